//===- ConstantFold.h - Compile-time evaluation of operations -----*- C++ -*-===//
//
// The constant folder of the canonicalize pass (DLVM §3.1.2 lists constant
// propagation among the optimizations every tensor compiler needs; MLIR's
// `fold` hooks are the model). `foldOperation` evaluates one operation whose
// operands are compile-time constants (`constant` ops or inline-literal
// globals, see ir::constantValue) and returns the values of its results; the
// caller turns them into new `constant` ops.
//
// What folds:
//   - element-wise unary ops, binary ops with numpy broadcasting, compares,
//     logical ops, select, cast;
//   - reshape / dyn_reshape (constant shape) / transpose / expand_dims /
//     squeeze / broadcast_to / concat / slice / split of constants;
//   - arange with constant operands; zeros / full with a constant shape;
//   - sum / max / min / mean / prod of constants of at most `maxElements` elements;
//   - shape_of and dim of any tensor whose type fixes the answer, even when
//     the operand itself is not a constant (only its type is read).
//
// Semantics are those of the runtime's reference kernels (vm/kernels/), bit
// for bit, so that -O0 and -O2 agree on every value, IEEE special values
// included (test/passes/canonicalize-exact.test checks it):
//   - Floats are computed in the op's own precision: f64 in double, f32 in
//     float (rounded after every arithmetic step, as a float kernel does), f16
//     and bf16 in float and rounded to the narrow type when stored (the
//     OpTable.h conversions, round to nearest even).
//   - Integers wrap on overflow (two's complement, like numpy).
//   - Integer division truncates toward zero and MIN / -1 wraps to MIN, as in
//     the kernel (docs/LangRef.md, div; numpy's // floors instead). Division
//     by zero is NOT folded: the runtime reports it with the op's source
//     location, and a compile-time fold would hide that error.
//   - cast is the kernel's: float to integer truncates toward zero and
//     saturates (NaN -> 0, +-inf and out-of-range values -> the type's max or
//     min: docs/LangRef.md); conversions to f16/bf16 round through f32, as the
//     kernel does (two roundings).
//   - Floats that the kernels compute through a wider type are folded the
//     same way: sum and mean accumulate in double and round once, arange
//     computes start + i * step in double, f16/bf16 go through f32.
//   - gelu does not fold: whether the runtime uses the erf or the tanh form is
//     the kernel's choice, and the two differ in the low bits.
//
// Size limit: a folded result may have at most `maxElements` elements (4096 by
// default), splats included. Folding writes the result into the IR as a
// literal; without a limit, `transpose @w` or `add @w, 1.0` of a weight matrix
// would duplicate the model's weights into the program text (and into the
// executable's constant pool), trading a cheap run-time op for megabytes.
// Reductions also limit their input, which bounds compile time.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_CONSTANTFOLD_H
#define NIMBLE_PASSES_CONSTANTFOLD_H

#include "ir/IR.h"

#include <optional>
#include <vector>

namespace nimble::passes {

/// Default bound on the number of elements of a folded value.
inline constexpr int64_t kDefaultFoldLimit = 4096;

/// Evaluates `op` at compile time. Returns one value per result, or nullopt
/// when an operand is not constant, the op has no folder, the result would
/// exceed `maxElements`, or the semantics leave the value to the runtime
/// (see the file comment).
std::optional<std::vector<DenseValue>> foldOperation(const ir::Operation &op,
                                                     int64_t maxElements = kDefaultFoldLimit);

/// A value of `dtype` and `shape` whose every element is `v` (a splat, or a
/// plain scalar for rank 0). `v` is converted like appendDouble / appendInt.
DenseValue makeSplat(DType dtype, const std::vector<int64_t> &shape, double v);

/// The number of elements of `shape`, saturated at INT64_MAX (and for a `?`
/// dim): dims come from user input, and a splat of 2^32 x 2^32 elements is
/// one line of IR.
int64_t elementCount(const std::vector<int64_t> &shape);

/// True when every element of `v` equals `x` (compared as double; -0.0 equals
/// 0.0). False for empty tensors and for non-splat values too large to scan.
bool allElementsEqual(const DenseValue &v, double x);

} // namespace nimble::passes

#endif // NIMBLE_PASSES_CONSTANTFOLD_H
