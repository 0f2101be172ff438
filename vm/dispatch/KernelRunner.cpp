//===- KernelRunner.cpp - Running kernels and their shape functions -------===//
//
// A KernelDesc is a primitive function: members over numbered values. The
// reference path evaluates it member by member with the reference kernels
// (temporaries for values that are not outputs). Before each member runs, its
// relation (ir/ShapeFns) is applied to the actual operand shapes: that is
// where the checks the compiler deferred on `?` dimensions happen (paper §3.1,
// gradual typing), and where an output buffer of the wrong shape is caught.
// The shape function of a kernel is the composition of its members' (paper
// §3.2), evaluated on shapes alone except for data-dependent members.
// A kernel may have no members at all: its outputs are then copies of its
// inputs (see the end of runKernel).
//
//===----------------------------------------------------------------------===//

#include "ir/Limits.h"
#include "vm/interpreter/Interpreter.h"

#include "ir/ShapeFns.h"

#include <cstring>

namespace nimble::vm {

namespace {

DenseValue denseOf(const Tensor &t) {
  DenseValue d;
  d.dtype = t.dtype();
  d.shape = t.shape();
  d.bytes.assign(t.rawData(), t.rawData() + t.numBytes());
  return d;
}

std::string opName(OpCode op) { return "'" + std::string(opInfo(op).mnemonic) + "'"; }

bool isKernelOutput(const KernelDesc &k, uint32_t value, size_t &which) {
  for (size_t i = 0; i < k.outputs.size(); ++i)
    if (k.outputs[i] == value) {
      which = i;
      return true;
    }
  return false;
}

} // namespace

std::vector<bool> shapeFuncNeedsValue(const KernelDesc &k) {
  std::vector<bool> need(k.numInputs, false);
  for (const auto &m : k.members)
    if (opInfo(m.op).shapeMode == ShapeMode::DataDependent)
      for (uint32_t v : m.operands)
        if (v < k.numInputs) need[v] = true;
  return need;
}

Status runKernel(const KernelDesc &k, const std::vector<Tensor *> &ins,
                 const std::vector<Tensor *> &outs, KernelContext &ctx, size_t *failedMember) {
  size_t wantOuts = k.outputs.size() + (k.upperBound ? 1 : 0);
  if (ins.size() != k.numInputs || outs.size() != wantOuts)
    return Status::error("kernel '" + k.name + "' takes " + std::to_string(k.numInputs) +
                         " inputs and " + std::to_string(wantOuts) + " outputs");
  std::vector<Tensor *> values(ins.begin(), ins.end());
  std::vector<TensorRef> temps;
  for (size_t mi = 0; mi < k.members.size(); ++mi) {
    const KernelDesc::Member &m = k.members[mi];
    // Errors from here on belong to member `mi`.
    auto memberError = [&](std::string msg) {
      if (failedMember) *failedMember = mi;
      return Status::error(std::move(msg));
    };
    std::vector<TensorSig> sigs;
    std::vector<const Tensor *> args;
    for (uint32_t v : m.operands) {
      sigs.push_back({values[v]->dtype(), values[v]->shape()});
      args.push_back(values[v]);
    }
    std::vector<DenseValue> owned;
    std::vector<const DenseValue *> vals;
    if (opInfo(m.op).shapeMode == ShapeMode::DataDependent) {
      owned.reserve(args.size());
      for (const Tensor *t : args) owned.push_back(denseOf(*t));
      for (const DenseValue &d : owned) vals.push_back(&d);
    }
    ShapeFnResult sr = inferShapes(m.op, sigs, m.attrs, vals);
    if (!sr.ok()) return memberError(opName(m.op) + " " + sr.error);
    if (sr.results.size() != m.numResults)
      return memberError(opName(m.op) + " produces " + std::to_string(sr.results.size()) +
                           " results, the kernel expects " + std::to_string(m.numResults));
    KernelArgs ka;
    ka.inputs = args;
    ka.attrs = &m.attrs;
    ka.ctx = &ctx;
    for (uint32_t j = 0; j < m.numResults; ++j) {
      uint32_t vn = static_cast<uint32_t>(values.size());
      const TensorSig &want = sr.results[j];
      size_t o;
      Tensor *out;
      if (isKernelOutput(k, vn, o)) {
        out = outs[o];
        // An upper-bound op's shape function gives the bound, which is the
        // buffer's shape too (the true shape goes to the extra output).
        bool shapeOk = out->shape() == want.dims;
        if (out->dtype() != want.dtype || !shapeOk)
          return memberError(opName(m.op) + " writes " + formatSig(want) +
                               " but its output buffer is " + out->typeString());
      } else {
        temps.push_back(makeTensor(want.dtype, want.dims));
        out = temps.back().get();
        if (!out) {
          int64_t bytes = 0;
          (void)limits::checkedByteSize(want.dims, static_cast<int64_t>(dtypeSize(want.dtype)), bytes);
          return memberError("out of memory allocating " + std::to_string(bytes) + " bytes for " +
                             formatSig(want));
        }
      }
      if (out->storage()->readOnly())
        return memberError(opName(m.op) + " output is a read-only constant");
      ka.outputs.push_back(out);
      values.push_back(out);
    }
    if (sr.upperBound) {
      if (!k.upperBound || outs.size() != k.outputs.size() + 1)
        return memberError(opName(m.op) + " needs the true-shape output of an upper-bound kernel");
      const Tensor *ts = outs.back();
      size_t rank = sr.results.empty() ? 0 : sr.results[0].dims.size();
      if (ts->dtype() != DType::I64 || ts->rank() != 1 || ts->dim(0) != static_cast<int64_t>(rank))
        return memberError(opName(m.op) + " needs a 1-D i64 true-shape output of length " +
                             std::to_string(rank) + ", got " + ts->typeString());
      if (ts->storage()->readOnly())
        return memberError(opName(m.op) + " true-shape output is a read-only constant");
      ka.outputs.push_back(outs.back());
    }
    KernelFn fn = referenceKernel(m.op);
    if (!fn) return memberError(opName(m.op) + " has no kernel");
    Status st = fn(ka);
    if (!st.ok()) return memberError(opName(m.op) + ": " + st.message);
  }
  // An output that no member wrote into its buffer is a copy: a kernel input
  // (a primitive whose body returns an argument, `ret %in0`, as canonicalize
  // may leave a fused group), or a value already returned as an earlier
  // output (`ret %a, %a`).
  for (size_t o = 0; o < k.outputs.size(); ++o) {
    const Tensor *src = values[k.outputs[o]];
    Tensor *dst = outs[o];
    if (src == dst) continue;
    if (src->dtype() != dst->dtype() || src->shape() != dst->shape())
      return Status::error("kernel '" + k.name + "' output " + std::to_string(o) + " is " +
                           src->typeString() + " but its output buffer is " + dst->typeString());
    if (dst->storage()->readOnly())
      return Status::error("kernel '" + k.name + "' output " + std::to_string(o) +
                           " is a read-only constant");
    if (src->numBytes()) std::memcpy(dst->rawData(), src->rawData(), src->numBytes());
  }
  return Status::success();
}

Status computeShapes(const KernelDesc &k, const std::vector<Tensor *> &ins,
                     std::vector<std::vector<int64_t>> &shapes, size_t *failedMember) {
  if (ins.size() != k.numInputs || k.inputDTypes.size() != k.numInputs)
    return Status::error("shape function of '" + k.name + "' takes " +
                         std::to_string(k.numInputs) + " inputs and " +
                         std::to_string(k.outputs.size()) + " outputs");
  std::vector<bool> needValue = shapeFuncNeedsValue(k);
  std::vector<TensorSig> sigs;
  std::vector<DenseValue> inputValues(k.numInputs);
  for (uint32_t i = 0; i < k.numInputs; ++i) {
    const Tensor *t = ins[i];
    if (needValue[i]) {
      sigs.push_back({t->dtype(), t->shape()});
      inputValues[i] = denseOf(*t);
      continue;
    }
    if (t->dtype() != DType::I64 || t->rank() != 1)
      return Status::error("shape function input " + std::to_string(i) + " of '" + k.name +
                           "' must be a 1-D i64 shape, got " + t->typeString());
    // A shape of a hostile program's making can be any length; a rank the
    // IR cannot have would only reach the shape function (and its error
    // message, one entry per dimension: nbc-fuzzer found a 500 MB one).
    if (t->dim(0) > static_cast<int64_t>(limits::kMaxRank))
      return Status::error("shape function input " + std::to_string(i) + " of '" + k.name + "' has " +
                           std::to_string(t->dim(0)) + " dimensions, more than the limit of " +
                           std::to_string(limits::kMaxRank));
    std::vector<int64_t> dims(t->data<int64_t>(), t->data<int64_t>() + t->dim(0));
    for (int64_t d : dims)
      if (d < 0) return Status::error("negative dimension in a shape");
    sigs.push_back({k.inputDTypes[i], std::move(dims)});
  }
  for (size_t mi = 0; mi < k.members.size(); ++mi) {
    const KernelDesc::Member &m = k.members[mi];
    auto memberError = [&](std::string msg) {
      if (failedMember) *failedMember = mi;
      return Status::error(std::move(msg));
    };
    std::vector<TensorSig> msigs;
    std::vector<const DenseValue *> vals;
    bool dataDep = opInfo(m.op).shapeMode == ShapeMode::DataDependent;
    for (uint32_t v : m.operands) {
      msigs.push_back(sigs[v]);
      if (dataDep) vals.push_back(v < k.numInputs && needValue[v] ? &inputValues[v] : nullptr);
    }
    ShapeFnResult sr = inferShapes(m.op, msigs, m.attrs, vals);
    if (!sr.ok()) return memberError(opName(m.op) + " " + sr.error);
    for (const TensorSig &s : sr.results) {
      for (int64_t d : s.dims)
        if (d == kDynamic)
          return memberError(opName(m.op) + ": the shape function could not compute the shape " +
                               formatSig(s) + " (a data-dependent input was not passed as a value)");
      sigs.push_back(s);
    }
  }
  shapes.resize(k.outputs.size());
  // Copied: two outputs may be one value.
  for (size_t o = 0; o < k.outputs.size(); ++o) shapes[o] = sigs[k.outputs[o]].dims;
  return Status::success();
}

} // namespace nimble::vm
