//===- KernelGen.cpp - One fused kernel to one LLVM function --------------===//
//
// Symbolic code generation (Nimble paper §3.4, seed 000): a primitive function
// (a fused group or a single op) becomes one function of the vm/KernelABI.h
// ABI. The design, in TVM's compute-inline style:
//
// * Stages. The values that live in memory are the kernel's inputs, its
//   outputs, and the results of reductions (sum, mean, max, min, argmax,
//   matmul, softmax, layer_norm) that other members read. Every other member
//   is computed in registers, inline, at the point where it is needed: one
//   loop nest per stored value, over that value's shape, with no intermediate
//   buffers for element-wise, broadcast or injective members.
// * Points and lanes. emitValue(v, index, lanes) computes member v at an
//   index whose innermost component may advance with the vector lane (each
//   index component is `base + coeff * lane`). Injective members (transpose,
//   split, slice, expand_dims, squeeze, broadcast, dynamic_slice) rewrite the
//   index; reshape, concat and take, whose lane structure is irregular,
//   compute their lanes one by one. A load whose lane step is 0 is a scalar
//   load and a splat, 1 a vector load, anything else a gather.
// * Symbolic shapes. Static dimensions are constants (LLVM folds and unrolls
//   them); each `?` is read from the buffer descriptors, which the VM fills
//   with the shapes its shape functions computed for every value of the kernel
//   (inputs, each member result, outputs). The shape logic therefore exists
//   once (ir/ShapeFns), shared by the compiler, the VM and these kernels.
// * Residue dispatch (§3.4, Fig. 3). The innermost loop of a vectorized stage
//   runs n - n % VF points VF at a time; the remaining n % VF points are
//   dispatched by a switch on the run-time residue to variants with a constant
//   trip count (no bounds checks, fully unrolled by LLVM). With a static n
//   the switch folds to the one variant that can run. With AVX2 and AVX-512
//   a stage whose every member computes a lane as a scalar point would
//   (maskedTailOk) runs them instead as one vector step with masked loads
//   and stores: Tree-LSTM's rows of 150 f32 end in 6 points that were 6
//   scalar sigmoids and tanhs a gate, now one step of 16 lanes.
// * Reductions whose innermost reduced axis is contiguous (a row sum, matmul
//   with transpose_b, the LSTM's x · Wᵀ) compute one output point at a time
//   and vectorize the reduction itself (vector accumulators, a horizontal
//   reduction at the end, a scalar tail); the others vectorize over output
//   points and keep a vector of accumulators.
// * Errors (integer division by zero, an index out of range, max of nothing)
//   branch to one exit that returns 1: the VM then runs the reference kernel,
//   which reports the exact message at the member's .nir location.
//
//===----------------------------------------------------------------------===//

#include "codegen/llvm/KernelLowering.h"

#include "ir/Printer.h"

#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <unordered_map>

namespace nimble::codegen {

namespace detail {

using namespace lowering;

//===-- Buffers and shapes -------------------------------------------------===//

Value *KernelLowering::bufField(unsigned buf, unsigned field) {
  Value *p = b_.CreateConstInBoundsGEP2_32(bufTy_, bufs_, buf, field);
  return b_.CreateLoad(bufTy_->getElementType(field), p);
}

// Descriptors: one per value (KernelDesc numbering), then one per output.
void KernelLowering::loadShapes() {
  dims_.assign(vals_.size(), {});
  strides_.assign(vals_.size(), {});
  data_.assign(vals_.size(), nullptr);
  for (uint32_t v = 0; v < vals_.size(); ++v) {
    const auto &d = vals_[v].dims;
    Value *shape = nullptr;
    for (size_t i = 0; i < d.size(); ++i) {
      if (d[i] != kDynamic) {
        dims_[v].push_back(i64(d[i]));
        continue;
      }
      if (!shape) shape = bufField(v, 1);
      Value *p = b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), shape, i);
      dims_[v].push_back(b_.CreateLoad(b_.getInt64Ty(), p, "dim"));
    }
    strides_[v].assign(d.size(), nullptr);
    Value *s = i64(1);
    for (size_t i = d.size(); i-- > 0;) {
      strides_[v][i] = s;
      s = b_.CreateMul(s, dims_[v][i]);
    }
    if (v < k_.numInputs) {
      data_[v] = bufField(v, 0);
      if (v < gatherBuf_.size() && gatherBuf_[v]) markGathered(data_[v]);
    }
  }
}

Value *KernelLowering::numElements(uint32_t v) {
  Value *n = i64(1);
  for (Value *d : dims_[v]) n = b_.CreateMul(n, d);
  return n;
}

//===-- Loops --------------------------------------------------------------===//

void KernelLowering::forLoop(Value *begin, Value *end, Value *step, const char *name,
                             const std::function<void(Value *)> &body) {
  forLoopCarried(begin, end, step, {}, name, [&](Value *iv, const std::vector<Value *> &) {
    body(iv);
    return std::vector<Value *>{};
  });
}

