//===- Inference.h - Result types of one operation ---------------*- C++ -*-===//
//
// The single place that decides an operation's result types from its operands
// and attributes: tensor ops through their row's relation (ShapeFns), the
// structural ops (call, construct, tuple, memory ops) from the module. The
// parser uses it to fill omitted result types, the verifier to check declared
// ones, and the type-infer pass to refine them.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_IR_INFERENCE_H
#define NIMBLE_IR_INFERENCE_H

#include "ir/IR.h"

namespace nimble::ir {

struct InferredTypes {
  std::vector<Type> types;
  /// Checks left for run time (gradual typing), in words.
  std::vector<std::string> deferred;
  /// Non-empty: the op is ill-typed. `errorOperand` >= 0 names the operand at
  /// fault (the verifier attaches a note at its definition).
  std::string error;
  int errorOperand = -1;
  /// >= 0: the attribute at fault (schema index).
  int errorAttr = -1;
  bool ok() const { return error.empty(); }
};

/// Infers `op`'s result types. Operands must have types. `m` resolves callees
/// and ADTs.
InferredTypes inferResultTypes(const Operation &op, const Module &m);

/// The error for a failed `inf` of `op`, as `'op' op <error>`: located at the
/// operand use or attribute at fault when known (else at the op), with a note
/// where that operand is defined.
Diagnostic relationError(const Operation &op, const InferredTypes &inf);

/// The compile-time value of `v` when it is produced by a `constant` (or is an
/// inline-literal global), else null. Data-dependent relations use it.
const DenseValue *constantValue(const Value *v);

} // namespace nimble::ir

#endif // NIMBLE_IR_INFERENCE_H
