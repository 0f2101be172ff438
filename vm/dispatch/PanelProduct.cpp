//===- PanelProduct.cpp - Few-row products over streamed weight panels ----===//
//
// See PanelProduct.h. The AVX-512 and AVX2 functions carry target
// attributes (the runtime is built for the baseline x86-64) and run only
// when the CPU reports AVX-512F, or AVX2 and FMA.
//
//===----------------------------------------------------------------------===//

#include "vm/dispatch/PanelProduct.h"
#include "vm/kernels/KernelUtil.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which
// -Wmaybe-uninitialized reports inside every inlined intrinsic (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__) // clang has no such warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace nimble::vm::panel {

namespace {

#define NIMBLE_AVX512 __attribute__((target("avx512f")))
#define NIMBLE_AVX2 __attribute__((target("avx2,fma")))

/// The lanes of the output's 16-column group `g` of a panel with `cols`
/// valid columns, as a store mask.
inline __mmask16 laneMask(int64_t cols, int g) {
  const int64_t lanes = std::clamp<int64_t>(cols - 16 * g, 0, 16);
  return static_cast<__mmask16>((1u << lanes) - 1u);
}

/// What a tile prefetches into L2 while it computes: its share of the next
/// block of the weight (PanelProduct.h, "Ahead"), as two streams `stride`
/// bytes apart, `perStep` bytes of each (whole lines) at each of its first
/// `steps` k's. steps = 0: nothing.
struct Ahead {
  const char *from = nullptr;
  int64_t stride = 0, perStep = 0, steps = 0;
};

/// R rows (R <= 8) of x times one panel: y's `cols` columns of these rows.
/// The accumulators stay in registers only with the loops over rows and
/// register groups unrolled (`#pragma GCC unroll`; GCC at -O2 keeps them in
/// an array on the stack otherwise, a load and a store around every FMA:
/// 40 against 115 GFLOP/s hot).
/// With `more`, the sums continue from y's values (a later block of k's):
/// the same additions in the same order as one pass, since y holds the f32
/// partial sums exactly.
template <int R>
NIMBLE_AVX512 void tile(const float *x, int64_t ldx, int64_t k, const float *panel, float *y, int64_t ldy,
                        int64_t cols, bool more, const Ahead &ahead) {
  __m512 acc[R][4];
  if (!more) {
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
    }
  } else {
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_maskz_loadu_ps(laneMask(cols, j), y + i * ldy + 16 * j);
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    const float *w = panel + kk * kWidth;
    if (kk < ahead.steps) {
      const char *a0 = ahead.from + kk * ahead.perStep, *a1 = a0 + ahead.stride;
      for (int64_t l = 0; l < ahead.perStep; l += 64) {
        _mm_prefetch(a0 + l, _MM_HINT_T1);
        _mm_prefetch(a1 + l, _MM_HINT_T1);
      }
    }
    const __m512 b0 = _mm512_loadu_ps(w), b1 = _mm512_loadu_ps(w + 16), b2 = _mm512_loadu_ps(w + 32),
                 b3 = _mm512_loadu_ps(w + 48);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m512 a = _mm512_set1_ps(x[i * ldx + kk]);
      acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
      acc[i][2] = _mm512_fmadd_ps(a, b2, acc[i][2]);
      acc[i][3] = _mm512_fmadd_ps(a, b3, acc[i][3]);
    }
  }
  if (cols == kWidth) {
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) _mm512_storeu_ps(y + i * ldy + 16 * j, acc[i][j]);
    }
    return;
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < 4; ++j) _mm512_mask_storeu_ps(y + i * ldy + 16 * j, laneMask(cols, j), acc[i][j]);
}

using TileFn = void (*)(const float *, int64_t, int64_t, const float *, float *, int64_t, int64_t, bool,
                        const Ahead &);
constexpr int64_t kBlock = 1024; // k's a block when the rows take several tiles
constexpr TileFn kTiles[9] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>, tile<7>, tile<8>};

constexpr int64_t kAhead2 = 1024; // floats (4 KiB, 64 k's) the AVX2 tile prefetches ahead