std::vector<Value *> KernelLowering::forLoopCarried(
    Value *begin, Value *end, Value *step, std::vector<Value *> init, const char *name,
    const std::function<std::vector<Value *>(Value *, const std::vector<Value *> &)> &body) {
  llvm::BasicBlock *pre = b_.GetInsertBlock();
  llvm::BasicBlock *head = llvm::BasicBlock::Create(ctx_, std::string(name) + ".head", fn_);
  llvm::BasicBlock *bodyBB = llvm::BasicBlock::Create(ctx_, std::string(name) + ".body", fn_);
  llvm::BasicBlock *exit = llvm::BasicBlock::Create(ctx_, std::string(name) + ".exit", fn_);
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  llvm::PHINode *iv = b_.CreatePHI(b_.getInt64Ty(), 2, name);
  iv->addIncoming(begin, pre);
  std::vector<llvm::PHINode *> phis;
  std::vector<Value *> carried;
  for (Value *v : init) {
    llvm::PHINode *p = b_.CreatePHI(v->getType(), 2);
    p->addIncoming(v, pre);
    phis.push_back(p);
    carried.push_back(p);
  }
  b_.CreateCondBr(b_.CreateICmpSLT(iv, end), bodyBB, exit);
  b_.SetInsertPoint(bodyBB);
  std::vector<Value *> next = body(iv, carried);
  Value *ivNext = b_.CreateAdd(iv, step);
  llvm::BasicBlock *latch = b_.GetInsertBlock();
  b_.CreateBr(head);
  iv->addIncoming(ivNext, latch);
  for (size_t i = 0; i < phis.size(); ++i) phis[i]->addIncoming(next[i], latch);
  b_.SetInsertPoint(exit);
  return carried;
}

//===-- Memory -------------------------------------------------------------===//

Value *KernelLowering::offsetOf(uint32_t v, const Index &idx, Value *&laneStep, size_t from) {
  Value *off = i64(0);
  laneStep = i64(0);
  for (size_t d = from; d < idx.size(); ++d) {
    off = b_.CreateAdd(off, b_.CreateMul(idx[d].base, strides_[v][d]));
    if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(idx[d].coeff); c && c->isZero()) continue;
    laneStep = b_.CreateAdd(laneStep, b_.CreateMul(idx[d].coeff, strides_[v][d]));
  }
  return off;
}

Value *KernelLowering::laneIota(unsigned lanes) {
  std::vector<llvm::Constant *> c;
  for (unsigned l = 0; l < lanes; ++l) c.push_back(b_.getInt64(l));
  return llvm::ConstantVector::get(c);
}

Value *KernelLowering::rowOf(Value *table, Value *row) {
  llvm::Type *ptr = llvm::PointerType::get(ctx_, 0);
  llvm::LoadInst *p = b_.CreateLoad(ptr, b_.CreateInBoundsGEP(ptr, table, row), "row");
  // The table does not change while the kernel runs: LICM hoists the load
  // out of the loops over a row's points.
  p->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(ctx_, {}));
  return p;
}

// A row table's lanes along axis 0 are rows of their own: one point each.
static bool zeroCoeff(Value *c) {
  auto *k = llvm::dyn_cast<llvm::ConstantInt>(c);
  return k && k->isZero();
}

Value *KernelLowering::loadFrom(uint32_t v, Value *base, const Index &idx, unsigned lanes) {
  DType dt = vals_[v].dtype;
  llvm::Type *mt = memoryType(ctx_, dt);
  Value *step;
  Value *off;
  Value *mask = lanes > 1 ? tailMask_ : nullptr;
  if (isGathered(base)) {
    if (lanes > 1 && !zeroCoeff(idx[0].coeff)) {
      Value *r = llvm::PoisonValue::get(withLanes(elementType(ctx_, dt), lanes));
      for (unsigned l = 0; l < lanes; ++l) {
        // A masked-off lane of a tail step reads lane 0's row (which exists).
        Value *lane = i64(l);
        if (mask) lane = b_.CreateSelect(b_.CreateExtractElement(mask, l), lane, i64(0));
        Index li;
        for (const Ix &ix : idx) li.push_back({b_.CreateAdd(ix.base, b_.CreateMul(ix.coeff, lane)), i64(0)});
        r = b_.CreateInsertElement(r, loadFrom(v, base, li, 1), l);
      }
      return r;
    }
    base = rowOf(base, idx[0].base);
    off = offsetOf(v, idx, step, 1);
  } else {
    off = offsetOf(v, idx, step);
  }
  auto fromMemory = [&](Value *x) {
    return dt == DType::I1 ? b_.CreateICmpNE(x, llvm::Constant::getNullValue(x->getType())) : x;
  };
  if (lanes == 1) return fromMemory(b_.CreateLoad(mt, b_.CreateInBoundsGEP(mt, base, off)));
  auto *cs = llvm::dyn_cast<llvm::ConstantInt>(step);
  if (cs && cs->isZero())
    return splat(fromMemory(b_.CreateLoad(mt, b_.CreateInBoundsGEP(mt, base, off))), lanes);
  llvm::Align align(mt->getPrimitiveSizeInBits() / 8);
  if (cs && cs->isOne()) {
    llvm::Type *vt = withLanes(mt, lanes);
    Value *p = b_.CreateInBoundsGEP(mt, base, off);
    // A masked tail step: the lanes past the end are not read (zeros).
    if (mask) return fromMemory(b_.CreateMaskedLoad(vt, p, align, mask, llvm::Constant::getNullValue(vt)));
    return fromMemory(b_.CreateAlignedLoad(vt, p, align));
  }
  Value *offs = b_.CreateAdd(splat(off, lanes), b_.CreateMul(splat(step, lanes), laneIota(lanes)));
  Value *ptrs = b_.CreateInBoundsGEP(mt, base, offs);
  llvm::Type *vt = withLanes(mt, lanes);
  return fromMemory(b_.CreateMaskedGather(vt, ptrs, align, mask,
                                          mask ? llvm::Constant::getNullValue(vt) : nullptr));
}

