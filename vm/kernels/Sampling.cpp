//===- Sampling.cpp - resize and grid_sample ------------------------------===//
//
// Both ops read each output element as a weighted sum of input elements
// ("taps") chosen per axis; docs/LangRef.md gives the formulas. They follow
// ONNX's reference implementation (onnx/reference/ops/op_resize.py and
// op_grid_sample.py) step by step, in double precision, so that the
// rounding of a nearest mode at an exact half and the edge handling agree
// with the values ONNX's node tests hold.
//
//   resize       separable: one 1-D pass per resized axis, innermost axis
//                first (the reference's order), each output index j of the
//                axis owning a list of (input index, weight) computed once.
//                Taps are clamped to the edge (the reference pads with
//                edge values), or dropped and the rest renormalised with
//                exclude_outside. tf_crop_and_resize gives
//                extrapolation_value where the source coordinate leaves
//                [0, d - 1]. An axis whose taps are the identity is skipped.
//   grid_sample  per output position, per spatial axis the taps of the
//                denormalised grid coordinate (1 nearest, 2 linear, 4
//                cubic), combined as a tensor product; padding modes zeros
//                (a tap outside reads 0), border (clamped) and reflection
//                (mirrored at the borders).
//
// Integers go through double and back, truncated toward zero and saturated
// to the type's range (numpy's astype truncates; out of range it is
// undefined, which a kernel must not be).
//
//===----------------------------------------------------------------------===//

#include "vm/kernels/KernelUtil.h"
#include "vm/kernels/Kernels.h"

#include <cmath>
#include <limits>

