//===- Linalg.cpp - matmul and batch_matmul -------------------------------===//
//
//   matmul        [M,K] x [K,N] -> [M,N]; transpose_a reads lhs as [K,M],
//                 transpose_b reads rhs as [N,K].
//   batch_matmul  [B..,M,K] x [B..,K,N] -> [B..,M,N]; lhs and rhs have the same
//                 rank >= 3 and the batch dimensions broadcast like numpy's
//                 (np.matmul).
//   attention     q [m,H,D], k [n,H,D], v [n,H,E] (, mask broadcasting to
//                 [H,m,n]) -> [m,H,E]: per head h and query i,
//                 softmax_j(scale q[i,h].k[j,h] + mask[h,i,j]) . v[j,h], the
//                 composition batch_matmul, mul, add, softmax, batch_matmul of
//                 BERT's heads in one kernel (heads read by strides).
//
// The reference loop is the textbook triple loop with the k loop innermost
// and an accumulator wider than the element type: double for f32/f64 (so the
// result is the correctly rounded dot product up to double's error, the same
// oracle for every faster implementation), uint64 wrap-around for integers
// (bitwise the result of wrapping in the element type, like numpy). Rows are
// spread over the thread pool. attention is the same oracle for its parts:
// each score, the softmax (max-shifted, as softmax's kernel) and each output
// are computed in double and rounded once, per (head, query) row.
//
//===----------------------------------------------------------------------===//

#include "vm/kernels/KernelUtil.h"
#include "vm/kernels/Kernels.h"

#include <algorithm>
#include <cmath>

namespace nimble::vm::kernels {

namespace {

template <class T> using Acc = std::conditional_t<kIsFloat<T>, double, uint64_t>;

/// One [M,K] x [K,N] product with element strides for each operand's row and
/// column (so transposition is a stride swap).
template <class T> struct Gemm {
  const T *a, *b;
  T *c;
  int64_t m, n, k;
  int64_t aRow, aCol, bRow, bCol;

  void rows(int64_t r0, int64_t r1) const {
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t j = 0; j < n; ++j) {
        Acc<T> acc = 0;
        const T *pa = a + i * aRow, *pb = b + j * bCol;
        for (int64_t p = 0; p < k; ++p)
          acc += static_cast<Acc<T>>(pa[p * aCol]) * static_cast<Acc<T>>(pb[p * bRow]);
        c[i * n + j] = static_cast<T>(acc);
      }
  }
};

template <class T>
Gemm<T> makeGemm(const T *a, const T *b, T *c, const std::vector<int64_t> &as,
                 const std::vector<int64_t> &bs, bool ta, bool tb) {
  size_t r = as.size();
  int64_t a0 = as[r - 2], a1 = as[r - 1], b0 = bs[r - 2], b1 = bs[r - 1];
  Gemm<T> g{a, b, c, 0, 0, 0, 0, 0, 0, 0};
  // Stored lhs is [a0, a1] row-major: element (i, p) of the logical [M,K] is at
  // i*a1 + p, or p*a1 + i when transposed.
  g.m = ta ? a1 : a0;
  g.k = ta ? a0 : a1;
  g.aRow = ta ? 1 : a1;
  g.aCol = ta ? a1 : 1;
  g.n = tb ? b0 : b1;
  g.bRow = tb ? 1 : b1; // stride of p (the contracted index)
  g.bCol = tb ? b1 : 1; // stride of j
  return g;
}

template <bool Batched> Status matmulImpl(const KernelArgs &args) {
  constexpr OpCode op = Batched ? OpCode::BatchMatMul : OpCode::MatMul;
  const Tensor &x = *args.inputs[0], &y = *args.inputs[1];
  Tensor &z = *args.outputs[0];
  bool ta = boolAttr(args, op, "transpose_a"), tb = boolAttr(args, op, "transpose_b");
  return visitType(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!(kIsFloat<T> || kIsInt<T>)) {
      return Status::error(std::string(opInfo(op).mnemonic) + " has no kernel for " + sig(x));
    } else {
      Gemm<T> g = makeGemm(x.data<T>(), y.data<T>(), z.data<T>(), x.shape(), y.shape(), ta, tb);
      const std::vector<int64_t> &zs = z.shape();
      size_t r = zs.size();
      // Batch dims: the output's leading dims; each operand's batch offset
      // comes from broadcast strides over them.
      std::vector<int64_t> batch(zs.begin(), zs.end() - 2);
      std::vector<int64_t> xb(x.shape().begin(), x.shape().end() - 2);
      std::vector<int64_t> yb(y.shape().begin(), y.shape().end() - 2);
      std::vector<int64_t> xs = broadcastStrides(xb, batch), ys = broadcastStrides(yb, batch);
      int64_t xMat = x.shape()[r - 2] * x.shape()[r - 1];
      int64_t yMat = y.shape()[r - 2] * y.shape()[r - 1];
      int64_t batches = product(batch);
      std::vector<int64_t> xOff(static_cast<size_t>(batches)), yOff(xOff.size());
      std::array<const int64_t *, 2> strides = {xs.data(), ys.data()};
      forEachStrided<2>(batch, strides, 0, batches,
                        [&](int64_t i, const std::array<int64_t, 2> &o) {
                          xOff[static_cast<size_t>(i)] = o[0] * xMat;
                          yOff[static_cast<size_t>(i)] = o[1] * yMat;
                        });
      // Parallel over (batch, row) pairs.
      int64_t rows = batches * g.m;
      parallelRange(args, rows, g.n * g.k, [&](int64_t b, int64_t e) {
        for (int64_t q = b; q < e;) {
          int64_t bi = q / g.m, r0 = q % g.m;
          int64_t r1 = std::min(g.m, r0 + (e - q));
          Gemm<T> sub = g;
          sub.a += xOff[static_cast<size_t>(bi)];
          sub.b += yOff[static_cast<size_t>(bi)];
          sub.c += bi * g.m * g.n;
          sub.rows(r0, r1);
          q += r1 - r0;
        }
      });
      return Status::success();
    }
  });
}

