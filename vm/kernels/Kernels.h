//===- Kernels.h - Declarations of the reference kernels (private) -*- C++ -*-===//
//
// One `Status refX(const KernelArgs &)` per op of ir/Ops.def whose relation is
// not Structural, declared from the op table itself so that a new op without
// a kernel is a link error, not a null pointer found at run time. The
// NIMBLE_HAS_KERNEL_<Relation>(Yes, No, Id) macros say, per relation, whether
// ops of that relation have a kernel; a new relation without a line here fails
// to compile, which forces that decision to be made.
//
// Private to //vm:runtime; the public entry point is referenceKernel() in
// vm/Kernel.h.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_KERNELS_KERNELS_H
#define NIMBLE_VM_KERNELS_KERNELS_H

#include "vm/Kernel.h"

#define NIMBLE_HAS_KERNEL_Unary(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Broadcast(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Compare(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Select(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Cast(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_MatMul(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_BatchMatMul(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Reduce(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_ArgReduce(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_LayerNorm(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Reshape(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_DynReshape(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Transpose(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Concat(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Split(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Slice(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_DynamicSlice(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_DynamicUpdateSlice(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Take(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_ExpandDims(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Squeeze(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_BroadcastTo(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Constant(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Zeros(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Full(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Arange(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Unique(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Nonzero(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_ShapeOf(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Dim(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_StorageSize(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Conv(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Pool(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_CumSum(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Tile(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Pad(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_GatherND(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_ScatterElements(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_ScatterND(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_OneHot(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Attention(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_TopK(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_ConvTranspose(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_NonMaxSuppression(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Resize(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_GridSample(Yes, No, Id) Yes(Id)
#define NIMBLE_HAS_KERNEL_Structural(Yes, No, Id) No(Id)

namespace nimble::vm::kernels {

#define NIMBLE_DECLARE_KERNEL(Id) Status ref##Id(const KernelArgs &args);
#define NIMBLE_NO_KERNEL(Id)
#define NIMBLE_OP(Id, Mnemonic, MinOps, MaxOps, NumResults, Attrs, Rel, ...)                \
  NIMBLE_HAS_KERNEL_##Rel(NIMBLE_DECLARE_KERNEL, NIMBLE_NO_KERNEL, Id)
#include "ir/Ops.def"
#undef NIMBLE_DECLARE_KERNEL
#undef NIMBLE_NO_KERNEL

} // namespace nimble::vm::kernels

#endif // NIMBLE_VM_KERNELS_KERNELS_H