namespace nimble::vm::kernels {

namespace {

double loadReal(const Tensor &t, int64_t i) {
  if (t.dtype() == DType::F64) return t.data<double>()[i];
  return static_cast<double>(t.data<float>()[i]);
}

template <class T> T fromDouble(double v) {
  if constexpr (kIsFloat<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T{};
    v = std::trunc(v);
    const double lo = static_cast<double>(std::numeric_limits<T>::min());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (v <= lo) return std::numeric_limits<T>::min();
    if (v >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

/// Keys' cubic convolution kernel with parameter a (ONNX's cubic_coeff_a),
/// written as the reference writes it.
double cubicW(double x, double a) {
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

//===-- resize -----------------------------------------------------------------===//

struct Tap {
  int64_t index;
  double weight;
};

/// The taps of one output index along one axis; `extrapolate` when
/// tf_crop_and_resize leaves the input.
struct Taps {
  std::vector<Tap> taps;
  bool extrapolate = false;
};

struct ResizeParams {
  std::string mode, ctm, nearestMode;
  double a = -0.75;
  bool excludeOutside = false, antialias = false;
};

/// ONNX's source coordinate of output index j (reference
/// _interpolate_1d_with_x); `outW` is scale * in, `outN` the output size.
double sourceCoord(const ResizeParams &p, int64_t j, double scale, int64_t in, int64_t outN, double roiStart,
                   double roiEnd) {
  const double x = static_cast<double>(j), inW = static_cast<double>(in);
  const double outW = scale * inW;
  const std::string &m = p.ctm;
  if (m == "align_corners") return outW == 1 ? 0.0 : x * (inW - 1) / (outW - 1);
  if (m == "asymmetric") return x / scale;
  if (m == "tf_crop_and_resize") {
    double v = outW == 1 ? (roiEnd - roiStart) * (inW - 1) / 2 : x * (roiEnd - roiStart) * (inW - 1) / (outW - 1);
    return v + roiStart * (inW - 1);
  }
  // The spec's 0 for a single output (ONNX Runtime and PyTorch agree).
  if (m == "pytorch_half_pixel") return outN > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (m == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (m == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(outN) / outW, center = inW / 2;
    return center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
  }
  return (x + 0.5) / scale - 0.5; // half_pixel
}

Taps tapsFor(const ResizeParams &p, double xo, double scale, int64_t in) {
  Taps t;
  if (std::isnan(xo)) xo = 0; // a NaN scale cannot reach here; keep floor defined
  // floor of a coordinate far outside still has to fit int64: taps beyond
  // the edge clamp anyway, so |xo| <= 2^52 changes nothing.
  xo = std::clamp(xo, -0x1p52, 0x1p52);
  const bool integral = xo == std::floor(xo);
  // The reference prefers the pixel left of xo: an integral xo is
  // (xo - 1) + ratio 1.
  const int64_t base = integral ? static_cast<int64_t>(xo) - 1 : static_cast<int64_t>(std::floor(xo));
  const double ratio = integral ? 1.0 : xo - std::floor(xo);
  std::vector<double> w;
  int64_t start;
  if (p.mode == "nearest") {
    bool up;
    if (integral) up = true;
    else if (p.nearestMode == "round_prefer_floor") up = ratio > 0.5;
    else if (p.nearestMode == "round_prefer_ceil") up = ratio >= 0.5;
    else up = p.nearestMode == "ceil";
    w = {up ? 0.0 : 1.0, up ? 1.0 : 0.0};
    start = 0;
  } else {
    const double s = p.antialias ? std::min(scale, 1.0) : 1.0;
    if (p.mode == "linear") {
      start = static_cast<int64_t>(std::floor(-1 / s)) + 1;
      if (!p.antialias) {
        w = {1 - ratio, ratio};
      } else {
        for (int64_t i = start; i < 2 - start; ++i)
          w.push_back(std::clamp(1 - std::fabs((static_cast<double>(i) - ratio) * s), 0.0, 1.0));
      }
    } else { // cubic
      start = static_cast<int64_t>(std::floor(-2 / s)) + 1;
      for (int64_t i = start; i < 2 - start; ++i) w.push_back(cubicW(s * (static_cast<double>(i) - ratio), p.a));
    }
    if (p.antialias) {
      double sum = 0;
      for (double v : w) sum += v;
      if (sum != 0)
        for (double &v : w) v /= sum;
    }
  }
  if (p.excludeOutside && p.mode != "nearest") {
    double sum = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      const int64_t idx = base + start + static_cast<int64_t>(i);
      if (idx < 0 || idx >= in) w[i] = 0;
      sum += w[i];
    }
    if (sum != 0)
      for (double &v : w) v /= sum;
  }
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == 0) continue;
    const int64_t idx = std::clamp<int64_t>(base + start + static_cast<int64_t>(i), 0, in - 1);
    // Merge taps that clamp onto the same index (fewer reads, same sum).
    if (!t.taps.empty() && t.taps.back().index == idx) t.taps.back().weight += w[i];
    else t.taps.push_back({idx, w[i]});
  }
  return t;
}

/// One 1-D pass along an axis: `in` is outer x n x inner, `out` outer x m x inner.
void resizeAxis(const KernelArgs &args, const std::vector<double> &src, std::vector<double> &dst, int64_t outer,
                int64_t n, int64_t m, int64_t inner, const std::vector<Taps> &taps, double extrapolation) {
  dst.assign(static_cast<size_t>(outer * m * inner), 0.0);
  parallelRange(args, outer * m, inner * 4, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t o = row / m, j = row % m;
      double *d = dst.data() + row * inner;
      const Taps &t = taps[static_cast<size_t>(j)];
      if (t.extrapolate) {
        std::fill(d, d + inner, extrapolation);
        continue;
      }
      for (const Tap &tap : t.taps) {
        const double *s = src.data() + (o * n + tap.index) * inner;
        for (int64_t i = 0; i < inner; ++i) d[i] += tap.weight * s[i];
      }
    }
  });
}

Status resizeImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0], &scales = *args.inputs[1], &sizes = *args.inputs[2];
  const Tensor *roi = args.inputs.size() > 3 ? args.inputs[3] : nullptr;
  Tensor &y = *args.outputs[0];
  ResizeParams p;
  p.mode = args.attr(OpCode::Resize, "mode").getStr();
  p.ctm = args.attr(OpCode::Resize, "coordinate_transformation_mode").getStr();
  p.nearestMode = args.attr(OpCode::Resize, "nearest_mode").getStr();
  p.a = floatAttr(args, OpCode::Resize, "cubic_coeff_a");
  p.excludeOutside = boolAttr(args, OpCode::Resize, "exclude_outside");
  p.antialias = boolAttr(args, OpCode::Resize, "antialias");
  const double extrapolation = floatAttr(args, OpCode::Resize, "extrapolation_value");
  const std::string &policy = args.attr(OpCode::Resize, "keep_aspect_ratio_policy").getStr();
  const int64_t r = x.rank();
  std::vector<int64_t> axes;
  for (int64_t a : intsAttr(args, OpCode::Resize, "axes")) axes.push_back(normAxis(a, r));
  if (axes.empty())
    for (int64_t k = 0; k < r; ++k) axes.push_back(k);
  const int64_t k = static_cast<int64_t>(axes.size());

