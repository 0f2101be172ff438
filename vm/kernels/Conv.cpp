//===- Conv.cpp - conv, conv_transpose, max_pool, avg_pool ----------------===//
//
// The reference kernels of the window ops over NCHW tensors (one or more
// spatial axes; docs/LangRef.md, "Convolution and pooling"):
//
//   conv      y[n, m, o..] = b[m] + sum over c in m's group and taps t.. of
//             x[n, c, o*s - pb + t*d ..] * w[m, c - group start, t..]
//   conv_transpose  conv's adjoint (ONNX's ConvTranspose): every input
//             element times every tap added at o = i*s - pb + t*d of output
//             channel m (w is C x M/groups x K..), plus b[m]
//   max_pool  the largest element of each window (NaN if one is NaN; the
//             lowest value, -inf for floats, if the window holds no input
//             element, which only padding larger than the window allows)
//   avg_pool  the window's sum divided by its input elements, or with
//             count_include_pad by its positions inside the padded input
//             (a window of ceil_mode that runs past the end padding counts
//             only what lies inside it: PyTorch's and ONNX Runtime's rule);
//             0 / 0 = NaN for a window with no element
//
// channels_last (conv, max_pool, avg_pool: x and y are N x D.. x C, set by
// the convert-layout pass) only changes where an element lives: the channel
// stride is 1 and the position stride C, and every sum runs in the same
// order as over NCHW, so the two layouts give the same bits.
//
// Positions in the padding contribute nothing. Every output element is one
// direct sum in an accumulator wider than the element type (double, as
// matmul's reference: the oracle the oneDNN path is checked against), over
// the taps that land inside the input: per spatial axis the range of taps is
// computed once, so the inner loop has no bounds test. The output's
// (batch, channel) planes are spread over the thread pool.
//
// max_pool over f32 channels-last with one or two spatial axes (ResNet's
// 3 x 3 stride-2 pool after convert-layout) has a hand-vectorized path: per
// output position the input offsets of its taps inside the input (an
// interior window's from one shared table), then per block of channels the
// maxima in vector registers, AVX-512 or AVX2 picked
// at run time (kernelIsa(): target attributes, the runtime is built for
// baseline x86-64). It computes what the loops below compute, bit for bit:
// MAXPS(v, best) is `v > best ? v : best`, the reference's comparison, taps
// in the same order (so of -0 and +0 the first one stays), and a window
// with a NaN gives the quiet NaN (a block with one is redone by the scalar
// loop). test/vm/kernels-pool-last.test checks every variant bit for bit.
//
//===----------------------------------------------------------------------===//

#include "vm/kernels/KernelUtil.h"
#include "vm/kernels/Kernels.h"

#include "ir/Limits.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which
// -Wmaybe-uninitialized reports inside every inlined intrinsic (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__) // clang has no such warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace nimble::vm::kernels {

namespace {

/// The window geometry of one op call, from its attributes and the shapes.
struct Window {
  size_t k = 0;                     // spatial axes
  int64_t in[limits::kMaxRank];     // input spatial sizes
  int64_t out[limits::kMaxRank];    // output spatial sizes
  int64_t taps[limits::kMaxRank];   // window sizes
  int64_t st[limits::kMaxRank], dil[limits::kMaxRank], pb[limits::kMaxRank], pe[limits::kMaxRank];
  int64_t inPlane = 1, outPlane = 1, tapCount = 1;
  bool last = false; // channels_last
  int64_t inC = 0, outC = 0; // channels of x and y

  Window(const KernelArgs &args, OpCode op, const Tensor &x, const Tensor &y, const std::vector<int64_t> &kernel) {
    k = x.rank() - 2;
    last = boolAttr(args, op, "channels_last");
    const size_t sp = last ? 1 : 2; // the first spatial axis
    inC = x.dim(last ? x.rank() - 1 : 1);
    outC = y.dim(last ? y.rank() - 1 : 1);
    const auto &s = intsAttr(args, op, "strides"), &p = intsAttr(args, op, "pads"), &d = intsAttr(args, op, "dilations");
    for (size_t i = 0; i < k; ++i) {
      in[i] = x.dim(i + sp);
      out[i] = y.dim(i + sp);
      taps[i] = kernel[i];
      st[i] = s.empty() ? 1 : s[i];
      dil[i] = d.empty() ? 1 : d[i];
      pb[i] = p.empty() ? 0 : p[i];
      pe[i] = p.empty() ? 0 : p[i + k];
      inPlane *= in[i];
      outPlane *= out[i];
      tapCount *= taps[i];
    }
  }

