//===- SameExtent.h - Run-time sizes proved equal from the IR ----*- C++ -*-===//
//
// Exporters write a reshape's target from the sizes of some *other* value:
// torch's BERT splits q into heads by Reshape(q, [Shape(h)[0], 12, 64]),
// where h is the layer's input and q = h W^T + b (issue 47). Its dimension 0
// is q's own, so the target is "q's rows, 12, 64", which `reshape` writes as
// [-1, 12, 64] without a shape vector computed at run time; to see it, a
// pass must prove that dim(h, 0) and dim(q, 0) are the same run-time size.
//
// rootOf walks a dimension back through ops whose result dimension is, for
// every run-time shape, one of their operand's dimensions: element-wise and
// same-shape ops (unary, layer_norm, softmax, cast), broadcasting ops where
// the other operands cannot set that size (absent or a static 1 there),
// matmul's rows and columns, transpose, attention, and reshapes whose entry
// is a `dim` of another value or a -1 that stands for the operand's one
// `?` dimension. Two dimensions with the same root are equal whenever both
// values are computed; anything else is "not proven" (conservative, like
// PatternUtils.h).
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_ANALYSIS_SAMEEXTENT_H
#define NIMBLE_PASSES_ANALYSIS_SAMEEXTENT_H

#include "ir/IR.h"

#include <optional>
#include <vector>

namespace nimble::passes {

/// Dimension `axis` (>= 0) of tensor `value`.
struct DimRef {
  ir::Value *value = nullptr;
  int64_t axis = 0;
  bool operator==(const DimRef &o) const { return value == o.value && axis == o.axis; }
};

/// The earliest dimension provably equal to `d` at run time (d itself when
/// nothing is proven).
DimRef rootOf(DimRef d);

/// True when a's and b's dimensions are provably the same run-time size
/// (equal static sizes, or the same root).
bool sameExtent(DimRef a, DimRef b);

/// One entry of a run-time shape vector: a static size (`dim.value` null),
/// or the size of a dimension.
struct ShapeEntry {
  int64_t size = 0;
  DimRef dim;
};

/// The dimension of `x` that a reshape's -1 entry at index `at` of
/// `target` stands for: x's only `?` dimension, when x's static sizes and
/// the other (static, >= 0) entries have the same nonzero product.
std::optional<DimRef> minusOneSource(ir::Value *x, const std::vector<int64_t> &target, size_t at);

/// The entries of a 1-D i64 shape vector built from constants and `dim`s:
/// a constant, `expand_dims` (or `reshape` to [1]) of a `dim`, and `concat`s
/// of those along axis 0. nullopt for anything else.
std::optional<std::vector<ShapeEntry>> shapeEntries(ir::Value *shape);

} // namespace nimble::passes

#endif // NIMBLE_PASSES_ANALYSIS_SAMEEXTENT_H