// Stores `val` at idx of a buffer laid out like value v (innermost coeff is
// 1 when lanes > 1: stages only vectorize their own innermost dimension).
void KernelLowering::store(uint32_t v, Value *ptr, const Index &idx, Value *val, unsigned lanes) {
  DType dt = vals_[v].dtype;
  llvm::Type *mt = memoryType(ctx_, dt);
  Value *step;
  Value *off;
  if (isGathered(ptr)) {
    if (lanes > 1 && !zeroCoeff(idx[0].coeff)) {
      for (unsigned l = 0; l < lanes; ++l) {
        Index li;
        for (const Ix &ix : idx) li.push_back({b_.CreateAdd(ix.base, b_.CreateMul(ix.coeff, i64(l))), i64(0)});
        store(v, ptr, li, b_.CreateExtractElement(val, l), 1);
      }
      return;
    }
    ptr = rowOf(ptr, idx[0].base);
    off = offsetOf(v, idx, step, 1);
  } else {
    off = offsetOf(v, idx, step);
  }
  if (dt == DType::I1) val = b_.CreateZExt(val, withLanes(mt, lanes));
  llvm::Align align(mt->getPrimitiveSizeInBits() / 8);
  if (lanes > 1 && tailMask_) {
    // A masked tail step stores its points only.
    b_.CreateMaskedStore(val, b_.CreateInBoundsGEP(mt, ptr, off), align, tailMask_);
    return;
  }
  b_.CreateAlignedStore(val, b_.CreateInBoundsGEP(mt, ptr, off), align);
}

//===-- Values -------------------------------------------------------------===//

// The index of `operand` when `consumer` (of rank idx.size()) reads it with
// numpy broadcasting. A `?` operand dimension broadcasts when it is 1 at run
// time; along the vectorized axis that would turn vector loads into gathers,
// so in the speculative version of a loop (emitStage) it is assumed equal to
// the consumer's dimension and the assumption is recorded as a condition the
// loop is guarded by.
KernelLowering::Index KernelLowering::broadcastIndex(uint32_t operand, uint32_t consumer,
                                                     const Index &idx) {
  const auto &od = vals_[operand].dims;
  size_t r = od.size(), R = idx.size();
  Index out(r);
  for (size_t j = 0; j < r; ++j) {
    const Ix &ix = idx[j + R - r];
    auto *cc = llvm::dyn_cast<llvm::ConstantInt>(ix.coeff);
    if (od[j] == 1) {
      out[j] = {i64(0), i64(0)};
    } else if (od[j] != kDynamic) {
      out[j] = ix;
    } else if (speculating_ && !(cc && cc->isZero())) {
      out[j] = ix;
      assumptions_.push_back({dims_[operand][j], dims_[consumer][j + R - r]});
    } else { // a `?` of size 1 broadcasts at run time
      Value *one = b_.CreateICmpEQ(dims_[operand][j], i64(1));
      out[j] = {b_.CreateSelect(one, i64(0), ix.base), selectZero(one, ix.coeff)};
    }
  }
  return out;
}

Value *KernelLowering::scalarized(uint32_t v, const Index &idx, unsigned lanes) {
  llvm::Type *et = elementType(ctx_, vals_[v].dtype);
  Value *r = llvm::PoisonValue::get(withLanes(et, lanes));
  for (unsigned l = 0; l < lanes; ++l) {
    Index li;
    for (const Ix &ix : idx) li.push_back({b_.CreateAdd(ix.base, b_.CreateMul(ix.coeff, i64(l))), i64(0)});
    r = b_.CreateInsertElement(r, emitValue(v, li, 1), l);
  }
  return r;
}

Value *KernelLowering::emitValue(uint32_t v, const Index &idx, unsigned lanes) {
  if (data_[v]) return load(v, idx, lanes);
  const ValueInfo &vi = vals_[v];
  const auto &m = k_.members[static_cast<size_t>(vi.member)];
  return emitMember(v, m, idx, lanes);
}

