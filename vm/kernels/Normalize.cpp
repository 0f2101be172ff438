//===- Normalize.cpp - softmax and layer_norm -----------------------------===//
//
//   softmax     y = exp(x - max(x)) / sum(exp(x - max(x))) along `axis`: the
//               max shift keeps exp from overflowing (the numerically stable
//               form; the result is mathematically unchanged).
//   layer_norm  over the last axis of x, with gamma and beta of its size:
//               y = (x - mean) / sqrt(var + eps) * gamma + beta, where var is
//               the biased (population) variance, computed in two passes.
//
// Both compute in double for f32 and f64 inputs and round once at the end.
// A softmax row lies along one axis with stride `inner` (the product of the
// dimensions after it): rows are indexed by (outer, inner) pairs.
//
//===----------------------------------------------------------------------===//

#include "vm/kernels/KernelUtil.h"
#include "vm/kernels/Kernels.h"

#include <cmath>

namespace nimble::vm::kernels {

namespace {

Status softmaxImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0];
  Tensor &y = *args.outputs[0];
  int64_t axis = normAxis(intAttr(args, OpCode::Softmax, "axis"), x.rank());
  int64_t len = x.dim(static_cast<size_t>(axis));
  int64_t inner = product(x.shape(), static_cast<size_t>(axis) + 1);
  int64_t outer = product(x.shape(), 0, static_cast<size_t>(axis));
  return visitType(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!kIsFloat<T>) {
      return Status::error("softmax has no kernel for " + sig(x));
    } else {
      const T *in = x.data<T>();
      T *out = y.data<T>();
      parallelRange(args, outer * inner, len * 16, [&](int64_t b, int64_t end) {
        std::vector<double> ex(static_cast<size_t>(len));
        for (int64_t r = b; r < end; ++r) {
          int64_t start = (r / inner) * len * inner + r % inner;
          double m = -INFINITY;
          for (int64_t j = 0; j < len; ++j) m = std::max(m, double(in[start + j * inner]));
          double sum = 0;
          for (int64_t j = 0; j < len; ++j) {
            ex[static_cast<size_t>(j)] = std::exp(double(in[start + j * inner]) - m);
            sum += ex[static_cast<size_t>(j)];
          }
          for (int64_t j = 0; j < len; ++j)
            out[start + j * inner] = static_cast<T>(ex[static_cast<size_t>(j)] / sum);
        }
      });
      return Status::success();
    }
  });
}

Status layerNormImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0], &gamma = *args.inputs[1], &beta = *args.inputs[2];
  Tensor &y = *args.outputs[0];
  double eps = floatAttr(args, OpCode::LayerNorm, "eps");
  int64_t d = x.shape().back();
  int64_t rows = d == 0 ? 0 : x.numElements() / d;
  return visitType(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!kIsFloat<T>) {
      return Status::error("layer_norm has no kernel for " + sig(x));
    } else {
      const T *in = x.data<T>(), *g = gamma.data<T>(), *bt = beta.data<T>();
      T *out = y.data<T>();
      parallelRange(args, rows, d * 4, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const T *row = in + r * d;
          double mean = 0;
          for (int64_t j = 0; j < d; ++j) mean += double(row[j]);
          mean /= double(d);
          double var = 0;
          for (int64_t j = 0; j < d; ++j) var += (double(row[j]) - mean) * (double(row[j]) - mean);
          var /= double(d);
          double inv = 1.0 / std::sqrt(var + eps);
          for (int64_t j = 0; j < d; ++j)
            out[r * d + j] =
                static_cast<T>((double(row[j]) - mean) * inv * double(g[j]) + double(bt[j]));
        }
      });
      return Status::success();
    }
  });
}

} // namespace

Status refSoftmax(const KernelArgs &args) {
  checkOutputShapes(OpCode::Softmax, args);
  return withF32(args, &softmaxImpl);
}

Status refLayerNorm(const KernelArgs &args) {
  checkOutputShapes(OpCode::LayerNorm, args);
  return withF32(args, &layerNormImpl);
}

} // namespace nimble::vm::kernels
