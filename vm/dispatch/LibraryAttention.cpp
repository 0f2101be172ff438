//===- LibraryAttention.cpp - The runtime's fused attention kernel --------===//
//
// See LibraryAttention.h for the design. The AVX-512 and AVX2 functions
// carry target attributes (the runtime is built for the baseline x86-64) and
// run only when kernelIsa() (vm/kernels/KernelUtil.h: the CPU's features,
// capped by NIMBLE_KERNEL_ISA) names their instruction set.
//
//===----------------------------------------------------------------------===//

#include "vm/dispatch/LibraryAttention.h"

#include "vm/Object.h"
#include "vm/kernels/KernelUtil.h"
#include "vm/support/ThreadPool.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which
// -Wmaybe-uninitialized reports inside every inlined intrinsic (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__) // clang has no such warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace nimble::vm {

namespace {

constexpr int kRows = 8;   // query rows per tile (16 accumulators)
constexpr int kLanes = 16; // f32 per zmm

struct Problem {
  const float *q, *k, *v, *mask;
  float *out;
  int64_t m, heads, d, n, e;
  int64_t maskStride[3]; // over [H, m, n], 0 along broadcast axes
  float scale;
};

#define NIMBLE_AVX512 __attribute__((target("avx512f")))
// The tiles' accumulators stay in registers only when the loops over the
// tile's rows are unrolled (`#pragma GCC unroll`): otherwise GCC keeps them
// in an array on the stack, a load and a store around every FMA (measured:
// 1.6x slower at 128 tokens).

/// exp of 16 lanes: Cephes expf's reduction and polynomial (as the native
/// kernels' inline exp, codegen/llvm/MathApprox.cpp), 2^n by scalef (which
/// gives 0 below the subnormals and keeps NaN).
NIMBLE_AVX512 inline __m512 exp16(__m512 x) {
  // max/min return their second operand when one is NaN: NaN stays NaN.
  x = _mm512_min_ps(_mm512_set1_ps(88.7228f), x);
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(y, fx);
}

NIMBLE_AVX512 inline __mmask16 tailMask(int64_t left) {
  return left >= kLanes ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
}

/// k's head h, transposed: kt[t * npad + j] = k[j, h, t], and zero columns
/// from n to npad (the tiles' width) so the score tiles load without masks.
void transposeKeys(const Problem &p, int64_t h, int64_t npad, float *kt) {
  const int64_t n = p.n, d = p.d, qStride = p.heads * d;
  for (int64_t j = 0; j < n; ++j) {
    const float *kj = p.k + j * qStride + h * d;
    for (int64_t t = 0; t < d; ++t) kt[t * npad + j] = kj[t];
  }
  for (int64_t t = 0; t < d; ++t)
    for (int64_t j = n; j < npad; ++j) kt[t * npad + j] = 0.0f;
}

/// One head, in three passes over all its query rows (each pass keeps its
/// operand hot: the panel of 32 keys in pass 1, a 32-column slice of v's
/// head in pass 3). `kt` holds d x npad floats, `s` m x npad.
NIMBLE_AVX512 void attentionHead(const Problem &p, int64_t h, float *kt, float *s, float * /*vp*/) {
  const int64_t m = p.m, n = p.n, d = p.d, e = p.e, npad = (n + 2 * kLanes - 1) / (2 * kLanes) * (2 * kLanes);
  const int64_t qStride = p.heads * d, vStride = p.heads * e;
  transposeKeys(p, h, npad, kt); // npad: a multiple of 32, no masks in pass 1

  // 1. Scores: tiles of kRows rows by 32 keys, accumulated over d in order.
  const __m512 sc = _mm512_set1_ps(p.scale);
  for (int64_t j0 = 0; j0 < npad; j0 += 2 * kLanes)
    for (int64_t i0 = 0; i0 < m; i0 += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, m - i0));
      const float *q[kRows];
      #pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) q[r] = p.q + (i0 + std::min(r, rows - 1)) * qStride + h * d;
      __m512 acc[kRows][2];
      #pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
      const float *col = kt + j0;
      for (int64_t t = 0; t < d; ++t, col += npad) {
        __m512 k0 = _mm512_loadu_ps(col), k1 = _mm512_loadu_ps(col + kLanes);
        #pragma GCC unroll 8
        for (int r = 0; r < kRows; ++r) {
          __m512 qv = _mm512_set1_ps(q[r][t]);
          acc[r][0] = _mm512_fmadd_ps(qv, k0, acc[r][0]);
          acc[r][1] = _mm512_fmadd_ps(qv, k1, acc[r][1]);
        }
      }
      #pragma GCC unroll 8
      for (int r = 0; r < rows; ++r) {
        _mm512_storeu_ps(s + (i0 + r) * npad + j0, _mm512_mul_ps(acc[r][0], sc));
        _mm512_storeu_ps(s + (i0 + r) * npad + j0 + kLanes, _mm512_mul_ps(acc[r][1], sc));
      }
    }

  // 2. Softmax per row (the mask added first), normalised in place: the
  // padding columns become 0.
  for (int64_t i = 0; i < m; ++i) {
    float *sr = s + i * npad;
    if (p.mask) {
      const float *mr = p.mask + h * p.maskStride[0] + i * p.maskStride[1];
      if (p.maskStride[2] == 1) {
        for (int64_t j = 0; j < n; j += kLanes) {
          __mmask16 mk = tailMask(n - j);
          _mm512_mask_storeu_ps(sr + j, mk, _mm512_add_ps(_mm512_maskz_loadu_ps(mk, sr + j),
                                                          _mm512_maskz_loadu_ps(mk, mr + j)));
        }
      } else {
        for (int64_t j = 0; j < n; ++j) sr[j] += mr[j * p.maskStride[2]];
      }
    }
    __m512 mx = _mm512_set1_ps(-INFINITY);
    __mmask16 nan = 0;
    for (int64_t j = 0; j < n; j += kLanes) {
      __mmask16 mk = tailMask(n - j);
      __m512 x = _mm512_loadu_ps(sr + j);
      nan |= _mm512_mask_cmp_ps_mask(mk, x, x, _CMP_UNORD_Q);
      mx = _mm512_mask_max_ps(mx, mk, mx, x);
    }
    // A NaN score makes the row NaN, as the reference's max and exp do.
    __m512 vmax = nan ? _mm512_set1_ps(NAN) : _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < npad; j += kLanes) {
      __m512 ex = _mm512_maskz_mov_ps(tailMask(n - j), exp16(_mm512_sub_ps(_mm512_loadu_ps(sr + j), vmax)));
      _mm512_storeu_ps(sr + j, ex);
      sum = _mm512_add_ps(sum, ex);
    }
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (int64_t j = 0; j < npad; j += kLanes) _mm512_storeu_ps(sr + j, _mm512_mul_ps(_mm512_loadu_ps(sr + j), inv));
  }

  // 3. p . v: kRows rows by 32 columns of E per pass over the keys.
  for (int64_t e0 = 0; e0 < e; e0 += 2 * kLanes) {
    const __mmask16 m0 = tailMask(e - e0), m1 = e - e0 > kLanes ? tailMask(e - e0 - kLanes) : __mmask16(0);
    for (int64_t i0 = 0; i0 < m; i0 += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, m - i0));
      const float *pr[kRows];
      #pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) pr[r] = s + (i0 + std::min(r, rows - 1)) * npad;
      __m512 acc[kRows][2];
      #pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
      const float *vj = p.v + h * e + e0;
      for (int64_t j = 0; j < n; ++j, vj += vStride) {
        __m512 v0 = _mm512_maskz_loadu_ps(m0, vj), v1 = _mm512_maskz_loadu_ps(m1, vj + kLanes);
        #pragma GCC unroll 8
        for (int r = 0; r < kRows; ++r) {
          __m512 w = _mm512_set1_ps(pr[r][j]);
          acc[r][0] = _mm512_fmadd_ps(w, v0, acc[r][0]);
          acc[r][1] = _mm512_fmadd_ps(w, v1, acc[r][1]);
        }
      }
      #pragma GCC unroll 8
      for (int r = 0; r < rows; ++r) {
        float *o = p.out + (i0 + r) * vStride + h * e + e0;
        _mm512_mask_storeu_ps(o, m0, acc[r][0]);
        _mm512_mask_storeu_ps(o + kLanes, m1, acc[r][1]);
      }
    }
  }
}

