//===- Linalg.cpp - matmul and batch_matmul -------------------------------===//
//
//   matmul        [M,K] x [K,N] -> [M,N]; transpose_a reads lhs as [K,M],
//                 transpose_b reads rhs as [N,K].
//   batch_matmul  [B..,M,K] x [B..,K,N] -> [B..,M,N]; lhs and rhs have the same
//                 rank >= 3 and the batch dimensions broadcast like numpy's
//                 (np.matmul).
//
// The reference loop is the textbook triple loop with the k loop innermost
// and an accumulator wider than the element type: double for f32/f64 (so the
// result is the correctly rounded dot product up to double's error, the same
// oracle for every faster implementation), uint64 wrap-around for integers
// (bitwise the result of wrapping in the element type, like numpy). Rows are
// spread over the thread pool.
//
//===----------------------------------------------------------------------===//

#include "vm/kernels/KernelUtil.h"
#include "vm/kernels/Kernels.h"

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

} // namespace

Status refMatMul(const KernelArgs &args) {
  checkOutputShapes(OpCode::MatMul, args);
  return withF32(args, &matmulImpl<false>);
}

Status refBatchMatMul(const KernelArgs &args) {
  checkOutputShapes(OpCode::BatchMatMul, args);
  return withF32(args, &matmulImpl<true>);
}

} // namespace nimble::vm::kernels