Value *KernelLowering::emitMember(uint32_t v, const vm::KernelDesc::Member &m, const Index &idx,
                                  unsigned lanes) {
  const ValueInfo &vi = vals_[v];
  auto attr = [&](const char *name) -> const Attr & {
    const OpInfo &info = opInfo(m.op);
    for (size_t i = 0; i < info.attrs.size(); ++i)
      if (info.attrs[i].name == name) return m.attrs[i];
    static Attr none;
    return none;
  };
  const size_t R = idx.size();
  switch (m.op) {
  case OpCode::Sum: case OpCode::Mean: case OpCode::Max: case OpCode::Min: case OpCode::ArgMax:
  case OpCode::Prod:
    return emitReduce(v, m, idx, lanes);
  case OpCode::MatMul: case OpCode::BatchMatMul: return emitMatMul(v, m, idx, lanes);
  case OpCode::Split: {
    uint32_t x = m.operands[0];
    int64_t axis = normAxis(attr("axis").getInt(), static_cast<int64_t>(R));
    Index xi = idx;
    xi[axis].base = b_.CreateAdd(xi[axis].base, b_.CreateMul(i64(vi.result), dims_[v][axis]));
    return emitValue(x, xi, lanes);
  }
  case OpCode::Slice: {
    uint32_t x = m.operands[0];
    Index xi = idx;
    const auto &axes = attr("axes").getInts();
    const auto &starts = attr("starts").getInts();
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = normAxis(axes[i], static_cast<int64_t>(R));
      Value *d = dims_[x][a];
      Value *s = i64(starts[i]);
      if (starts[i] < 0) s = b_.CreateAdd(s, d);
      // numpy clamps starts to [0, dim].
      s = b_.CreateSelect(b_.CreateICmpSLT(s, i64(0)), i64(0), s);
      s = b_.CreateSelect(b_.CreateICmpSGT(s, d), d, s);
      xi[a].base = b_.CreateAdd(xi[a].base, s);
    }
    return emitValue(x, xi, lanes);
  }
  case OpCode::DynamicSlice: {
    uint32_t x = m.operands[0];
    int64_t axis = normAxis(attr("axis").getInt(), static_cast<int64_t>(R));
    Value *start = emitCast(b_, emitValue(m.operands[1], Index(vals_[m.operands[1]].dims.size(), {i64(0), i64(0)}), 1),
                            vals_[m.operands[1]].dtype, DType::I64);
    Value *hi = b_.CreateSub(dims_[x][axis], i64(attr("size").getInt()));
    Value *bad = b_.CreateOr(b_.CreateICmpSLT(start, i64(0)), b_.CreateICmpSGT(start, hi));
    llvm::BasicBlock *ok = llvm::BasicBlock::Create(ctx_, "dslice.ok", fn_);
    b_.CreateCondBr(bad, errBB_, ok);
    b_.SetInsertPoint(ok);
    Index xi = idx;
    xi[axis].base = b_.CreateAdd(xi[axis].base, start);
    return emitValue(x, xi, lanes);
  }
  case OpCode::Transpose: {
    uint32_t x = m.operands[0];
    std::vector<int64_t> perm = attr("perm").getInts();
    if (perm.empty())
      for (size_t i = 0; i < R; ++i) perm.push_back(static_cast<int64_t>(R - 1 - i));
    Index xi(R);
    for (size_t d = 0; d < R; ++d) xi[normAxis(perm[d], R)] = idx[d];
    return emitValue(x, xi, lanes);
  }
  case OpCode::ExpandDims: {
    int64_t axis = normAxis(attr("axis").getInt(), static_cast<int64_t>(R));
    Index xi;
    for (size_t d = 0; d < R; ++d)
      if (static_cast<int64_t>(d) != axis) xi.push_back(idx[d]);
    return emitValue(m.operands[0], xi, lanes);
  }
  case OpCode::Squeeze: {
    uint32_t x = m.operands[0];
    const auto &xd = vals_[x].dims;
    std::vector<bool> squeezed(xd.size(), false);
    const auto &axes = attr("axes").getInts();
    if (axes.empty()) {
      for (size_t d = 0; d < xd.size(); ++d) squeezed[d] = xd[d] == 1;
    } else {
      for (int64_t a : axes) squeezed[normAxis(a, static_cast<int64_t>(xd.size()))] = true;
    }
    Index xi;
    size_t j = 0;
    for (size_t d = 0; d < xd.size(); ++d) xi.push_back(squeezed[d] ? Ix{i64(0), i64(0)} : idx[j++]);
    return emitValue(x, xi, lanes);
  }
  case OpCode::BroadcastTo: return emitValue(m.operands[0], broadcastIndex(m.operands[0], v, idx), lanes);
  case OpCode::Reshape: case OpCode::DynReshape: {
    if (lanes > 1) return scalarized(v, idx, lanes);
    uint32_t x = m.operands[0];
    Value *flat = i64(0);
    for (size_t d = 0; d < R; ++d) flat = b_.CreateAdd(flat, b_.CreateMul(idx[d].base, strides_[v][d]));
    Index xi(vals_[x].dims.size());
    for (size_t d = 0; d < xi.size(); ++d) {
      xi[d] = {b_.CreateURem(b_.CreateUDiv(flat, strides_[x][d]), dims_[x][d]), i64(0)};
    }
    return emitValue(x, xi, 1);
  }
  case OpCode::Concat: {
    if (lanes > 1) return scalarized(v, idx, lanes);
    int64_t axis = normAxis(attr("axis").getInt(), static_cast<int64_t>(R));
    // A chain of blocks: the first operand whose extent covers the index.
    llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx_, "concat.done", fn_);
    std::vector<std::pair<Value *, llvm::BasicBlock *>> incoming;
    Value *pos = idx[axis].base;
    for (size_t i = 0; i < m.operands.size(); ++i) {
      uint32_t x = m.operands[i];
      Value *ext = dims_[x][axis];
      llvm::BasicBlock *here = llvm::BasicBlock::Create(ctx_, "concat.in", fn_);
      llvm::BasicBlock *next = llvm::BasicBlock::Create(ctx_, "concat.next", fn_);
      b_.CreateCondBr(b_.CreateICmpSLT(pos, ext), here, next);
      b_.SetInsertPoint(here);
      Index xi = idx;
      xi[axis].base = pos;
      Value *val = emitValue(x, xi, 1);
      incoming.push_back({val, b_.GetInsertBlock()});
      b_.CreateBr(done);
      b_.SetInsertPoint(next);
      pos = b_.CreateSub(pos, ext);
    }
    b_.CreateBr(errBB_); // unreachable for a checked shape
    b_.SetInsertPoint(done);
    llvm::PHINode *phi = b_.CreatePHI(elementType(ctx_, vi.dtype), static_cast<unsigned>(incoming.size()));
    for (auto &[val, bb] : incoming) phi->addIncoming(val, bb);
    return phi;
  }
  case OpCode::Take: {
    if (lanes > 1) return scalarized(v, idx, lanes);
    uint32_t x = m.operands[0], ind = m.operands[1];
    int64_t xr = static_cast<int64_t>(vals_[x].dims.size());
    int64_t axis = normAxis(attr("axis").getInt(), xr);
    size_t ir = vals_[ind].dims.size();
    Index ii(idx.begin() + axis, idx.begin() + axis + static_cast<int64_t>(ir));
    Value *i = emitCast(b_, emitValue(ind, ii, 1), vals_[ind].dtype, DType::I64);
    Value *n = dims_[x][axis];
    i = b_.CreateSelect(b_.CreateICmpSLT(i, i64(0)), b_.CreateAdd(i, n), i);
    Value *bad = b_.CreateOr(b_.CreateICmpSLT(i, i64(0)), b_.CreateICmpSGE(i, n));
    llvm::BasicBlock *ok = llvm::BasicBlock::Create(ctx_, "take.ok", fn_);
    b_.CreateCondBr(bad, errBB_, ok);
    b_.SetInsertPoint(ok);
    Index xi;
    for (int64_t d = 0; d < axis; ++d) xi.push_back(idx[d]);
    xi.push_back({i, i64(0)});
    for (size_t d = static_cast<size_t>(axis) + ir; d < R; ++d) xi.push_back(idx[d]);
    return emitValue(x, xi, 1);
  }
  case OpCode::Zeros: return splat(llvm::Constant::getNullValue(elementType(ctx_, vi.dtype)), lanes);
  case OpCode::Full: {
    uint32_t s = m.operands[1];
    Value *val = emitValue(s, Index(vals_[s].dims.size(), {i64(0), i64(0)}), 1);
    return splat(emitCast(b_, val, vals_[s].dtype, vi.dtype), lanes);
  }
  case OpCode::Arange: {
    auto scalar = [&](uint32_t o) {
      return emitCast(b_, emitValue(o, Index(vals_[o].dims.size(), {i64(0), i64(0)}), 1), vals_[o].dtype, vi.dtype);
    };
    Value *start = scalar(m.operands[0]), *step = scalar(m.operands[2]);
    Value *i = b_.CreateAdd(splat(idx[0].base, lanes),
                            lanes == 1 ? b_.CreateMul(idx[0].coeff, i64(0)) : b_.CreateMul(splat(idx[0].coeff, lanes), laneIota(lanes)));
    Value *iv = emitCast(b_, i, DType::I64, vi.dtype);
    return isFloat(vi.dtype) ? b_.CreateFAdd(splat(start, lanes), b_.CreateFMul(iv, splat(step, lanes)))
                             : b_.CreateAdd(splat(start, lanes), b_.CreateMul(iv, splat(step, lanes)));
  }
  case OpCode::Dim: {
    uint32_t x = m.operands[0];
    int64_t axis = normAxis(attr("axis").getInt(), static_cast<int64_t>(vals_[x].dims.size()));
    return splat(emitCast(b_, dims_[x][axis], DType::I64, vi.dtype), lanes);
  }
  case OpCode::ShapeOf: {
    uint32_t x = m.operands[0];
    if (lanes > 1) return scalarized(v, idx, lanes);
    // The index selects the axis: a small switch over the rank.
    Value *r = i64(0);
    for (size_t d = 0; d < dims_[x].size(); ++d)
      r = b_.CreateSelect(b_.CreateICmpEQ(idx[0].base, i64(static_cast<int64_t>(d))), dims_[x][d], r);
    return r;
  }
  default: break;
  }
  // Element-wise: every operand broadcast to this value's index.
  std::vector<Value *> args;
  for (uint32_t o : m.operands) args.push_back(emitValue(o, broadcastIndex(o, v, idx), lanes));
  DType in = vals_[m.operands[0]].dtype;
  if (m.op == OpCode::Select) in = vals_[m.operands[1]].dtype;
  return emitElementOp(b_, m.op, in, vi.dtype, args, m.attrs, errBB_);
}