/// The AVX2 tile (PanelProduct.h, "AVX2"): R rows (R <= 6) of x times one
/// 16-column panel, 2R ymm accumulators; `cols` of the panel's columns are
/// y's. With `more`, the sums continue from y's values, as tile<R> does.
template <int R>
NIMBLE_AVX2 void tile2(const float *x, int64_t ldx, int64_t k, const float *panel, float *y, int64_t ldy,
                       int64_t cols, bool more) {
  // Lanes of the two ymm halves that are y's columns (maskload/maskstore
  // take the sign bit of each 32-bit lane).
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(cols, 8))), lane);
  const __m256i m1 =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<int64_t>(cols - 8, 0, 8))), lane);
  __m256 acc[R][2];
  if (!more) {
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  } else {
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      acc[i][0] = _mm256_maskload_ps(y + i * ldy, m0);
      acc[i][1] = _mm256_maskload_ps(y + i * ldy + 8, m1);
    }
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    const float *w = panel + kk * kWidth2;
    const __m256 b0 = _mm256_loadu_ps(w), b1 = _mm256_loadu_ps(w + 8);
    // The panel (and past its end the next one) kAhead2 floats ahead: a
    // prefetch changes no result ("AVX2" in PanelProduct.h).
    _mm_prefetch(reinterpret_cast<const char *>(w + kAhead2), _MM_HINT_T0);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m256 a = _mm256_broadcast_ss(x + i * ldx + kk);
      acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
    }
  }
  if (cols == kWidth2) {
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      _mm256_storeu_ps(y + i * ldy, acc[i][0]);
      _mm256_storeu_ps(y + i * ldy + 8, acc[i][1]);
    }
    return;
  }
  // Unrolled too: a loop over i here would make acc an array in memory, a
  // store to the stack after every FMA of the loop above.
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    _mm256_maskstore_ps(y + i * ldy, m0, acc[i][0]);
    _mm256_maskstore_ps(y + i * ldy + 8, m1, acc[i][1]);
  }
}

using Tile2Fn = void (*)(const float *, int64_t, int64_t, const float *, float *, int64_t, int64_t, bool);
constexpr int64_t kBlock2 = 512; // k's a block of the AVX2 path: 32 KiB of a panel
constexpr Tile2Fn kTiles2[7] = {nullptr, tile2<1>, tile2<2>, tile2<3>, tile2<4>, tile2<5>, tile2<6>};

/// multiply() on AVX2: each panel in blocks of kBlock2 k's, every tile of
/// 6 rows over a block before the next (the block stays in L1 and L2).
void multiply2(const float *x, int64_t m, int64_t k, int64_t n, const float *packed, float *y, int64_t p0,
               int64_t p1) {
  const int64_t block = m > 6 ? kBlock2 : k, kp = paddedRows(k);
  for (int64_t p = p0; p < p1; ++p) {
    const float *panel = packed + p * kp * kWidth2;
    const int64_t c0 = p * kWidth2, cols = std::min(kWidth2, n - c0);
    for (int64_t k0 = 0; k0 < k; k0 += block) {
      const int64_t kb = std::min(block, k - k0);
      for (int64_t r = 0; r < m; r += 6)
        kTiles2[std::min<int64_t>(6, m - r)](x + r * k + k0, k, kb, panel + k0 * kWidth2, y + r * n + c0, n, cols,
                                             k0 > 0);
    }
  }
}

} // namespace

// By kernels::kernelIsa(): the CPU's features, capped by NIMBLE_KERNEL_ISA
// (avx2: the AVX2 path on an AVX-512 CPU, as library-panels-avx2.test runs
// it; sse2: no panel path, oneDNN).
bool wide() { return kernels::kernelIsa() == kernels::KernelIsa::kAvx512; }

bool supported() { return kernels::kernelIsa() >= kernels::KernelIsa::kAvx2; }

int64_t width() { return wide() ? kWidth : kWidth2; }

bool takesRows(int64_t m, int64_t threads) {
  if (m < 1) return false;
  if (!wide()) return true;
  return m <= kMaxRows || (m <= kMaxSplitRows && threads >= 2 && threads % 2 == 0);
}

namespace {

/// NIMBLE_PANEL_PRODUCT: "0", "1", or null (unset; any other value reads as unset).
const char *panelSwitch() {
  const char *env = std::getenv("NIMBLE_PANEL_PRODUCT");
  return env && (std::strcmp(env, "0") == 0 || std::strcmp(env, "1") == 0) ? env : nullptr;
}

bool amd() { return __builtin_cpu_is("amd") != 0; }

} // namespace

