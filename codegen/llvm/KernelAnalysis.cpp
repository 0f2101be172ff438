//===- KernelAnalysis.cpp - What a kernel's lowering may do ---------------===//
//
// The decisions KernelGen.cpp's lowering takes before it emits anything
// (docs/codegen.md): whether a fused kernel can be generated at all
// (analyze: its members, dtypes, stored values and gathered buffers; the
// reason when not, after which the VM runs the reference kernel), and per
// stage the form its loops take: vectorized over output points or one point
// at a time with a vectorized reduction (prefersScalarPoints, stageLanes),
// and whether the residue after the vector loop may run as one masked
// vector step (maskableValue, maskedTailOk: every lane computes exactly the
// ops of a scalar point). Split from KernelGen.cpp, which emits the code.
//
//===----------------------------------------------------------------------===//

#include "codegen/llvm/KernelLowering.h"

namespace nimble::codegen {

namespace detail {

using namespace lowering;

//===-- Analysis -----------------------------------------------------------===//

bool KernelLowering::analyze(std::string &reason) {
  if (k_.upperBound) {
    reason = "upper-bound kernels (unique, nonzero) return their true shape: reference only";
    return false;
  }
  const ir::Block *body = f_.entry();
  for (unsigned i = 0; i < body->numArguments(); ++i) {
    ir::Type t = body->argument(i)->type();
    if (!t.isTensor()) {
      reason = "a non-tensor input";
      return false;
    }
    vals_.push_back({t.dtype(), t.dims()});
  }
  size_t mi = 0;
  for (const ir::Operation &op : *body) {
    if (op.is(OpCode::Ret)) break;
    if (mi >= k_.members.size() || k_.members[mi].op != op.code()) {
      reason = "the kernel table does not match the IR";
      return false;
    }
    for (unsigned r = 0; r < op.numResults(); ++r) {
      ir::Type t = op.result(r)->type();
      if (!t.isTensor()) {
        reason = "a non-tensor value";
        return false;
      }
      ValueInfo vi{t.dtype(), t.dims()};
      vi.member = static_cast<int>(mi);
      vi.result = r;
      vals_.push_back(vi);
    }
    ++mi;
  }
  if (mi != k_.members.size()) {
    reason = "the kernel table does not match the IR";
    return false;
  }
  for (const ValueInfo &vi : vals_)
    if (vi.dtype == DType::F16 || vi.dtype == DType::BF16) {
      reason = "f16/bf16 values have no native form yet";
      return false;
    }
  for (size_t m = 0; m < k_.members.size(); ++m) {
    const auto &mem = k_.members[m];
    for (uint32_t o : mem.operands) {
      ++vals_[o].uses;
      vals_[o].singleUser = static_cast<int>(m);
    }
    switch (mem.op) {
    case OpCode::Unique: case OpCode::Nonzero: case OpCode::DeviceCopy: case OpCode::Constant:
      reason = "'" + std::string(opInfo(mem.op).mnemonic) + "' has no native form";
      return false;
    case OpCode::Attention:
      // The runtime's fused kernel (vm/dispatch/LibraryAttention.cpp) is the
      // fast path: one hand-vectorised loop per head and query block.
      reason = "'attention' runs on the runtime's fused kernel or its reference kernel";
      return false;
    case OpCode::Conv: case OpCode::MaxPool: case OpCode::AvgPool: case OpCode::ConvTranspose:
      // oneDNN's convolution (vm/dispatch/LibraryConv.cpp) is the fast path;
      // a generated window loop would not beat its blocked direct kernels.
      reason = "'" + std::string(opInfo(mem.op).mnemonic) + "' runs on oneDNN or its reference kernel";
      return false;
    case OpCode::CumSum: case OpCode::Tile: case OpCode::Pad: case OpCode::GatherND:
    case OpCode::ScatterElements: case OpCode::ScatterND: case OpCode::OneHot:
      // A sequential scan along a run-time axis, gathers whose shape needs
      // operand values (data-dependent), and scatters (updates may collide):
      // each is one loop nest that a generated kernel would only repeat.
      reason = "'" + std::string(opInfo(mem.op).mnemonic) + "' runs as its reference kernel";
      return false;
    case OpCode::TopK: case OpCode::NonMaxSuppression: case OpCode::ShiftLeft: case OpCode::ShiftRight:
      // Issue 47's third batch: sorts and a greedy selection (sequential),
      // and shifts, which are not fused (Opaque) and have no native element
      // form yet.
    case OpCode::Resize: case OpCode::GridSample:
      // Weighted gathers whose taps depend on run-time sizes and values
      // (issue 47): no native form yet.
      reason = "'" + std::string(opInfo(mem.op).mnemonic) + "' runs as its reference kernel";
      return false;
    case OpCode::DynamicUpdateSlice:
      // Two memcpys, the first skipped when it runs in place: the reference
      // kernel is what a generated one would be.
      reason = "'dynamic_update_slice' runs as its reference kernel (in place when planned so)";
      return false;
    case OpCode::Sum: case OpCode::Mean: case OpCode::Max: case OpCode::Min: case OpCode::ArgMax:
    case OpCode::Prod:
    case OpCode::MatMul: case OpCode::BatchMatMul: case OpCode::Softmax: case OpCode::LayerNorm:
    case OpCode::Reshape: case OpCode::DynReshape: case OpCode::Transpose: case OpCode::Concat:
    case OpCode::Split: case OpCode::Slice: case OpCode::DynamicSlice: case OpCode::Take:
    case OpCode::ExpandDims: case OpCode::Squeeze: case OpCode::BroadcastTo: case OpCode::Zeros:
    case OpCode::Full: case OpCode::Arange: case OpCode::ShapeOf: case OpCode::Dim:
      break;
    default: {
      DType in = vals_[mem.operands.empty() ? 0 : mem.operands.back()].dtype;
      if (mem.op == OpCode::Select) in = vals_[mem.operands[1]].dtype;
      if (!elementOpSupported(mem.op, in, in, reason)) return false;
    }
    }
  }
  for (uint32_t o : k_.outputs) ++vals_[o].uses;
  materialize_.assign(vals_.size(), false);
  for (size_t v = k_.numInputs; v < vals_.size(); ++v) {
    const ValueInfo &vi = vals_[v];
    OpCode op = k_.members[static_cast<size_t>(vi.member)].op;
    if (!isReductionLike(op)) continue;
    bool usedByMember = false;
    for (const auto &mem : k_.members)
      for (uint32_t o : mem.operands) usedByMember |= o == v;
    if (!usedByMember) continue;
    // An integer matmul read once by an element-wise epilogue of its own
    // shape stays inline; float matmuls are stored by the register-blocked
    // tile loops (emitMatMulStage) and their epilogue reads them back.
    bool epilogue = (op == OpCode::MatMul || op == OpCode::BatchMatMul) && !isFloat(vi.dtype) &&
                    vi.uses == 1 &&
                    vi.singleUser >= 0 &&
                    (opInfo(k_.members[vi.singleUser].op).fusion == FusionPattern::ElemWise ||
                     opInfo(k_.members[vi.singleUser].op).fusion == FusionPattern::Broadcast);
    if (epilogue) {
      // the user's result must have the matmul's shape, or the dot products
      // would be recomputed per broadcast point.
      for (size_t u = k_.numInputs; u < vals_.size(); ++u)
        if (vals_[u].member == vi.singleUser) epilogue &= vals_[u].dims == vi.dims;
    }
    materialize_[v] = !epilogue || op == OpCode::Softmax || op == OpCode::LayerNorm;
  }
  // The operands of a float matmul that the tiles read (emitMatMulStage
  // reads memory) are stored when a member computes them point by point:
  // a row cell's h_l + h_r before (h_l + h_r) . U^T (passes/lowering/Fuse.cpp).
  // Stored once, as a stage of its own, each element is the value the
  // separate kernel would have written: the product's sums do not change.
  if (vf_ > 1)
    for (const auto &mem : k_.members)
      if ((mem.op == OpCode::MatMul || mem.op == OpCode::BatchMatMul) && isFloat(vals_[mem.operands[0]].dtype))
        for (uint32_t o : mem.operands)
          if (o >= k_.numInputs) materialize_[o] = true;
  if (!gatherBuf_.empty()) {
    // Row tables stand for inputs and outputs with a row axis only.
    if (gatherBuf_.size() != vals_.size() + k_.outputs.size()) {
      reason = "the gather mask does not match the kernel's buffers";
      return false;
    }
    for (size_t b = 0; b < gatherBuf_.size(); ++b) {
      if (!gatherBuf_[b]) continue;
      bool io = b < k_.numInputs || b >= vals_.size();
      size_t v = b < vals_.size() ? b : k_.outputs[b - vals_.size()];
      if (!io || vals_[v].dims.empty()) {
        reason = "a gathered buffer that is not an input or output with a row axis";
        return false;
      }
    }
  }
  return true;
}

//===-- Stage forms --------------------------------------------------------===//

// Whether the value's inline expression contains a reduction that prefers
// computing one output point at a time (contiguous innermost reduced axis).
bool KernelLowering::prefersScalarPoints(uint32_t v) {
  if (v < k_.numInputs || data_[v]) return false;
  const auto &m = k_.members[static_cast<size_t>(vals_[v].member)];
  switch (m.op) {
  case OpCode::MatMul: case OpCode::BatchMatMul: return !m.attrs[0].getBool();
  case OpCode::Sum: case OpCode::Mean: case OpCode::Max: case OpCode::Min: case OpCode::Prod: {
    const auto &axes = m.attrs[0].getInts();
    int64_t rx = static_cast<int64_t>(vals_[m.operands[0]].dims.size());
    if (axes.empty()) return true;
    for (int64_t a : axes)
      if (normAxis(a, rx) == rx - 1) return true;
    return false;
  }
  default: break;
  }
  for (uint32_t o : m.operands)
    if (prefersScalarPoints(o)) return true;
  return false;
}

unsigned KernelLowering::stageLanes(uint32_t v) {
  if (vf_ <= 1 || vals_[v].dims.empty()) return 1;
  return prefersScalarPoints(v) ? 1 : vf_;
}

bool KernelLowering::maskableValue(uint32_t v) {
  if (v < k_.numInputs || data_[v]) {
    unsigned bits = memoryType(ctx_, vals_[v].dtype)->getPrimitiveSizeInBits();
    return bits == 32 || bits == 64;
  }
  const auto &m = k_.members[static_cast<size_t>(vals_[v].member)];
  DType in = m.operands.empty() ? vals_[v].dtype : vals_[m.operands[0]].dtype;
  if (m.op == OpCode::Select) in = vals_[m.operands[1]].dtype;
  const bool f = isFloat(in);
  switch (m.op) {
  // Index rewrites: the lanes stay one vector (or one gather).
  case OpCode::Split: case OpCode::Slice: case OpCode::DynamicSlice: case OpCode::Transpose:
  case OpCode::ExpandDims: case OpCode::Squeeze: case OpCode::BroadcastTo: case OpCode::Zeros:
  case OpCode::Full: case OpCode::Arange: case OpCode::Dim:
  // Arithmetic a lane of which is a scalar point's ops.
  case OpCode::Neg: case OpCode::Abs: case OpCode::Relu: case OpCode::LogicalNot:
  case OpCode::Add: case OpCode::Sub: case OpCode::Mul: case OpCode::Maximum: case OpCode::Minimum:
  case OpCode::Equal: case OpCode::NotEqual: case OpCode::Less: case OpCode::LessEqual:
  case OpCode::Greater: case OpCode::GreaterEqual: case OpCode::LogicalAnd: case OpCode::LogicalOr:
  case OpCode::Select: case OpCode::Cast:
    break;
  // Float only: integer division branches to the error exit on a zero lane.
  case OpCode::Div: case OpCode::Sqrt: case OpCode::Rsqrt:
    if (!f) return false;
    break;
  // Inline polynomials for f32; f64 calls libm once a lane.
  case OpCode::Exp: case OpCode::Tanh: case OpCode::Sigmoid: case OpCode::Log: case OpCode::Erf:
  case OpCode::Gelu: case OpCode::Pow:
    if (in != DType::F32) return false;
    break;
  default: return false; // reductions, lane-by-lane members, libm calls
  }
  for (uint32_t o : m.operands)
    if (!maskableValue(o)) return false;
  return true;
}

bool KernelLowering::maskedTailOk(uint32_t v, const std::vector<Value *> &dests, size_t axis) {
  if (vf_ < 8 || gpu_) return false; // no masked loads and stores below AVX
  unsigned bits = memoryType(ctx_, vals_[v].dtype)->getPrimitiveSizeInBits();
  if (bits != 32 && bits != 64) return false;
  for (Value *d : dests)
    if (axis == 0 && isGathered(d)) return false; // lanes that are rows: stored one by one
  return maskableValue(v);
}

} // namespace detail

} // namespace nimble::codegen
