//===- LibraryAttention.h - The runtime's fused attention kernel ---*- C++ -*-===//
//
// A kernel that is one `attention` member (ir/Ops.def; formed from BERT's
// q.k^T, scale, mask, softmax and .v by the fuse-attention pass) runs here on
// f32 under --kernels=auto, library and tune, the way a conv group runs on
// oneDNN (LibraryConv.h): native code generation skips the op, and without
// this path it runs its reference kernel. oneDNN 2.6 has no attention
// primitive outside its graph API, so the kernel is the runtime's own, written
// with AVX-512 intrinsics and again with AVX2 + FMA ones (chosen at run time
// by the CPU's features, kernelIsa(); on a CPU with neither the call is
// declined and the reference kernel runs it). The two differ only in vector
// width (tiles of 8 rows x 32 keys, and of 6 x 16 with AVX2's 16
// registers) and so in the rounding of the row sums.
//
// Per head (the unit of work over the thread pool, so every output element is
// computed by the same code whatever the thread count: the results do not
// depend on --threads):
//   1. k's head is copied transposed into a D x n panel in the thread's
//      scratch (n x D floats, in L1/L2 for BERT's lengths), so the scores of
//      four query rows against 32 keys are outer-product tiles: per d, two
//      loads of the panel, four broadcasts of q, eight FMAs;
//   2. each row: scale, the mask (broadcast strides), max, exp(s - max)
//      (Cephes's expf polynomial, the one of codegen/llvm/MathApprox.cpp),
//      the sum;
//   3. p . v (the rows normalised by their sums in pass 2), E in strips of
//      32 (AVX-512: v's rows read in place, token-major, the head a stride)
//      or of 16 (AVX2: v's head first copied into n x 16 strips, since its
//      rows lie H x E floats apart and fell into a few of L1's sets).
// The q, k, v and output tensors are read and written through their strides
// (H x D between tokens): no transpose kernel before or after.
//
// Results match the reference (double throughout) within f32 rounding of
// the sums (test/e2e/multihead-attention.nir, under each NIMBLE_KERNEL_ISA).
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_DISPATCH_LIBRARYATTENTION_H
#define NIMBLE_VM_DISPATCH_LIBRARYATTENTION_H

#include "vm/format/Executable.h"
#include "vm/Kernel.h"

#include <vector>

namespace nimble::vm {

class ThreadPool;

class AttentionKernels {
public:
  explicit AttentionKernels(const Executable &exe);
  /// Kernel `k` is a lone f32 attention over kernel inputs.
  bool supports(uint32_t k) const { return k < ok_.size() && ok_[k]; }
  size_t count() const;
  /// As LibraryKernels::run, for a kernel that supports(k); `pool` may be null.
  Status run(uint32_t k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs, ThreadPool *pool,
             bool *declined);

private:
  const Executable *exe_;
  std::vector<bool> ok_;
};

} // namespace nimble::vm

#endif // NIMBLE_VM_DISPATCH_LIBRARYATTENTION_H