bool enabled() {
  static const bool yes = [] {
    const char *env = panelSwitch();
    return supported() && !(env && *env == '0');
  }();
  return yes;
}

bool sharedLayout() { return enabled() && wide(); }

bool oneRow() {
  static const bool yes = [] {
    const char *env = panelSwitch();
    return enabled() && wide() && ((env && *env == '1') || amd()); // "Which CPUs" in PanelProduct.h
  }();
  return yes;
}

bool ahead() {
  static const bool yes = [] {
    const char *env = std::getenv("NIMBLE_PANEL_AHEAD");
    if (env && (std::strcmp(env, "0") == 0 || std::strcmp(env, "1") == 0)) return *env == '1';
    return !amd(); // "Ahead" in PanelProduct.h: measured on an Intel Xeon, not on AMD's
  }();
  return yes;
}

void pack(const float *w, int64_t k, int64_t n, bool transposed, float *to) {
  const int64_t kp = paddedRows(k), pw = width();
  for (int64_t p = 0; p < panels(n); ++p) {
    float *panel = to + p * kp * pw;
    const int64_t c0 = p * pw, cols = std::min(pw, n - c0);
    for (int64_t kk = 0; kk < k; ++kk) {
      float *row = panel + kk * pw;
      if (!transposed) std::memcpy(row, w + kk * n + c0, static_cast<size_t>(cols) * sizeof(float));
      std::fill(row + cols, row + pw, 0.0f);
    }
    std::fill(panel + k * pw, panel + kp * pw, 0.0f);
    if (!transposed) continue;
    // W^T: blocks of 16 k's, so each of W's rows is read 64 bytes at a time.
    for (int64_t k0 = 0; k0 < k; k0 += 16) {
      const int64_t k1 = std::min(k, k0 + 16);
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t kk = k0; kk < k1; ++kk) panel[kk * pw + c] = w[(c0 + c) * k + kk];
    }
  }
}

void multiply(const float *x, int64_t m, int64_t k, int64_t n, const float *packed, float *y, int64_t p0,
              int64_t p1, int64_t then) {
  if (!wide()) return multiply2(x, m, k, n, packed, y, p0, p1);
  // Past one tile of rows, the k's go in blocks of kBlock, every tile of
  // rows over a block before the next: the block of the panel (256 KiB)
  // stays in L2 for the later tiles instead of a whole long panel (K past
  // 4096: more than 1 MiB) being read again from memory.
  const int64_t block = m > 8 ? kBlock : k, kp = paddedRows(k);
  const int64_t tiles = (m + 7) / 8;
  const bool prefetch = m > 1 && ahead(); // one row: its weight is usually in L2 and L3 ("Ahead")
  for (int64_t p = p0; p < p1; ++p) {
    const float *panel = packed + p * kp * kWidth;
    const int64_t c0 = p * kWidth, cols = std::min(kWidth, n - c0);
    for (int64_t k0 = 0; k0 < k; k0 += block) {
      const int64_t kb = std::min(block, k - k0);
      // The block that comes next (the next k's of this panel, or the first
      // ones of the next panel: p + 1 in the run, then `then`), whose lines
      // the tiles of this block prefetch between them.
      const float *next = nullptr;
      int64_t nextRows = 0;
      if (k0 + kb < k) {
        next = panel + (k0 + kb) * kWidth;
        nextRows = std::min(block, k - k0 - kb);
      } else if (p + 1 < p1 || then >= 0) {
        next = packed + (p + 1 < p1 ? p + 1 : then) * kp * kWidth;
        nextRows = std::min(block, k);
      }
      const int64_t nextBytes = prefetch && next ? nextRows * kWidth * static_cast<int64_t>(sizeof(float)) : 0;
      for (int64_t r = 0; r < m; r += 8) {
        const int64_t rows = std::min<int64_t>(8, m - r);
        Ahead share;
        if (nextBytes > 0) {
          // This tile's share of the next block's two halves: `lines` lines
          // of each, from line t * lines on, a line or more a k.
          const int64_t half = nextBytes / 2, lines = (half / 64 + tiles - 1) / tiles, first = (r / 8) * lines * 64;
          share.from = reinterpret_cast<const char *>(next) + first;
          share.stride = half;
          share.perStep = (lines + kb - 1) / kb * 64;
          const int64_t mine = std::min(lines * 64, half - first);
          share.steps = mine > 0 ? (mine + share.perStep - 1) / share.perStep : 0;
        }
        kTiles[rows](x + r * k + k0, k, kb, panel + k0 * kWidth, y + r * n + c0, n, cols, k0 > 0, share);
      }
    }
  }
}

