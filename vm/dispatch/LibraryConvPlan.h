//===- LibraryConvPlan.h - What a conv kernel is, for oneDNN -----*- C++ -*-===//
//
// Private to vm/dispatch/ (LibraryConv.cpp). The decisions LibraryConv.h
// describes that depend on a kernel's members and a call's shapes alone,
// never on a primitive or a clock: a kernel's Plan (a conv or conv_transpose
// and its post-op chain, or a conv pair), the memory descriptors of the
// tensors' own layouts, which oneDNN implementation a shape takes
// ("Implementations"), into how many runs of images a call splits
// ("Threads"), and whether a pair runs fused ("Pairs").
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_DISPATCH_LIBRARYCONVPLAN_H
#define NIMBLE_VM_DISPATCH_LIBRARYCONVPLAN_H

#include "vm/dispatch/LibraryPostOps.h"
#include "vm/format/Executable.h"
#include "vm/Object.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <vector>

namespace nimble::vm::library {

using Dims = dnnl::memory::dims;

struct Plan {
  bool ok = false;
  uint32_t x = 0, w = 0;
  int64_t bias = -1;
  std::vector<int64_t> strides, pads, dilations;
  int64_t groups = 1;
  bool last = false; // conv's channels_last: x and y are N x D.. x C
  // conv_transpose: oneDNN's deconvolution (its weights read in ONNX's
  // C x M/groups x K.. order through strides; output_padding taken off the
  // end padding, declined where that would go negative).
  bool transpose = false;
  std::vector<int64_t> outPad;
  std::vector<PostOp> post;
  // A conv pair (LibraryConv.h, "Pairs"): parts[0] the 1 x 1 conv and its
  // chain, parts[1] the conv reading its result, whose x is input
  // numInputs (the intermediate, appended to the kernel's inputs);
  // `second` is the member index of that conv.
  std::vector<Plan> parts;
  size_t second = 0;
};

/// How kernel `k` runs on oneDNN, decided from its members alone (ok false:
/// it does not).
Plan analyze(const KernelDesc &k);

/// A conv pair (LibraryConv.h, "Pairs"): members [conv, chain.., conv,
/// chain..], the first conv 1 x 1, not grouped, stride 1, no padding, the
/// second reading the first chain's result as its x and nothing else of
/// the first part. Each part is analyzed as a kernel of its own: the second
/// with the intermediate as an extra input (value numInputs) and its
/// members' values renumbered.
Plan analyzePair(const KernelDesc &k);

/// ReLU6 and every clip the importer writes as `maximum` then `minimum`
/// by scalars: post-ops i and i + 1 as one eltwise clip when both scalars
/// are single elements with lo <= hi (min(max(x, lo), hi) is then exactly
/// oneDNN's max(lo, min(hi, x)); one post-op instead of two binaries that
/// read their operand).
bool clipAt(const Plan &p, const std::vector<Tensor *> &ins, size_t i, float &lo, float &hi);

dnnl::memory::desc plain(const Dims &d);

/// A row-major tensor of shape `phys` as oneDNN sees it: in its logical
/// order (N, C, D..), which for channels_last moves the last axis to 1 with
/// its stride (oneDNN's nhwc / acdb).
dnnl::memory::desc user(const Dims &phys, bool last);

/// LibraryConv.h, "Implementations": a channels-last 2-D conv of a batch
/// of images onto at most 7 x 7 outputs, its kernel larger than 1 x 1, not
/// grouped, runs on oneDNN's jit:avx512_core (brgconv, its first choice,
/// was 10-35% slower there); by the shapes alone, never by a clock.
bool preferJit(const Plan &p, const Dims &xd, const Dims &od, const Dims &wd);

/// LibraryConv.h, "Implementations": a channels-last depthwise conv (one
/// input channel per group, as many output channels as groups) takes
/// oneDNN's jit_dw kernel instead of brdgmm_dw, its first choice, on AMD
/// CPUs; by the vendor and the shapes alone, never by a clock.
/// NIMBLE_CONV_DW_IMPL (read once) overrides the vendor: `jit_dw` on any
/// CPU, `first` oneDNN's own choice.
bool preferJitDw(const Plan &p, const Dims &xd, const Dims &wd);

/// Moves `pd` to oneDNN's first implementation whose name starts with
/// `prefix`, when there is one over the same source and destination layouts;
/// else leaves it as it was.
void takeImpl(dnnl::convolution_forward::primitive_desc &pd, const char *prefix);

/// Multiply-adds of one call (ConvKernels::kSerialMacs).
double convMacs(const Plan &p, const std::vector<Tensor *> &ins, const Tensor *out);

/// LibraryConv.h, "Threads": into how many runs of images a call is split
/// over `threads` threads: `threads` when the conv is channels-last and its
/// batch a multiple of them, else 1 (oneDNN's own split of the whole call).
/// NIMBLE_CONV_BATCH_SPLIT=0 (read once) turns the split off.
int64_t batchSlices(const Plan &p, const Tensor *x, int64_t threads);

/// LibraryConv.h, "Pairs": whether a pair whose intermediate has shape
/// `mid` (N x H x W x M) runs as one fused primitive: a stride-2 depthwise
/// conv over an intermediate of kPairFuseBytes or more. NIMBLE_CONV_PAIR=0
/// (read once) never fuses, =1 always (where oneDNN has the fusion).
bool fusePair(const Plan &second, const std::vector<int64_t> &mid);

/// The post-ops of a pair's part: clips and unary ops only (a binary
/// post-op reads an operand oneDNN's fused depthwise post-op does not take);
/// throws dnnl::error otherwise.
void appendPairChain(const Plan &p, const std::vector<Tensor *> &ins, dnnl::post_ops &ops);

} // namespace nimble::vm::library

#endif // NIMBLE_VM_DISPATCH_LIBRARYCONVPLAN_H
