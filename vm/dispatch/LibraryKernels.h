//===- LibraryKernels.h - Dense kernels through oneDNN -------------*- C++ -*-===//
//
// The library implementation of dense kernels (Nimble paper §3.4 and §5:
// each dense op dispatches to whichever of its generated kernels and a vendor
// library is fastest). A kernel qualifies when it is a `matmul` or
// `batch_matmul` of f32 tensors that reads two kernel inputs, followed by a
// chain of members that oneDNN's post-ops express:
//
//   add / mul with a kernel input (either side), sub / div with the chain on
//   the left                       -> binary post-op (src1 broadcast as numpy)
//   relu, gelu (erf form), tanh, sigmoid, exp
//                                  -> eltwise post-op
//
// each member consuming the previous one's result, the last one the kernel's
// only output: exactly the groups the fusion pass forms around a matmul in
// BERT (bias add, gelu, residual add, attention scale). Anything else (other
// dtypes, other members, empty dimensions) stays with the generated or the
// reference kernel. A kernel whose first member is a `conv` goes to
// LibraryConv.h (oneDNN's convolution, its own post-op chain and layouts),
// a kernel of one `attention` to LibraryAttention.h (the runtime's own
// AVX-512 or AVX2 kernel: oneDNN 2.6 has no attention primitive).
//
// Few rows: a plain matmul of 2 to panel::kMaxRows (32) rows by a constant
// 2-D weight, whose binary post-op operands are a row or of the output's
// shape, runs as the runtime's own few-row product (PanelProduct.h, on
// AVX-512 CPUs): the weight copied once into panels of 64 columns, each a
// sequential stream; binary post-ops applied by its threads, activations
// by oneDNN's eltwise primitive. With weights arriving from memory it is
// 1.2-2x faster than oneDNN's kernel for these shapes (docs/perf.md,
// "Few-row products: weights streamed in panels"); level from 48 rows up.
// On an even number of threads it also takes 33 to panel::kMaxSplitRows
// (64) rows, as two blocks of rows (PanelProduct.h). On CPUs with AVX2
// and FMA but not AVX-512 the same path, in AVX2 over panels of 16
// columns, takes such a matmul of any number of rows: oneDNN's gemm:jit
// there is slower at every row count (PanelProduct.h, "AVX2").
// The panels are oneDNN's own blocked layout for such a weight (BA16a64b),
// and oneDNN's primitives read them: a weight called with both few and
// many rows (BERT-base over sequences of 16 and of 128 tokens in one
// process, a server's batches) keeps one packed copy ("Weights" below).
//
// Shapes: one primitive per distinct set of input shapes, created at its
// first call and kept in a cache of bounded size (least recently used out).
// A primitive with run-time dimensions (DNNL_RUNTIME_DIM_VAL) would be
// created once, but then oneDNN cannot choose its blocking and kernel for the
// shape it runs; shapes repeat (BERT has a handful per sequence length), so a
// cache keyed by shape pays one creation per shape. docs/perf.md ("Library
// kernels") measures a miss.
//
// Threads: oneDNN here is built with OpenMP; `setThreads(n)` sets its team
// to the VM's --threads, so the VM's pool (idle while a library kernel runs)
// and oneDNN never have more than n threads running between them. A matmul
// whose weights are a constant, given a pool of n > 1 threads, is instead
// split by output columns: n blocks (a multiple of 16 columns each, at
// least kMinSliceColumns), each a primitive planned for one thread, all
// started at once on the pool (ThreadPool::runEach), each with its own
// stream and scratchpad. Each thread then streams only its own part of the
// weights (a copy of its columns made once, like a packed weight): at M =
// 128 on two cores 6-8% faster than oneDNN's own two-thread split of the
// whole matmul. Where the panel path runs (AVX-512, a 2-D weight whose
// columns split into about even runs of whole 64-column panels), a slice
// writes a dense block of its own, run by the brgemm kernel over its
// window of the weight's one packed copy, and copies the block into its
// columns, at every row count. Elsewhere, from kBlockedSliceRows rows up a
// slice writes its columns of the output in place (a strided output),
// which oneDNN runs with its gemm:jit kernel over a row-major copy of the
// columns (a copy of its own: gemm:jit reads no blocked layout); gemm:jit
// repacks the weights on every call, which with few rows costs more than
// the second thread gains (BERT-base at 16 tokens ran slower on two
// threads than on one), so below that a slice is blocked as above, over
// its columns packed in the layout brgemm chose (docs/perf.md, "BERT-base
// at two threads: the column split", and "One packed copy a weight"). Where
// oneDNN runs gemm:jit for every matmul (CPUs without AVX-512), a matmul on
// a constant weight wider than kNarrowSliceColumns is split at every thread
// count into slices of at most that many columns, each blocked as above:
// gemm:jit loses half its rate when the output's rows are a multiple of a
// few KiB apart (BERT's 3072 columns; docs/perf.md, "Zen 3"), and a dense
// block of 768 columns or fewer runs at full rate; thread t runs the t-th
// even run of the slices, which are the same at one thread and at two (so
// are the results). Where panels are shared, two threads give the one-thread result bit for bit
// where both run brgemm (AVX-512; observed, not promised by oneDNN). The
// fused group must have a form the primitive runs with post-ops: a bias row
// (first) becomes the primitive's bias, activations eltwise post-ops, one
// residual of the output's shape a `sum` post-op (its columns copied into
// the output's, or the block, first, unless it is the output itself in
// place; a residual that overlaps the output otherwise runs the whole
// primitive). Anything else (mul, sub, div, a broadcast operand), or oneDNN
// offering only its reference implementation for a block, keeps the whole
// primitive.
//
// Weights: a right-hand side that is a constant (read-only storage: the
// executable's data, every linear layer's W) is given to the primitive in
// the layout it prefers (format `any`), reordered once at its first use and
// kept for the process (memory: one packed copy of each such weight, shown
// by --profile), instead of in its own layout, which oneDNN repacks block
// by block on every call. Once packed (all its column blocks, when split),
// the constant's original pages are given back when they are the .nbc's
// mapped file (vm/format/Format.h, readExecutableFile): madvise
// MADV_DONTNEED on the pages wholly inside it, so each weight keeps one
// resident copy, the packed one (issue 52: BERT-base at 128 tokens peaked
// at 868 MB, its 436 MB of weights twice). A later read of the original
// (native code, another layout's packing) reads the file's pages again.
// Packed copies of 2 MiB or more are 2 MiB-aligned
// and advised into huge pages (madvise; the kernel may decline): streamed
// from memory, weights in 4 KiB pages miss the TLB every page (a
// stand-alone oneDNN GEMM at M = 128 ran 3-4% faster from huge pages;
// BERT-base on one thread about 2%, near the noise: docs/perf.md). A packed copy stands for the constant's bytes read
// in one layout (a square weight read transposed and not has two), and keeps
// the constant's storage alive (its address then cannot name other bytes). A weight
// the program computes is never packed (its memory is reused for other
// values: a copy found by address could be stale), so constant and computed
// weights get different primitives.
//
// One packed copy a weight: where the panel path runs (PanelProduct.h), a
// 2-D constant's packed copy is its panels, made once, and every oneDNN
// primitive on it whose chosen layout is BA16a64b of the whole weight (one
// thread) or of a run of whole panels (a slice) reads that copy or a
// window of it instead of a reorder of its own (Impl::panelWindow): the
// same bytes. A weight used at every row count then holds one copy (BERT-
// base over 16- and 128-token sequences in one process: 448 MB peak on two
// threads, 792 MB with a copy per path; docs/perf.md, "One packed copy a
// weight"). Other layouts (a CPU without AVX-512, NIMBLE_PANEL_PRODUCT=0,
// weights of rank 3 and more, column slices not on panel boundaries) get
// copies of their own, as before.
//
// The rule of --kernels=auto (vm/dispatch/Dispatch.h; ruleChoosesLibrary):
// oneDNN when the product has at least kRuleMinRows rows and constant
// weights (packed once, below), or a computed right-hand side and at least
// kRuleMinComputedMacs multiply-adds per batch; native code otherwise. From
// the two implementations side by side on BERT-base, the LSTMs and
// Tree-LSTM (issue 52; Intel Xeon, Emerald Rapids, one thread, the median
// of 3-5 alternations, native / oneDNN kernel time): constant weights at
// M = 1 (the LSTM's 1x512 . 512x2048, Tree-LSTM's products) 0.87-1.00 here,
// and oneDNN's GEMV 2.7x slower on Zen (docs/perf.md, "Native kernels");
// at M = 2 to 8 1.0-1.8, at M = 16 to 128 1.2-1.9 (BERT) and 3.4-7.0 (the
// LSTM's 128x300 input projection). Computed right-hand sides (attention):
// 0.59-0.63 at 16 tokens (16K multiply-adds per head), 0.70 and 1.35 at 74
// (350K), 1.23 and 4.05 at 128 (1M). A rule loses where the two are within
// noise of each other; a measurement there picks at random, which is what
// made outputs change from process to process (issue 52).
// One row by a constant weight of kRuleOneRowMinWeight elements or more
// goes to the panel path on AMD CPUs with AVX-512 (panel::oneRow();
// PanelProduct.h, "Which CPUs"), native code elsewhere: its K-major panels are
// one sequential stream a panel, where the native kernel's units read 8
// rows of [N, K] at once; the LSTM's 1x512 . 512x2048 from L3, one thread,
// 43-46 against 49-53 us a call (docs/perf.md, "One row through the
// panels"). oneDNN's GEMV is not used for it.
//
// Errors: a primitive oneDNN cannot create for a shape (unsupported
// broadcast, out of memory) is remembered and the caller falls back; a
// failed execution is reported as a run-time error of the kernel's matmul.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_LIBRARYKERNELS_H
#define NIMBLE_VM_LIBRARYKERNELS_H

