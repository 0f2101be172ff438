//===- kernel-runner.cpp - Run one reference kernel on .npy inputs --------===//
//
// A test driver, not a product tool: it runs the reference kernel of one op
// the way the VM will (outputs sized by the op's shape function, input values
// passed to data-dependent shape functions, the extra true-shape output of
// upper-bound ops) so that test/vm/Inputs/check_ops.py can compare every
// kernel with numpy.
//
//   kernel-runner --op=NAME [--attr=NAME=VALUE]... [--input=@x.npy | --input=LITERAL]...
//                 [--output=@y.npy | --output=-]... [--threads=N] [--bf16]
//   kernel-runner --batch=FILE
//   kernel-runner --list-ops
//
// --batch runs many invocations in one process: FILE holds one per line, its
// arguments separated by tabs. For each, in order, stdout gets one line
// `INDEX<tab>EXIT<tab>MESSAGE`: the exit status the invocation would have
// had alone and the message it would have printed on stderr (backslashes
// as `\\`, newlines as `\n`, tabs as spaces; empty on success). In a batch
// an output without `@file.npy` is dropped rather than printed.
// check_ops.py runs its thousands of cases this way: one process start per
// case cost most of the suite's time, ~60 ms of each under ASan (vm:lit:
// 302 s under ASan, 55 s plain, in CI).
//
// Attribute values by kind: bool true/false/1/0; int; float; ints as
// [1,2,3] (brackets optional, [] for empty); dtype f32...; str and sym as
// is; dense as @file.npy or a tensor literal (vm/io/TensorText.h), with a
// `splat:` prefix for a splat literal (splat:2x3xf32=7). Attributes left out
// take their Ops.def defaults.
//
// Outputs: one --output per result in order (`-` or none: print the tensor
// as text on stdout). Output buffers are filled with a 0xA5 pattern before
// the kernel runs, so an element the kernel forgets to write shows up as a
// mismatch. numpy has no bf16: bf16 results are written to .npy as f32 (exact),
// and --bf16 turns every f32 input into bf16 (rounding to nearest even) before
// the call, which lets the numpy checks cover bf16 kernels.
//
// Exit status: 0 success; 1 the shape function or the kernel reported an
// error (printed as `error: ...`), or a file could not be read/written;
// 2 usage error. With --batch: 0 once every line has run, whatever their
// statuses; 1 if FILE cannot be read; 2 usage error.
//
//===----------------------------------------------------------------------===//

#include "ir/OpTable.h"
#include "ir/ShapeFns.h"
#include "vm/Kernel.h"
#include "vm/io/Npy.h"
#include "vm/io/TensorText.h"
#include "vm/support/ThreadPool.h"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace nimble;
using namespace nimble::vm;

namespace {

const char kUsage[] =
    "usage: kernel-runner --op=NAME [--attr=NAME=VALUE]... [--input=@x.npy|LITERAL]...\n"
    "                     [--output=@y.npy|-]... [--threads=N] [--bf16]\n"
    "       kernel-runner --batch=FILE\n"
    "       kernel-runner --list-ops\n";

/// Where one invocation's diagnostics go: stderr when run alone, a string
/// (reported on its status line) in a batch.
struct Invocation {
  bool batch = false;
  std::string message;

