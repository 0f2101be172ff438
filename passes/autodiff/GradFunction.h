//===- GradFunction.h - Forward/backward pair of one function -------*- C++ -*-===//
//
// The per-function half of the `grad` pass (Grad.cpp holds the options, the
// checks and the wrapper): for a function @g it builds
//
//   @<root>.<g>.fwd(params) -> (results..., @<root>.<g>.tape)
//   @<root>.<g>.bwd(tape, seeds..., accs...) -> (param adjoints..., accs...)
//
// where `accs` are the running adjoints of the differentiated `const`
// globals. See Grad.cpp for the algorithm.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_GRADFUNCTION_H
#define NIMBLE_PASSES_GRADFUNCTION_H

#include "ir/IR.h"
#include "passes/autodiff/GradAggregates.h"

#include <map>
#include <string>
#include <vector>

namespace nimble::passes {

enum class Checkpoint : uint8_t { Store, Recompute };

struct FuncGrad {
  ir::Function *src = nullptr, *fwd = nullptr, *bwd = nullptr;
  ir::AdtDecl *tape = nullptr;
  ir::Type tapeType;
  /// Results that take a seed (floating-point tensors), in order.
  std::vector<unsigned> seedResults;
  /// Parameters whose adjoints bwd returns, in order.
  std::vector<unsigned> adjParams;
  bool built = false;
};

/// Shared state of one run of the pass: the module, the options and the
/// functions already declared.
class GradBuilder {
public:
  GradBuilder(ir::Module &m, ir::DiagnosticEngine &diag, std::string prefix,
              std::vector<ir::Global *> consts, Checkpoint mode)
      : m_(m), diag_(diag), prefix_(prefix), consts_(std::move(consts)), mode_(mode),
        agg_(m, std::move(prefix)) {}

  /// Declares the function being differentiated with respect to its
  /// parameters `wrt`: finds, over the call graph, which parameters of every
  /// function it reaches receive a varied value (interprocedural activity),
  /// then declares `f` with those of its own (wrt, plus what its recursive
  /// calls pass). Returns the declaration; bodies are built by buildAll().
  FuncGrad *declareRoot(ir::Function *f, const std::vector<unsigned> &wrt);
  /// Declares fwd/bwd/tape of `f` (once), differentiating with respect to
  /// `adjParams`; the body is built by buildAll().
  FuncGrad *declare(ir::Function *f, std::vector<unsigned> adjParams);
  /// Builds the bodies of every declared function (declaring callees as it
  /// meets their calls). Errors are reported; returns failure on any.
  ir::LogicalResult buildAll();

  const std::vector<ir::Global *> &consts() const { return consts_; }
  /// The names the pass would create for `f`, to check for clashes first.
  std::vector<std::string> namesFor(const ir::Function &f) const;
  /// Tuples' and ADTs' adjoints (which types carry one, their helpers).
  AggregateAdjoints &aggregates() { return agg_; }

private:
  ir::LogicalResult build(FuncGrad &fg);

  ir::Module &m_;
  ir::DiagnosticEngine &diag_;
  std::string prefix_;
  std::vector<ir::Global *> consts_;
  Checkpoint mode_;
  AggregateAdjoints agg_;
  /// Parameters of each reachable function that receive a varied value.
  std::map<const ir::Function *, std::vector<unsigned>> variedParams_;
  std::map<std::string, FuncGrad> funcs_;
  std::vector<FuncGrad *> order_;
};

} // namespace nimble::passes

#endif // NIMBLE_PASSES_GRADFUNCTION_H
