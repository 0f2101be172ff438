//===- LibraryConv.h - conv kernels through oneDNN (internal) -----*- C++ -*-===//
//
// The `conv` groups of LibraryKernels (LibraryKernels.h): a kernel whose
// first member is a `conv` of f32 kernel inputs (x, w, optional bias),
// followed by a chain of post-ops oneDNN's convolution applies in its
// epilogue:
//
//   add, mul, maximum, minimum with a kernel input (either side; a scalar,
//   a per-channel [M, 1, 1] or a full residual), sub / div with the chain
//   on the left                    -> binary post-op
//   relu, gelu, tanh, sigmoid, exp -> eltwise post-op
//   maximum then minimum by single   -> one eltwise clip (ReLU6; the
//   elements lo <= hi                   bounds are part of the cache key)
//
// the groups the fusion pass forms around a CNN's convolution (the residual
// add and relu of ResNet's blocks, the maximum/minimum of ReLU6 in
// MobileNetV2). One primitive per distinct input shapes, cached like the
// matmuls'; a constant weight is reordered once into the layout the
// primitive picks (format `any`) and kept, as for matmul.
//
// Layouts: the VM's tensors are dense row-major (NCHW), where oneDNN 2.6
// offers only its im2col + GEMM convolution (gemm:jit). Its direct kernels
// (brgconv, jit) read and write blocked or channels-last layouts, so the
// primitive is created with `any` for src and dst: x is reordered into the
// chosen layout before the call and the result out of it after (two
// streaming copies of the activations, small beside the convolution),
// and a residual add of the output's shape becomes a `sum` post-op over dst,
// the residual reordered into dst first. ResNet-18 at 224x224, one thread:
// 176 ms against 380 ms plain (docs/perf.md). A chain with another
// full-shape binary, or shapes oneDNN keeps plain anyway, use the plain
// primitive.
//
// channels_last (set by the convert-layout pass, passes/transforms/
// ConvertLayout.cpp): x and y are N x D.. x C, which oneDNN's direct
// kernels read and write as they are (nhwc, described by strides over the
// logical N, C, D.. order): no reorder around the call, and a residual of
// the output's shape is copied into dst for the `sum` post-op (a plain
// memcpy, skipped when the planner gave the output the residual's buffer).
//
// Weights: a constant weight reordered into the primitive's layout keeps
// one resident copy, as the matmuls' (LibraryKernels.h, "Weights"): once
// packed, the original's pages are dropped when they are the .nbc's mapped
// file (releaseMappedPages; a later read, e.g. packing for another batch
// size's primitive that picked another layout, reads the file again).
// ResNet-18's conv weights are 44.7 MB, resident twice before.
//
// Implementations: oneDNN 2.6 offers several per conv and picks the first
// its list has for the shapes (brgconv for nhwc). One rule overrides it:
// a batch of two or more images onto at most 7 x 7 outputs (ResNet's
// layer4), kernel larger than 1 x 1, not grouped, takes the next jit:
// implementation (jit:avx512_core) when oneDNN has one with the same src
// and dst layouts. Measured alone (one thread, CPU time, docs/perf.md):
// 512 channels at 7 x 7, batch 8, brgconv 11.2-18.4 ms, jit 10.4-11.3;
// 256 -> 512 with stride 2, 7.3-8.3 against 5.7-6.8; batch 2 and 4 the
// same way; at batch 1 brgconv is faster (1.8-2.4 against 2.0-2.5 ms), and
// at 14 x 14 and larger the two are level. A second rule, by the CPU's
// vendor: on AMD a channels-last depthwise conv (MobileNetV2's 17) takes
// oneDNN's jit_dw kernel instead of brdgmm_dw, its first choice, when the
// chain has one over the same layouts. On a Zen 4 EPYC (one thread, CPU
// time, alone, docs/perf.md) jit_dw was 1.2-2.2x faster at batch 1 at every
// depthwise shape of MobileNetV2 (112 x 112 x 32: 0.11-0.15 against
// 0.20-0.36 ms; 14 x 14 x 576: 0.03 against 0.045) and level at batch 8;
// in the model at batch 8 the 17 calls took 18.3-21.2 against 22.5-22.8
// ms a run. On the Intel Xeon brdgmm_dw was as fast or faster (jit_dw up
// to 4x slower at 112 x 112), so Intel keeps oneDNN's choice.
// NIMBLE_CONV_DW_IMPL=jit_dw (any CPU) or =first (oneDNN's choice) in the
// environment overrides the vendor (read once).
//
// Threads: oneDNN runs each primitive as one OpenMP parallel region over the
// VM's --threads. A conv of fewer than kSerialMacs multiply-adds is created
// and run with a team of one instead (omp_set_num_threads(1) around the
// call: run inline, no region, no barrier). NIMBLE_CONV_SERIAL_MACS in the
// environment overrides the bound (read once). Default 0, none: measured
// under contention only (docs/perf.md, "Imported CNNs", third round), where
// every region waits for a descheduled thread: MobileNetV2 at batch 1 and
// --threads=2, the median of 7 alternating rounds at load 10-13, 1,665 ms
// with every conv split, 164 ms with none (59 ms at one thread). On a
// machine with two free cores a split conv of 30 µs gains ~15 µs, so the
// bound is left to that measurement.
//
// Split by images: with a pool of T > 1 threads (--threads), a
// channels-last conv whose batch is a multiple of T runs as T slices of
// batch / T images each, all at once on the pool (ThreadPool::runEach, one
// OpenMP region, inside which oneDNN runs each primitive inline): one
// primitive created for one thread (omp_set_num_threads(1) around its
// creation) and for the slice's batch, run by every slice on its own
// stream with its own scratchpad (scratchpad_mode::user), reading and
// writing its images of x, y and the residual (copied into its images of y
// by its own thread) and the shared weights, bias and per-channel
// operands. Each thread then works on the same images from layer to layer
// (oneDNN's own split divides each conv its own way: by images, channel
// blocks or rows), and a conv is one region with no barrier inside.
// Not split: a batch that is not a multiple of T (oneDNN's own split of
// the whole call), an operand that varies by image other than the residual,
// a blocked (NCHW) or transposed conv, a conv run serially (kSerialMacs).
// NIMBLE_CONV_BATCH_SPLIT=0 in the environment turns the split off (read
// once). The results may differ from the whole call's in the last bits
// (another primitive, planned for one thread).
//
// Pairs (issue 47): a kernel [conv, chain.., conv, chain..] whose first
// conv is channels-last, 1 x 1, stride 1, unpadded and not grouped and
// whose second reads its chain's result as x (the fuse pass forms them
// from MobileNetV2's expand and depthwise convs, passes/lowering/Fuse.cpp,
// "Conv pairs"). When the second is a depthwise 3 x 3 of stride 2 and the
// intermediate (N x H x W x M, f32) is kPairFuseBytes or more, the pair
// runs as one oneDNN primitive: the 1 x 1 conv with its chain as post-ops,
// oneDNN's depthwise post-op (append_dw, which computes the depthwise conv
// from rows of the 1 x 1 conv's output kept in cache) and the second chain;
// both chains must be clips and unary ops, both biases and weights
// constants. oneDNN 2.6 offers it only over its blocked layouts
// (jit_1x1:avx512_core, jit_1x1:avx2): over nhwc it creates the primitive
// but computes wrong values (docs/perf.md), so a primitive that keeps
// channels-last layouts is refused, and x is reordered into the blocked
// layout before the call and y out of it after, through buffers from the
// pool. Every other pair, and one oneDNN has no fused primitive for (other
// than its reference one: every pair on an Intel Xeon, Emerald Rapids,
// where oneDNN lists only ref_fused_convolution), runs as its two convs one after the other, each
// as above, the intermediate from the pool. Measured alone (docs/perf.md,
// one thread, CPU time, batch 8): fused 0.57 of the two convs at 112 x 112
// x 96 stride 2, 0.71 at 56 x 56 x 144 stride 2, 0.84-0.85 at 28 x 28 and
// 14 x 14; at stride 1 level (0.98-0.99: the output reorder costs what the
// fusion saves); at batch 1 0.83 at 112 x 112, 1.07-1.13 slower at 56 x 56
// and 28 x 28 (intermediates under 3 MiB). NIMBLE_CONV_PAIR=0 in the
// environment never fuses, =1 fuses every pair oneDNN can (read once).
//
// Per call: the primitive is found by the kernel's last key (a CNN calls a
// conv kernel with the same shapes every time) before the cache, and the
// memory objects and arguments made at an entry's first call are reused,
// given the tensors' addresses (set_data_handle).
//
// conv_transpose (issue 47) runs as oneDNN's deconvolution_forward, alone
// (it is not fused), in the plain layouts: the weights keep ONNX's
// C x M/groups x K.. order, described to oneDNN by strides (packed once
// when constant); an output_padding larger than the end padding declines.
//
// Errors: a primitive oneDNN cannot create, or creates only as its
// reference implementation (slower than Nimble's own reference kernel),
// declines these shapes; out of memory is the run's error.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_DISPATCH_LIBRARYCONV_H
#define NIMBLE_VM_DISPATCH_LIBRARYCONV_H

