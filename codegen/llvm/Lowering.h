//===- Lowering.h - Fused kernels to LLVM IR (internal) ----------*- C++ -*-===//
//
// The pieces of the kernel generator shared by its files; not a public API.
//
//   KernelLowering (KernelGen.cpp)   one kernel: buffers, stages, loop nests,
//                                    residue dispatch, index algebra
//   emitElementOp  (ElementOps.cpp)  the scalar / vector semantics of every
//                                    element-wise op, matching the reference
//                                    kernels (vm/kernels/) bit for bit where
//                                    no approximation is involved
//   emitExp, ...   (MathApprox.cpp)  vectorizable transcendental functions
//
// Values are LLVM scalars when a loop nest computes one point at a time and
// fixed vectors of `lanes` elements when it computes `lanes` consecutive
// points of the innermost dimension; every helper here works on both.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_CODEGEN_LLVM_LOWERING_H
#define NIMBLE_CODEGEN_LLVM_LOWERING_H

#include "ir/OpTable.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <string>

namespace nimble::codegen::lowering {

/// The LLVM type of one element of `t` in registers (i1 for booleans).
llvm::Type *elementType(llvm::LLVMContext &c, DType t);
/// The LLVM type of one element in memory (i8 for booleans).
llvm::Type *memoryType(llvm::LLVMContext &c, DType t);
/// `elem` or a vector of `lanes` of it.
llvm::Type *withLanes(llvm::Type *elem, unsigned lanes);

/// Whether the generator has a native form of `op` on `dtype` operands
/// (reason set when not).
bool elementOpSupported(OpCode op, DType operandType, DType resultType, std::string &reason);

/// One element-wise op (unary, binary, compare, select, cast) on already
/// broadcast operands. `onError` is the block to branch to for a run-time
/// error (integer division by zero); the builder continues after the check.
llvm::Value *emitElementOp(llvm::IRBuilder<> &b, OpCode op, DType in, DType out,
                           llvm::ArrayRef<llvm::Value *> args, const std::vector<Attr> &attrs,
                           llvm::BasicBlock *onError);

/// Casts between element types with the reference kernels' rules (float to
/// integer saturates, NaN to 0; to bool is `!= 0`).
llvm::Value *emitCast(llvm::IRBuilder<> &b, llvm::Value *v, DType from, DType to);

/// exp, tanh and sigmoid of f32 scalars or vectors, as inline polynomials
/// (vectorizable; accuracy in docs/codegen.md, checked by
/// test/codegen/math-accuracy). f64 calls libm.
llvm::Value *emitExp(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emitTanh(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emitSigmoid(llvm::IRBuilder<> &b, llvm::Value *x);
/// erf, gelu, log and pow of f32 scalars or vectors, evaluated in f64 with
/// inline polynomials and rounded once (MathApprox.cpp; within 1 ulp of
/// libm). CPU targets only: NVPTX takes them from libdevice.
llvm::Value *emitErfF32(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emitGeluF32(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emitLogF32(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emitPowF32(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y);
/// A libm function (expf, logf, erff, powf, ... by name) applied lane by lane.
llvm::Value *emitLibmCall(llvm::IRBuilder<> &b, const char *f32Name, const char *f64Name,
                          llvm::ArrayRef<llvm::Value *> args);

/// `x` is NaN (an unordered compare with itself), lane by lane.
llvm::Value *isNaN(llvm::IRBuilder<> &b, llvm::Value *x);
/// The overloaded intrinsic `id` on `args`, typed by the first argument.
llvm::Value *intrinsic(llvm::IRBuilder<> &b, llvm::Intrinsic::ID id, llvm::ArrayRef<llvm::Value *> args);
/// A constant of `like`'s type (scalar or splat).
llvm::Value *constLike(llvm::Value *like, double v);

} // namespace nimble::codegen::lowering

#endif // NIMBLE_CODEGEN_LLVM_LOWERING_H
