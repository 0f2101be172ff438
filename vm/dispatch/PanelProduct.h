//===- PanelProduct.h - Few-row products over streamed weight panels -*- C++ -*-===//
//
// Private to vm/dispatch/ (LibraryPanels.cpp). A matmul of 1 to kMaxRows
// rows by a constant 2-D weight (an LSTM's input projections over a short
// sequence, BERT-base's linear layers at 16 tokens) reads every weight byte
// for a handful of FLOPs: it runs at the rate its weights arrive, usually
// from DRAM (a model's weights do not stay in a shared L3 between calls).
// oneDNN's kernel for these shapes reads its packed weights at about half
// the rate a plain sequential stream gets from memory (measured on the
// EPYC of docs/perf.md, "Few-row products: weights streamed in panels",
// one thread, weights evicted before each call: 8 x 512 by 512 x 2048 in
// 0.38-0.42 ms against 0.19-0.21 ms here; BERT's 16 x 768 by 768 x 3072
// 0.93-0.99 against 0.77-0.78 ms). Hot, the two are level (0.15-0.17 ms).
//
// The layout: the weight, read as K x N, is copied once into panels of
// kWidth (64) columns; panel p holds rows k = 0..Kp-1 of columns
// [64p, 64p + 64), each row's 64 floats contiguous, with K padded to Kp, a
// multiple of 16, by rows of zeros, and the last panel padded with zero
// columns. That is byte for byte oneDNN's blocked format BA16a64b of the K x
// N matrix (N/64 blocks of columns, each Kp/16 blocks of 16 rows x 64
// columns), the layout oneDNN 2.6's AVX-512 matmul chooses for a constant
// weight: LibraryKernels gives oneDNN the same copy (and a column block of
// it, from a panel boundary on, to a split's slice), so a weight used with
// few rows and with many keeps one packed copy. One panel is one
// sequential stream of K x 256 bytes, which on the EPYC the hardware
// prefetchers follow without help (software prefetches at 1-16 KiB ahead in
// the same stream measured slower; on a Xeon see "Ahead" below). A
// tile is 8 rows x 64 columns: 32 AVX-512 accumulators (GCC keeps 27 of
// them in registers and 5 on the stack: the four loads of the panel's row
// and the broadcast need registers too); per k, four loads of the panel's
// row and eight broadcasts of x, 32 FMAs. Past 8 rows the k's go in blocks
// of 1024, every tile of rows over a block (256 KiB of the panel, in L2)
// before the next, each tile continuing its sums from the partial ones
// stored in y (blocks of 256 were 4-10% slower at 16 and 32 rows, 32 and
// 64 slower still: each block reloads and stores the tile; docs/perf.md,
// "Few-row products: blocks of k"). At 64
// and 128 rows oneDNN is 5-8% faster (its kernel computes more per byte
// loaded); hence kMaxRows = 32 (docs/perf.md).
//
// One row: the LSTM's recurrent product (1 x 512 by a 512 x 2048 W_hh, once
// a token) reads its 4 MiB weight from L3 (and what L2 kept of it). As
// panels it is one sequential stream a panel, 256 bytes a k, four FMA
// chains; the native kernel's one-row stage reads 8 rows of the [N, K]
// weight at once (8 streams) and reduces each dot product across lanes. A
// stand-alone check of both (one thread, every other call backwards, 3,000
// calls): 43.0-43.4 us best / 45-46 us mean a call here against 48.7-49.0 /
// 52-54 us (97 against 86 GB/s best; docs/perf.md, "One row through the
// panels"). LibraryKernels gives each thread a fixed run of panels and
// reverses it every other call, as the native stage does with its units.
//
// Each output element is one sum over k in increasing order (a partial sum
// stored in y and loaded again is the same f32): the results depend
// neither on the thread count (threads take whole panels) nor on which rows
// share a tile (test/codegen/library-panels.test).
//
// AVX-512F, or AVX2 + FMA with a layout of its own (below; target
// attributes: the runtime is built for baseline x86-64): supported() is
// false elsewhere, and the caller keeps oneDNN.
//
// AVX2 (wide() false: AMD Zen 1 to 3, Intel before Skylake-SP): panels of
// 16 columns (width()), each K x 64 bytes contiguous, and a tile of 6 rows
// x 16 columns, 12 ymm accumulators (per k two loads of the panel's row,
// six broadcasts of x, 12 FMAs), over blocks of kBlock2 (512) k's: a block
// of a panel (32 KiB) is read from L1 and L2 by every tile of rows, x's
// block of rows from L2. It takes every row count, not just a few: oneDNN
// 2.6 runs f32 matmuls there with gemm:jit, which reached 29.6-32.5
// GFLOP/s on BERT-base's shapes at 128 rows on a Zen 1 EPYC where this
// tile gets 35-37 (the core's FMA peak measured 35.4-37.3; docs/perf.md,
// "Zen 1 (AVX2): the panel product for every row count"), and 28-33
// against ~22 with 64-column panels at 16 rows (a 16-column strip of a
// 64-column panel hits a quarter of L1's sets). No split of rows (each
// thread takes whole panels). Each k step prefetches the panel 4 KiB (64
// k's) ahead, into the next panel past the end of one (the AVX-512 path's
// "Ahead" below is its own scheme): on the Zen 1 EPYC, weights cold (256
// MiB of them in turn), one thread, against no prefetch: 16 rows 1.12-1.15x,
// 8 rows 1.26x, 32 rows 1.08x, 128 rows 1.02-1.03x (docs/perf.md, "Zen 1
// (AVX2): values packed, epilogue in vectors, panels prefetched").
// The sums are the AVX-512 tile's: one fma a k in increasing order, so
// the two instruction sets give the same bits.
//
// Ahead: on an Intel Xeon (Emerald Rapids, 2 MB L2 a core) one stream a
// core gets 11 GB/s from DRAM where several streams with prefetches get
// 17 (a stand-alone read of 256 MiB, one thread: 1 stream 11.0, 4 streams
// 15.5, 4 streams prefetched 4 KiB ahead 17.4), and a tile that waits for
// its stream computes nothing meanwhile: the 16-row products of BERT-base
// ran at 7 GB/s, the sum of their arithmetic (162 GFLOP/s hot) and their
// reads, not the larger of the two. So while it computes a block, each
// tile prefetches into L2 its share of the block that comes next (the next
// k's of the panel, else the next panel of the run, else the panel the
// caller names as `then`: on two threads each thread claims its next panel
// before it computes this one), as two streams half a block apart, a line
// or more a k. The next block's demand loads then hit L2. Measured with
// the weights of BERT-base's 48 linear layers in turn (340 MB, one
// thread, 16 rows): 49.4 ms without, 38.7 with the next block prefetched
// by the first tile only, 32.6 by every tile, 29.0 as two streams; in the
// model against oneDNN (docs/perf.md, "Few-row products ahead of their
// stream"): 16 tokens 40.2-40.4 -> 28.3-29.7 ms on one thread, 22.0-22.2
// -> 16.3-17.1 on two;
// 8 tokens 1.17-1.25x, 32 tokens 1.02-1.22x faster; 64 and 128 level (two
// blocks of rows at 64 on two threads; oneDNN past them). Not for one row:
// the LSTM's recurrent weight is in L2 and L3 from token to token, and
// prefetching it measured 10-29% slower (so m = 1 never prefetches). Not
// measured on an AMD CPU: off there by default (NIMBLE_PANEL_AHEAD=1 turns
// it on, 0 off anywhere). The prefetches move no arithmetic: each output
// is the same bits with and without them.
//
// Which CPUs: the kernel runs the products of 2 to 32 rows (64 on an even
// thread count) on every AVX-512 CPU, of 2 rows and more on every CPU with
// AVX2 and FMA but not AVX-512 ("AVX2" above) (enabled()): on the Zen 4 EPYC it
// streams at about twice oneDNN's rate without help, on the Xeon with its
// next block prefetched ("Ahead"; without that it lost to oneDNN there:
// BERT-base at one thread 47.5 against 39.8 ms at 16 tokens, 41.8 against
// 32.0 at 8; docs/perf.md, "The panel path on an Intel Xeon"). One row
// goes to it on AMD CPUs only (oneRow()): on the Xeon the LSTMs ran level
// at one thread and 3-10% slower at two through it, so one row runs native
// code there. The layout is shared on every AVX-512 CPU (sharedLayout()):
// oneDNN's primitives at more rows read the one panel copy, so each weight
// keeps one resident copy (BERT-base over 16 and 128 tokens in one
// two-thread process on the Xeon: 438 MB, against 775 MB with a copy per
// path). Its price there: on two threads each slice of whole panels writes
// a dense block, copied into the output's columns (LibrarySlices.cpp,
// buildSlices), 7-12% slower at 64 and 128 rows than oneDNN's in-place form
// over a row-major copy of its own. NIMBLE_PANEL_PRODUCT=1 also sends one
// row to the kernel on any AVX-512 CPU; 0 turns kernel and shared layout
// off anywhere. A choice by vendor and the environment alone, read once:
// never by a clock, so every process on a machine computes alike (issue
// 52). NIMBLE_KERNEL_ISA (vm/kernels/KernelUtil.h, kernelIsa()) caps the
// instruction set: avx2 runs the AVX2 kernel on an AVX-512 CPU, sse2 none.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_DISPATCH_PANELPRODUCT_H
#define NIMBLE_VM_DISPATCH_PANELPRODUCT_H