  /// For output position `o` along axis `a`: the first input index of its
  /// window (may be negative) and the taps [lo, hi) that fall inside the
  /// input.
  void range(size_t a, int64_t o, int64_t &start, int64_t &lo, int64_t &hi) const {
    start = o * st[a] - pb[a];
    // start + t * dil >= 0  and  start + t * dil < in
    lo = start >= 0 ? 0 : (-start + dil[a] - 1) / dil[a];
    hi = start >= in[a] ? 0 : std::min(taps[a], (in[a] - start + dil[a] - 1) / dil[a]);
    if (hi < lo) hi = lo;
  }

  /// Element strides of a channel and of a spatial position in x (y: outC).
  int64_t chanStride(int64_t plane) const { return last ? 1 : plane; }
  int64_t posStride(int64_t channels) const { return last ? channels : 1; }

  /// Calls body(outIndex, starts, lo, hi) for every output position of one
  /// plane, in row-major order.
  template <class Body> void forEachOutput(Body &&body) const {
    int64_t idx[limits::kMaxRank] = {};
    int64_t start[limits::kMaxRank], lo[limits::kMaxRank], hi[limits::kMaxRank];
    for (int64_t i = 0; i < outPlane; ++i) {
      for (size_t a = 0; a < k; ++a) range(a, idx[a], start[a], lo[a], hi[a]);
      body(i, start, lo, hi);
      for (size_t a = k; a-- > 0;) {
        if (++idx[a] < out[a]) break;
        idx[a] = 0;
      }
    }
  }

  /// Calls tap(inputOffset, tapOffset) for every tap of a window inside the
  /// input (offsets within one input plane and one kernel plane).
  template <class Tap>
  void forEachTap(const int64_t *start, const int64_t *lo, const int64_t *hi, Tap &&tap) const {
    for (size_t a = 0; a < k; ++a)
      if (lo[a] >= hi[a]) return;
    int64_t t[limits::kMaxRank];
    for (size_t a = 0; a < k; ++a) t[a] = lo[a];
    const size_t last = k - 1;
    for (;;) {
      int64_t xo = 0, wo = 0;
      for (size_t a = 0; a < last; ++a) {
        xo = xo * in[a] + start[a] + t[a] * dil[a];
        wo = wo * taps[a] + t[a];
      }
      xo = xo * in[last] + start[last];
      wo = wo * taps[last];
      for (int64_t j = lo[last]; j < hi[last]; ++j) tap(xo + j * dil[last], wo + j);
      size_t a = last;
      for (;;) {
        if (a == 0) return;
        --a;
        if (++t[a] < hi[a]) break;
        t[a] = lo[a];
      }
    }
  }
};

Status convImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0], &w = *args.inputs[1];
  const Tensor *b = args.inputs.size() > 2 ? args.inputs[2] : nullptr;
  Tensor &y = *args.outputs[0];
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  Window win(args, OpCode::Conv, x, y, kernel);
  const int64_t n = x.dim(0), c = win.inC, m = win.outC;
  const int64_t groups = intAttr(args, OpCode::Conv, "groups");
  const int64_t cg = w.dim(1), mg = m / groups;
  const int64_t xcs = win.chanStride(win.inPlane), xps = win.posStride(c);
  const int64_t ycs = win.chanStride(win.outPlane), yps = win.posStride(m);
  return visitType(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!kIsFloat<T>) {
      return Status::error("conv has no kernel for " + sig(x));
    } else {
      const T *xs = x.data<T>(), *ws = w.data<T>(), *bs = b ? b->data<T>() : nullptr;
      T *ys = y.data<T>();
      parallelRange(args, n * m, win.outPlane * cg * win.tapCount * 2 + 1, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t bi = p / m, oc = p % m, g = oc / mg;
          const T *xg = xs + bi * c * win.inPlane + g * cg * xcs;
          const T *wm = ws + oc * cg * win.tapCount;
          T *yp = ys + bi * m * win.outPlane + oc * ycs;
          win.forEachOutput([&](int64_t i, const int64_t *start, const int64_t *lo, const int64_t *hi) {
            double acc = bs ? double(bs[oc]) : 0.0;
            for (int64_t ic = 0; ic < cg; ++ic) {
              const T *xp = xg + ic * xcs, *wp = wm + ic * win.tapCount;
              win.forEachTap(start, lo, hi,
                             [&](int64_t xo, int64_t wo) { acc += double(xp[xo * xps]) * double(wp[wo]); });
            }
            yp[i * yps] = static_cast<T>(acc);
          });
        }
      });
      return Status::success();
    }
  });
}

