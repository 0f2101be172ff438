//===- InputTextFuzzer.cpp - nimble-run's input syntax (tensors, ADTs) -----===//
//
// vm::parseValue over arbitrary text against one of a fixed set of parameter
// types (the first byte chooses it): tensors of every dtype with static and
// `?` dimensions, two recursive ADTs and a tuple. Whatever parses must pass
// checkValue, print, and the printed text must parse back to a value that
// prints the same (the TensorText/ValueText round trip promised in their
// headers). parseTensorLiteral gets the same text on its own.
//
// Inputs asking for tensors over 64K elements are skipped (FuzzSupport.h says
// why; also, printing a few million elements back takes seconds under ASan,
// which libFuzzer reports as a timeout); so are inputs containing '/':
// `@path` reads files, and a fuzzer must not read /dev/zero or the machine's
// files. Relative `@` paths resolve under a directory that does not exist,
// so their error paths still run.
//
//===----------------------------------------------------------------------===//

#include "test/fuzz/FuzzSupport.h"
#include "vm/io/TensorText.h"
#include "vm/io/ValueText.h"

#include <cstdio>
#include <string>

using namespace nimble;
using namespace nimble::vm;

namespace {

TypeDesc tensorType(DType dt, std::vector<int64_t> dims) {
  TypeDesc t;
  t.kind = TypeDesc::Kind::Tensor;
  t.dtype = dt;
  t.dims = std::move(dims);
  return t;
}

TypeDesc adtType(uint32_t index) {
  TypeDesc t;
  t.kind = TypeDesc::Kind::Adt;
  t.adt = index;
  return t;
}

struct Fixture {
  Executable exe;
  std::vector<TypeDesc> types;
  Fixture() {
    constexpr int64_t Q = -1; // `?`
    // type @Tree = Leaf(tensor<1x4xf32>) | Node(@Tree, @Tree)
    exe.adts.push_back({"Tree", {{"Leaf", {tensorType(DType::F32, {1, 4})}}, {"Node", {adtType(0), adtType(0)}}}});
    // type @List = Nil | Cons(tensor<?xi64>, @List)
    exe.adts.push_back({"List", {{"Nil", {}}, {"Cons", {tensorType(DType::I64, {Q}), adtType(1)}}}});
    types = {tensorType(DType::F32, {Q, Q}), tensorType(DType::I64, {2, 3}), tensorType(DType::I1, {}),
             tensorType(DType::F16, {Q}),    tensorType(DType::BF16, {Q}),   tensorType(DType::F64, {Q, 2}),
             tensorType(DType::I8, {Q}),     tensorType(DType::I32, {3}),    adtType(0),
             adtType(1)};
    TypeDesc tup;
    tup.kind = TypeDesc::Kind::Tuple;
    tup.elems = {tensorType(DType::F32, {Q}), adtType(0), adtType(1)};
    types.push_back(tup);
  }
};

[[noreturn]] void bug(const std::string &what) { fuzz::bug("input", what); }

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static Fixture fx;
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char *>(data + 1), size - 1);
  if (text.find('/') != std::string_view::npos) return 0;
  if (fuzz::largestDimProduct(text) > (int64_t(1) << 16)) return 0;
  const TypeDesc &t = fx.types[data[0] % fx.types.size()];
  const std::string dir = "/nonexistent-nimble-fuzz-dir";

  ObjectRef v;
  std::string error;
  if (parseValue(fx.exe, t, text, dir, v, error)) {
    if (!v) bug("parseValue succeeded without a value");
    // Static dimensions are checked by checkValue, not the parser.
    if (checkValue(fx.exe, t, v.get(), "input", error)) {
      std::string printed = printValue(fx.exe, t, *v);
      // printValue elides what is nested deeper than 1000 levels ("...").
      if (printed.find("...") != std::string::npos) return 0;
      ObjectRef again;
      if (!parseValue(fx.exe, t, printed, dir, again, error))
        bug("printed value does not parse back: '" + printed + "': " + error);
      std::string reprinted = printValue(fx.exe, t, *again);
      if (reprinted != printed) bug("value round trip changed '" + printed + "' into '" + reprinted + "'");
    }
  }

  TensorRef tensor;
  if (parseTensorLiteral(text, tensor).ok()) {
    std::string printed = formatTensor(*tensor);
    TensorRef again;
    Status st = parseTensorLiteral(printed, again);
    if (!st.ok()) bug("printed tensor does not parse back: '" + printed + "': " + st.message);
    if (formatTensor(*again) != printed) bug("tensor round trip changed '" + printed + "'");
  }
  return 0;
}
