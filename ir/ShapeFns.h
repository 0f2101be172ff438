//===- ShapeFns.h - One shape function per op, for compile and run time -*- C++ -*-===//
//
// Nimble paper §3.1-3.2: every operator has a type relation, checked at compile
// time over dimensions that may be unknown (`?`, the paper's Any), and a shape
// function, run at run time over concrete sizes to size outputs and to finish
// the checks the compiler could not decide (gradual typing). Here they are one
// function: `inferShapes` takes operand signatures whose dimensions are either
// known or kDynamic. With every dimension known it is the run-time shape
// function; with some `?` it is the type relation, and each check that depends
// on a `?` is reported in `deferred` instead of being decided.
//
// Rules for `?` (paper §3.1):
//   broadcast(?, 1) = ?     broadcast(?, d) = d  (d != 1; run time checks ? in {1, d})
//   broadcast(?, ?) = ?     (run time checks compatibility)
//   equality constraints (matmul's inner dimension, concat's other axes, ...)
//   with a `?` side are deferred; the result takes the known side.
//
// Data-dependent ops (dyn_reshape, zeros, full, arange) need operand values:
// `values[i]` is operand i's value where known (a constant at compile time;
// always supplied at run time). Upper-bound ops (unique, nonzero) return the
// bound of their results' leading dimension with `upperBound` set; the kernel
// reports the true extent, so compile-time types show that dimension as `?`
// (ir/Inference.cpp).
//
// This file is shared with the runtime: it depends on OpTable.h only.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_IR_SHAPEFNS_H
#define NIMBLE_IR_SHAPEFNS_H

#include "ir/OpTable.h"

#include <string>
#include <span>
#include <vector>

namespace nimble {

/// The type of one tensor operand or result: element type and dimensions, each
/// a size >= 0 or kDynamic.
struct TensorSig {
  DType dtype = DType::F32;
  std::vector<int64_t> dims;
  bool operator==(const TensorSig &o) const { return dtype == o.dtype && dims == o.dims; }
};

struct ShapeFnResult {
  std::vector<TensorSig> results;
  /// Checks that depend on `?` dimensions and are left for run time.
  std::vector<std::string> deferred;
  /// Non-empty: the operands violate the op's relation. `errorOperand` names the
  /// operand at fault (-1: the op as a whole).
  std::string error;
  int errorOperand = -1;
  /// Index (schema order) of the attribute at fault, or -1.
  int errorAttr = -1;
  /// Upper-bound mode: `results` hold bounds, the kernel returns the true shape.
  bool upperBound = false;
  bool ok() const { return error.empty(); }
};

/// Applies op `code`'s relation to operand signatures and attributes (in the
/// op's schema order, defaults filled in). `values` may be empty or hold one
/// entry per operand (nullptr where unknown). Structural ops are not handled
/// here (the verifier types them): calling with one is a programming error.
ShapeFnResult inferShapes(OpCode code, const std::vector<TensorSig> &operands,
                          std::span<const Attr> attrs,
                          const std::vector<const DenseValue *> &values = {});

/// The operand whose shape op `code`'s single result always has, for every
/// run-time size its operands' signatures allow, when the relation also
/// leaves no check for run time (`deferred` empty); -1 otherwise. Then the
/// run-time shape function would only copy that operand's shape, and
/// manifest-memory sizes the output from the operand's `shape_of` instead
/// of calling it. Proved per relation, not sampled: element-wise unary ops,
/// casts and layer_norm (operand 0); broadcasting ops whose other operands broadcast
/// only along size-1 dims or match a static size (`?x8` + `8`, `?x8` +
/// `1x8`); a rank-2 matmul whose output width equals the lhs width (`?x8`
/// by `8x8`). Everything else, and every data-dependent or upper-bound op,
/// gives -1.
int shapeIdentityOperand(OpCode code, const std::vector<TensorSig> &operands,
                         std::span<const Attr> attrs);

/// "2x?x3" (no dtype); "scalar" for rank 0.
std::string formatDims(const std::vector<int64_t> &dims);
/// "tensor<2x?xf32>".
std::string formatSig(const TensorSig &sig);

/// The dimension lattice of sub-shaping: a static dim is a subtype of `?`.
/// join(a, b): the most precise dimension both are subtypes of.
inline int64_t joinDim(int64_t a, int64_t b) { return a == b ? a : kDynamic; }
/// True when a value of dimension `sub` may flow where `super` is expected.
inline bool isSubDim(int64_t sub, int64_t super) { return super == kDynamic || sub == super; }
/// True when two dimensions may be equal at run time.
inline bool dimsCompatible(int64_t a, int64_t b) {
  return a == kDynamic || b == kDynamic || a == b;
}

} // namespace nimble

#endif // NIMBLE_IR_SHAPEFNS_H