/// conv_transpose: y[n, m, o..] = b[m] + the sum over the input channels c
/// of m's group, the input positions i.. and the taps t.. with
/// o = i s - pb + t d, of x[n, c, i..] w[c, m - group start, t..]. One
/// (batch, output channel) plane per task, scattered into a double
/// accumulator plane (so every output element is one sum, as conv's).
Status convTransposeImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0], &w = *args.inputs[1];
  const Tensor *b = args.inputs.size() > 2 ? args.inputs[2] : nullptr;
  Tensor &y = *args.outputs[0];
  constexpr OpCode op = OpCode::ConvTranspose;
  const size_t k = static_cast<size_t>(x.rank() - 2);
  const auto &sa = intsAttr(args, op, "strides"), &pa = intsAttr(args, op, "pads"), &da = intsAttr(args, op, "dilations");
  int64_t in[limits::kMaxRank], out[limits::kMaxRank], taps[limits::kMaxRank], st[limits::kMaxRank],
      dil[limits::kMaxRank], pb[limits::kMaxRank];
  int64_t inPlane = 1, outPlane = 1, tapCount = 1;
  for (size_t a = 0; a < k; ++a) {
    in[a] = x.dim(a + 2);
    out[a] = y.dim(a + 2);
    taps[a] = w.dim(a + 2);
    st[a] = sa.empty() ? 1 : sa[a];
    dil[a] = da.empty() ? 1 : da[a];
    pb[a] = pa.empty() ? 0 : pa[a];
    inPlane *= in[a];
    outPlane *= out[a];
    tapCount *= taps[a];
  }
  const int64_t n = x.dim(0), c = x.dim(1), m = y.dim(1);
  const int64_t groups = intAttr(args, op, "groups");
  const int64_t cg = c / groups, mg = m / groups;
  return visitType(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!kIsFloat<T>) {
      return Status::error("conv_transpose has no kernel for " + sig(x));
    } else {
      const T *xs = x.data<T>(), *ws = w.data<T>(), *bs = b ? b->data<T>() : nullptr;
      T *ys = y.data<T>();
      parallelRange(args, n * m, outPlane * cg * tapCount + 1, [&](int64_t p0, int64_t p1) {
        std::vector<double> acc(static_cast<size_t>(outPlane));
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t bi = p / m, oc = p % m, g = oc / mg, om = oc - g * mg;
          std::fill(acc.begin(), acc.end(), bs ? double(bs[oc]) : 0.0);
          for (int64_t ic = g * cg; ic < (g + 1) * cg; ++ic) {
            const T *xp = xs + (bi * c + ic) * inPlane, *wp = ws + (ic * mg + om) * tapCount;
            // Every (input position, tap) pair, scattered to its output
            // position when that lies inside the output.
            int64_t ii[limits::kMaxRank] = {};
            for (int64_t xi = 0; xi < inPlane; ++xi) {
              const double xv = double(xp[xi]);
              int64_t tt[limits::kMaxRank] = {};
              for (int64_t ti = 0; ti < tapCount; ++ti) {
                int64_t oi = 0;
                bool inside = true;
                for (size_t a = 0; a < k && inside; ++a) {
                  int64_t o = ii[a] * st[a] - pb[a] + tt[a] * dil[a];
                  inside = o >= 0 && o < out[a];
                  oi = oi * out[a] + o;
                }
                if (inside) acc[static_cast<size_t>(oi)] += xv * double(wp[ti]);
                for (size_t a = k; a-- > 0;) {
                  if (++tt[a] < taps[a]) break;
                  tt[a] = 0;
                }
              }
              for (size_t a = k; a-- > 0;) {
                if (++ii[a] < in[a]) break;
                ii[a] = 0;
              }
            }
          }
          T *yp = ys + p * outPlane;
          for (int64_t i = 0; i < outPlane; ++i) yp[i] = static_cast<T>(acc[static_cast<size_t>(i)]);
        }
      });
      return Status::success();
    }
  });
}

