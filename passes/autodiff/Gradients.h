//===- Gradients.h - Adjoint (vector-Jacobian product) rules -------*- C++ -*-===//
//
// The rules of ir/Gradients.def written as `.nir` ops (DLVM, seed 004,
// §3.1.3: every op declares its adjoint; the differentiation pass generates
// adjoint code from those declarations). The `grad` pass (Grad.cpp) owns the
// control flow and the tape; this file knows one op at a time: given the
// adjoints of an op's results, emit the adjoints of its operands.
//
// Forward values a rule needs (x, y) are asked of a callback, so the same
// rule serves both checkpointing modes: the pass answers with a value loaded
// from the tape (`checkpoint=store`) or recomputed in the reverse block
// (`checkpoint=recompute`).
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_GRADIENTS_H
#define NIMBLE_PASSES_GRADIENTS_H

#include "ir/Builder.h"
#include "ir/IR.h"

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace nimble::passes {

enum class GradKind : uint8_t { Rule, Inactive, NonDiff, Control };

/// How reverse-mode AD treats `code` (its row of Gradients.def).
GradKind gradKind(OpCode code);
/// The row's formula or reason, for diagnostics and docs.
std::string_view gradFormula(OpCode code);

/// True for the types that carry adjoints: floating-point tensors.
bool isDifferentiableType(ir::Type t);

/// Emits adjoint code at a builder's insertion point.
class AdjointEmitter {
public:
  /// `fwd` maps a forward value (an operand or result of the op being
  /// differentiated) to its value at the insertion point.
  AdjointEmitter(ir::Builder &b, std::function<ir::Value *(ir::Value *)> fwd)
      : b_(b), fwd_(std::move(fwd)) {}

  /// Adjoints of `op`'s operands (null: none, i.e. zero) from the adjoints of
  /// its results (null: zero; at least one is set). Returns false with
  /// error() set when the rule does not cover this use of the op.
  bool emit(const ir::Operation &op, const std::vector<ir::Value *> &resultAdj,
            std::vector<ir::Value *> &operandAdj);
  const std::string &error() const { return error_; }

  /// The helpers the pass shares with the rules.
  ir::Value *add(ir::Value *a, ir::Value *b);
  /// A zero tensor shaped like forward value `x`.
  ir::Value *zerosLike(ir::Value *x);
  /// Zeros of element type `dt` and the run-time shape `shape` (tensor<r x i64>),
  /// or of static type `t` when it has a static shape.
  ir::Value *zeros(ir::Type t, ir::Value *shape);
  /// `v` typed as `t` (a subtype of it), through a reshape when inference
  /// lost static sizes that `t` has; null when that is not possible.
  ir::Value *coerce(ir::Value *v, ir::Type t);
  /// `acc` plus the adjoint `g` of `slice = dynamic_slice %x, %start`, where
  /// `acc` is a running adjoint of %x: `g` is added into the window
  /// (`dynamic_update_slice acc, dynamic_slice(acc) + g, start`) instead of
  /// being padded to %x's size, so a loop that slices a row per iteration
  /// accumulates in O(row) per iteration (in place, manifest-memory). Null
  /// when an op does not type-check.
  ir::Value *addToWindow(const ir::Operation &slice, ir::Value *acc, ir::Value *g);

private:
  ir::Value *op(OpCode c, const std::vector<ir::Value *> &ops,
                const std::vector<std::pair<std::string, Attr>> &attrs = {});
  ir::Value *scalar(ir::Type like, double v);
  ir::Value *fwd(ir::Value *v) { return fwd_(v); }
  ir::Value *unbroadcast(ir::Value *g, ir::Value *x);
  ir::Value *broadcastLike(ir::Value *g, ir::Value *x);
  ir::Value *reshapeLike(ir::Value *g, ir::Value *x);
  /// g padded with `before`/`after` zeros along `axis` (each a static count
  /// when the Value is null).
  ir::Value *padAxis(ir::Value *g, int64_t axis, ir::Value *before, int64_t beforeC,
                     ir::Value *after, int64_t afterC);
  bool fail(std::string msg) {
    error_ = std::move(msg);
    return false;
  }

  ir::Builder &b_;
  std::function<ir::Value *(ir::Value *)> fwd_;
  std::string error_;
  bool broken_ = false;
};

} // namespace nimble::passes

#endif // NIMBLE_PASSES_GRADIENTS_H