// ---- AVX2 + FMA (Zen 2/3, Haswell to Alder Lake): the same three passes in
// 8-lane vectors. 16 registers hold a tile of 6 query rows by 16 keys (12
// accumulators, two loads, one broadcast); rows are padded to 16 columns.
// Issue 52, AMD EPYC Zen 3: without it BERT-base's attention ran on the
// reference kernel, 40% of a 128-token sequence.

constexpr int kRows2 = 6;  // query rows per tile (12 accumulators)
constexpr int kLanes2 = 8; // f32 per ymm

#define NIMBLE_AVX2 __attribute__((target("avx2,fma")))

/// exp of 8 lanes: exp16's reduction and polynomial; 2^n, n in [-150, 128],
/// as two factors 2^(n>>1) 2^(n - (n>>1)), each a normal float (AVX2 has no
/// scalef): below the normals the product rounds as scalef does, to 0 at
/// -104 and under; NaN stays NaN (it is y's).
NIMBLE_AVX2 inline __m256 exp8(__m256 x) {
  // min/max return their second operand when one is NaN: NaN stays NaN.
  x = _mm256_min_ps(_mm256_set1_ps(88.7228f), x);
  x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);
  __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  __m256i n = _mm256_cvtps_epi32(fx);
  __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(y, p1), p2);
}