/// avg_pool's divisor for one window: its taps inside the input, or with
/// count_include_pad inside the padded input.
double poolCount(const Window &win, bool includePad, const int64_t *start, const int64_t *lo, const int64_t *hi) {
  double count = 1;
  for (size_t a = 0; a < win.k; ++a) {
    if (!includePad) {
      count *= double(hi[a] - lo[a]);
      continue;
    }
    int64_t end = win.in[a] + win.pe[a], n = 0;
    for (int64_t t = 0; t < win.taps[a]; ++t) {
      int64_t pos = start[a] + t * win.dil[a];
      n += pos >= -win.pb[a] && pos < end;
    }
    count *= double(n);
  }
  return count;
}

/// best[i] = max(best[i], x[i]) over n channels with NaN sticky (a NaN in
/// either stays, as the plane-wise loop's flag makes it): chunks of 8 through
/// restrict pointers, which -O2's SLP vectorizer turns into vector code
/// (the plain loop stayed scalar: 37 ms for ResNet-18's pool at batch 8).
void maxInto(float *__restrict best, const float *__restrict x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) {
      float v = x[i + k], b = best[i + k];
      best[i + k] = (v > b || v != v) ? v : b;
    }
  for (; i < n; ++i) {
    float v = x[i], b = best[i];
    best[i] = (v > b || v != v) ? v : b;
  }
}

/// The channels-last f32 max_pool of one or two spatial axes (a 1-D pool
/// is 1 x W), for the vectorized path.
struct MaxPool2 {
  int64_t ih, iw, oh, ow, c;
  int64_t kh, kw, sh, sw, dh, dw, ph, pw;
};

/// The maxima of channels [c0, c1) of one output position over its taps
/// (input offsets `off`, in the reference's order) with the reference's
/// comparison and NaN rule: the exact result a vector block falls back to
/// when it met a NaN.
void maxTapsScalar(const float *x, const int64_t *off, int64_t taps, float *y, int64_t c0, int64_t c1) {
  for (int64_t ch = c0; ch < c1; ++ch) {
    float best = -std::numeric_limits<float>::infinity();
    bool nan = false;
    for (int64_t t = 0; t < taps; ++t) {
      float v = x[off[t] + ch];
      nan |= v != v;
      best = v > best ? v : best;
    }
    y[ch] = nan ? std::numeric_limits<float>::quiet_NaN() : best;
  }
}

/// The taps of the window at input row `hs`, column `ws` of image `b` that
/// lie inside the input, in the reference's order, as offsets from `*base`:
/// an interior window (every tap inside, the common case) reads the shared
/// table `rel` and needs no test per tap; one at the border lists its taps
/// in `off`. Returns their count.
inline int64_t windowTaps(const MaxPool2 &g, int64_t b, int64_t hs, int64_t ws, const int64_t *rel, int64_t *off,
                          const int64_t **offs, int64_t *base) {
  if (hs >= 0 && hs + (g.kh - 1) * g.dh < g.ih && ws >= 0 && ws + (g.kw - 1) * g.dw < g.iw) {
    *base = ((b * g.ih + hs) * g.iw + ws) * g.c;
    *offs = rel;
    return g.kh * g.kw;
  }
  int64_t taps = 0;
  for (int64_t th = 0; th < g.kh; ++th) {
    const int64_t h = hs + th * g.dh;
    if (h < 0 || h >= g.ih) continue;
    for (int64_t tw = 0; tw < g.kw; ++tw) {
      const int64_t w = ws + tw * g.dw;
      if (w >= 0 && w < g.iw) off[taps++] = ((b * g.ih + h) * g.iw + w) * g.c;
    }
  }
  *base = 0;
  *offs = off;
  return taps;
}