//===-- Stages -------------------------------------------------------------===//

void KernelLowering::emitStage(uint32_t v, const std::vector<Value *> &destsIn) {
  const size_t R = vals_[v].dims.size();
  bool parallelized = false;
  std::vector<Value *> dests = destsIn; // replaced inside a parallel body
  unsigned lanes = stageLanes(v);
  Index idx(R);
  auto point = [&](unsigned ln) {
    Value *val = emitValue(v, idx, ln);
    for (Value *d : dests) store(v, d, idx, val, ln);
  };
  std::function<void(size_t)> nest = [&](size_t d) {
    if (d == 0 && R == 1 && gpu_ && !parallelized) {
      // NVPTX: a vector's points over the grid (CPU: one loop, vectorized).
      parallelized = true;
      parallel("points", dims_[v][0], numElements(v), dests, [&](Value *begin, Value *end) {
        forLoop(begin, end, i64(1), "j", [&](Value *iv) {
          idx[0] = {iv, i64(0)};
          point(1);
        });
      });
      return;
    }
    if (d == 0 && R >= 2 && !parallelized) {
      // The outermost dimension in parts on the thread pool.
      parallelized = true;
      parallel("rows", dims_[v][0], numElements(v), dests, [&](Value *begin, Value *end) {
        forLoop(begin, end, i64(1), "i", [&](Value *iv) {
          idx[0] = {iv, i64(0)};
          nest(1);
        });
      });
      return;
    }
    if (d + 1 < R) {
      forLoop(i64(0), dims_[v][d], i64(1), "i", [&](Value *iv) {
        idx[d] = {iv, i64(0)};
        nest(d + 1);
      });
      return;
    }
    Value *n = dims_[v][d];
    if (lanes == 1) {
      forLoop(i64(0), n, i64(1), "j", [&](Value *iv) {
        idx[d] = {iv, i64(0)};
        point(1);
      });
      return;
    }
    Value *rem = b_.CreateSRem(n, i64(lanes));
    Value *nMain = b_.CreateSub(n, rem);
    const bool maskedTail = maskedTailOk(v, dests, d);
    auto inner = [&] {
      forLoop(i64(0), nMain, i64(lanes), "jv", [&](Value *iv) {
        idx[d] = {iv, i64(1)};
        point(lanes);
      });
      if (maskedTail) {
        // The n % VF points past the vector body as one vector step whose
        // loads and stores are masked to them: each lane computes what a
        // scalar point would (maskedTailOk), in one step, not n % VF.
        llvm::BasicBlock *tail = llvm::BasicBlock::Create(ctx_, "tail.masked", fn_);
        llvm::BasicBlock *after = llvm::BasicBlock::Create(ctx_, "tail.done", fn_);
        b_.CreateCondBr(b_.CreateICmpSGT(rem, i64(0)), tail, after);
        b_.SetInsertPoint(tail);
        idx[d] = {nMain, i64(1)};
        tailMask_ = b_.CreateICmpSLT(laneIota(lanes), splat(rem, lanes), "tail.mask");
        point(lanes);
        tailMask_ = nullptr;
        b_.CreateBr(after);
        b_.SetInsertPoint(after);
        return;
      }
      // Residue dispatch: one variant per residue, each a constant-count loop.
      llvm::BasicBlock *after = llvm::BasicBlock::Create(ctx_, "residue.done", fn_);
      llvm::SwitchInst *sw = b_.CreateSwitch(rem, after, lanes - 1);
      for (unsigned r = 1; r < lanes; ++r) {
        llvm::BasicBlock *cs = llvm::BasicBlock::Create(ctx_, "residue." + std::to_string(r), fn_);
        sw->addCase(b_.getInt64(r), cs);
        b_.SetInsertPoint(cs);
        forLoop(nMain, b_.CreateAdd(nMain, i64(r)), i64(1), "jr", [&](Value *iv) {
          idx[d] = {iv, i64(0)};
          point(1);
        });
        b_.CreateBr(after);
      }
      b_.SetInsertPoint(after);
    };
    // The speculative version first (no run-time broadcasting along this
    // axis), then, if it assumed anything, the general one and the guard.
    llvm::BasicBlock *guard = llvm::BasicBlock::Create(ctx_, "bcast.guard", fn_);
    llvm::BasicBlock *fast = llvm::BasicBlock::Create(ctx_, "bcast.none", fn_);
    llvm::BasicBlock *join = llvm::BasicBlock::Create(ctx_, "bcast.join", fn_);
    b_.CreateBr(guard);
    b_.SetInsertPoint(fast);
    speculating_ = true;
    assumptions_.clear();
    inner();
    speculating_ = false;
    b_.CreateBr(join);
    std::vector<std::pair<Value *, Value *>> assumed = std::move(assumptions_);
    assumptions_.clear();
    llvm::IRBuilder<> gb(guard);
    if (assumed.empty()) {
      gb.CreateBr(fast);
    } else {
      llvm::BasicBlock *general = llvm::BasicBlock::Create(ctx_, "bcast.any", fn_);
      Value *ok = gb.getTrue();
      for (auto &[a, c] : assumed) ok = gb.CreateAnd(ok, gb.CreateICmpEQ(a, c));
      gb.CreateCondBr(ok, fast, general);
      b_.SetInsertPoint(general);
      inner();
      b_.CreateBr(join);
    }
    b_.SetInsertPoint(join);
  };
  if (R == 0) {
    point(1);
    return;
  }
  nest(0);
}