namespace {

/// maximum / minimum of (first, second) as the reference kernel computes
/// them: NaN if either is (first's if first is), else max: first < second ?
/// second : first, min: second < first ? second : first.
template <bool IsMax>
NIMBLE_AVX512 inline __attribute__((always_inline)) __m512 maxMin(__m512 first, __m512 second) {
  const __mmask16 takeSecond = IsMax ? _mm512_cmp_ps_mask(first, second, _CMP_LT_OQ)
                                     : _mm512_cmp_ps_mask(second, first, _CMP_LT_OQ);
  __m512 r = _mm512_mask_blend_ps(takeSecond, first, second);
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(second, second, _CMP_UNORD_Q), r, second);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(first, first, _CMP_UNORD_Q), r, first);
}

template <Binary Op>
NIMBLE_AVX512 inline __attribute__((always_inline)) __m512 binary(__m512 a, __m512 v) {
  if constexpr (Op == Binary::Add) return _mm512_add_ps(a, v);
  if constexpr (Op == Binary::Mul) return _mm512_mul_ps(a, v);
  if constexpr (Op == Binary::Sub) return _mm512_sub_ps(a, v);
  if constexpr (Op == Binary::Div) return _mm512_div_ps(a, v);
  if constexpr (Op == Binary::Max) return maxMin<true>(a, v);
  if constexpr (Op == Binary::Min) return maxMin<false>(a, v);
  if constexpr (Op == Binary::RMax) return maxMin<true>(v, a);
  return maxMin<false>(v, a);
}

template <Binary Op>
NIMBLE_AVX512 void applyRows(float *y, const float *b, bool row, int64_t m, int64_t n, int64_t c0, int64_t c1) {
  for (int64_t i = 0; i < m; ++i) {
    float *yr = y + i * n;
    const float *br = row ? b : b + i * n;
    int64_t c = c0;
    for (; c + 16 <= c1; c += 16)
      _mm512_storeu_ps(yr + c, binary<Op>(_mm512_loadu_ps(yr + c), _mm512_loadu_ps(br + c)));
    if (c < c1) {
      const __mmask16 mask = static_cast<__mmask16>((1u << (c1 - c)) - 1u);
      _mm512_mask_storeu_ps(yr + c, mask, binary<Op>(_mm512_maskz_loadu_ps(mask, yr + c), _mm512_maskz_loadu_ps(mask, br + c)));
    }
  }
}

/// The same operations on 8 lanes (the AVX2 path). Each is one IEEE
/// operation or selection, as in binary<Op>: the scalar kernels' bits.
/// (One float at a time, the pass was 4% of a 128 x 768 . 3072 product
/// with its bias on AMD EPYC, Zen 1.)
template <bool IsMax> NIMBLE_AVX2 inline __attribute__((always_inline)) __m256 maxMin8(__m256 first, __m256 second) {
  const __m256 takeSecond = IsMax ? _mm256_cmp_ps(first, second, _CMP_LT_OQ) : _mm256_cmp_ps(second, first, _CMP_LT_OQ);
  __m256 r = _mm256_blendv_ps(first, second, takeSecond);
  r = _mm256_blendv_ps(r, second, _mm256_cmp_ps(second, second, _CMP_UNORD_Q));
  return _mm256_blendv_ps(r, first, _mm256_cmp_ps(first, first, _CMP_UNORD_Q));
}

template <Binary Op> NIMBLE_AVX2 inline __attribute__((always_inline)) __m256 binary8(__m256 a, __m256 v) {
  if constexpr (Op == Binary::Add) return _mm256_add_ps(a, v);
  if constexpr (Op == Binary::Mul) return _mm256_mul_ps(a, v);
  if constexpr (Op == Binary::Sub) return _mm256_sub_ps(a, v);
  if constexpr (Op == Binary::Div) return _mm256_div_ps(a, v);
  if constexpr (Op == Binary::Max) return maxMin8<true>(a, v);
  if constexpr (Op == Binary::Min) return maxMin8<false>(a, v);
  if constexpr (Op == Binary::RMax) return maxMin8<true>(v, a);
  return maxMin8<false>(v, a);
}