#define NIMBLE_AVX512 __attribute__((target("avx512f")))
#define NIMBLE_AVX2 __attribute__((target("avx2,fma")))

/// V vectors of 16 channels from c0 (the last one masked by `tail`).
template <int V>
NIMBLE_AVX512 inline void maxTaps512(const float *x, const int64_t *off, int64_t taps, float *y, int64_t c0,
                                     __mmask16 tail) {
  __m512 acc[V];
  #pragma GCC unroll 4
  for (int v = 0; v < V; ++v) acc[v] = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __mmask16 nan = 0;
  for (int64_t t = 0; t < taps; ++t) {
    const float *p = x + off[t] + c0;
    #pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      __m512 xv = v == V - 1 ? _mm512_maskz_loadu_ps(tail, p + 16 * v) : _mm512_loadu_ps(p + 16 * v);
      acc[v] = _mm512_max_ps(xv, acc[v]); // xv > acc ? xv : acc
      nan |= _mm512_cmp_ps_mask(xv, xv, _CMP_UNORD_Q);
    }
  }
  if (nan) {
    maxTapsScalar(x, off, taps, y, c0, c0 + 16 * (V - 1) + __builtin_popcount(tail));
    return;
  }
  #pragma GCC unroll 4
  for (int v = 0; v < V; ++v) {
    if (v == V - 1) _mm512_mask_storeu_ps(y + c0 + 16 * v, tail, acc[v]);
    else _mm512_storeu_ps(y + c0 + 16 * v, acc[v]);
  }
}

/// Output rows [r0, r1) of n x oh (windowTaps: `rel`, `off`).
NIMBLE_AVX512 void maxPoolRows512(const MaxPool2 &g, const float *xs, float *ys, int64_t r0, int64_t r1,
                                  const int64_t *rel, int64_t *off) {
  const int64_t c = g.c;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / g.oh, oy = r % g.oh;
    const int64_t hs = oy * g.sh - g.ph;
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      const int64_t *offs;
      int64_t base;
      const int64_t taps = windowTaps(g, b, hs, ox * g.sw - g.pw, rel, off, &offs, &base);
      const float *x = xs + base;
      float *y = ys + (r * g.ow + ox) * c;
      int64_t c0 = 0;
      for (; c0 + 64 <= c; c0 += 64) maxTaps512<4>(x, offs, taps, y, c0, 0xFFFF);
      for (; c0 + 16 <= c; c0 += 16) maxTaps512<1>(x, offs, taps, y, c0, 0xFFFF);
      if (c0 < c) maxTaps512<1>(x, offs, taps, y, c0, static_cast<__mmask16>((1u << (c - c0)) - 1));
    }
  }
}

/// V vectors of 8 channels from c0, none partial (the tail goes scalar).
template <int V>
NIMBLE_AVX2 inline void maxTaps256(const float *x, const int64_t *off, int64_t taps, float *y, int64_t c0) {
  __m256 acc[V];
  #pragma GCC unroll 4
  for (int v = 0; v < V; ++v) acc[v] = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 nan = _mm256_setzero_ps();
  for (int64_t t = 0; t < taps; ++t) {
    const float *p = x + off[t] + c0;
    #pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      __m256 xv = _mm256_loadu_ps(p + 8 * v);
      acc[v] = _mm256_max_ps(xv, acc[v]); // xv > acc ? xv : acc
      nan = _mm256_or_ps(nan, _mm256_cmp_ps(xv, xv, _CMP_UNORD_Q));
    }
  }
  if (!_mm256_testz_ps(nan, nan)) {
    maxTapsScalar(x, off, taps, y, c0, c0 + 8 * V);
    return;
  }
  #pragma GCC unroll 4
  for (int v = 0; v < V; ++v) _mm256_storeu_ps(y + c0 + 8 * v, acc[v]);
}