#include "vm/format/Executable.h"
#include "vm/Kernel.h"

#include <memory>
#include <vector>

namespace dnnl {
struct engine;
struct stream;
} // namespace dnnl

namespace nimble::vm {

class ThreadPool;

class ConvKernels {
public:
  explicit ConvKernels(const Executable &exe);
  ~ConvKernels();
  bool supports(uint32_t k) const;
  size_t count() const;
  /// As LibraryKernels::run, for a kernel that supports(k).
  /// `pool` (may be null: one thread) runs a call split by images.
  Status run(uint32_t k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs,
             const dnnl::engine &engine, dnnl::stream &stream, ThreadPool *pool, size_t *failedMember,
             bool *declined);
  uint64_t primitivesCreated() const;
  double creationSeconds() const;
  double packSeconds() const;
  size_t primitivesCached() const;
  uint64_t weightsPacked() const;
  uint64_t packedBytes() const;
  /// Bytes of packed weights' originals given back to the mapped file.
  uint64_t releasedBytes() const;
  /// Calls split by images over the pool's threads ("Threads").
  uint64_t splitCalls() const;
  /// Conv pairs run as one fused primitive ("Pairs").
  uint64_t pairsFused() const;

  /// A conv of fewer multiply-adds than this runs on one thread ("Threads").
  static constexpr double kSerialMacs = 0;
  /// A pair with a stride-2 depthwise conv and an intermediate of at least
  /// this many bytes runs fused ("Pairs").
  static constexpr double kPairFuseBytes = 3 * 1024 * 1024;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace nimble::vm

#endif // NIMBLE_VM_DISPATCH_LIBRARYCONV_H