// One f32 row of softmax or layer_norm along the innermost axis, in vector
// passes (VF lanes, scalar tails) with f32 accumulators and the inline exp:
//   softmax:    max (ordered compares: NaN ignored as by the reference's
//               std::max, then propagated by exp), e = exp(x - max) stored and
//               summed, e / sum;
//   layer_norm: mean, mean of squared deviations, (x - mean) * rsqrt * g + b.
llvm::Function *KernelLowering::emit(const std::string &symbol) {
  llvm::Type *ptr = llvm::PointerType::get(ctx_, 0);
  bufTy_ = llvm::StructType::get(ctx_, {ptr, ptr, ptr, b_.getInt32Ty(), b_.getInt32Ty()});
  // CPU: int32_t f(bufs, num_bufs, ctx) (vm/KernelABI.h). NVPTX: a kernel
  // entry void f(bufs, num_bufs, status), every pointer a device pointer;
  // an error stores 1 to *status (the runtime then reports it).
  auto *fty = llvm::FunctionType::get(gpu_ ? b_.getVoidTy() : b_.getInt32Ty(), {ptr, b_.getInt32Ty(), ptr}, false);
  fn_ = llvm::Function::Create(fty, llvm::GlobalValue::ExternalLinkage, symbol, mod_);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  if (gpu_) fn_->setCallingConv(llvm::CallingConv::PTX_Kernel);
  bufs_ = fn_->getArg(0);
  fn_->getArg(0)->setName("bufs");
  fn_->getArg(2)->setName(gpu_ ? "status" : "ctx");
  llvm::BasicBlock *entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  llvm::BasicBlock *okExit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
  errBB_ = llvm::BasicBlock::Create(ctx_, "error", fn_);
  b_.SetInsertPoint(entry);
  loadShapes();
  llvm::FunctionCallee mallocFn =
      mod_.getOrInsertFunction("malloc", llvm::FunctionType::get(ptr, {b_.getInt64Ty()}, false));
  llvm::FunctionCallee freeFn =
      mod_.getOrInsertFunction("free", llvm::FunctionType::get(b_.getVoidTy(), {ptr}, false));
  // Output descriptors follow the value descriptors.
  std::vector<std::vector<Value *>> outDests(vals_.size());
  for (size_t o = 0; o < k_.outputs.size(); ++o) {
    size_t buf = vals_.size() + o;
    Value *d = bufField(static_cast<unsigned>(buf), 0);
    if (buf < gatherBuf_.size() && gatherBuf_[buf]) markGathered(d);
    outDests[k_.outputs[o]].push_back(d);
  }
  // Outputs that are inputs are copies; then each stored member in order.
  for (uint32_t v = 0; v < k_.numInputs; ++v)
    if (!outDests[v].empty()) emitStage(v, outDests[v]);
  // The memory a stored member is written to: its output buffers, else a
  // temporary freed at exit.
  auto destsOf = [&](uint32_t v) {
    std::vector<Value *> dests = outDests[v];
    if (dests.empty()) {
      llvm::Type *mt = memoryType(ctx_, vals_[v].dtype);
      Value *bytes = b_.CreateMul(numElements(v), i64(mt->getPrimitiveSizeInBits() / 8));
      llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
      llvm::AllocaInst *slot = eb.CreateAlloca(ptr);
      eb.CreateStore(llvm::ConstantPointerNull::get(llvm::PointerType::get(ctx_, 0)), slot);
      temps_.push_back(slot);
      Value *mem = gpu_ ? deviceTemporary(b_.CreateAdd(bytes, i64(1)), mallocFn)
                        : b_.CreateCall(mallocFn, {b_.CreateAdd(bytes, i64(1))});
      b_.CreateStore(mem, slot);
      llvm::BasicBlock *ok = llvm::BasicBlock::Create(ctx_, "alloc.ok", fn_);
      b_.CreateCondBr(b_.CreateIsNull(mem), errBB_, ok);
      b_.SetInsertPoint(ok);
      dests.push_back(mem);
    }
    return dests;
  };
  // Products stored early, with an earlier sibling (emitMatMulStage), and
  // their memory.
  std::vector<std::vector<Value *>> early(vals_.size());
  for (uint32_t v = k_.numInputs; v < vals_.size(); ++v) {
    if (outDests[v].empty() && !materialize_[v]) continue;
    if (!early[v].empty()) {
      // Computed with its sibling; the other outputs are copies.
      const std::vector<Value *> &dests = early[v];
      data_[v] = dests[0];
      for (size_t i = 1; i < dests.size(); ++i) emitStage(v, {dests[i]});
      continue;
    }
    std::vector<Value *> dests = destsOf(v);
    OpCode op = k_.members[static_cast<size_t>(vals_[v].member)].op;
    stages_ += static_cast<unsigned>(dests.size()); // row and matmul stages copy the rest
    uint32_t sib = op == OpCode::MatMul ? matMulSibling(v) : kNoSibling;
    if (sib != kNoSibling) {
      early[sib] = destsOf(sib);
      stages_ += static_cast<unsigned>(early[sib].size());
      emitMatMulStage(v, dests[0], sib, early[sib][0]);
      data_[v] = dests[0];
      for (size_t i = 1; i < dests.size(); ++i) emitStage(v, {dests[i]});
    } else if (op == OpCode::Softmax || op == OpCode::LayerNorm) {
      emitRowStage(v, dests[0]);
      for (size_t i = 1; i < dests.size(); ++i) {
        data_[v] = dests[0];
        emitStage(v, {dests[i]});
      }
    } else if ((op == OpCode::MatMul || op == OpCode::BatchMatMul) && emitMatMulStage(v, dests[0])) {
      data_[v] = dests[0];
      for (size_t i = 1; i < dests.size(); ++i) emitStage(v, {dests[i]});
    } else {
      emitStage(v, dests);
    }
    data_[v] = dests[0];
    // NVPTX: the next stage may read any point of this one, so the block
    // waits for all its threads (a stage outside a grid-stride loop is
    // computed by every thread, each storing the same values).
    if (gpu_) barrier();
  }
  b_.CreateBr(okExit);
  if (gpu_) {
    // Thread 0 frees the temporaries once the block is done with them. An
    // error exit leaves them to the device heap (other threads may still
    // read them): the runtime ends the run on any kernel error.
    b_.SetInsertPoint(okExit);
    if (!temps_.empty()) {
      llvm::BasicBlock *freeBB = llvm::BasicBlock::Create(ctx_, "temp.free", fn_);
      llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx_, "done", fn_);
      b_.CreateCondBr(b_.CreateICmpEQ(sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x), i64(0)), freeBB, done);
      b_.SetInsertPoint(freeBB);
      for (llvm::AllocaInst *slot : temps_) b_.CreateCall(freeFn, {b_.CreateLoad(ptr, slot)});
      b_.CreateBr(done);
      b_.SetInsertPoint(done);
    }
    b_.CreateRetVoid();
    b_.SetInsertPoint(errBB_);
    b_.CreateStore(b_.getInt32(1), fn_->getArg(2));
    b_.CreateRetVoid();
    return fn_;
  }
  auto freeTemps = [&](llvm::BasicBlock *bb, int32_t rc) {
    b_.SetInsertPoint(bb);
    for (llvm::AllocaInst *slot : temps_) b_.CreateCall(freeFn, {b_.CreateLoad(ptr, slot)});
    b_.CreateRet(b_.getInt32(rc));
  };
  freeTemps(okExit, 0);
  freeTemps(errBB_, 1);
  return fn_;
}

} // namespace detail