NIMBLE_AVX2 void maxPoolRows256(const MaxPool2 &g, const float *xs, float *ys, int64_t r0, int64_t r1,
                                const int64_t *rel, int64_t *off) {
  const int64_t c = g.c;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / g.oh, oy = r % g.oh;
    const int64_t hs = oy * g.sh - g.ph;
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      const int64_t *offs;
      int64_t base;
      const int64_t taps = windowTaps(g, b, hs, ox * g.sw - g.pw, rel, off, &offs, &base);
      const float *x = xs + base;
      float *y = ys + (r * g.ow + ox) * c;
      int64_t c0 = 0;
      for (; c0 + 32 <= c; c0 += 32) maxTaps256<4>(x, offs, taps, y, c0);
      for (; c0 + 8 <= c; c0 += 8) maxTaps256<1>(x, offs, taps, y, c0);
      if (c0 < c) maxTapsScalar(x, offs, taps, y, c0, c);
    }
  }
}

/// The vectorized channels-last f32 max_pool (see the file comment); false
/// when it does not apply (three spatial axes, a CPU without AVX2).
bool maxPoolLastVector(const KernelArgs &args, const Window &win, const float *xs, float *ys, int64_t n) {
  const KernelIsa isa = kernelIsa();
  if (isa == KernelIsa::kBaseline || win.k < 1 || win.k > 2 || win.inC == 0) return false;
  const size_t a = win.k - 1; // the last spatial axis: W
  MaxPool2 g{};
  g.c = win.inC;
  g.ih = win.k == 2 ? win.in[0] : 1, g.oh = win.k == 2 ? win.out[0] : 1, g.kh = win.k == 2 ? win.taps[0] : 1;
  g.sh = win.k == 2 ? win.st[0] : 1, g.dh = win.k == 2 ? win.dil[0] : 1, g.ph = win.k == 2 ? win.pb[0] : 0;
  g.iw = win.in[a], g.ow = win.out[a], g.kw = win.taps[a], g.sw = win.st[a], g.dw = win.dil[a], g.pw = win.pb[a];
  // An interior window's taps, relative to its first.
  std::vector<int64_t> rel;
  rel.reserve(static_cast<size_t>(win.tapCount));
  for (int64_t th = 0; th < g.kh; ++th)
    for (int64_t tw = 0; tw < g.kw; ++tw) rel.push_back((th * g.dh * g.iw + tw * g.dw) * g.c);
  parallelRange(args, n * g.oh, g.ow * win.tapCount * g.c + 1, [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> off(static_cast<size_t>(win.tapCount));
    if (isa == KernelIsa::kAvx512) maxPoolRows512(g, xs, ys, r0, r1, rel.data(), off.data());
    else maxPoolRows256(g, xs, ys, r0, r1, rel.data(), off.data());
  });
  return true;
}

/// channels_last pooling: one task per (batch, output position), the
/// window's taps in NCHW's order, each applied to the C contiguous channels
/// at once (a loop the compiler vectorizes; the same sums and maxima per
/// element as the plane-wise loop, so the same bits).
template <bool IsMax, class T> void poolLast(const KernelArgs &args, const Window &win, bool includePad, const T *xs,
                                             T *ys, int64_t n) {
  const int64_t c = win.inC;
  parallelRange(args, n * win.outPlane, win.tapCount * c + 1, [&](int64_t p0, int64_t p1) {
    std::vector<T> best(static_cast<size_t>(c));
    std::vector<double> sum(static_cast<size_t>(c));
    std::vector<char> nan(static_cast<size_t>(c));
    int64_t start[limits::kMaxRank], lo[limits::kMaxRank], hi[limits::kMaxRank];
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t bi = p / win.outPlane;
      int64_t rest = p % win.outPlane;
      for (size_t a = win.k; a-- > 0;) {
        win.range(a, rest % win.out[a], start[a], lo[a], hi[a]);
        rest /= win.out[a];
      }
      const T *xb = xs + bi * c * win.inPlane;
      T *yp = ys + p * c;
      if constexpr (IsMax) {
        std::fill(best.begin(), best.end(),
                  kIsFloat<T> ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest());
        std::fill(nan.begin(), nan.end(), 0);
        win.forEachTap(start, lo, hi, [&](int64_t xo, int64_t) {
          const T *xp = xb + xo * c;
          if constexpr (std::is_same_v<T, float>) {
            maxInto(best.data(), xp, c);
            return;
          }
          for (int64_t ch = 0; ch < c; ++ch) {
            T v = xp[ch];
            if constexpr (kIsFloat<T>) nan[ch] |= std::isnan(v);
            best[ch] = v > best[ch] ? v : best[ch];
          }
        });
        for (int64_t ch = 0; ch < c; ++ch) {
          T v = best[ch];
          if constexpr (kIsFloat<T>)
            if (nan[ch] || std::isnan(v)) v = std::numeric_limits<T>::quiet_NaN();
          yp[ch] = v;
        }
      } else {
        std::fill(sum.begin(), sum.end(), 0.0);
        win.forEachTap(start, lo, hi, [&](int64_t xo, int64_t) {
          const T *xp = xb + xo * c;
          for (int64_t ch = 0; ch < c; ++ch) sum[ch] += double(xp[ch]);
        });
        const double count = poolCount(win, includePad, start, lo, hi);
        for (int64_t ch = 0; ch < c; ++ch) yp[ch] = static_cast<T>(sum[ch] / count);
      }
    }
  });
}

