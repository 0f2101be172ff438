//===- Verifier.h - IR invariants ----------------------------------*- C++ -*-===//
//
// The verifier runs after parsing and after every pass (nimble-opt
// --verify-each). It checks the invariants below and reports each failure at
// the operand, attribute or branch target at fault where the parser recorded
// its position (Operation::operandLoc/attrLoc, Successor::loc), else at the
// op, with notes at the related definitions:
//
//  Structure (verifyStructure, needs no types):
//   S1 every function has an entry block; every block ends in exactly one
//      terminator, and no terminator appears before the end;
//   S2 every operand is defined; successors are blocks of the same function,
//      other than the entry block (whose arguments are the parameters);
//   S3 SSA dominance: a value is used only where its definition dominates
//      (same block: defined earlier; block arguments: the owner block
//      dominates the use). Unreachable blocks are exempt, as in MLIR.
//  Types (verifyModule, after structure):
//   T1 entry block arguments match the function signature;
//   T2 each op's operand count and attributes match its row in Ops.def, and
//      its relation accepts the operand types (ShapeFns / Inference); declared
//      result types are compatible with the inferred ones (`?` matches any
//      size; a declared size the relation cannot prove is a run-time check);
//   T3 values flowing into block arguments, call parameters, constructor
//      fields and function results have a subtype of the target type
//      (sub-shaping: tensor<3x4xf32> flows into tensor<?x4xf32>, not back);
//   T4 branch, call and constructor arities; cond_br conditions are
//      tensor<i1>; match covers each constructor at most once, its targets
//      take exactly the constructor's fields, and a `_` case exists unless
//      every constructor is covered;
//   T5 every named type (@Adt) used anywhere is declared; callees exist.
//  Limits (verifyModule):
//   L1 every type of a value, a signature or an ADT field is within the
//      limits of ir/Limits.h: nesting depth, rank, bytes of a static shape
//      (docs/LangRef.md, "Limits"); op result counts are bounded by the
//      relations (split sections).
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_IR_VERIFIER_H
#define NIMBLE_IR_VERIFIER_H

#include "ir/FlatMap.h"
#include "ir/IR.h"

#include <span>
#include <vector>

namespace nimble::ir {

struct VerifyOptions {
  /// Attach a note with the printed op (useful when the IR came from a pass
  /// and the source line no longer shows it).
  bool printOp = false;
  /// Every function's structure (verifyStructure) was checked since the
  /// module last changed: parseModule does so before it infers types, so a
  /// tool verifying what it just parsed skips that part (it builds each
  /// function's dominator tree).
  bool structureVerified = false;
};

LogicalResult verifyStructure(const Function &f, DiagnosticEngine &diag,
                              const VerifyOptions &opts = {});
LogicalResult verifyModule(const Module &m, DiagnosticEngine &diag,
                           const VerifyOptions &opts = {});

/// Dominance over a function's CFG (Cooper, Harvey, Kennedy: "A Simple, Fast
/// Dominance Algorithm"), on reachable blocks. Queries are O(1): the
/// dominator tree is numbered in DFS pre- and post-order (a dominates b when
/// b's interval nests in a's), and same-block order is the ops' order numbers.
/// The verifier asks `valueDominates`; memory planning (passes/analysis/Dominators.h)
/// asks for common dominators and the tree's children as well.
class DominanceInfo {
public:
  explicit DominanceInfo(const Function &f);
  bool isReachable(const Block *b) const { return index(b) >= 0; }
  /// RPO position, or -1 for unreachable blocks.
  int index(const Block *b) const {
    const uint64_t w = b->domWord();
    if ((w >> 32) == tag_) return static_cast<int>(static_cast<uint32_t>(w));
    return slowIndex(b);
  }
  /// The reachable blocks in reverse post-order.
  const std::vector<Block *> &reversePostOrder() const { return rpo_; }
  /// True when `a` dominates `b` (reflexive). False for unreachable blocks.
  bool dominates(const Block *a, const Block *b) const;
  /// True when `a` comes before or is `b`, and its block dominates b's.
  bool dominates(const Operation *a, const Operation *b) const {
    if (a->block() == b->block()) return a == b || a->isBeforeInBlock(b);
    return dominates(a->block(), b->block());
  }
  /// True when value `v` is available at operation `user` (SSA dominance).
  bool valueDominates(const Value *v, const Operation *user) const;
  /// The immediate dominator, or null for the entry and unreachable blocks.
  Block *idom(const Block *b) const;
  /// The nearest block dominating both (both reachable).
  Block *common(const Block *a, const Block *b) const {
    return rpo_[intersect(index(a), index(b))];
  }
  /// The nearest block dominating every block of `bs` (all reachable, at
  /// least one): the common dominator of the two with the smallest and
  /// largest pre-order numbers.
  Block *common(const std::vector<const Block *> &bs) const;
  /// The dominator-tree children of the block at RPO position `i`, as RPO
  /// positions in increasing order (which is also their pre-order).
  std::span<const int> children(int i) const {
    return {kids_.data() + kidBegin_[static_cast<size_t>(i)], kids_.data() + kidBegin_[static_cast<size_t>(i) + 1]};
  }
  /// The predecessors of the block at RPO position `i` that are reachable,
  /// as RPO positions: by increasing position, each once per edge.
  std::span<const int> predecessors(int i) const {
    return {preds_.data() + predBegin_[static_cast<size_t>(i)], preds_.data() + predBegin_[static_cast<size_t>(i) + 1]};
  }
  /// The child of `d` in the dominator tree that dominates `c` (`d` strictly
  /// dominates `c`, both reachable). O(log children).
  Block *childToward(const Block *d, const Block *c) const;

private:
  int intersect(int a, int b) const {
    while (a != b) {
      while (a > b) a = idom_[a];
      while (b > a) b = idom_[b];
    }
    return a;
  }
  int slowIndex(const Block *b) const;
  std::vector<Block *> rpo_;
  // A block's RPO position is kept in its dominance word (Block::domWord)
  // under this object's tag (newScratchTag), so that a lookup is a load, not
  // a hash (issue 23: the verifier asks per operand from another block). A
  // word without the tag (an unreachable block, or one a later
  // DominanceInfo of the function overwrote while this one lives) is looked
  // up in `index_`, built at the first such lookup.
  uint64_t tag_ = 0;
  mutable FlatMap<const Block *, int> index_;
  mutable bool indexed_ = false;
  std::vector<int> idom_;
  /// Predecessors as compressed rows: those of block i are
  /// preds_[predBegin_[i], predBegin_[i + 1]).
  std::vector<int> preds_;
  std::vector<uint32_t> predBegin_;
  /// Dominator-tree children of each block, in increasing RPO index (which
  /// is also their pre-order): those of block i are kids_[kidBegin_[i],
  /// kidBegin_[i + 1]).
  std::vector<int> kids_;
  std::vector<uint32_t> kidBegin_;
  std::vector<uint32_t> pre_, post_;
};

} // namespace nimble::ir

#endif // NIMBLE_IR_VERIFIER_H
