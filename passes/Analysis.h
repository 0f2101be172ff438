//===- Analysis.h - Call graph, function effects, IR cloning -------*- C++ -*-===//
//
// Module-level facts that several passes need, computed on demand and never
// cached across passes (a pass that edits the IR recomputes what it needs):
//
//  CallGraph      one node per function, one edge per distinct `call` target.
//                 Strongly connected components come from Tarjan's algorithm,
//                 which emits them in reverse topological order: every SCC
//                 appears after the SCCs it calls. That is the bottom-up order
//                 the inliner wants (callees are finished before their
//                 callers) and the order in which effects propagate.
//                 `invoke_mut` / `invoke_shape_func` name kernels, not calls:
//                 they are effects in their own right and add no edge.
//
//  EffectAnalysis which functions are side-effect free. `call` is flagged
//                 Effect in Ops.def because its effect is its callee's: a
//                 function is side-effect free when it contains no Effect op
//                 other than calls to side-effect-free functions. One bottom-
//                 up walk over the SCCs decides it; a recursive SCC is free of
//                 effects when none of its members has a real effect (calls
//                 inside the SCC do not count). Non-termination is not
//                 modelled: a recursion that never returns is still "pure",
//                 as LLVM's `readnone` without `willreturn`. So DCE may delete
//                 an unused call that would not have returned, and CSE may
//                 merge two such calls; the same holds for the run-time shape
//                 checks of Pure ops (gradual typing): a failing check of a
//                 deleted op is not preserved.
//
//  IRMapping / cloneOp / cloneBlocksInto
//                 copy operations and blocks, remapping operands, block
//                 arguments and successors through a value map and a block
//                 map (MLIR's IRMapping). Names, locations, attributes and
//                 result types are kept.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_ANALYSIS_H
#define NIMBLE_PASSES_ANALYSIS_H

#include "ir/IR.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace nimble::passes {

//===-- Call graph ---------------------------------------------------------===//

class CallGraph {
public:
  explicit CallGraph(const ir::Module &m);

  /// Distinct functions `f` calls, in the order of their first call site.
  const std::vector<ir::Function *> &callees(const ir::Function *f) const;
  /// The strongly connected components, callees before callers.
  const std::vector<std::vector<ir::Function *>> &sccs() const { return sccs_; }
  /// Index of `f`'s component in sccs().
  unsigned sccOf(const ir::Function *f) const { return sccIndex_.at(f); }
  /// True when `f` can reach itself through calls (a component of several
  /// functions, or one function that calls itself).
  bool isRecursive(const ir::Function *f) const { return recursive_[sccOf(f)]; }

private:
  std::unordered_map<const ir::Function *, std::vector<ir::Function *>> callees_;
  std::vector<std::vector<ir::Function *>> sccs_;
  std::unordered_map<const ir::Function *, unsigned> sccIndex_;
  std::vector<bool> recursive_;
};

//===-- Effects ------------------------------------------------------------===//

class EffectAnalysis {
public:
  EffectAnalysis(const ir::Module &m, const CallGraph &cg);

  /// True when calling `f` has no side effect (see the header comment).
  bool isSideEffectFree(const ir::Function *f) const;
  /// True when `op` has no side effect and allocates nothing: the ops CSE may
  /// merge. Pure table ops and calls to side-effect-free functions.
  bool isPure(const ir::Operation &op) const;
  /// True when `op` may be deleted once its results are unused: pure ops and
  /// Alloc ops (an unused allocation is dead; a `kill` would be a use).
  bool isRemovableIfUnused(const ir::Operation &op) const;

private:
  const ir::Module &m_;
  std::unordered_map<const ir::Function *, bool> free_;
};

//===-- Cloning ------------------------------------------------------------===//

/// Old-to-new maps for values and blocks. Unmapped values map to themselves
/// (globals, values defined outside the cloned region).
struct IRMapping {
  std::unordered_map<const ir::Value *, ir::Value *> values;
  std::unordered_map<const ir::Block *, ir::Block *> blocks;

  ir::Value *lookup(ir::Value *v) const {
    auto it = values.find(v);
    return it == values.end() ? v : it->second;
  }
  ir::Block *lookup(ir::Block *b) const {
    auto it = blocks.find(b);
    return it == blocks.end() ? b : it->second;
  }
};

/// A detached copy of `op`: operands and successor blocks go through `map`,
/// results keep their types and names and are recorded in `map`.
std::unique_ptr<ir::Operation> cloneOp(const ir::Operation &op, IRMapping &map);

/// Copies `blocks` (of one function) into `dst`, in that order, right after
/// `insertAfter`; returns the new blocks. An argument already mapped in `map`
/// gets no counterpart (the inliner maps the callee's parameters to the call's
/// operands); every other argument is recreated with its type and name. New
/// blocks are labelled `labelPrefix` + old label. Operands may refer to values
/// of blocks cloned later: they are remapped once every block is copied.
std::vector<ir::Block *> cloneBlocksInto(const std::vector<ir::Block *> &blocks, ir::Function &dst,
                                         ir::Block *insertAfter, IRMapping &map,
                                         const std::string &labelPrefix);

/// The label a block is printed with when it has none of its own.
std::string blockLabelOrDefault(const ir::Block &b);

} // namespace nimble::passes

#endif // NIMBLE_PASSES_ANALYSIS_H