// Emits kl's function as `symbol` and checks it with the function bodies of
// its parallel regions; an invalid result is removed again.
static bool lowerKernelChecked(llvm::Module &mod, detail::KernelLowering &kl, const std::string &symbol,
                               std::string &reason, bool *multiBlock);

// NIMBLE_GATHER_SUFFIX of vm/KernelABI.h (a runtime header this library
// does not depend on); test/codegen/gather-fusion.test fails if they differ.
std::string gatherSymbol(const std::string &symbol) { return symbol + "_gather"; }

bool lowerGatheredKernel(llvm::Module &mod, const vm::KernelDesc &k, const ir::Function &f,
                         const KernelTarget &target, const std::string &symbol,
                         const std::vector<bool> &gathered, std::string &reason) {
  if (target.gpu()) {
    reason = "gather fusion is for cpu kernels";
    return false;
  }
  detail::KernelLowering kl(mod, k, f, target, gathered);
  if (!kl.analyze(reason)) return false;
  return lowerKernelChecked(mod, kl, gatherSymbol(symbol), reason, nullptr);
}

std::string kernelCodeKey(const vm::KernelDesc &k, const ir::Function &f) {
  std::string key;
  auto num = [&](uint64_t x) { key += std::to_string(x) + ","; };
  num(k.numInputs);
  num(k.upperBound);
  for (DType t : k.inputDTypes) num(static_cast<uint64_t>(t));
  key += "|";
  for (uint32_t o : k.outputs) num(o);
  key += "|";
  // Not the function attributes: the lowering does not read them (they name
  // the batched variant, which differs per kernel). A lowering that starts
  // reading one must add it here.
  key += f.type().str() + "|";
  // Values numbered in definition order (block arguments, then results).
  std::unordered_map<const ir::Value *, uint64_t> ids;
  for (const auto &b : f.blocks()) {
    key += "^";
    for (ir::Value *a : b->arguments()) {
      ids.emplace(a, ids.size());
      key += a->type().str() + ",";
    }
    for (const ir::Operation &op : *b) {
      key += std::string(op.name()) + "(";
      for (ir::Value *v : op.operandValues()) {
        auto it = ids.find(v);
        if (it != ids.end()) num(it->second);
        else key += "@" + v->name() + ","; // a global
      }
      key += ")";
      for (const Attr &a : op.attrs()) key += ir::printAttr(a) + ";";
      for (ir::Value *r : op.resultValues()) {
        ids.emplace(r, ids.size());
        key += r->type().str() + ",";
      }
      for (const ir::Successor &s : op.successors()) key += "->" + s.block->label() + s.label + ",";
      key += "\n";
    }
  }
  return key;
}

