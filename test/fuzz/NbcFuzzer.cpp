//===- NbcFuzzer.cpp - .nbc bytes -> load -> verify -> run every function ---===//
//
// The runtime's trust boundary: deserialize() must refuse whatever it cannot
// run, and whatever it accepts must run without a crash. The checksum is
// resealed before loading (vm::resealChecksum), else nearly every mutation
// would stop at the CRC; the CRC check itself is covered by
// test/vm/format/HostileTest.cpp. Every function then runs with the
// reference kernels, a bound on instructions and call depth, on arguments
// made from its signature (`?` dimensions become 2, values small integers,
// ADTs their smallest constructor). Errors are fine; crashes, hangs and
// sanitizer reports are bugs.
//
//===----------------------------------------------------------------------===//

#include "test/fuzz/FuzzSupport.h"
#include "vm/format/Format.h"
#include "vm/interpreter/Interpreter.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

using namespace nimble;
using namespace nimble::vm;

namespace {

constexpr uint64_t kMaxInstructions = 20000;
constexpr uint32_t kMaxCallDepth = 200;
/// Arguments stay small: big static dims in a signature are skipped.
constexpr int64_t kMaxArgElements = 1 << 12;

/// A value of type `t`, or null when none is cheap to build.
ObjectRef makeArg(const Executable &exe, const TypeDesc &t, int depth) {
  if (depth > 8) return {};
  switch (t.kind) {
  case TypeDesc::Kind::Tensor: {
    std::vector<int64_t> shape;
    int64_t n = 1;
    for (int64_t d : t.dims) {
      int64_t x = d < 0 ? 2 : d;
      if (x > kMaxArgElements || (x && n > kMaxArgElements / x)) return {};
      n *= x;
      shape.push_back(x);
    }
    TensorRef r = makeTensor(t.dtype, shape);
    if (!r) return {};
    uint8_t *p = r->rawData();
    size_t es = dtypeSize(t.dtype);
    for (int64_t i = 0; i < n; ++i) {
      // Small non-negative integers in every dtype: zeros of every width
      // except the low byte, which holds i % 3 (valid bool, i8..i64; a
      // denormal-free tiny float for f16/f32/f64, which is fine here).
      std::memset(p + i * es, 0, es);
      p[i * es] = static_cast<uint8_t>(i % 3);
    }
    return r;
  }
  case TypeDesc::Kind::Tuple: {
    std::vector<ObjectRef> fields;
    for (const TypeDesc &e : t.elems) {
      ObjectRef f = makeArg(exe, e, depth + 1);
      if (!f) return {};
      fields.push_back(f);
    }
    return ObjectRef(new Adt(0, std::move(fields)));
  }
  case TypeDesc::Kind::Adt: {
    if (t.adt >= exe.adts.size()) return {};
    const AdtDesc &a = exe.adts[t.adt];
    // The constructor with the fewest ADT fields first: it ends recursion.
    std::vector<size_t> order;
    for (size_t c = 0; c < a.ctors.size(); ++c) order.push_back(c);
    auto adtFields = [&](size_t c) {
      size_t k = 0;
      for (auto &f : a.ctors[c].fields) k += f.kind == TypeDesc::Kind::Adt;
      return k;
    };
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return adtFields(x) < adtFields(y); });
    for (size_t c : order) {
      std::vector<ObjectRef> fields;
      bool ok = true;
      for (const TypeDesc &f : a.ctors[c].fields) {
        ObjectRef v = makeArg(exe, f, depth + 1);
        if (!v) {
          ok = false;
          break;
        }
        fields.push_back(v);
      }
      if (ok) return ObjectRef(new Adt(static_cast<uint32_t>(c), std::move(fields)));
    }
    return {};
  }
  case TypeDesc::Kind::Storage:
    return {};
  }
  return {};
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto buf = AlignedBuffer::copyOf(data, size);
  if (!buf) return 0;
  resealChecksum(buf->data(), buf->size());
  auto exe = std::make_shared<Executable>();
  std::string error;
  if (!deserialize(std::shared_ptr<const AlignedBuffer>(buf), *exe, error)) return 0;
  VMOptions opts;
  opts.maxInstructions = kMaxInstructions;
  opts.maxCallDepth = kMaxCallDepth;
  VirtualMachine vm(exe, opts);
  for (const VMFunction &fn : exe->functions) {
    std::vector<ObjectRef> args;
    bool ok = true;
    for (const TypeDesc &t : fn.paramTypes) {
      ObjectRef a = makeArg(*exe, t, 0);
      if (!a) {
        ok = false;
        break;
      }
      args.push_back(a);
    }
    if (!ok) continue;
    std::vector<ObjectRef> results;
    (void)vm.run(fn.name, args, results);
  }
  return 0;
}
