//===- KernelReduce.cpp - Reductions, softmax and layer_norm --------------===//
//
// KernelLowering's reductions (sum, mean, max, min, prod, argmax; vectorized along a
// contiguous reduced axis or over output points) and the row stages of
// softmax and layer_norm. The design: KernelGen.cpp.
//
//===----------------------------------------------------------------------===//

#include "codegen/llvm/KernelLowering.h"

namespace nimble::codegen::detail {

using namespace lowering;

//===-- Reductions -----------------------------------------------------------===//

Value *KernelLowering::emitReduce(uint32_t v, const vm::KernelDesc::Member &m, const Index &idx,
                                  unsigned lanes) {
  const ValueInfo &vi = vals_[v];
  uint32_t x = m.operands[0];
  const size_t Rx = vals_[x].dims.size();
  const OpInfo &info = opInfo(m.op);
  std::vector<bool> reduced(Rx, false);
  bool keep = false;
  for (size_t i = 0; i < info.attrs.size(); ++i) {
    if (info.attrs[i].name == "keepdims") keep = m.attrs[i].getBool();
    if (info.attrs[i].name == "axes") {
      const auto &axes = m.attrs[i].getInts();
      if (axes.empty()) reduced.assign(Rx, true);
      for (int64_t a : axes) reduced[normAxis(a, static_cast<int64_t>(Rx))] = true;
    }
    if (info.attrs[i].name == "axis" && Rx > 0) reduced[normAxis(m.attrs[i].getInt(), static_cast<int64_t>(Rx))] = true;
  }
  const bool isArg = m.op == OpCode::ArgMax;
  const DType dt = vals_[x].dtype;
  const bool fl = isFloat(dt);
  std::vector<size_t> axes;
  Index xi(Rx);
  for (size_t d = 0, o = 0; d < Rx; ++d) {
    if (reduced[d]) {
      axes.push_back(d);
      if (keep) ++o;
    } else {
      xi[d] = idx[o++];
    }
  }
  Value *count = i64(1);
  for (size_t a : axes) count = b_.CreateMul(count, dims_[x][a]);
  // max / min of an empty axis give their identities, the accumulators'
  // starting values (-inf / +inf, the integer extremes), like the reference;
  // argmax has none.
  if (isArg) {
    llvm::BasicBlock *ok = llvm::BasicBlock::Create(ctx_, "nonempty", fn_);
    b_.CreateCondBr(b_.CreateICmpEQ(count, i64(0)), errBB_, ok);
    b_.SetInsertPoint(ok);
  }
  llvm::Type *et = elementType(ctx_, dt);
  // Sums and means of f32 accumulate in double, like the reference (no
  // overflow of intermediate sums; one rounding at the end).
  const bool isProd = m.op == OpCode::Prod;
  const bool wideSum = dt == DType::F32 && (m.op == OpCode::Sum || m.op == OpCode::Mean || isProd);
  llvm::Type *accTy = wideSum ? b_.getDoubleTy() : et;
  // Combine (acc, x) -> acc with the reference's rules.
  auto better = [&](Value *xv, Value *acc) -> Value * {
    bool mx = m.op != OpCode::Min;
    if (!fl && isUnsigned(dt)) return mx ? b_.CreateICmpUGT(xv, acc) : b_.CreateICmpULT(xv, acc);
    if (!fl) return mx ? b_.CreateICmpSGT(xv, acc) : b_.CreateICmpSLT(xv, acc);
    Value *c = mx ? b_.CreateFCmpOGT(xv, acc) : b_.CreateFCmpOLT(xv, acc);
    // The first NaN wins and then stays.
    return b_.CreateAnd(b_.CreateNot(b_.CreateFCmpUNO(acc, acc)), b_.CreateOr(c, b_.CreateFCmpUNO(xv, xv)));
  };
  auto initFor = [&](unsigned ln) -> Value * {
    if (m.op == OpCode::Sum || m.op == OpCode::Mean) return llvm::Constant::getNullValue(withLanes(accTy, ln));
    if (isProd) return splat(fl ? static_cast<Value *>(llvm::ConstantFP::get(accTy, 1.0)) : llvm::ConstantInt::get(accTy, 1), ln);
    bool mx = m.op != OpCode::Min;
    Value *s;
    if (fl) {
      s = llvm::ConstantFP::getInfinity(et, mx);
    } else {
      unsigned w = et->getIntegerBitWidth();
      bool u = isUnsigned(dt);
      s = llvm::ConstantInt::get(et, mx ? (u ? llvm::APInt::getMinValue(w) : llvm::APInt::getSignedMinValue(w))
                                        : (u ? llvm::APInt::getMaxValue(w) : llvm::APInt::getSignedMaxValue(w)));
    }
    return splat(s, ln);
  };
  // Vectorize the innermost reduced axis when it is the contiguous one and
  // this point is computed alone.
  const bool vecInner = lanes == 1 && !isArg && !axes.empty() && axes.back() == Rx - 1 && vf_ > 1 &&
                        dt != DType::I1;
  std::vector<Value *> acc = {initFor(lanes)};
  if (isArg) acc.push_back(splat(i64(0), lanes));
  std::function<std::vector<Value *>(size_t, std::vector<Value *>)> nest =
      [&](size_t level, std::vector<Value *> in) -> std::vector<Value *> {
    size_t a = axes[level];
    bool last = level + 1 == axes.size();
    auto step = [&](Value *iv, const std::vector<Value *> &cur, unsigned ln) -> std::vector<Value *> {
      // Lanes run along the reduced axis only in the vectorized inner
      // reduction; otherwise they run along the output's innermost axis and
      // every lane reads the same reduced index.
      xi[a] = {iv, i64(vecInner && ln > 1 ? 1 : 0)};
      if (!last) return nest(level + 1, cur);
      Value *xv = emitValue(x, xi, ln);
      if (wideSum) xv = b_.CreateFPExt(xv, withLanes(accTy, ln));
      if (m.op == OpCode::Sum || m.op == OpCode::Mean)
        return {fl ? b_.CreateFAdd(cur[0], xv) : b_.CreateAdd(cur[0], xv)};
      if (isProd) return {fl ? b_.CreateFMul(cur[0], xv) : b_.CreateMul(cur[0], xv)};
      Value *bt = better(xv, cur[0]);
      std::vector<Value *> r = {b_.CreateSelect(bt, xv, cur[0])};
      if (isArg) r.push_back(b_.CreateSelect(bt, splat(iv, ln), cur[1]));
      return r;
    };
    if (!(last && vecInner))
      return forLoopCarried(i64(0), dims_[x][a], i64(1), in, "red",
                            [&](Value *iv, const std::vector<Value *> &cur) { return step(iv, cur, lanes); });
    // Vector body over n - n % VF, horizontal reduction, scalar tail.
    Value *n = dims_[x][a];
    Value *nMain = b_.CreateSub(n, b_.CreateSRem(n, i64(vf_)));
    std::vector<Value *> vacc = forLoopCarried(i64(0), nMain, i64(vf_), {initFor(vf_)}, "redv",
                                               [&](Value *iv, const std::vector<Value *> &cur) { return step(iv, cur, vf_); });
    Value *h;
    if (m.op == OpCode::Sum || m.op == OpCode::Mean) {
      if (fl) {
        llvm::FastMathFlags fmf;
        fmf.setAllowReassoc();
        h = b_.CreateFAddReduce(llvm::ConstantFP::get(accTy, 0.0), vacc[0]);
        llvm::cast<llvm::Instruction>(h)->setFastMathFlags(fmf);
        h = b_.CreateFAdd(in[0], h);
      } else {
        h = b_.CreateAdd(in[0], b_.CreateAddReduce(vacc[0]));
      }
    } else if (isProd) {
      if (fl) {
        llvm::FastMathFlags fmf;
        fmf.setAllowReassoc();
        h = b_.CreateFMulReduce(llvm::ConstantFP::get(accTy, 1.0), vacc[0]);
        llvm::cast<llvm::Instruction>(h)->setFastMathFlags(fmf);
        h = b_.CreateFMul(in[0], h);
      } else {
        h = b_.CreateMul(in[0], b_.CreateMulReduce(vacc[0]));
      }
    } else {
      // Lane by lane with the scalar rule (keeps NaN and tie behaviour).
      h = in[0];
      for (unsigned l = 0; l < vf_; ++l) {
        Value *xv = b_.CreateExtractElement(vacc[0], l);
        h = b_.CreateSelect(better(xv, h), xv, h);
      }
    }
    return forLoopCarried(nMain, n, i64(1), {h}, "redt",
                          [&](Value *iv, const std::vector<Value *> &cur) { return step(iv, cur, 1); });
  };
  if (axes.empty()) return emitCast(b_, emitValue(x, xi, lanes), dt, vi.dtype);
  std::vector<Value *> r = nest(0, acc);
  if (isArg) return r[1];
  Value *res = r[0];
  if (m.op == OpCode::Mean) res = b_.CreateFDiv(res, splat(b_.CreateSIToFP(count, accTy), lanes));
  return wideSum ? b_.CreateFPTrunc(res, withLanes(et, lanes)) : res;
}

void KernelLowering::emitVectorRow(const vm::KernelDesc::Member &m, uint32_t x, uint32_t v,
                                   Value *dest, Index idx, int64_t axis) {
  llvm::Type *et = b_.getFloatTy();
  Value *n = dims_[x][axis];
  Value *nMain = b_.CreateSub(n, b_.CreateSRem(n, i64(vf_)));
  auto at = [&](Value *j, unsigned ln) {
    idx[axis] = {j, i64(ln > 1 ? 1 : 0)};
    return emitValue(x, idx, ln);
  };
  auto put = [&](Value *j, Value *val, unsigned ln) {
    idx[axis] = {j, i64(ln > 1 ? 1 : 0)};
    store(v, dest, idx, val, ln);
  };
  auto loaded = [&](Value *j, unsigned ln) {
    idx[axis] = {j, i64(ln > 1 ? 1 : 0)};
    return loadFrom(v, dest, idx, ln);
  };
  // pass(body(j, lanes, acc) -> acc): vector body, horizontal combine, tail.
  auto pass = [&](const char *name, Value *init, bool isMax,
                  const std::function<Value *(Value *, unsigned, Value *)> &body) {
    std::vector<Value *> vacc = forLoopCarried(i64(0), nMain, i64(vf_), {splat(init, vf_)}, name,
                                               [&](Value *j, const std::vector<Value *> &c) {
                                                 return std::vector<Value *>{body(j, vf_, c[0])};
                                               });
    Value *h = init;
    for (unsigned l = 0; l < vf_; ++l) {
      Value *e = b_.CreateExtractElement(vacc[0], l);
      h = isMax ? b_.CreateSelect(b_.CreateFCmpOGT(e, h), e, h) : b_.CreateFAdd(h, e);
    }
    return forLoopCarried(nMain, n, i64(1), {h}, name, [&](Value *j, const std::vector<Value *> &c) {
      return std::vector<Value *>{body(j, 1, c[0])};
    })[0];
  };
  auto both = [&](const char *name, const std::function<void(Value *, unsigned)> &body) {
    forLoop(i64(0), nMain, i64(vf_), name, [&](Value *j) { body(j, vf_); });
    forLoop(nMain, n, i64(1), name, [&](Value *j) { body(j, 1); });
  };
  Value *zero = llvm::ConstantFP::get(et, 0.0);
  if (m.op == OpCode::Softmax) {
    Value *mx = pass("vsmax", llvm::ConstantFP::getInfinity(et, true), true, [&](Value *j, unsigned ln, Value *acc) {
      Value *xv = at(j, ln);
      return b_.CreateSelect(b_.CreateFCmpOGT(xv, acc), xv, acc);
    });
    Value *sum = pass("vssum", zero, false, [&](Value *j, unsigned ln, Value *acc) {
      Value *e = emitExp(b_, b_.CreateFSub(at(j, ln), splat(mx, ln)));
      put(j, e, ln);
      return b_.CreateFAdd(acc, e);
    });
    both("vsnorm", [&](Value *j, unsigned ln) { put(j, b_.CreateFDiv(loaded(j, ln), splat(sum, ln)), ln); });
    return;
  }
  Value *fn = b_.CreateSIToFP(n, et);
  Value *mean = b_.CreateFDiv(pass("vlmean", zero, false, [&](Value *j, unsigned ln, Value *acc) {
                                return b_.CreateFAdd(acc, at(j, ln));
                              }),
                              fn);
  Value *var = b_.CreateFDiv(pass("vlvar", zero, false, [&](Value *j, unsigned ln, Value *acc) {
                               Value *d = b_.CreateFSub(at(j, ln), splat(mean, ln));
                               return b_.CreateFAdd(acc, b_.CreateFMul(d, d));
                             }),
                             fn);
  Value *eps = llvm::ConstantFP::get(et, m.attrs[0].getFloat());
  Value *inv = b_.CreateFDiv(llvm::ConstantFP::get(et, 1.0),
                             b_.CreateIntrinsic(llvm::Intrinsic::sqrt, {et}, {b_.CreateFAdd(var, eps)}));
  both("vlnorm", [&](Value *j, unsigned ln) {
    Index gi = {Ix{j, i64(ln > 1 ? 1 : 0)}};
    Value *g = emitValue(m.operands[1], gi, ln);
    Value *bt = emitValue(m.operands[2], gi, ln);
    Value *y = b_.CreateFMul(b_.CreateFMul(b_.CreateFSub(at(j, ln), splat(mean, ln)), splat(inv, ln)), g);
    put(j, b_.CreateFAdd(y, bt), ln);
  });
}

// softmax and layer_norm: per row (all axes but one), three passes in
// double like the reference (vm/kernels/Normalize.cpp), or in f32 vectors
// (emitVectorRow) along a contiguous f32 axis.
void KernelLowering::emitRowStage(uint32_t v, Value *dest) {
  const auto &m = k_.members[static_cast<size_t>(vals_[v].member)];
  uint32_t x = m.operands[0];
  const size_t R = vals_[v].dims.size();
  int64_t axis = m.op == OpCode::Softmax ? normAxis(m.attrs[0].getInt(), static_cast<int64_t>(R))
                                         : static_cast<int64_t>(R) - 1;
  llvm::Type *et = elementType(ctx_, vals_[v].dtype);
  llvm::Type *dt = b_.getDoubleTy();
  Index idx(R);
  auto at = [&](Value *j) {
    idx[axis] = {j, i64(0)};
    return b_.CreateFPExt(emitValue(x, idx, 1), dt);
  };
  Value *n = dims_[x][axis];
  // f32 rows along the contiguous axis: vectorized passes (emitVectorRow).
  const bool vectorRows = vals_[v].dtype == DType::F32 && axis == static_cast<int64_t>(R) - 1 && vf_ > 1;
  // The outermost row dimension in parts: over the grid on NVPTX, on the
  // thread pool on the CPU (when the rows are work enough). A CPU part is a
  // function of its own: the destination comes through the closure and the
  // row length is derived again there.
  const size_t outerRow = axis == 0 ? 1 : 0;
  std::function<void(size_t)> rows = [&](size_t d) {
    if (d < R) {
      if (static_cast<int64_t>(d) == axis) return rows(d + 1);
      if (d == outerRow) {
        std::vector<Value *> carry = {dest};
        parallel("rows", dims_[v][d], numElements(v), carry, [&](Value *begin, Value *end) {
          Value *outerDest = dest, *outerN = n;
          dest = carry[0];
          n = dims_[x][axis];
          forLoop(begin, end, i64(1), "row", [&](Value *iv) {
            idx[d] = {iv, i64(0)};
            rows(d + 1);
          });
          dest = outerDest;
          n = outerN;
        });
        return;
      }
      forLoop(i64(0), dims_[v][d], i64(1), "row", [&](Value *iv) {
        idx[d] = {iv, i64(0)};
        rows(d + 1);
      });
      return;
    }
    if (vectorRows) {
      emitVectorRow(m, x, v, dest, idx, axis);
      return;
    }
    if (m.op == OpCode::Softmax) {
      Value *mx = forLoopCarried(i64(0), n, i64(1), {llvm::ConstantFP::getInfinity(dt, true)}, "smax",
                                 [&](Value *j, const std::vector<Value *> &c) {
                                   Value *xv = at(j);
                                   return std::vector<Value *>{b_.CreateSelect(b_.CreateFCmpOGT(xv, c[0]), xv, c[0])};
                                 })[0];
      Value *sum = forLoopCarried(i64(0), n, i64(1), {llvm::ConstantFP::get(dt, 0.0)}, "ssum",
                                  [&](Value *j, const std::vector<Value *> &c) {
                                    Value *e = emitLibmCall(b_, "exp", "exp", {b_.CreateFSub(at(j), mx)});
                                    return std::vector<Value *>{b_.CreateFAdd(c[0], e)};
                                  })[0];
      forLoop(i64(0), n, i64(1), "snorm", [&](Value *j) {
        Value *e = emitLibmCall(b_, "exp", "exp", {b_.CreateFSub(at(j), mx)});
        store(v, dest, idx, b_.CreateFPTrunc(b_.CreateFDiv(e, sum), et), 1);
      });
      return;
    }
    // layer_norm %x, %gamma, %beta, eps
    Value *dn = b_.CreateSIToFP(n, dt);
    Value *mean = b_.CreateFDiv(forLoopCarried(i64(0), n, i64(1), {llvm::ConstantFP::get(dt, 0.0)}, "lmean",
                                               [&](Value *j, const std::vector<Value *> &c) {
                                                 return std::vector<Value *>{b_.CreateFAdd(c[0], at(j))};
                                               })[0],
                                dn);
    Value *var = b_.CreateFDiv(forLoopCarried(i64(0), n, i64(1), {llvm::ConstantFP::get(dt, 0.0)}, "lvar",
                                              [&](Value *j, const std::vector<Value *> &c) {
                                                Value *dlt = b_.CreateFSub(at(j), mean);
                                                return std::vector<Value *>{b_.CreateFAdd(c[0], b_.CreateFMul(dlt, dlt))};
                                              })[0],
                               dn);
    Value *eps = llvm::ConstantFP::get(dt, m.attrs[0].getFloat());
    Value *inv = b_.CreateFDiv(llvm::ConstantFP::get(dt, 1.0),
                               b_.CreateIntrinsic(llvm::Intrinsic::sqrt, {dt}, {b_.CreateFAdd(var, eps)}));
    forLoop(i64(0), n, i64(1), "lnorm", [&](Value *j) {
      Value *xv = at(j);
      Index gi = {Ix{j, i64(0)}};
      Value *g = b_.CreateFPExt(emitValue(m.operands[1], gi, 1), dt);
      Value *bt = b_.CreateFPExt(emitValue(m.operands[2], gi, 1), dt);
      Value *y = b_.CreateFAdd(b_.CreateFMul(b_.CreateFMul(b_.CreateFSub(xv, mean), inv), g), bt);
      store(v, dest, idx, b_.CreateFPTrunc(y, et), 1);
    });
  };
  rows(0);
}

// Register-blocked matmul (float): the output is covered by MR x NR tiles
// whose accumulators live in registers for the whole k loop, so each loaded
// operand element feeds several FMAs instead of one.
//  * rhs not transposed (B[k, j] contiguous in j): outer-product tiles of
//    MR rows x NV vectors of VF columns: per k, MR broadcasts of A, NV vector
//    loads of B, MR * NV vector FMAs.
//  * rhs transposed, lhs not (both contiguous in k, the x . W^T of every
//    model here): dot-product tiles of MR rows x NC columns: per k step of VF,
//    MR + NC vector loads, MR * NC vector FMAs, then MR * NC horizontal sums.
// Rows and columns left over at the edges (M % MR, N % NR) and the k tail go
// through the same loops with smaller tiles or scalar steps; full-tile columns
// are cache-blocked so that each block of B is read from memory once. Returns false
// (the caller then uses the per-point path) for layouts without a tile form.

} // namespace nimble::codegen::detail