std::string kernelSymbol(size_t index, const std::string &name) {
  std::string s = "nimble_k" + std::to_string(index) + "_";
  for (char c : name) s += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return s.substr(0, 200);
}

bool lowerKernel(llvm::Module &mod, const vm::KernelDesc &k, const ir::Function &f,
                 const KernelTarget &target, const std::string &symbol, std::string &reason,
                 bool *multiBlock) {
  detail::KernelLowering kl(mod, k, f, target);
  if (!kl.analyze(reason)) return false;
  return lowerKernelChecked(mod, kl, symbol, reason, multiBlock);
}

static bool lowerKernelChecked(llvm::Module &mod, detail::KernelLowering &kl, const std::string &symbol,
                               std::string &reason, bool *multiBlock) {
  llvm::Function *fn = kl.emit(symbol);
  if (multiBlock) *multiBlock = kl.stages() <= 1 && !kl.hasTemporaries();
  std::string err;
  llvm::raw_string_ostream os(err);
  // The kernel and the bodies of its parallel regions (internal functions
  // named after it) are checked together.
  bool broken = false;
  std::vector<llvm::Function *> made;
  for (llvm::Function &f : mod)
    if (&f == fn || f.getName().starts_with((symbol + ".").c_str())) made.push_back(&f);
  for (llvm::Function *f : made) broken |= llvm::verifyFunction(*f, &os);
  if (broken) {
    reason = "internal error: the generated function is invalid: " + os.str();
    for (llvm::Function *f : made) f->dropAllReferences();
    for (llvm::Function *f : made) f->eraseFromParent();
    return false;
  }
  return true;
}

} // namespace nimble::codegen
