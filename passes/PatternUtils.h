//===- PatternUtils.h - Matchers shared by rewrite patterns -------*- C++ -*-===//
//
// Small predicates the canonicalize patterns (and later rewrite passes) ask of
// values: is it a constant whose every element is x, may a result be replaced
// by one of its operands without changing any shape, is a cast lossless.
// Each answers from types and constants only, conservatively: `false` means
// "not proven", never "proven otherwise".
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_PATTERNUTILS_H
#define NIMBLE_PASSES_PATTERNUTILS_H

#include "ir/IR.h"
#include "ir/Inference.h"
#include "passes/transforms/ConstantFold.h"

#include <cmath>

namespace nimble::passes {

/// The op that defines `v` when it is an `code` op, else null.
inline ir::Operation *definedBy(ir::Value *v, OpCode code) {
  ir::Operation *d = v->definingOp();
  return d && d->is(code) ? d : nullptr;
}

/// True when `v` is a compile-time constant whose every element equals `x`.
inline bool isConstantSplat(const ir::Value *v, double x) {
  const DenseValue *d = ir::constantValue(v);
  return d && allElementsEqual(*d, x);
}

/// True when `v` is a constant whose every element is a zero that leaves
/// x unchanged under `op` for every x, -0.0 included: for floats x + (-0.0)
/// and x - (+0.0) are x (IEEE 754: -0 + -0 = -0), but x + (+0.0) and
/// x - (-0.0) are +0.0 at x = -0.0. For integers any zero.
inline bool isNeutralZero(const ir::Value *v, bool negative) {
  const DenseValue *d = ir::constantValue(v);
  if (!d || !allElementsEqual(*d, 0.0)) return false;
  if (!isFloat(d->dtype)) return true;
  int64_t n = d->splat ? 1 : d->numElements();
  for (int64_t i = 0; i < n; ++i)
    if (std::signbit(d->getDouble(i)) != negative) return false;
  return true;
}

/// True when a value of type `o` broadcast against one of type `x` (numpy
/// rules) provably leaves x's shape unchanged: aligned from the right, each of
/// o's dims is 1 or the same static size as x's. A `?` on either side may hide
/// a size that grows the result (or a size mismatch the runtime must report),
/// so it is not accepted.
inline bool broadcastsInto(ir::Type o, ir::Type x) {
  if (!o.isTensor() || !x.isTensor() || o.rank() > x.rank()) return false;
  size_t off = static_cast<size_t>(x.rank() - o.rank());
  for (size_t k = 0; k < o.dims().size(); ++k) {
    int64_t od = o.dims()[k], xd = x.dims()[off + k];
    if (od == 1) continue;
    if (od == kDynamic || xd == kDynamic || od != xd) return false;
  }
  return true;
}

/// True when `op`'s (single) result may be replaced by its operand `x`: x's
/// type is a subtype of the result's, and no other operand can make the
/// broadcast result bigger than x. The subtype test alone is not enough: with
/// `%r = add %x, %zeros : tensor<?x4xf32>`, x: tensor<?x4xf32> and %zeros:
/// tensor<3x4xf32>, x may be 1x4 at run time and %r 3x4.
inline bool canForwardOperand(const ir::Operation &op, ir::Value *x) {
  if (op.numResults() != 1 || !x->type().isSubtypeOf(op.result(0)->type())) return false;
  for (ir::Value *o : op.operands())
    if (o != x && !broadcastsInto(o->type(), x->type())) return false;
  return true;
}

/// True when every value of `from` converts exactly to `to`, so that a later
/// cast of the converted value equals a cast of the original (conversions
/// depend on the value only): i1 to anything; i8 to the wider integers and
/// every float (|v| <= 128 is exact even in bf16); i16 to i32, i64, f32, f64;
/// u8 to the wider integers and every float; u16 to the integers and floats
/// of 32 bits and more; u32 to i64, u64, f64; i32 to i64 and f64; f16 and
/// bf16 to f32 and f64; f32 to f64. i64 to f64 loses bits above 2^53, and no
/// narrowing cast is lossless.
inline bool isLosslessCast(DType from, DType to) {
  if (from == to) return true;
  switch (from) {
  case DType::I1: return true;
  case DType::I8: return isSignedInt(to) || isFloat(to);
  case DType::I16: return to == DType::I32 || to == DType::I64 || to == DType::F32 || to == DType::F64;
  case DType::I32: return to == DType::I64 || to == DType::F64;
  case DType::U8: return (isInteger(to) && to != DType::I8) || isFloat(to);
  case DType::U16:
    return to == DType::I32 || to == DType::I64 || to == DType::U32 || to == DType::U64 ||
           to == DType::F32 || to == DType::F64;
  case DType::U32: return to == DType::I64 || to == DType::U64 || to == DType::F64;
  case DType::F16:
  case DType::BF16: return to == DType::F32 || to == DType::F64;
  case DType::F32: return to == DType::F64;
  default: return false;
  }
}

} // namespace nimble::passes

#endif // NIMBLE_PASSES_PATTERNUTILS_H