  int usage(const std::string &msg) {
    report("kernel-runner: " + msg);
    if (!batch) std::fputs(kUsage, stderr);
    return 2;
  }
  int fail(const std::string &msg) {
    report("error: " + msg);
    return 1;
  }
  void report(const std::string &line) {
    if (batch) {
      if (!message.empty()) message += "\n";
      message += line;
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  }
};

bool parseI64(std::string_view s, int64_t &v) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size();
}

DenseValue toDense(const Tensor &t) {
  DenseValue v;
  v.dtype = t.dtype();
  v.shape = t.shape();
  v.bytes.assign(t.rawData(), t.rawData() + t.numBytes());
  return v;
}

TensorRef convertFloat(const Tensor &t, DType to) {
  TensorRef r = makeTensor(to, t.shape());
  for (int64_t i = 0; i < t.numElements(); ++i) {
    if (to == DType::BF16)
      r->data<uint16_t>()[i] = floatToBF16(t.data<float>()[i]);
    else
      r->data<float>()[i] = bf16ToFloat(t.data<uint16_t>()[i]);
  }
  return r;
}

/// Reads `@file.npy` or a literal.
std::string loadTensor(const std::string &text, TensorRef &out) {
  Status s = text.size() > 1 && text[0] == '@' ? readNpy(text.substr(1), out)
                                               : parseTensorLiteral(text, out);
  return s.message;
}

/// Parses one attribute value of kind `kind`; returns an error message.
std::string parseAttr(AttrKind kind, const std::string &text, Attr &out) {
  switch (kind) {
  case AttrKind::Bool:
    if (text == "true" || text == "1") out = Attr::getBool(true);
    else if (text == "false" || text == "0") out = Attr::getBool(false);
    else return "expected true or false, got '" + text + "'";
    return "";
  case AttrKind::Int: {
    int64_t v;
    if (!parseI64(text, v)) return "expected an integer, got '" + text + "'";
    out = Attr::getInt(v);
    return "";
  }
  case AttrKind::Float: {
    double v;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size())
      return "expected a number, got '" + text + "'";
    out = Attr::getFloat(v);
    return "";
  }
  case AttrKind::Ints: {
    std::string body = text;
    if (!body.empty() && body.front() == '[') body.erase(0, 1);
    if (!body.empty() && body.back() == ']') body.pop_back();
    std::vector<int64_t> vals;
    size_t pos = 0;
    while (pos < body.size()) {
      size_t comma = body.find(',', pos);
      std::string item = body.substr(pos, comma == std::string::npos ? comma : comma - pos);
      int64_t v;
      if (!parseI64(item, v)) return "expected a list of integers, got '" + text + "'";
      vals.push_back(v);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    out = Attr::getInts(std::move(vals));
    return "";
  }
  case AttrKind::DType: {
    std::optional<DType> t = parseDType(text);
    if (!t) return "unknown element type '" + text + "'";
    out = Attr::getDType(*t);
    return "";
  }
  case AttrKind::Str: out = Attr::getStr(text); return "";
  case AttrKind::Sym: out = Attr::getSym(text); return "";
  case AttrKind::Dense: {
    bool splat = text.rfind("splat:", 0) == 0;
    TensorRef t;
    std::string err = loadTensor(splat ? text.substr(6) : text, t);
    if (!err.empty()) return err;
    DenseValue v = toDense(*t);
    if (splat) {
      v.splat = true;
      v.bytes.resize(dtypeSize(v.dtype));
    }
    out = Attr::getDense(std::move(v));
    return "";
  }
  }
  return "unsupported attribute kind";
}

} // namespace