#include "vm/format/Executable.h"
#include "vm/Kernel.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nimble::vm {

class ThreadPool;

class LibraryKernels {
public:
  /// Analyzes every kernel of `exe` (which kernels oneDNN can run). Creates
  /// no primitive yet.
  explicit LibraryKernels(const Executable &exe);
  ~LibraryKernels();
  LibraryKernels(const LibraryKernels &) = delete;
  LibraryKernels &operator=(const LibraryKernels &) = delete;

  /// Whether oneDNN works here: a CPU engine and a stream can be created.
  /// False with a one-line reason otherwise; nothing else may be called then.
  bool init(std::string &reason);
  /// Whether kernel `k` has a library implementation (for some shapes).
  bool supports(uint32_t k) const;
  /// The rule of --kernels=auto ("The rule" above): whether oneDNN rather
  /// than native code should run kernel `k` on these inputs. Depends on the
  /// shapes and on whether the weights are a constant, never on a clock.
  bool ruleChoosesLibrary(uint32_t k, const std::vector<Tensor *> &ins) const;
  static constexpr int64_t kRuleMinRows = 2;
  static constexpr double kRuleMinComputedMacs = 1 << 19;
  /// One row by a constant 2-D weight of at least this many elements (the
  /// LSTM's h . W_hh^T: 2^20) goes to the panel path where it runs
  /// (PanelProduct.h, "One row"); smaller ones (Tree-LSTM's 450 x 300) stay
  /// native, as the native kernel keeps its one-row stage for the same sizes.
  static constexpr double kRuleOneRowMinWeight = 1 << 18;