  // Per axis of x: the scale of the coordinate map and the roi.
  std::vector<double> scale(static_cast<size_t>(r), 1.0), roiStart(static_cast<size_t>(r), 0.0),
      roiEnd(static_cast<size_t>(r), 1.0);
  std::vector<bool> resized(static_cast<size_t>(r), false);
  double fitted = policy == "not_larger" ? INFINITY : 0.0;
  if (scales.numElements() == 0 && policy != "stretch")
    for (int64_t i = 0; i < k; ++i) {
      const double s = static_cast<double>(loadInt(sizes, i)) / static_cast<double>(x.dim(static_cast<size_t>(axes[static_cast<size_t>(i)])));
      fitted = policy == "not_larger" ? std::min(fitted, s) : std::max(fitted, s);
    }
  for (int64_t i = 0; i < k; ++i) {
    const size_t a = static_cast<size_t>(axes[static_cast<size_t>(i)]);
    resized[a] = true;
    if (scales.numElements() != 0) scale[a] = loadReal(scales, i);
    else if (policy != "stretch") scale[a] = fitted;
    else scale[a] = static_cast<double>(loadInt(sizes, i)) / static_cast<double>(x.dim(a));
    if (roi && roi->numElements() != 0) {
      roiStart[a] = loadReal(*roi, i);
      roiEnd[a] = loadReal(*roi, i + k);
    }
    if (x.dim(a) == 0 && y.dim(a) != 0)
      return Status::error("resize: cannot resize the empty dimension " + std::to_string(a) + " of " + sig(x) +
                           " to " + std::to_string(y.dim(a)));
  }
  if (y.numElements() == 0) return Status::success();

  return visitType(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (kIsBool<T> || kIsHalfBits<T>) {
      return Status::error("resize: unsupported element type in " + sig(x));
    } else {
      std::vector<double> cur(static_cast<size_t>(x.numElements())), next;
      const T *in = x.data<T>();
      for (size_t i = 0; i < cur.size(); ++i) cur[i] = static_cast<double>(in[i]);
      std::vector<int64_t> shape = x.shape();
      for (int64_t a = r - 1; a >= 0; --a) {
        const size_t au = static_cast<size_t>(a);
        if (!resized[au]) continue;
        const int64_t n = shape[au], m = y.dim(au);
        // antialias widens the kernel to about 4 / scale taps per output.
        if (p.antialias && p.mode != "nearest" && scale[au] < 1e-6)
          return Status::error("resize: antialias with scale " + std::to_string(scale[au]) + " on axis " +
                               std::to_string(a) + " of " + sig(x) + " needs more than 10^6 taps per output");
        std::vector<Taps> taps(static_cast<size_t>(m));
        bool identity = n == m;
        for (int64_t j = 0; j < m; ++j) {
          const double xo = sourceCoord(p, j, scale[au], n, m, roiStart[au], roiEnd[au]);
          Taps &t = taps[static_cast<size_t>(j)];
          if (p.ctm == "tf_crop_and_resize" && (xo < 0 || xo > static_cast<double>(n - 1) || std::isnan(xo)))
            t.extrapolate = true;
          else
            t = tapsFor(p, xo, scale[au], n);
          identity &= !t.extrapolate && t.taps.size() == 1 && t.taps[0].index == j && t.taps[0].weight == 1.0;
        }
        if (identity) continue;
        const int64_t outer = product(shape, 0, au), inner = product(shape, au + 1);
        resizeAxis(args, cur, next, outer, n, m, inner, taps, extrapolation);
        cur.swap(next);
        shape[au] = m;
      }
      T *out = y.data<T>();
      for (size_t i = 0; i < cur.size(); ++i) out[i] = fromDouble<T>(cur[i]);
      return Status::success();
    }
  });
}

