//===- KernelMatMul.cpp - matmul and batch_matmul -------------------------===//
//
// KernelLowering's matmul and batch_matmul: the dot product of one output
// point (fused into element-wise consumers) and the register-tiled stage for
// float matmuls with symbolic M (and N, K). The design: KernelGen.cpp.
//
//===----------------------------------------------------------------------===//

#include "codegen/llvm/KernelLowering.h"

namespace nimble::codegen::detail {

using namespace lowering;

Value *KernelLowering::emitMatMul(uint32_t v, const vm::KernelDesc::Member &m, const Index &idx,
                                  unsigned lanes) {
  uint32_t a = m.operands[0], bb = m.operands[1];
  bool ta = m.attrs[0].getBool(), tb = m.attrs[1].getBool();
  const size_t R = idx.size();
  const DType dt = vals_[v].dtype;
  const bool fl = isFloat(dt);
  // Batch dimensions broadcast like element-wise operands.
  Index batch(idx.begin(), idx.end() - 2);
  auto operandIndex = [&](uint32_t o, Ix row, Ix col, bool t) {
    Index bi;
    const auto &od = vals_[o].dims;
    for (size_t d = 0; d + 2 < R; ++d) {
      if (od[d] == 1) bi.push_back({i64(0), i64(0)});
      else if (od[d] != kDynamic) bi.push_back(batch[d]);
      else {
        Value *one = b_.CreateICmpEQ(dims_[o][d], i64(1));
        bi.push_back({b_.CreateSelect(one, i64(0), batch[d].base), selectZero(one, batch[d].coeff)});
      }
    }
    if (t) std::swap(row, col);
    bi.push_back(row);
    bi.push_back(col);
    return bi;
  };
  Value *K = ta ? dims_[a][R - 2] : dims_[a][R - 1];
  const Ix i = idx[R - 2], j = idx[R - 1];
  auto step = [&](Value *kv, Value *acc, unsigned ln, bool kLanes) {
    Ix k = {kv, i64(kLanes ? 1 : 0)};
    Value *x = emitValue(a, operandIndex(a, i, k, ta), ln);
    Value *y = emitValue(bb, operandIndex(bb, k, j, tb), ln);
    return fl ? b_.CreateFAdd(acc, b_.CreateFMul(x, y)) : b_.CreateAdd(acc, b_.CreateMul(x, y));
  };
  llvm::Type *et = elementType(ctx_, dt);
  Value *zero = llvm::Constant::getNullValue(et);
  if (lanes == 1 && !ta && vf_ > 1) {
    // One output point; the contracted axis is contiguous in lhs (and in rhs
    // when tb): vector accumulators over k, then a horizontal sum.
    Value *kMain = b_.CreateSub(K, b_.CreateSRem(K, i64(vf_)));
    std::vector<Value *> vacc = forLoopCarried(i64(0), kMain, i64(vf_), {splat(zero, vf_)}, "dotv",
                                               [&](Value *kv, const std::vector<Value *> &c) {
                                                 return std::vector<Value *>{step(kv, c[0], vf_, true)};
                                               });
    Value *h;
    if (fl) {
      h = b_.CreateFAddReduce(llvm::ConstantFP::get(et, 0.0), vacc[0]);
      llvm::FastMathFlags fmf;
      fmf.setAllowReassoc();
      llvm::cast<llvm::Instruction>(h)->setFastMathFlags(fmf);
    } else {
      h = b_.CreateAddReduce(vacc[0]);
    }
    return forLoopCarried(kMain, K, i64(1), {h}, "dott", [&](Value *kv, const std::vector<Value *> &c) {
      return std::vector<Value *>{step(kv, c[0], 1, false)};
    })[0];
  }
  return forLoopCarried(i64(0), K, i64(1), {splat(zero, lanes)}, "dot",
                        [&](Value *kv, const std::vector<Value *> &c) {
                          return std::vector<Value *>{step(kv, c[0], lanes, false)};
                        })[0];
}

// A later one-row product of the same weight whose left operand is already
// stored (Tree-LSTM's node: h_l . U_f^T and h_r . U_f^T): emitMatMulStage
// computes it with v's, as the two rows of one product, so that U_f is read
// once a node instead of twice (a fifth of the node's weight bytes). Each
// output is the sum the one-row tiles give (a dot-product tile's sums do not
// depend on its rows), so nothing changes but the reads. Only dot-product
// tiles of weights under kParallelMatMulWork (the general tiles, one
// thread), with static shapes, in a kernel that gathers nothing (a batched
// variant has its rows already).
uint32_t KernelLowering::matMulSibling(uint32_t v) const {
  if (gpu_ || vf_ <= 1 || !gatherBuf_.empty()) return kNoSibling;
  const auto &m = k_.members[static_cast<size_t>(vals_[v].member)];
  if (m.op != OpCode::MatMul || m.attrs.size() < 2 || m.attrs[0].getBool() || !m.attrs[1].getBool() ||
      !isFloat(vals_[v].dtype))
    return kNoSibling;
  const std::vector<int64_t> &d = vals_[v].dims;
  const uint32_t a = m.operands[0], bb = m.operands[1];
  if (d.size() != 2 || d[0] != 1 || d[1] == kDynamic || vals_[a].dims.size() != 2 || vals_[a].dims[1] == kDynamic ||
      d[1] * vals_[a].dims[1] >= kParallelMatMulWork || !data_[a] || isGathered(data_[a]) || !data_[bb] ||
      isGathered(data_[bb]))
    return kNoSibling;
  for (uint32_t w = v + 1; w < vals_.size(); ++w) { // members only: v >= numInputs
    const auto &mw = k_.members[static_cast<size_t>(vals_[w].member)];
    if (mw.op != OpCode::MatMul || mw.operands[1] != bb || mw.attrs.size() < 2 || mw.attrs[0].getBool() ||
        !mw.attrs[1].getBool() || vals_[w].dims != d || vals_[w].dtype != vals_[v].dtype)
      continue;
    const uint32_t aw = mw.operands[0];
    bool stored = materialize_[w];
    for (uint32_t o : k_.outputs) stored |= o == w;
    if (stored && data_[aw] && !isGathered(data_[aw]) && vals_[aw].dims == vals_[a].dims) return w;
  }
  return kNoSibling;
}

bool KernelLowering::emitMatMulStage(uint32_t v, Value *dest, uint32_t sibling, Value *siblingDest) {
  const auto &m = k_.members[static_cast<size_t>(vals_[v].member)];
  const DType dt = vals_[v].dtype;
  if (!isFloat(dt) || vf_ <= 1) return false;
  uint32_t a = m.operands[0], bb = m.operands[1];
  const bool ta = m.attrs[0].getBool(), tb = m.attrs[1].getBool();
  if (tb && ta) return false;
  const size_t R = vals_[v].dims.size();
  // Gather fusion: rows of A and of C may come from row tables (a batched
  // variant's per-instance operands); B, a transposed A and batch
  // dimensions take the point-at-a-time stage, which reads through load().
  const bool merged = sibling != kNoSibling;
  // A sibling's product (matMulSibling): rows 0 and 1 of one product, A's
  // and C's rows read through two-row tables (the gathered form).
  std::vector<Value *> carry = {dest};
  if (merged) {
    llvm::Type *ptrTy = llvm::PointerType::get(ctx_, 0);
    llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    llvm::AllocaInst *rowsC = eb.CreateAlloca(ptrTy, i64(2));
    llvm::AllocaInst *rowsA = eb.CreateAlloca(ptrTy, i64(2));
    const uint32_t aw = k_.members[static_cast<size_t>(vals_[sibling].member)].operands[0];
    b_.CreateStore(dest, rowsC);
    b_.CreateStore(siblingDest, b_.CreateConstInBoundsGEP1_64(ptrTy, rowsC, 1));
    b_.CreateStore(data_[a], rowsA);
    b_.CreateStore(data_[aw], b_.CreateConstInBoundsGEP1_64(ptrTy, rowsA, 1));
    markGathered(rowsC);
    markGathered(rowsA);
    carry = {rowsC, rowsA};
  }
  const bool gA = merged || isGathered(data_[a]), gC = merged || isGathered(dest);
  if (isGathered(data_[bb]) || ((gA || gC) && (R != 2 || ta))) return false;
  llvm::Type *et = elementType(ctx_, dt);
  llvm::Type *vt = withLanes(et, vf_);
  const unsigned esize = et->getPrimitiveSizeInBits() / 8;
  llvm::Align align(esize);
  // Sizes and row strides, (re)derived in whichever function is being
  // emitted (the kernel or the body of a parallel region); the lambdas below
  // capture these variables, not their values. aData: A's data (or row
  // table).
  Value *M, *N, *K, *aRow, *bRow, *aData;
  auto derive = [&] {
    aData = merged ? carry[1] : data_[a];
    M = merged ? i64(2) : dims_[v][R - 2];
    N = dims_[v][R - 1];
    K = ta ? dims_[a][R - 2] : dims_[a][R - 1];
    aRow = strides_[a][R - 2];
    bRow = strides_[bb][R - 2];
  };
  derive();
  Index batch(R - 2);
  // Element pointers of A[i, k] / B[k, j] for the current batch index.
  auto batchOffset = [&](uint32_t o) {
    Value *off = i64(0);
    const auto &od = vals_[o].dims;
    for (size_t d = 0; d + 2 < R; ++d) {
      Value *bi = batch[d].base;
      if (od[d] == 1) continue;
      if (od[d] == kDynamic) bi = b_.CreateSelect(b_.CreateICmpEQ(dims_[o][d], i64(1)), i64(0), bi);
      off = b_.CreateAdd(off, b_.CreateMul(bi, strides_[o][d]));
    }
    return off;
  };
  auto ptrAt = [&](Value *base, Value *off) { return b_.CreateInBoundsGEP(et, base, off); };
  auto fma = [&](Value *x, Value *y, Value *acc) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {acc->getType()}, {x, y, acc});
  };
  // Dot-product tiles are 4 x 4 (16 accumulators + 8 loads: fits AVX-512's
  // 32 registers; on AVX2 LLVM spills a few, still ahead of one dot product
  // at a time).
  // The outer-product tile by vector registers: on AVX-512 (32 of them) 8
  // rows x 3 vectors of f32 (24 accumulators + 3 loads + 1 broadcast: enough
  // independent fmas to cover two pipes of 4-cycle latency); on AVX2 (16) 6 x
  // 2 of f32; 4 x 2 otherwise (f64 and narrower lanes).
  // With a static N that 3 vectors do not divide but 2 do (BERT's heads of
  // 64), 8 x 2: the columns past the last full tile run one row at a time.
  const int64_t mStatic = merged ? 2 : vals_[v].dims[R - 2];
  const bool wide = vf_ >= 16 && esize == 4;
  const int64_t staticN = vals_[v].dims[R - 1];
  const bool wideBy2 = wide && staticN != kDynamic && staticN % (3 * vf_) != 0 && staticN % (2 * vf_) == 0;
  const unsigned MR = wide ? 8 : (vf_ == 8 && esize == 4 ? 6 : 4);
  const unsigned NV = wide && !wideBy2 ? 3 : 2, ND = 4;
  const unsigned RT = tb ? 4 : MR; // rows of a full tile (dot-product tiles: 4 x ND)
  const bool outer = !tb;
  const unsigned colStep = tb ? ND : NV * vf_;
  // Outer-product tiles are cache-blocked the GotoBLAS way: k in blocks of
  // KC, columns in blocks of JB, so that one KC x JB block of B (128 KiB:
  // a quarter of Zen 3's L2) serves every row tile; when at least kPackRows rows
  // share it, the block is first packed into a contiguous buffer on the
  // stack, tile by tile (KC x colStep each), so the inner loop streams it
  // with no stride. Accumulators go through C between k blocks, so every
  // output is the same chain of fmas in k order as without blocking: blocked
  // and packed results are bit-identical to the unblocked ones.
  // Dot-product tiles (`transpose_b`: B stored as [N, K], the models'
  // x . W^T) block k by KD = 768 f32 (24 KiB of f32 for a tile's 4 + 4 rows:
  // they stay in L1 across the block): each block's horizontal sums are
  // added to C, so K <= KD gives the unblocked results exactly.
  // (Packing B^T transposed for outer-product tiles was measured and lost to
  // these: the transposing copy costs more than the strided rows.)
  const int64_t KC = 256;
  const int64_t KD = 3072 / esize;
  const int64_t JB = std::max<int64_t>(NV * vf_, (int64_t(131072 / esize) / KC) / (NV * vf_) * (NV * vf_));
  const int64_t kPackRows = 16;
  // One tile at (i0, j0) of mr x nc over k in [kBegin, kEnd); `first` (i1,
  // a constant where known) starts the accumulators at 0, else at C's values; `packed` (or null) is
  // the tile's KC x colStep panel of B. Writes C. `ahead`: a dot-product
  // tile of one or two rows also prefetches, into L1, the next tile's rows
  // of B (see the dot-product tile below).
  auto tile = [&](Value *aOff, Value *bOff, Value *cOff, Value *i0, Value *j0, unsigned mr, unsigned nc,
                  Value *kBegin, Value *kEnd, Value *first, Value *packed, bool ahead = false) {
    if (outer) {
      // nc vectors of VF columns; accumulators [r][c].
      auto cAt = [&](unsigned r, unsigned c) {
        if (gC) return ptrAt(rowOf(carry[0], b_.CreateAdd(i0, i64(r))), b_.CreateAdd(j0, i64(c * vf_)));
        return ptrAt(carry[0], b_.CreateAdd(cOff, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(i0, i64(r)), N),
                                                                b_.CreateAdd(j0, i64(c * vf_)))));
      };
      std::vector<Value *> init(mr * nc, llvm::Constant::getNullValue(vt));
      if (first != b_.getTrue())
        for (unsigned r = 0; r < mr; ++r)
          for (unsigned c = 0; c < nc; ++c) {
            Value *prev = b_.CreateAlignedLoad(vt, cAt(r, c), align);
            init[r * nc + c] = first == b_.getFalse() ? prev : b_.CreateSelect(first, init[r * nc + c], prev);
          }
      std::vector<Value *> acc = forLoopCarried(kBegin, kEnd, i64(1), init, "mmk",
          [&](Value *k, const std::vector<Value *> &cur) {
            std::vector<Value *> bv(nc);
            if (packed) {
              Value *pk = b_.CreateMul(b_.CreateSub(k, kBegin), i64(colStep));
              for (unsigned c = 0; c < nc; ++c)
                bv[c] = b_.CreateAlignedLoad(vt, ptrAt(packed, b_.CreateAdd(pk, i64(c * vf_))), align);
            } else {
              Value *bk = b_.CreateAdd(bOff, b_.CreateAdd(b_.CreateMul(k, bRow), j0));
              for (unsigned c = 0; c < nc; ++c)
                bv[c] = b_.CreateAlignedLoad(vt, ptrAt(data_[bb], b_.CreateAdd(bk, i64(c * vf_))), align);
            }
            std::vector<Value *> out(cur.size());
            for (unsigned r = 0; r < mr; ++r) {
              Value *ai = b_.CreateAdd(i0, i64(r));
              Value *ap;
              if (gA) {
                ap = ptrAt(rowOf(aData, ai), k);
              } else {
                Value *ao = ta ? b_.CreateAdd(b_.CreateMul(k, aRow), ai) : b_.CreateAdd(b_.CreateMul(ai, aRow), k);
                ap = ptrAt(aData, b_.CreateAdd(aOff, ao));
              }
              Value *as = splat(b_.CreateLoad(et, ap), vf_);
              for (unsigned c = 0; c < nc; ++c) out[r * nc + c] = fma(as, bv[c], cur[r * nc + c]);
            }
            return out;
          });
      for (unsigned r = 0; r < mr; ++r)
        for (unsigned c = 0; c < nc; ++c) b_.CreateAlignedStore(acc[r * nc + c], cAt(r, c), align);
      return;
    }
    // Dot-product tile: mr rows of A x nc rows of B (= columns of C), over
    // k in [kBegin, kEnd): vector steps, then the k tail as one masked
    // vector step (lanes past kEnd read as zeros), then each row's sums of
    // four columns reduced together (reduce4) and stored as one vector of
    // four; added to C unless `first`. Every output is reduced by the same
    // tree whichever the tile's shape (1 x 8 units of the one-row stage, 4 x
    // 4 tiles, 1 x 4 rows), so a batched call and its instances' one-row
    // calls agree bit for bit. Issue 52: the scalar tail (6 of Tree-LSTM's
    // 150, 12 of its 300) and sixteen horizontal sums a tile were half of a
    // 4 x 4 tile's instructions at K = 150.
    // Vectors narrower than 4 lanes (f64 without AVX) keep horizontal sums
    // and a scalar tail.
    // One or two rows (Tree-LSTM's products, once a node): B comes from L2, and
    // four rows of a few hundred elements are too short a stream for the
    // L1 prefetcher, so each k step also prefetches the next tile's rows at
    // the same k (`ahead`). Issue 52, Xeon (Emerald Rapids), 1 x 300 . [450,
    // 300]^T hot in L2: 7.2 -> 6.1 us (75 -> 88 GB/s; level at K = 150:
    // scripts/bench_kernels.py, section 8); 8, 12 or 16 rows ahead no
    // better, into L2 only (T1) slower (8.8 us). Tiles of 4 rows (batched
    // calls, whose B is reread by every row tile) and the one-row stage of
    // large weights (the LSTM's W_hh, from L3) measured level with it, and
    // go without. A prefetch changes no result.
    const bool quad = vf_ >= 4 && nc % 4 == 0;
    Value *kMain = b_.CreateSub(kEnd, b_.CreateSRem(b_.CreateSub(kEnd, kBegin), i64(vf_)));
    std::vector<Value *> init(mr * nc, llvm::Constant::getNullValue(vt));
    auto rowPtr = [&](Value *base, Value *off, Value *row, Value *stride, Value *k) {
      if (isGathered(base)) return ptrAt(rowOf(base, row), k);
      return ptrAt(base, b_.CreateAdd(off, b_.CreateAdd(b_.CreateMul(row, stride), k)));
    };
    // One vector step at k; `mask` (or null) selects the lanes read.
    auto dotStep = [&](Value *k, const std::vector<Value *> &cur, Value *mask) {
      std::vector<Value *> av(mr), bv(nc), out(cur.size());
      Value *zeros = llvm::Constant::getNullValue(vt);
      auto loadRow = [&](Value *p) -> Value * {
        if (!mask) return b_.CreateAlignedLoad(vt, p, align);
        return b_.CreateMaskedLoad(vt, p, align, mask, zeros);
      };
      for (unsigned r = 0; r < mr; ++r) av[r] = loadRow(rowPtr(aData, aOff, b_.CreateAdd(i0, i64(r)), aRow, k));
      for (unsigned c = 0; c < nc; ++c) bv[c] = loadRow(rowPtr(data_[bb], bOff, b_.CreateAdd(j0, i64(c)), bRow, k));
      if (ahead && mr <= 2)
        for (unsigned c = 0; c < nc; ++c) {
          // A plain GEP: the last tile's prefetch points past B, which a
          // prefetch may do (it never faults) and an inbounds GEP may not.
          Value *row = b_.CreateAdd(j0, i64(nc + c));
          Value *ptr = b_.CreateGEP(et, data_[bb], b_.CreateAdd(bOff, b_.CreateAdd(b_.CreateMul(row, bRow), k)));
          b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {ptr->getType()},
                             {ptr, b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)}); // read, T0, data
        }
      for (unsigned r = 0; r < mr; ++r)
        for (unsigned c = 0; c < nc; ++c) out[r * nc + c] = fma(av[r], bv[c], cur[r * nc + c]);
      return out;
    };
    std::vector<Value *> vacc = forLoopCarried(kBegin, kMain, i64(vf_), init, "mmdot",
        [&](Value *k, const std::vector<Value *> &cur) { return dotStep(k, cur, nullptr); });
    // C's element (i0 + r, j0 + c).
    auto cPtr = [&](unsigned r, unsigned c) {
      if (gC) return ptrAt(rowOf(carry[0], b_.CreateAdd(i0, i64(r))), b_.CreateAdd(j0, i64(c)));
      Value *co = b_.CreateAdd(cOff, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(i0, i64(r)), N),
                                                  b_.CreateAdd(j0, i64(c))));
      return ptrAt(carry[0], co);
    };
    if (quad) {
      // The tail: at most one step, whose lanes k + l < kEnd are read.
      std::vector<llvm::Constant *> laneIds;
      for (unsigned l = 0; l < vf_; ++l) laneIds.push_back(b_.getInt64(l));
      Value *ids = llvm::ConstantVector::get(laneIds);
      vacc = forLoopCarried(kMain, kEnd, i64(vf_), vacc, "mmdott", [&](Value *k, const std::vector<Value *> &cur) {
        Value *mask = b_.CreateICmpULT(ids, splat(b_.CreateSub(kEnd, k), vf_));
        return dotStep(k, cur, mask);
      });
      // Four vectors' lane sums as one vector of four, by halving: lane l
      // of a vector is added to lane l + h at h = vf/2, vf/4, ..., 1, the
      // same tree for every output. Exact float adds (no reassociation).
      auto shuffle = [&](Value *x, Value *y, const std::vector<int> &m) { return b_.CreateShuffleVector(x, y, m); };
      auto reduce4 = [&](Value *v0, Value *v1, Value *v2, Value *v3) {
        const int L = static_cast<int>(vf_);
        // Pairs: the first half of the lanes holds v0's (or v2's) partial
        // sums, the second v1's (v3's).
        auto pair = [&](Value *x, Value *y) {
          std::vector<int> lo, hi;
          for (int l = 0; l < L / 2; ++l) lo.push_back(l), hi.push_back(l + L / 2);
          for (int l = 0; l < L / 2; ++l) lo.push_back(L + l), hi.push_back(L + l + L / 2);
          return b_.CreateFAdd(shuffle(x, y, lo), shuffle(x, y, hi));
        };
        Value *p01 = pair(v0, v1), *p23 = pair(v2, v3);
        // Four groups of G lanes (one per vector), halved until one lane each.
        int G = L / 2;
        Value *z = nullptr;
        {
          std::vector<int> lo, hi;
          int H = G / 2;
          for (int g = 0; g < 4; ++g)
            for (int l = 0; l < H; ++l) {
              int base = (g / 2) * L + (g % 2) * G;
              lo.push_back(base + l);
              hi.push_back(base + l + H);
            }
          z = b_.CreateFAdd(shuffle(p01, p23, lo), shuffle(p01, p23, hi));
          G = H;
        }
        while (G > 1) {
          std::vector<int> lo, hi;
          int H = G / 2;
          for (int g = 0; g < 4; ++g)
            for (int l = 0; l < H; ++l) {
              lo.push_back(g * G + l);
              hi.push_back(g * G + l + H);
            }
          z = b_.CreateFAdd(shuffle(z, z, lo), shuffle(z, z, hi));
          G = H;
        }
        return z; // 4 lanes
      };
      llvm::Type *v4 = withLanes(et, 4);
      for (unsigned r = 0; r < mr; ++r)
        for (unsigned c = 0; c < nc; c += 4) {
          Value *sum = reduce4(vacc[r * nc + c], vacc[r * nc + c + 1], vacc[r * nc + c + 2], vacc[r * nc + c + 3]);
          Value *cp = cPtr(r, c);
          if (first != b_.getTrue()) {
            Value *added = b_.CreateFAdd(b_.CreateAlignedLoad(v4, cp, align), sum);
            sum = first == b_.getFalse() ? added : b_.CreateSelect(first, sum, added);
          }
          b_.CreateAlignedStore(sum, cp, align);
        }
      return;
    }
    llvm::FastMathFlags fmf;
    fmf.setAllowReassoc();
    std::vector<Value *> sums(mr * nc);
    for (unsigned i = 0; i < mr * nc; ++i) {
      sums[i] = b_.CreateFAddReduce(llvm::ConstantFP::get(et, 0.0), vacc[i]);
      llvm::cast<llvm::Instruction>(sums[i])->setFastMathFlags(fmf);
    }
    sums = forLoopCarried(kMain, kEnd, i64(1), sums, "mmtail", [&](Value *k, const std::vector<Value *> &cur) {
      std::vector<Value *> out(cur.size());
      for (unsigned r = 0; r < mr; ++r) {
        Value *x = b_.CreateLoad(et, rowPtr(aData, aOff, b_.CreateAdd(i0, i64(r)), aRow, k));
        for (unsigned c = 0; c < nc; ++c) {
          Value *y = b_.CreateLoad(et, rowPtr(data_[bb], bOff, b_.CreateAdd(j0, i64(c)), bRow, k));
          out[r * nc + c] = fma(x, y, cur[r * nc + c]);
        }
      }
      return out;
    });
    for (unsigned r = 0; r < mr; ++r)
      for (unsigned c = 0; c < nc; ++c) {
        Value *cp = cPtr(r, c);
        Value *sum = sums[r * nc + c];
        if (first != b_.getTrue()) {
          Value *added = b_.CreateFAdd(b_.CreateLoad(et, cp), sum);
          sum = first == b_.getFalse() ? added : b_.CreateSelect(first, sum, added);
        }
        b_.CreateStore(sum, cp);
      }
  };
  // The column-block size (a multiple of the tile width): JB for
  // outer-product tiles; for dot-product tiles, one whose slice of B (of
  // min(K, KD) elements a row) fits in 256 KiB. And the full-tile extent of
  // the rows and columns.
  Value *jb, *mMain, *nMain;
  auto blocking = [&] {
    if (outer) {
      jb = i64(JB);
    } else {
      Value *kd = b_.CreateSelect(b_.CreateICmpSLT(K, i64(KD)), K, i64(KD));
      Value *jbRaw = b_.CreateSDiv(i64(65536), b_.CreateAdd(kd, i64(1)));
      jb = b_.CreateSub(jbRaw, b_.CreateSRem(jbRaw, i64(colStep)));
      jb = b_.CreateSelect(b_.CreateICmpSLT(jb, i64(colStep)), i64(colStep), jb);
    }
    mMain = b_.CreateSub(M, b_.CreateSRem(M, i64(RT)));
    nMain = b_.CreateSub(N, b_.CreateSRem(N, i64(colStep)));
  };
  // The bound of the k-block loops: at least one block, so that K = 0 still
  // stores its zeros.
  auto kBlocksEnd = [&] { return b_.CreateSelect(b_.CreateICmpEQ(K, i64(0)), i64(1), K); };
  // if (cond) then() else otherwise(), in the current function.
  auto ifElse = [&](Value *cond, const std::function<void()> &then, const std::function<void()> &otherwise) {
    llvm::BasicBlock *tBB = llvm::BasicBlock::Create(ctx_, "mm.then", fn_);
    llvm::BasicBlock *eBB = llvm::BasicBlock::Create(ctx_, "mm.else", fn_);
    llvm::BasicBlock *join = llvm::BasicBlock::Create(ctx_, "mm.join", fn_);
    b_.CreateCondBr(cond, tBB, eBB);
    b_.SetInsertPoint(tBB);
    then();
    b_.CreateBr(join);
    b_.SetInsertPoint(eBB);
    otherwise();
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
  };
  // Column blocks [bBegin, bEnd) of one batch element: every row tile of a
  // block before the next (B's block streams from memory once).
  // Columns [j1, jEnd) of column block `blk` (full tiles only).
  auto colBlock = [&](Value *blk, Value *&j1, Value *&jEnd) {
    j1 = b_.CreateMul(blk, jb);
    jEnd = b_.CreateAdd(j1, jb);
    jEnd = b_.CreateSelect(b_.CreateICmpSLT(jEnd, nMain), jEnd, nMain);
  };
  // min(kb + step, K): the end of the k block at kb.
  auto kBlockEnd = [&](Value *kb, int64_t step) {
    Value *ke = b_.CreateAdd(kb, i64(step));
    return b_.CreateSelect(b_.CreateICmpSLT(ke, K), ke, K);
  };
  // Every tile of columns [j1, jEnd): full row tiles, then single rows.
  auto rowTiles = [&](Value *j1, Value *jEnd, const std::function<void(Value *, Value *, unsigned)> &tileAt) {
    auto block = [&](Value *i0, unsigned mr) {
      forLoop(j1, jEnd, i64(colStep), "mmj", [&](Value *j0) { tileAt(i0, j0, mr); });
    };
    forLoop(i64(0), mMain, i64(RT), "mmi", [&](Value *i0) { block(i0, RT); });
    Value *rest = mMain;
    if (!outer && mStatic != kDynamic && mStatic % RT >= 2) {
      // Two rows past the last full tile (a sibling's pair, matMulSibling):
      // one tile, so B's rows are read once for both (static M only: a tile
      // of code fewer everywhere else).
      block(mMain, 2);
      rest = b_.CreateAdd(mMain, i64(2));
    }
    if (RT > 4) {
      // The rows past the last full tile: 4-row tiles, then single rows.
      rest = b_.CreateAdd(mMain, b_.CreateAnd(b_.CreateSub(M, mMain), i64(~int64_t(3))));
      forLoop(mMain, rest, i64(4), "mmi4", [&](Value *i0) { block(i0, 4); });
    }
    forLoop(rest, M, i64(1), "mmir", [&](Value *i0) { block(i0, 1); });
  };
  // Column blocks [bBegin, bEnd) of one batch element: every row tile of a
  // block before the next (B's block streams from memory once).
  auto blocks = [&](Value *aOff, Value *bOff, Value *cOff, Value *bBegin, Value *bEnd) {
    if (!outer) {
      forLoop(bBegin, bEnd, i64(1), "mmjb", [&](Value *blk) {
        Value *j1, *jEnd;
        colBlock(blk, j1, jEnd);
        // The first k block stores its sums (peeled: no load of C when K <=
        // KD, the common case), the others add theirs.
        auto kBlock = [&](Value *kb, Value *first) {
          Value *ke = kBlockEnd(kb, KD);
          rowTiles(j1, jEnd, [&](Value *i0, Value *j0, unsigned mr) {
            tile(aOff, bOff, cOff, i0, j0, mr, ND, kb, ke, first, nullptr, /*ahead=*/true);
          });
        };
        kBlock(i64(0), b_.getTrue());
        forLoop(i64(KD), K, i64(KD), "mmkb", [&](Value *kb) { kBlock(kb, b_.getFalse()); });
      });
      return;
    }
    // The packing buffer: KC x JB elements in this function's frame (the
    // kernel's, or a parallel part's on its worker).
    llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    llvm::AllocaInst *pack = eb.CreateAlloca(et, i64(KC * JB));
    pack->setAlignment(llvm::Align(64));
    Value *doPack = b_.CreateICmpSGE(M, i64(kPackRows));
    forLoop(bBegin, bEnd, i64(1), "mmjb", [&](Value *blk) {
      Value *j1, *jEnd;
      colBlock(blk, j1, jEnd);
      forLoop(i64(0), kBlocksEnd(), i64(KC), "mmkb", [&](Value *kb) {
        Value *ke = kBlockEnd(kb, KC);
        Value *first = b_.CreateICmpEQ(kb, i64(0));
        // The panel of the column tile at j0 in the packing buffer.
        auto panel = [&](Value *j0) {
          Value *t = b_.CreateSDiv(b_.CreateSub(j0, j1), i64(colStep));
          return ptrAt(pack, b_.CreateMul(t, i64(KC * colStep)));
        };
        auto rows = [&](bool packed) {
          rowTiles(j1, jEnd, [&](Value *i0, Value *j0, unsigned mr) {
            tile(aOff, bOff, cOff, i0, j0, mr, NV, kb, ke, first, packed ? panel(j0) : nullptr);
          });
        };
        auto packBlock = [&] {
          forLoop(j1, jEnd, i64(colStep), "mmpj", [&](Value *j0) {
            Value *dst = panel(j0);
            forLoop(kb, ke, i64(1), "mmpk", [&](Value *k) {
              Value *src = b_.CreateAdd(bOff, b_.CreateAdd(b_.CreateMul(k, bRow), j0));
              Value *d = b_.CreateMul(b_.CreateSub(k, kb), i64(colStep));
              for (unsigned c = 0; c < NV; ++c) {
                Value *x = b_.CreateAlignedLoad(vt, ptrAt(data_[bb], b_.CreateAdd(src, i64(c * vf_))), align);
                b_.CreateAlignedStore(x, b_.CreateInBoundsGEP(et, dst, b_.CreateAdd(d, i64(c * vf_))), align);
              }
            });
          });
          rows(true);
        };
        ifElse(doPack, packBlock, [&] { rows(false); });
      });
    });
  };
  // The columns after the full tiles: (outer product) single vectors, then
  // scalar points, for every row.
  auto edges = [&](Value *aOff, Value *bOff, Value *cOff) {
    forLoop(i64(0), M, i64(1), "mmedge", [&](Value *i0) {
      Value *j = nMain;
      if (!tb) {
        Value *vMain = b_.CreateSub(N, b_.CreateSRem(N, i64(vf_)));
        forLoop(nMain, vMain, i64(vf_), "mmjv",
                [&](Value *j0) { tile(aOff, bOff, cOff, i0, j0, 1, 1, i64(0), K, b_.getTrue(), nullptr); });
        j = vMain;
      }
      forLoop(j, N, i64(1), "mmjs", [&](Value *j0) {
        Index idx = batch;
        idx.push_back({i0, i64(0)});
        idx.push_back({j0, i64(0)});
        store(v, carry[0], idx, emitMatMul(v, m, idx, 1), 1);
      });
    });
  };
  Value *work = b_.CreateMul(numElements(v), K);
  // Weights of fewer elements than kParallelMatMulWork (Tree-LSTM's
  // 450 x 300) stay on the tiles below: they sit in L2 whatever the order,
  // and the stage measured 2-8% slower there (a node's products of 150 and
  // 300 columns, one thread).
  const int64_t staticK = vals_[a].dims[R - 1];
  const bool bigWeight = staticN == kDynamic || staticK == kDynamic || staticN * staticK >= kParallelMatMulWork;
  if (R == 2 && !outer && !gA && !gC && vals_[v].dims[0] == 1 && bigWeight) {
    // One row by a [N, K] weight (the LSTM's h . W_hh^T, once a token): the
    // columns in units of GV dot products, parted on the pool by units.
    // The pool gives each thread the same contiguous units on every call
    // (vm/dispatch/NativeKernels.cpp), so each core reads the same half of
    // the weight every token and keeps what fits of it in its own L2
    // (issue 52: 2 MiB of the LSTM's 4 MiB W_hh per core of 2 MB L2),
    // and 8 independent accumulators keep the loads coming at L2 rates
    // where a 1 x 4 tile waits on its fma chains. Column blocks (jb) buy
    // nothing for one row: each element of B is read once anyway. Each
    // output is the same sums in the same order as the tiles above (k blocks
    // of KD added to C), so the results are the other path's bits.
    // Every other call runs each thread's units backwards: the weight's
    // part a core read last is the part it reads first on the next call, so
    // the lines its L2 kept (least recently used ones go first) are hit
    // before the call's own reads evict them. A part as large as the L2
    // (2 MiB, two threads on the LSTM) is then mostly served from it; read
    // forwards every time, each line is gone before its turn comes round.
    // The parity is a per-kernel counter (a relaxed atomic: concurrent calls
    // from other threads only change some call's direction, never which
    // units a thread computes, nor any result).
    const unsigned GV = 8;
    // The row's tile of nc columns at j0: the first k block stores its sums,
    // the others add theirs (as the tiles above).
    auto rowTile = [&](Value *j0, unsigned nc) {
      tile(i64(0), i64(0), i64(0), i64(0), j0, 1, nc, i64(0), kBlockEnd(i64(0), KD), b_.getTrue(), nullptr);
      forLoop(i64(KD), K, i64(KD), "gvkb", [&](Value *kb) {
        tile(i64(0), i64(0), i64(0), i64(0), j0, 1, nc, kb, kBlockEnd(kb, KD), b_.getFalse(), nullptr);
      });
    };
    auto *calls = new llvm::GlobalVariable(mod_, b_.getInt64Ty(), false, llvm::GlobalValue::InternalLinkage,
                                           b_.getInt64(0), fn_->getName() + ".calls");
    b_.CreateAtomicRMW(llvm::AtomicRMWInst::Add, calls, i64(1), llvm::MaybeAlign(8),
                       llvm::AtomicOrdering::Monotonic);
    Value *units = b_.CreateSDiv(N, i64(GV));
    parallel("gemv", units, work, carry, [&](Value *begin, Value *end) {
      derive();
      llvm::LoadInst *parity = b_.CreateAlignedLoad(b_.getInt64Ty(), calls, llvm::Align(8));
      parity->setAtomic(llvm::AtomicOrdering::Monotonic);
      Value *back = b_.CreateICmpNE(b_.CreateAnd(parity, i64(1)), i64(0));
      Value *last = b_.CreateSub(b_.CreateAdd(begin, end), i64(1));
      forLoop(begin, end, i64(1), "gvu", [&](Value *i) {
        Value *u = b_.CreateSelect(back, b_.CreateSub(last, i), i);
        rowTile(b_.CreateMul(u, i64(GV)), GV);
      });
    }, kParallelMatMulWork);
    derive();
    // Columns past the last unit: the 1 x ND tiles and then the edge points
    // the other path gives them. The edge points' sums are not the tiles'
    // (mul, then add, where a tile fuses them), so a column must fall to the
    // same kind of code on both paths: a batched call (M rows, the tiles)
    // equals its instances' one-row calls bit for bit (auto-batching, and
    // the served Tree-LSTM's 150 columns: 144-147 were edge points here).
    Value *nTiles = b_.CreateSub(N, b_.CreateSRem(N, i64(ND)));
    forLoop(b_.CreateMul(units, i64(GV)), nTiles, i64(ND), "gvt", [&](Value *j0) { rowTile(j0, ND); });
    nMain = nTiles;
    edges(i64(0), i64(0), i64(0));
    return true;
  }
  if (R == 2) {
    // One matrix: its column blocks in parts on the thread pool, then the
    // edge columns.
    blocking();
    Value *numBlocks = b_.CreateSDiv(b_.CreateAdd(nMain, b_.CreateSub(jb, i64(1))), jb);
    parallel("cols", numBlocks, work, carry, [&](Value *begin, Value *end) {
      derive();
      blocking();
      blocks(i64(0), i64(0), i64(0), begin, end);
    }, kParallelMatMulWork);
    derive();
    blocking();
    if (merged) {
      // The columns past the full tiles, each product's as it would have
      // had them alone (edge points).
      for (auto [p, pDest] : {std::pair{v, dest}, std::pair{sibling, siblingDest}}) {
        const auto &pm = k_.members[static_cast<size_t>(vals_[p].member)];
        forLoop(nMain, N, i64(1), "mmjs", [&](Value *j0) {
          Index idx = {{i64(0), i64(0)}, {j0, i64(0)}};
          store(p, pDest, idx, emitMatMul(p, pm, idx, 1), 1);
        });
      }
      return true;
    }
    edges(i64(0), i64(0), i64(0));
    return true;
  }
  // Batches: the outermost batch dimension in parts on the thread pool.
  std::function<void(size_t)> batches = [&](size_t d) {
    if (d + 2 < R) {
      forLoop(i64(0), dims_[v][d], i64(1), "mmb", [&](Value *iv) {
        batch[d] = {iv, i64(0)};
        batches(d + 1);
      });
      return;
    }
    blocking();
    Value *numBlocks = b_.CreateSDiv(b_.CreateAdd(nMain, b_.CreateSub(jb, i64(1))), jb);
    Value *aOff = batchOffset(a), *bOff = batchOffset(bb);
    Value *cOff = i64(0);
    for (size_t dd = 0; dd + 2 < R; ++dd) cOff = b_.CreateAdd(cOff, b_.CreateMul(batch[dd].base, strides_[v][dd]));
    blocks(aOff, bOff, cOff, i64(0), numBlocks);
    edges(aOff, bOff, cOff);
  };
  parallel("batch", dims_[v][0], work, carry, [&](Value *begin, Value *end) {
    derive();
    forLoop(begin, end, i64(1), "mmb", [&](Value *iv) {
      batch[0] = {iv, i64(0)};
      batches(1);
    });
  }, kParallelMatMulWork);
  return true;
}

} // namespace nimble::codegen::detail