/// Lanes l < left (all for left >= 8, none for left <= 0), as a maskload mask.
NIMBLE_AVX2 inline __m256i tailMask8(int64_t left) {
  const int32_t l = static_cast<int32_t>(std::clamp<int64_t>(left, 0, kLanes2));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(l), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

NIMBLE_AVX2 inline float reduceMax8(__m256 v) {
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  x = _mm_max_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}

NIMBLE_AVX2 inline float reduceAdd8(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}

/// v's head h in strips of 16 columns, each n x 16 contiguous (zero columns
/// past e): vp[(c / 16) * n * 16 + j * 16 + c % 16] = v[j, h, c]. Read in
/// place, a strip's rows lie H x E floats apart (3 KiB in BERT-base), which
/// puts all of them in 4 of L1's 64 sets; the tiles of pass 3 then reread v
/// from L2 (AMD EPYC, Zen 1: pass 3 2.2 -> 0.8 ms for BERT-base's 12 heads
/// at 128 tokens, packing included).
NIMBLE_AVX2 void packValues(const Problem &p, int64_t h, float *vp) {
  const int64_t n = p.n, e = p.e, strips = (e + 2 * kLanes2 - 1) / (2 * kLanes2), vStride = p.heads * e;
  for (int64_t j = 0; j < n; ++j) {
    const float *vr = p.v + j * vStride + h * e;
    for (int64_t st = 0; st < strips; ++st) {
      const int64_t c = st * 2 * kLanes2;
      float *dst = vp + (st * n + j) * 2 * kLanes2;
      _mm256_storeu_ps(dst, _mm256_maskload_ps(vr + c, tailMask8(e - c)));
      _mm256_storeu_ps(dst + kLanes2, _mm256_maskload_ps(vr + c + kLanes2, tailMask8(e - c - kLanes2)));
    }
  }
}

/// attentionHead in AVX2: `kt` holds d x npad floats, `s` m x npad, npad a
/// multiple of 16; `vp` n x e floats, e rounded up to 16 (packValues).
NIMBLE_AVX2 void attentionHeadAvx2(const Problem &p, int64_t h, float *kt, float *s, float *vp) {
  const int64_t m = p.m, n = p.n, d = p.d, e = p.e, npad = (n + 2 * kLanes2 - 1) / (2 * kLanes2) * (2 * kLanes2);
  const int64_t qStride = p.heads * d, vStride = p.heads * e;
  transposeKeys(p, h, npad, kt); // npad: a multiple of 16

  // 1. Scores: tiles of kRows2 rows by 16 keys, accumulated over d in order.
  const __m256 sc = _mm256_set1_ps(p.scale);
  for (int64_t j0 = 0; j0 < npad; j0 += 2 * kLanes2)
    for (int64_t i0 = 0; i0 < m; i0 += kRows2) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows2, m - i0));
      const float *q[kRows2];
      #pragma GCC unroll 6
      for (int r = 0; r < kRows2; ++r) q[r] = p.q + (i0 + std::min(r, rows - 1)) * qStride + h * d;
      __m256 acc[kRows2][2];
      #pragma GCC unroll 6
      for (int r = 0; r < kRows2; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
      const float *col = kt + j0;
      for (int64_t t = 0; t < d; ++t, col += npad) {
        __m256 k0 = _mm256_loadu_ps(col), k1 = _mm256_loadu_ps(col + kLanes2);
        #pragma GCC unroll 6
        for (int r = 0; r < kRows2; ++r) {
          __m256 qv = _mm256_broadcast_ss(q[r] + t);
          acc[r][0] = _mm256_fmadd_ps(qv, k0, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(qv, k1, acc[r][1]);
        }
      }
      #pragma GCC unroll 6
      for (int r = 0; r < rows; ++r) {
        _mm256_storeu_ps(s + (i0 + r) * npad + j0, _mm256_mul_ps(acc[r][0], sc));
        _mm256_storeu_ps(s + (i0 + r) * npad + j0 + kLanes2, _mm256_mul_ps(acc[r][1], sc));
      }
    }

  // 2. Softmax per row (the mask added first), normalised in place: the
  // padding columns become 0.
  for (int64_t i = 0; i < m; ++i) {
    float *sr = s + i * npad;
    if (p.mask) {
      const float *mr = p.mask + h * p.maskStride[0] + i * p.maskStride[1];
      if (p.maskStride[2] == 1) {
        int64_t j = 0;
        for (; j + kLanes2 <= n; j += kLanes2)
          _mm256_storeu_ps(sr + j, _mm256_add_ps(_mm256_loadu_ps(sr + j), _mm256_loadu_ps(mr + j)));
        for (; j < n; ++j) sr[j] += mr[j];
      } else {
        for (int64_t j = 0; j < n; ++j) sr[j] += mr[j * p.maskStride[2]];
      }
    }
    __m256 mx = _mm256_set1_ps(-INFINITY);
    int nan = 0;
    for (int64_t j = 0; j < n; j += kLanes2) {
      __m256 valid = _mm256_castsi256_ps(tailMask8(n - j));
      __m256 x = _mm256_loadu_ps(sr + j); // columns up to npad hold finite zeros
      nan |= _mm256_movemask_ps(_mm256_and_ps(valid, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
      mx = _mm256_max_ps(mx, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), x, valid));
    }
    // A NaN score makes the row NaN, as the reference's max and exp do.
    __m256 vmax = nan ? _mm256_set1_ps(NAN) : _mm256_set1_ps(reduceMax8(mx));
    __m256 sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < npad; j += kLanes2) {
      __m256 ex = _mm256_and_ps(_mm256_castsi256_ps(tailMask8(n - j)),
                                exp8(_mm256_sub_ps(_mm256_loadu_ps(sr + j), vmax)));
      _mm256_storeu_ps(sr + j, ex);
      sum = _mm256_add_ps(sum, ex);
    }
    __m256 inv = _mm256_set1_ps(1.0f / reduceAdd8(sum));
    for (int64_t j = 0; j < npad; j += kLanes2) _mm256_storeu_ps(sr + j, _mm256_mul_ps(_mm256_loadu_ps(sr + j), inv));
  }

  // 3. p . v: kRows2 rows by 16 columns of E per pass over the keys, v's
  // head packed in strips of 16 columns first (packValues).
  packValues(p, h, vp);
  for (int64_t e0 = 0; e0 < e; e0 += 2 * kLanes2) {
    const __m256i m0 = tailMask8(e - e0), m1 = tailMask8(e - e0 - kLanes2);
    const float *strip = vp + e0 * n; // n x 16
    for (int64_t i0 = 0; i0 < m; i0 += kRows2) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows2, m - i0));
      const float *pr[kRows2];
      #pragma GCC unroll 6
      for (int r = 0; r < kRows2; ++r) pr[r] = s + (i0 + std::min(r, rows - 1)) * npad;
      __m256 acc[kRows2][2];
      #pragma GCC unroll 6
      for (int r = 0; r < kRows2; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
      const float *vj = strip;
      for (int64_t j = 0; j < n; ++j, vj += 2 * kLanes2) {
        __m256 v0 = _mm256_loadu_ps(vj), v1 = _mm256_loadu_ps(vj + kLanes2);
        #pragma GCC unroll 6
        for (int r = 0; r < kRows2; ++r) {
          __m256 w = _mm256_broadcast_ss(pr[r] + j);
          acc[r][0] = _mm256_fmadd_ps(w, v0, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(w, v1, acc[r][1]);
        }
      }
      // Whole strips without masks (a masked store is many micro-ops on
      // AMD's cores).
      if (e - e0 >= 2 * kLanes2) {
        #pragma GCC unroll 6
        for (int r = 0; r < rows; ++r) {
          float *o = p.out + (i0 + r) * vStride + h * e + e0;
          _mm256_storeu_ps(o, acc[r][0]);
          _mm256_storeu_ps(o + kLanes2, acc[r][1]);
        }
      } else {
        #pragma GCC unroll 6
        for (int r = 0; r < rows; ++r) {
          float *o = p.out + (i0 + r) * vStride + h * e + e0;
          _mm256_maskstore_ps(o, m0, acc[r][0]);
          _mm256_maskstore_ps(o + kLanes2, m1, acc[r][1]);
        }
      }
    }
  }
}


} // namespace