/// Runs one invocation (argv without the program name).
static int runOne(const std::vector<std::string> &argv, Invocation &inv) {
  auto usage = [&](const std::string &msg) { return inv.usage(msg); };
  auto fail = [&](const std::string &msg) { return inv.fail(msg); };
  std::string opName;
  std::vector<std::pair<std::string, std::string>> attrTexts;
  std::vector<std::string> inputTexts, outputTexts;
  int64_t threads = 1;
  bool bf16 = false, listOps = false;
  for (const std::string &a : argv) {
    auto value = [&](const char *flag) -> const char * {
      size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char *v = value("--op=")) {
      opName = v;
    } else if (const char *v = value("--attr=")) {
      std::string s = v;
      size_t eq = s.find('=');
      if (eq == std::string::npos) return usage("--attr expects NAME=VALUE, got '" + s + "'");
      attrTexts.emplace_back(s.substr(0, eq), s.substr(eq + 1));
    } else if (const char *v = value("--input=")) {
      inputTexts.push_back(v);
    } else if (const char *v = value("--output=")) {
      outputTexts.push_back(v);
    } else if (const char *v = value("--threads=")) {
      if (!parseI64(v, threads) || threads < 1 || threads > 256)
        return usage("--threads expects a count in [1, 256]");
    } else if (a == "--bf16") {
      bf16 = true;
    } else if (a == "--list-ops") {
      listOps = true;
    } else {
      return usage("unknown argument '" + a + "'");
    }
  }

  if (listOps) {
    if (inv.batch) return usage("--list-ops cannot be part of a batch");
    for (int i = 0; i < kNumOpCodes; ++i)
      if (referenceKernel(static_cast<OpCode>(i)))
        std::printf("%s\n", std::string(opInfo(static_cast<OpCode>(i)).mnemonic).c_str());
    return 0;
  }
  std::optional<OpCode> code = lookupOpCode(opName);
  if (!code) return usage("unknown op '" + opName + "'");
  const OpInfo &info = opInfo(*code);
  KernelFn kernel = referenceKernel(*code);
  if (!kernel) return usage("op '" + opName + "' has no reference kernel (structural op)");

  // Attributes in schema order, defaults filled in.
  std::vector<Attr> attrs(info.attrs.size());
  std::vector<bool> given(info.attrs.size(), false);
  for (auto &[name, text] : attrTexts) {
    int idx = info.attrIndex(name);
    if (idx < 0) return usage("op '" + opName + "' has no attribute '" + name + "'");
    std::string err = parseAttr(info.attrs[static_cast<size_t>(idx)].kind, text,
                                attrs[static_cast<size_t>(idx)]);
    if (!err.empty()) return usage("attribute '" + name + "': " + err);
    given[static_cast<size_t>(idx)] = true;
  }
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (given[i]) continue;
    if (!info.attrs[i].defaultValue)
      return usage("op '" + opName + "' requires attribute '" + info.attrs[i].name + "'");
    attrs[i] = *info.attrs[i].defaultValue;
  }

  std::vector<TensorRef> inputs;
  for (const std::string &text : inputTexts) {
    TensorRef t;
    std::string err = loadTensor(text, t);
    if (!err.empty()) return fail(err);
    if (bf16 && t->dtype() == DType::F32) t = convertFloat(*t, DType::BF16);
    inputs.push_back(t);
  }

  // Output shapes from the shape function, given every input's value.
  std::vector<TensorSig> sigs;
  std::vector<DenseValue> values;
  for (const TensorRef &t : inputs) {
    sigs.push_back({t->dtype(), t->shape()});
    values.push_back(toDense(*t));
  }
  std::vector<const DenseValue *> valuePtrs;
  for (const DenseValue &v : values) valuePtrs.push_back(&v);
  ShapeFnResult shapes = inferShapes(*code, sigs, attrs, valuePtrs);
  if (!shapes.ok()) return fail(opName + ": " + shapes.error);

  std::vector<TensorRef> outputs;
  for (const TensorSig &s : shapes.results) {
    TensorRef t = makeTensor(s.dtype, s.dims);
    if (!t) return fail("out of memory allocating " + formatSig(s));
    outputs.push_back(t);
  }
  if (shapes.upperBound)
    outputs.push_back(makeTensor(DType::I64, {static_cast<int64_t>(shapes.results[0].dims.size())}));
  for (const TensorRef &t : outputs)
    if (t->numBytes()) std::memset(t->rawData(), 0xA5, t->numBytes());

  ThreadPool pool(static_cast<unsigned>(threads));
  KernelContext ctx;
  ctx.pool = threads > 1 ? &pool : nullptr;
  KernelArgs args;
  for (const TensorRef &t : inputs) args.inputs.push_back(t.get());
  for (const TensorRef &t : outputs) args.outputs.push_back(t.get());
  args.attrs = &attrs;
  args.ctx = &ctx;
  Status st = kernel(args);
  if (!st.ok()) return fail(opName + ": " + st.message);

  std::vector<TensorRef> results(outputs.begin(), outputs.begin() + static_cast<long>(shapes.results.size()));
  if (shapes.upperBound) {
    // The true shape must lie within the bound; the result is a view of the
    // compact prefix.
    const Tensor &bound = *outputs[0];
    const Tensor &trueShape = *outputs.back();
    std::vector<int64_t> dims(trueShape.data<int64_t>(),
                              trueShape.data<int64_t>() + trueShape.numElements());
    for (size_t d = 0; d < dims.size(); ++d)
      if (dims[d] < 0 || dims[d] > bound.dim(d))
        return fail(opName + ": kernel returned shape " + formatDims(dims) +
                    " outside the bound " + formatDims(bound.shape()));
    results[0] = TensorRef(new Tensor(bound.dtype(), dims, bound.storage(), bound.offset()));
  }

  for (size_t i = 0; i < results.size(); ++i) {
    TensorRef t = results[i];
    std::string dest = i < outputTexts.size() ? outputTexts[i] : "-";
    if (dest == "-" && inv.batch) {
      continue; // stdout carries the status lines
    } else if (dest == "-") {
      std::printf("%s\n", formatTensor(*t).c_str());
    } else if (dest.size() > 1 && dest[0] == '@') {
      if (t->dtype() == DType::BF16) t = convertFloat(*t, DType::F32);
      Status ws = writeNpy(dest.substr(1), *t);
      if (!ws.ok()) return fail(ws.message);
    } else {
      return usage("--output expects @file.npy or -, got '" + dest + "'");
    }
  }
  return 0;
}

namespace {

/// --batch=FILE: each line one invocation, arguments separated by tabs.
int runBatch(const std::string &path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "error: cannot read '%s'\n", path.c_str());
    return 1;
  }
  std::string line;
  for (int64_t index = 0; std::getline(in, line); ++index) {
    std::vector<std::string> args;
    for (size_t pos = 0; pos <= line.size();) {
      size_t tab = line.find('\t', pos);
      if (tab == std::string::npos) tab = line.size();
      if (tab > pos) args.push_back(line.substr(pos, tab - pos));
      pos = tab + 1;
    }
    Invocation inv;
    inv.batch = true;
    int status = 0;
    if (args.empty()) status = inv.usage("empty invocation");
    else if (args[0].rfind("--batch=", 0) == 0) status = inv.usage("--batch cannot be nested");
    else status = runOne(args, inv);
    std::string escaped;
    for (char c : inv.message) {
      if (c == '\\') escaped += "\\\\";
      else if (c == '\n') escaped += "\\n";
      else if (c == '\t') escaped += ' ';
      else escaped += c;
    }
    // Flushed per line: if a later case crashes the process, the statuses
    // already printed still reach the caller.
    std::printf("%lld\t%d\t%s\n", static_cast<long long>(index), status, escaped.c_str());
    std::fflush(stdout);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0].rfind("--batch=", 0) == 0) return runBatch(args[0].substr(8));
  Invocation inv;
  for (const std::string &a : args)
    if (a.rfind("--batch=", 0) == 0) return inv.usage("--batch=FILE takes no other argument");
  return runOne(args, inv);
}