  /// Kernels with a library implementation (whether or not init() succeeded).
  size_t count() const;
  /// oneDNN's thread count (its OpenMP team); the VM's --threads.
  static void setThreads(unsigned n);

  /// Runs kernel `k` on `ins`, writing `outs`. `*declined` is set (and
  /// nothing written) when this call cannot be done here: shape checks that
  /// fail (the reference path words them), dimensions of zero, a primitive
  /// oneDNN does not create for these shapes.
  /// With a `pool` of more than one thread, a matmul whose weights are a
  /// constant is split by output columns over its threads ("Threads").
  Status run(uint32_t k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs, ThreadPool *pool,
             size_t *failedMember, bool *declined);

  /// Primitives created so far (cache misses), the time spent creating them
  /// (the cost of the misses), and how many are cached now.
  uint64_t primitivesCreated() const;
  double creationSeconds() const;
  size_t primitivesCached() const;
  /// Constant weights reordered into a primitive's packed layout (once per
  /// constant and layout), the bytes they hold, the time spent reordering.
  uint64_t weightsPacked() const;
  uint64_t packedBytes() const;
  double packSeconds() const;
  /// Bytes of the packed constants' originals given back to the file
  /// (releaseMappedPages; "Weights").
  uint64_t releasedBytes() const;

  /// Calls that ran split over the pool's threads ("Threads").
  uint64_t splitCalls() const;
  /// Calls run as few-row products over weight panels (PanelProduct.h).
  uint64_t panelCalls() const;
  /// Conv calls split by images over the pool's threads (LibraryConv.h, "Threads").
  uint64_t convSplitCalls() const;
  /// Conv pairs run as one fused primitive (LibraryConv.h, "Pairs").
  uint64_t convPairsFused() const;

  /// Bound of the primitive cache.
  static constexpr size_t kCacheCapacity = 256;
  /// Fewest output columns a thread gets when a matmul is split.
  static constexpr int64_t kMinSliceColumns = 64;
  /// Widest slice where oneDNN runs gemm:jit (no AVX-512; "Threads").
  static constexpr int64_t kNarrowSliceColumns = 768;
  /// Below this many output rows a split matmul's slices write dense blocks
  /// of their own (brgemm, weights packed), at or above it their columns of
  /// the output in place ("Threads"; docs/perf.md: the crossover measured
  /// between 56 and 64 rows on an AMD EPYC).
  static constexpr int64_t kBlockedSliceRows = 64;

  struct Impl; // defined in LibraryMatMul.h (public so that its helpers can name it)

private:
  std::unique_ptr<Impl> impl_;
};

} // namespace nimble::vm

#endif // NIMBLE_VM_LIBRARYKERNELS_H
