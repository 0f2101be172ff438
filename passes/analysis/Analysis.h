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
//  EffectAnalysis what calling a function may do, on the scale of the Ops.def
//                 flags: nothing (Pure), allocate (Alloc), or an observable
//                 effect (Effect). `call` is flagged Effect in Ops.def because
//                 its effect is its callee's: a function's level is the
//                 highest level of its ops, where a call counts at its
//                 callee's level. One bottom-up walk over the SCCs decides it;
//                 calls inside a recursive SCC do not count (the component is
//                 as pure as its members' other ops). A function without an
//                 Effect op (other than calls to such functions) is
//                 side-effect free: DCE may delete an unused call to it. CSE
//                 may merge two calls only when the callee does not allocate
//                 either: each call would return a fresh buffer, which a
//                 later invoke_mut may write (the same reason CSE never
//                 merges alloc_tensor).
//                 Non-termination is not modelled: a recursion that never
//                 returns is still "pure", as LLVM's `readnone` without
//                 `willreturn`. So DCE may delete an unused call that would
//                 not have returned, and CSE may merge two such calls; the
//                 same holds for the run-time shape checks of Pure ops
//                 (gradual typing): a failing check of a deleted op is not
//                 preserved.
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
  const std::vector<ir::Function *> &callees(const ir::Function *f) const { return callees_[number(f)]; }
  /// The strongly connected components, callees before callers.
  const std::vector<std::vector<ir::Function *>> &sccs() const { return sccs_; }
  /// Index of `f`'s component in sccs().
  unsigned sccOf(const ir::Function *f) const { return sccIndex_[number(f)]; }
  /// True when `f` can reach itself through calls (a component of several
  /// functions, or one function that calls itself).
  bool isRecursive(const ir::Function *f) const { return recursive_[sccOf(f)]; }

  /// What `f`'s own ops may do, calls aside (Ops.def flags), gathered in the
  /// same walk as the calls so that EffectAnalysis needs no walk of its own
  /// (issue 23: on a program of 125,000 functions the two walks were two
  /// thirds of CSE and DCE).
  enum LocalEffect : uint8_t { kLocalAlloc = 1, kLocalEffect = 2, kCallsUnknown = 4 };
  uint8_t localEffects(const ir::Function *f) const { return local_[number(f)]; }

private:
  unsigned number(const ir::Function *f) const { return num_.at(f); }
  /// Functions are numbered in module order; the tables below are by number.
  std::unordered_map<const ir::Function *, unsigned> num_;
  std::vector<std::vector<ir::Function *>> callees_;
  std::vector<uint8_t> local_;
  std::vector<std::vector<ir::Function *>> sccs_;
  std::vector<unsigned> sccIndex_;
  std::vector<bool> recursive_;
};

//===-- Effects ------------------------------------------------------------===//

class EffectAnalysis {
public:
  /// Ordered: each level includes what the ones below it may do.
  enum class Level : uint8_t { Pure, Alloc, Effect };

  EffectAnalysis(const ir::Module &m, const CallGraph &cg);

  /// What calling `f` may do (Effect for an unknown function).
  Level level(const ir::Function *f) const;
  /// True when calling `f` has no side effect (it may allocate).
  bool isSideEffectFree(const ir::Function *f) const { return level(f) != Level::Effect; }
  /// What executing `op` may do: its Ops.def flags, or its callee's level.
  /// Terminators are Pure here (control flow is not an effect).
  Level level(const ir::Operation &op) const;
  /// The ops CSE may merge: no side effect and no allocation.
  bool isPure(const ir::Operation &op) const { return level(op) == Level::Pure; }
  /// The ops DCE may delete once their results are unused.
  bool isRemovableIfUnused(const ir::Operation &op) const {
    return !op.isTerminator() && level(op) != Level::Effect;
  }

private:
  const ir::Module &m_;
  std::unordered_map<const ir::Function *, Level> level_;
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

//===----------------------------------------------------------------------===//
// Kernels and primitive functions (fuse, manifest-memory, place-devices,
// plan-memory)
//===----------------------------------------------------------------------===//

/// A function with attribute `primitive = true`: a kernel (one or a fused
/// group of tensor ops), called through invoke_mut after manifest-memory.
bool isPrimitive(const ir::Function &f);
/// Ops the VM executes itself, without a kernel: constant (LoadConst),
/// shape_of, reshape/dyn_reshape (views), device_copy, storage_size.
bool isVMNative(OpCode c);
/// An op that becomes a kernel call: not structural and not VM-native.
bool isKernelOp(const ir::Operation &op);

/// A result of `shape_of`, `invoke_shape_func` or `storage_size`: a tensor
/// the VM makes fresh, of at most 8 x 64 bytes (a shape of the largest rank,
/// or one i64), that aliases no storage. Memory planning does not kill
/// these: the register that holds one is overwritten soon after its last
/// use, which releases it, and a kill would be one more instruction in every
/// kernel call with a dynamic shape (and one more op in the IR).
bool smallFreshTensor(const ir::Value *v);

/// A value memory planning kills where it dies, and a branch releases when
/// it passes the value to a block argument on an edge where it dies (see
/// `br` in docs/LangRef.md): a tensor or a storage that is not a global, a
/// function parameter (the caller holds its own reference), a constant (the
/// constant pool keeps it) or a small fresh tensor (above).
bool killable(const ir::Value *v);

/// True when a result of `op` is the operand of a `kill` (manifest-memory or
/// plan-memory ended its life there). Rewrites that replace one value by
/// another (CSE, canonicalize) leave such ops alone: the kill would move to
/// the other value and end its life before its later uses.
bool hasKilledResult(const ir::Operation &op);

} // namespace nimble::passes

#endif // NIMBLE_PASSES_ANALYSIS_H
