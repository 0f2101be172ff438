//===- GradAggregates.h - Adjoints of tuples and ADT values ---------*- C++ -*-===//
//
// The `grad` pass differentiates with respect to any value that holds a
// floating-point tensor somewhere inside: a tensor, a tuple of them, a tree of
// word vectors (the Tree-LSTM's input). The adjoint of such a value has the
// value's own type and shape: the same constructor at every node, the adjoint
// in each floating-point tensor field and the primal value in every other
// field (an i64 tensor, an ADT without floats), so the structure survives
// sums and zeros. DLVM (seed 004, §3.1.3) declares adjoints per op; for
// aggregates the "op" is the type, and this file generates, per ADT, the two
// functions every adjoint of that type needs:
//
//   @<grad>.zeros.<T>(%x: @T) -> @T     the zero adjoint shaped like %x
//   @<grad>.add.<T>(%a: @T, %b: @T) -> @T  the sum of two adjoints of one value
//
// (recursive like the type; a constructor mismatch in add, which the pass
// never builds, ends in `unreachable`). Tuples are handled inline, element by
// element.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_GRADAGGREGATES_H
#define NIMBLE_PASSES_GRADAGGREGATES_H

#include "ir/Builder.h"
#include "ir/IR.h"

#include <map>
#include <string>
#include <vector>

namespace nimble::passes {

class AggregateAdjoints {
public:
  AggregateAdjoints(ir::Module &m, std::string prefix) : m_(m), prefix_(std::move(prefix)) {}

  /// True when a value of type `t` carries an adjoint: a floating-point
  /// tensor, or a tuple or ADT with one in some element or field (ADTs to a
  /// fixed point, so recursive types work).
  bool carries(ir::Type t);
  /// The zero adjoint of forward value `x` (any type that carries one), at
  /// the builder's insertion point.
  ir::Value *zerosLike(ir::Builder &b, ir::Value *x);
  /// The sum of two adjoints of one value (either may be null: the other).
  /// Tensors are added with `add` (the caller coerces types).
  ir::Value *add(ir::Builder &b, ir::Value *x, ir::Value *y);
  /// `v` retyped as `t` where a tuple's elements lost static sizes
  /// (elements rebuilt through `coerceTensor`); null when impossible.
  ir::Value *coerce(ir::Builder &b, ir::Value *v, ir::Type t,
                    const std::function<ir::Value *(ir::Value *, ir::Type)> &coerceTensor);

  /// The names this may create for the module's ADTs (to check for clashes).
  std::vector<std::string> helperNames() const;

private:
  /// A new @<prefix>.<kind>.<T>(params: @T...) -> @T with an empty entry.
  ir::Function *helper(const ir::AdtDecl &adt, const std::string &kind,
                       const std::vector<std::string> &params);
  ir::Function *zerosFn(const ir::AdtDecl &adt);
  ir::Function *addFn(const ir::AdtDecl &adt);
  ir::Value *tensorZeros(ir::Builder &b, ir::Value *x);

  ir::Module &m_;
  std::string prefix_;
  std::map<std::string, bool> carries_;
  std::map<std::string, ir::Function *> zeros_, add_;
};

} // namespace nimble::passes

#endif // NIMBLE_PASSES_GRADAGGREGATES_H