//===-- grid_sample ---------------------------------------------------------===//

/// Mirrors v into [lo, hi] (reference _gs_reflect), by fmod so that a huge
/// coordinate costs nothing.
double reflect(double v, double lo, double hi) {
  const double rng = hi - lo;
  if (rng <= 0) return lo;
  if (v < lo) {
    const double dx = lo - v, n = std::floor(dx / rng), rem = dx - n * rng;
    return std::fmod(n, 2.0) == 0 ? lo + rem : hi - rem;
  }
  if (v > hi) {
    const double dx = v - hi, n = std::floor(dx / rng), rem = dx - n * rng;
    return std::fmod(n, 2.0) == 0 ? hi - rem : lo + rem;
  }
  return v;
}

struct GridParams {
  int mode = 0; // 0 nearest, 1 linear, 2 cubic
  int padding = 0; // 0 zeros, 1 border, 2 reflection
  bool alignCorners = false;
};

/// The input index a tap at integer position i reads along an axis of size
/// d, or -1 for a zero (reference _pixel_at_array).
int64_t tapIndex(const GridParams &p, int64_t i, int64_t d, double lo, double hi) {
  if (i >= 0 && i < d) return i;
  if (p.padding == 0) return -1;
  if (p.padding == 1) return std::clamp<int64_t>(i, 0, d - 1);
  const int64_t j = static_cast<int64_t>(reflect(static_cast<double>(i), lo, hi));
  return std::clamp<int64_t>(j, 0, d - 1);
}

/// Taps along one axis of size d for normalised coordinate g.
void gridTaps(const GridParams &p, double g, int64_t d, std::vector<Tap> &out) {
  out.clear();
  const double dd = static_cast<double>(d);
  double v = p.alignCorners ? (g + 1) / 2.0 * (dd - 1) : ((g + 1) * dd - 1) / 2.0;
  const double lo = p.alignCorners ? 0.0 : -0.5, hi = p.alignCorners ? dd - 1 : dd - 0.5;
  if (std::isnan(v)) {
    out.push_back({-2, 0.0}); // NaN in, NaN out
    return;
  }
  if (p.mode == 0) v = std::nearbyint(v); // np.rint: halves to even
  if (v < lo || v > hi) {
    if (p.padding == 1) v = std::clamp(v, 0.0, dd - 1);
    else if (p.padding == 2) v = reflect(v, lo, hi);
  }
  // Far outside (zeros padding) every tap reads 0: keep the int conversion defined.
  v = std::clamp(v, -dd - 8, 2 * dd + 8);
  if (p.mode == 0) {
    out.push_back({tapIndex(p, static_cast<int64_t>(v), d, lo, hi), 1.0});
    return;
  }
  const double f = std::floor(v), t = v - f;
  const int64_t i0 = static_cast<int64_t>(f);
  if (p.mode == 1) {
    out.push_back({tapIndex(p, i0, d, lo, hi), 1 - t});
    out.push_back({tapIndex(p, i0 + 1, d, lo, hi), t});
    return;
  }
  for (int64_t k = -1; k <= 2; ++k)
    out.push_back({tapIndex(p, i0 + k, d, lo, hi), cubicW(static_cast<double>(k) - t, -0.75)});
}