template <bool IsMax> Status poolImpl(const KernelArgs &args) {
  constexpr OpCode op = IsMax ? OpCode::MaxPool : OpCode::AvgPool;
  const Tensor &x = *args.inputs[0];
  Tensor &y = *args.outputs[0];
  Window win(args, op, x, y, intsAttr(args, op, "kernel"));
  const bool includePad = !IsMax && boolAttr(args, op, "count_include_pad");
  const int64_t planes = x.dim(0) * win.inC;
  return visitType(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!(kIsFloat<T> || (IsMax && kIsInt<T>))) {
      return Status::error(std::string(opInfo(op).mnemonic) + " has no kernel for " + sig(x));
    } else {
      const T *xs = x.data<T>();
      T *ys = y.data<T>();
      if (win.last) {
        if constexpr (IsMax && std::is_same_v<T, float>)
          if (maxPoolLastVector(args, win, xs, ys, x.dim(0))) return Status::success();
        poolLast<IsMax, T>(args, win, includePad, xs, ys, x.dim(0));
        return Status::success();
      }
      parallelRange(args, planes, win.outPlane * win.tapCount + 1, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const T *xp = xs + p * win.inPlane;
          T *yp = ys + p * win.outPlane;
          win.forEachOutput([&](int64_t i, const int64_t *start, const int64_t *lo, const int64_t *hi) {
            if constexpr (IsMax) {
              T best = kIsFloat<T> ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
              bool nan = false;
              win.forEachTap(start, lo, hi, [&](int64_t xo, int64_t) {
                T v = xp[xo];
                if constexpr (kIsFloat<T>) nan |= std::isnan(v);
                if (v > best) best = v;
              });
              if constexpr (kIsFloat<T>)
                if (nan) best = std::numeric_limits<T>::quiet_NaN();
              yp[i] = best;
            } else {
              double sum = 0;
              win.forEachTap(start, lo, hi, [&](int64_t xo, int64_t) { sum += double(xp[xo]); });
              yp[i] = static_cast<T>(sum / poolCount(win, includePad, start, lo, hi));
            }
          });
        }
      });
      return Status::success();
    }
  });
}

} // namespace

Status refConv(const KernelArgs &args) {
  checkOutputShapes(OpCode::Conv, args);
  return withF32(args, &convImpl);
}

Status refConvTranspose(const KernelArgs &args) {
  checkOutputShapes(OpCode::ConvTranspose, args);
  return withF32(args, &convTransposeImpl);
}

Status refMaxPool(const KernelArgs &args) {
  checkOutputShapes(OpCode::MaxPool, args);
  return withF32(args, &poolImpl<true>);
}

Status refAvgPool(const KernelArgs &args) {
  checkOutputShapes(OpCode::AvgPool, args);
  return withF32(args, &poolImpl<false>);
}

} // namespace nimble::vm::kernels