Status attentionImpl(const KernelArgs &args) {
  const Tensor &q = *args.inputs[0], &k = *args.inputs[1], &v = *args.inputs[2];
  const Tensor *mask = args.inputs.size() > 3 ? args.inputs[3] : nullptr;
  Tensor &out = *args.outputs[0];
  double scale = floatAttr(args, OpCode::Attention, "scale");
  int64_t m = q.dim(0), heads = q.dim(1), d = q.dim(2), n = k.dim(0), e = v.dim(2);
  // The mask's element strides over [H, m, n] (0 along broadcast axes).
  std::vector<int64_t> ms = {0, 0, 0};
  if (mask) ms = broadcastStrides(mask->shape(), {heads, m, n});
  return visitType(q.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!kIsFloat<T>) {
      return Status::error("attention has no kernel for " + sig(q));
    } else {
      const T *pq = q.data<T>(), *pk = k.data<T>(), *pv = v.data<T>();
      const T *pm = mask ? mask->data<T>() : nullptr;
      T *po = out.data<T>();
      parallelRange(args, heads * m, n * (d + e) * 2 + 1, [&](int64_t b, int64_t end) {
        std::vector<double> p(static_cast<size_t>(n)), acc(static_cast<size_t>(e));
        for (int64_t r = b; r < end; ++r) {
          int64_t h = r / m, i = r % m;
          const T *qi = pq + (i * heads + h) * d;
          double mx = -INFINITY;
          for (int64_t j = 0; j < n; ++j) {
            const T *kj = pk + (j * heads + h) * d;
            double s = 0;
            for (int64_t t = 0; t < d; ++t) s += double(qi[t]) * double(kj[t]);
            s *= scale;
            if (pm) s += double(pm[h * ms[0] + i * ms[1] + j * ms[2]]);
            p[static_cast<size_t>(j)] = s;
            mx = std::max(mx, s);
          }
          double sum = 0;
          for (int64_t j = 0; j < n; ++j) sum += p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx);
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t j = 0; j < n; ++j) {
            const T *vj = pv + (j * heads + h) * e;
            double w = p[static_cast<size_t>(j)] / sum;
            for (int64_t t = 0; t < e; ++t) acc[static_cast<size_t>(t)] += w * double(vj[t]);
          }
          for (int64_t t = 0; t < e; ++t) po[(i * heads + h) * e + t] = static_cast<T>(acc[static_cast<size_t>(t)]);
        }
      });
      return Status::success();
    }
  });
}

} // namespace

Status refMatMul(const KernelArgs &args) {
  checkOutputShapes(OpCode::MatMul, args);
  return withF32(args, &matmulImpl<false>);
}

Status refBatchMatMul(const KernelArgs &args) {
  checkOutputShapes(OpCode::BatchMatMul, args);
  return withF32(args, &matmulImpl<true>);
}

Status refAttention(const KernelArgs &args) {
  checkOutputShapes(OpCode::Attention, args);
  return withF32(args, &attentionImpl);
}

} // namespace nimble::vm::kernels