AttentionKernels::AttentionKernels(const Executable &exe) : exe_(&exe), ok_(exe.kernels.size(), false) {
  for (size_t i = 0; i < exe.kernels.size(); ++i) {
    const KernelDesc &k = exe.kernels[i];
    if (k.members.size() != 1 || k.outputs.size() != 1 || k.upperBound) continue;
    const KernelDesc::Member &m = k.members[0];
    if (m.op != OpCode::Attention || m.numResults != 1 || m.operands.size() < 3 || m.attrs.size() != 1) continue;
    bool inputs = true;
    for (uint32_t v : m.operands)
      inputs &= v < k.numInputs && v < k.inputDTypes.size() && k.inputDTypes[v] == DType::F32;
    ok_[i] = inputs && k.outputs[0] == k.numInputs;
  }
}

size_t AttentionKernels::count() const { return static_cast<size_t>(std::count(ok_.begin(), ok_.end(), true)); }

Status AttentionKernels::run(uint32_t k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs,
                             ThreadPool *pool, bool *declined) {
  *declined = true;
  using kernels::KernelIsa;
  const KernelIsa isa = kernels::kernelIsa(); // AVX-512F, AVX2 + FMA, or decline
  if (!supports(k) || isa == KernelIsa::kBaseline || outs.size() != 1) return Status::success();
  const KernelDesc::Member &mem = exe_->kernels[k].members[0];
  const Tensor *t[4] = {nullptr, nullptr, nullptr, nullptr};
  for (size_t i = 0; i < mem.operands.size(); ++i) {
    if (mem.operands[i] >= ins.size()) return Status::success();
    t[i] = ins[mem.operands[i]];
    if (t[i]->dtype() != DType::F32) return Status::success();
  }
  Tensor *out = outs[0];
  // The shape checks are the reference path's to word: anything unexpected
  // declines.
  if (t[0]->rank() != 3 || t[1]->rank() != 3 || t[2]->rank() != 3 || out->rank() != 3 ||
      out->dtype() != DType::F32 || out->storage()->readOnly())
    return Status::success();
  Problem p{};
  p.m = t[0]->dim(0), p.heads = t[0]->dim(1), p.d = t[0]->dim(2);
  p.n = t[1]->dim(0), p.e = t[2]->dim(2);
  if (t[1]->dim(1) != p.heads || t[2]->dim(1) != p.heads || t[1]->dim(2) != p.d || t[2]->dim(0) != p.n ||
      out->dim(0) != p.m || out->dim(1) != p.heads || out->dim(2) != p.e)
    return Status::success();
  if (p.m == 0 || p.heads == 0 || p.d == 0 || p.n == 0 || p.e == 0) return Status::success();
  if (t[3]) {
    const std::vector<int64_t> &ms = t[3]->shape();
    const int64_t target[3] = {p.heads, p.m, p.n};
    if (ms.size() > 3) return Status::success();
    int64_t stride = 1;
    for (int a = 2; a >= 0; --a) {
      int64_t i = a - (3 - static_cast<int64_t>(ms.size()));
      int64_t size = i >= 0 ? ms[static_cast<size_t>(i)] : 1;
      if (size != 1 && size != target[a]) return Status::success();
      p.maskStride[a] = size == 1 ? 0 : stride;
      stride *= size;
    }
    p.mask = t[3]->data<float>();
  }
  p.q = t[0]->data<float>(), p.k = t[1]->data<float>(), p.v = t[2]->data<float>();
  p.out = out->data<float>();
  p.scale = static_cast<float>(mem.attrs[0].getFloat());
  *declined = false;
  // Score rows padded to the tiles' width: 32 columns (AVX-512), 16 (AVX2).
  const int64_t width = isa == KernelIsa::kAvx512 ? 2 * kLanes : 2 * kLanes2;
  const int64_t npad = (p.n + width - 1) / width * width;
  auto head = isa == KernelIsa::kAvx512 ? attentionHead : attentionHeadAvx2;
  // v's head in strips of 16 columns (AVX2's packValues; the AVX-512 head
  // reads v in place).
  const int64_t vFloats = isa == KernelIsa::kAvx512 ? 0 : (p.e + 2 * kLanes2 - 1) / (2 * kLanes2) * 2 * kLanes2 * p.n;
  auto heads = [&](int64_t b, int64_t end) {
    // Per thread: the panel, the score rows and the packed values (grown,
    // never shrunk).
    thread_local std::vector<float> scratch;
    size_t need = static_cast<size_t>((p.d + p.m) * npad + vFloats);
    if (scratch.size() < need) scratch.resize(need);
    float *kt = scratch.data(), *s = kt + p.d * npad, *vp = s + p.m * npad;
    for (int64_t h = b; h < end; ++h) head(p, h, kt, s, vp);
  };
  // A head is about 2 m n (d + e) flops; below ~64K of them a second thread
  // costs more to wake than it saves.
  double work = 2.0 * double(p.m) * double(p.n) * double(p.d + p.e);
  if (pool && pool->size() > 1 && p.heads > 1 && work >= 65536.0) pool->parallelFor(p.heads, 1, heads);
  else heads(0, p.heads);
  return Status::success();
}

} // namespace nimble::vm