/// Lanes l < left (all for left >= 8), as a maskload/maskstore mask.
NIMBLE_AVX2 inline __m256i lanes8(int64_t left) {
  const int32_t l = static_cast<int32_t>(std::min<int64_t>(left, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(l), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <Binary Op>
NIMBLE_AVX2 void applyRows2(float *y, const float *b, bool row, int64_t m, int64_t n, int64_t c0, int64_t c1) {
  for (int64_t i = 0; i < m; ++i) {
    float *yr = y + i * n;
    const float *br = row ? b : b + i * n;
    int64_t c = c0;
    for (; c + 8 <= c1; c += 8)
      _mm256_storeu_ps(yr + c, binary8<Op>(_mm256_loadu_ps(yr + c), _mm256_loadu_ps(br + c)));
    if (c < c1) {
      const __m256i mask = lanes8(c1 - c);
      _mm256_maskstore_ps(yr + c, mask, binary8<Op>(_mm256_maskload_ps(yr + c, mask), _mm256_maskload_ps(br + c, mask)));
    }
  }
}

} // namespace

void apply(Binary op, float *y, const float *b, bool row, int64_t m, int64_t n, int64_t c0, int64_t c1) {
  if (!wide()) {
    switch (op) {
    case Binary::Add: return applyRows2<Binary::Add>(y, b, row, m, n, c0, c1);
    case Binary::Mul: return applyRows2<Binary::Mul>(y, b, row, m, n, c0, c1);
    case Binary::Sub: return applyRows2<Binary::Sub>(y, b, row, m, n, c0, c1);
    case Binary::Div: return applyRows2<Binary::Div>(y, b, row, m, n, c0, c1);
    case Binary::Max: return applyRows2<Binary::Max>(y, b, row, m, n, c0, c1);
    case Binary::Min: return applyRows2<Binary::Min>(y, b, row, m, n, c0, c1);
    case Binary::RMax: return applyRows2<Binary::RMax>(y, b, row, m, n, c0, c1);
    case Binary::RMin: return applyRows2<Binary::RMin>(y, b, row, m, n, c0, c1);
    }
    return;
  }
  switch (op) {
  case Binary::Add: return applyRows<Binary::Add>(y, b, row, m, n, c0, c1);
  case Binary::Mul: return applyRows<Binary::Mul>(y, b, row, m, n, c0, c1);
  case Binary::Sub: return applyRows<Binary::Sub>(y, b, row, m, n, c0, c1);
  case Binary::Div: return applyRows<Binary::Div>(y, b, row, m, n, c0, c1);
  case Binary::Max: return applyRows<Binary::Max>(y, b, row, m, n, c0, c1);
  case Binary::Min: return applyRows<Binary::Min>(y, b, row, m, n, c0, c1);
  case Binary::RMax: return applyRows<Binary::RMax>(y, b, row, m, n, c0, c1);
  case Binary::RMin: return applyRows<Binary::RMin>(y, b, row, m, n, c0, c1);
  }
}

namespace {

NIMBLE_AVX512 void relu512(float *y, int64_t count) {
  const __m512 zero = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512 v = _mm512_loadu_ps(y + i);
    _mm512_storeu_ps(y + i, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, zero));
  }
  if (i < count) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (count - i)) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(mask, y + i);
    _mm512_mask_storeu_ps(y + i, mask, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, zero));
  }
}

/// relu on 8 lanes: y < 0 ? 0 : y (NaN stays NaN).
NIMBLE_AVX2 void relu256(float *y, int64_t count) {
  const __m256 zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 v = _mm256_loadu_ps(y + i);
    _mm256_storeu_ps(y + i, _mm256_blendv_ps(v, zero, _mm256_cmp_ps(v, zero, _CMP_LT_OQ)));
  }
  if (i < count) {
    const __m256i mask = lanes8(count - i);
    const __m256 v = _mm256_maskload_ps(y + i, mask);
    _mm256_maskstore_ps(y + i, mask, _mm256_blendv_ps(v, zero, _mm256_cmp_ps(v, zero, _CMP_LT_OQ)));
  }
}

} // namespace

void relu(float *y, int64_t count) {
  if (wide()) return relu512(y, count);
  relu256(y, count);
}

} // namespace nimble::vm::panel