#include <cstddef>
#include <cstdint>

namespace nimble::vm::panel {

constexpr int64_t kWidth = 64;   // columns an AVX-512 panel: four zmm registers
constexpr int64_t kWidth2 = 16;  // columns an AVX2 panel: two ymm registers
constexpr int64_t kMaxRows = 32; // rows (M) the path takes on one thread
/// Rows the path takes on an even number of threads: two blocks of at most
/// kMaxRows rows (a multiple of 8 and the rest), each block's panels shared
/// by half the threads. Each thread reads the whole weight (a panel is read
/// once by each block, the second time usually from the other core's L2 or
/// the L3), but computes its rows at the one-thread rate of kMaxRows rows,
/// with no copy: oneDNN's two-thread form at these rows is column slices,
/// and its AVX-512 kernel (brgemm) writes only a dense output, so each
/// slice's block is copied into the output's columns (and a residual into
/// the block). BERT-base at 64 tokens, two threads, 8 alternating
/// processes: 54.7 against 58.4 ms median (docs/perf.md, "Two blocks of
/// rows"). At 128 rows the same split (64 rows a block, past the panel
/// kernel's rate) was level with oneDNN (119.2 against 121.9 ms).
constexpr int64_t kMaxSplitRows = 2 * kMaxRows;

/// Whether this CPU can run the kernel (AVX-512F, or AVX2 and FMA).
bool supported();
/// Whether the kernel is the AVX-512 one (64-column panels, the layout
/// oneDNN shares); false on AVX2 ("AVX2" above). Read once.
bool wide();
/// Columns a panel on this CPU: kWidth (AVX-512) or kWidth2 (AVX2).
int64_t width();
/// Whether the path takes a product of `m` rows on `threads` threads: up to
/// kMaxRows, up to kMaxSplitRows on an even thread count (AVX-512); any
/// number of rows on AVX2.
bool takesRows(int64_t m, int64_t threads);
/// Whether the kernel runs the few-row products (2 to kMaxSplitRows rows,
/// and one row when the library path gets it): supported() and
/// NIMBLE_PANEL_PRODUCT is not 0 ("Which CPUs" above). Read once.
bool enabled();
/// Whether the one-row rule sends one-row products to the kernel (the
/// LSTM's recurrent product) rather than to native code: enabled(), wide()
/// (on AVX2 a one-row tile is two FMA chains, latency-bound), and
/// NIMBLE_PANEL_PRODUCT=1 or the variable unset (any other value too) and an
/// AMD CPU. Read once.
bool oneRow();
/// Whether constant weights are packed as panels that oneDNN's primitives
/// (whole and split by panels) read too: wide() and
/// NIMBLE_PANEL_PRODUCT is not 0. Read once.
bool sharedLayout();
/// Whether products of two or more rows prefetch the next block ("Ahead"):
/// NIMBLE_PANEL_AHEAD=1 or 0, by default on every CPU but AMD's. Read once.
bool ahead();

/// Panels a K x N weight takes.
inline int64_t panels(int64_t n) { return (n + width() - 1) / width(); }
/// Rows of a panel: K padded to a multiple of 16 (BA16a64b's blocks of rows).
inline int64_t paddedRows(int64_t k) { return (k + 15) / 16 * 16; }
/// Floats of the packed copy of a K x N weight.
inline size_t packedFloats(int64_t k, int64_t n) {
  return static_cast<size_t>(panels(n)) * static_cast<size_t>(paddedRows(k)) * static_cast<size_t>(width());
}

/// Copies `w` into panels at `to` (packedFloats(k, n) floats). `w` is
/// N x K row-major when `transposed` (a linear layer's W, used as W^T),
/// else K x N row-major.
void pack(const float *w, int64_t k, int64_t n, bool transposed, float *to);

/// y[i][j] = sum over k of x[i][k] * W[k][j], for rows i < m
/// and the columns of panels [p0, p1). x is m x K row-major, y m x N
/// row-major. `then`: the panel the caller multiplies next (-1: none or
/// unknown), whose first block the last one prefetches ("Ahead").
/// supported() must be true.
void multiply(const float *x, int64_t m, int64_t k, int64_t n, const float *panels, float *y, int64_t p0,
              int64_t p1, int64_t then = -1);

/// The element-wise binary operations a product's epilogue applies. Max and
/// Min are the IR's `maximum` / `minimum` (vm/kernels/Binary.cpp): a NaN
/// operand gives a NaN (the first operand's when both are), and of equal
/// values (+0 and -0) the first operand; RMax and RMin the same with b as
/// the first operand.
enum class Binary { Add, Mul, Sub, Div, Max, Min, RMax, RMin };

/// y = y op b (RMax, RMin: b op y) over rows i < m and columns [c0, c1) of
/// the m x n row-major y; b is one row of n (broadcast over the rows) when
/// `row`, else m x n row-major. b must not overlap y. Each element is one
/// IEEE operation or selection, so the results equal the reference
/// kernels' bit for bit. supported() must be true.
void apply(Binary op, float *y, const float *b, bool row, int64_t m, int64_t n, int64_t c0, int64_t c1);

/// y = relu(y) over `count` floats as the reference kernel computes it
/// (vm/kernels/Elementwise.cpp: x < 0 ? 0 : x, so NaN and -0 stay), where
/// oneDNN's eltwise_relu gives 0 for a NaN. supported() must be true.
void relu(float *y, int64_t count);

} // namespace nimble::vm::panel

#endif // NIMBLE_VM_DISPATCH_PANELPRODUCT_H