template <class T, class G> void gridSampleTyped(const KernelArgs &args, const GridParams &p) {
  const Tensor &x = *args.inputs[0], &grid = *args.inputs[1];
  Tensor &y = *args.outputs[0];
  const T *in = x.data<T>();
  const G *gr = grid.data<G>();
  T *out = y.data<T>();
  const int64_t n = x.dim(0), c = x.dim(1), r = x.rank() - 2;
  const int64_t spatialIn = product(x.shape(), 2), spatialOut = product(y.shape(), 2);
  const std::vector<int64_t> strides = contiguousStrides(std::vector<int64_t>(x.shape().begin() + 2, x.shape().end()));
  parallelRange(args, n * spatialOut, c * (p.mode == 2 ? 16 : 4), [&](int64_t b, int64_t e) {
    std::vector<std::vector<Tap>> taps(static_cast<size_t>(r));
    std::vector<size_t> pos(static_cast<size_t>(r));
    for (int64_t item = b; item < e; ++item) {
      const int64_t bn = item / spatialOut, o = item % spatialOut;
      const G *g = gr + item * r;
      bool nan = false;
      // Grid entry 0 is the last axis (x = width).
      for (int64_t k = 0; k < r; ++k) {
        gridTaps(p, static_cast<double>(g[r - 1 - k]), x.dim(static_cast<size_t>(2 + k)), taps[static_cast<size_t>(k)]);
        nan |= taps[static_cast<size_t>(k)][0].index == -2;
      }
      for (int64_t ch = 0; ch < c; ++ch) {
        const T *src = in + (bn * c + ch) * spatialIn;
        double acc = 0;
        if (nan) {
          acc = NAN;
        } else {
          std::fill(pos.begin(), pos.end(), 0);
          for (;;) {
            double w = 1;
            int64_t off = 0;
            bool zero = false;
            for (int64_t k = 0; k < r; ++k) {
              const Tap &t = taps[static_cast<size_t>(k)][pos[static_cast<size_t>(k)]];
              w *= t.weight;
              if (t.index < 0) zero = true;
              else off += t.index * strides[static_cast<size_t>(k)];
            }
            if (!zero) acc += w * static_cast<double>(src[off]);
            int64_t k = r - 1;
            for (; k >= 0; --k) {
              size_t &q = pos[static_cast<size_t>(k)];
              if (++q < taps[static_cast<size_t>(k)].size()) break;
              q = 0;
            }
            if (k < 0) break;
          }
        }
        out[(bn * c + ch) * spatialOut + o] = static_cast<T>(acc);
      }
    }
  });
}

Status gridSampleImpl(const KernelArgs &args) {
  GridParams p;
  const std::string &mode = args.attr(OpCode::GridSample, "mode").getStr();
  const std::string &padding = args.attr(OpCode::GridSample, "padding_mode").getStr();
  p.mode = mode == "nearest" ? 0 : mode == "linear" ? 1 : 2;
  p.padding = padding == "zeros" ? 0 : padding == "border" ? 1 : 2;
  p.alignCorners = boolAttr(args, OpCode::GridSample, "align_corners");
  const Tensor &x = *args.inputs[0], &grid = *args.inputs[1];
  if (args.outputs[0]->numElements() == 0) return Status::success();
  for (int64_t k = 2; k < x.rank(); ++k)
    if (x.dim(static_cast<size_t>(k)) == 0)
      return Status::error("grid_sample: cannot sample the empty spatial dimension " + std::to_string(k) + " of " +
                           sig(x));
  const bool xd = x.dtype() == DType::F64, gd = grid.dtype() == DType::F64;
  if (xd && gd) gridSampleTyped<double, double>(args, p);
  else if (xd) gridSampleTyped<double, float>(args, p);
  else if (gd) gridSampleTyped<float, double>(args, p);
  else gridSampleTyped<float, float>(args, p);
  return Status::success();
}

} // namespace

Status refResize(const KernelArgs &args) {
  checkOutputShapes(OpCode::Resize, args);
  return withF32(args, &resizeImpl);
}

Status refGridSample(const KernelArgs &args) {
  checkOutputShapes(OpCode::GridSample, args);
  return withF32(args, &gridSampleImpl);
}

} // namespace nimble::vm::kernels
