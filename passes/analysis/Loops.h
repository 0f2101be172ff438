//===- Loops.h - Natural loops of a function's CFG -----------------*- C++ -*-===//
//
// Loops in Nimble IR are block-argument loops: a header block whose arguments
// carry the loop state, entered from a preheader and re-entered by back
// edges (`br ^header(...)` from a latch). A back edge is an edge B -> H where
// H dominates B; the natural loop of H is H plus every block that reaches a
// latch without passing through H (the textbook construction, as LLVM's
// LoopInfo). Loops sharing a header are one loop.
//
// `preheader` is set when the header has exactly one predecessor outside the
// loop and that predecessor ends in an unconditional `br` to the header: code
// hoisted out of the loop goes before that `br`, where it runs exactly once
// each time the loop is entered.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_LOOPS_H
#define NIMBLE_PASSES_LOOPS_H

#include "ir/IR.h"
#include "ir/Verifier.h"

#include <memory>
#include <vector>

namespace nimble::passes {

/// The loop nest of one findLoops call, shared by its loops: per block (by
/// its RPO position in the DominanceInfo) the innermost loop holding it, and
/// per loop the loop it is directly nested in (LLVM's LoopInfo: membership
/// is a walk up the nest from the block's innermost loop, not a set per
/// loop: a loop of a million blocks made a million entries in a hash set in
/// each of the three passes that find loops; issue 23).
struct LoopNest {
  const ir::DominanceInfo *dom = nullptr;
  std::vector<int> innermost; // per RPO position: a loop id, or -1
  std::vector<int> parent;    // per loop id: the enclosing loop's id, or -1
};

struct Loop {
  ir::Block *header = nullptr;
  ir::Block *preheader = nullptr;        // null when there is none (see above)
  std::vector<ir::Block *> blocks;       // the header first, then in reverse post-order
  std::vector<ir::Block *> latches;      // blocks with an edge back to the header

  /// Whether `b` is one of `blocks`: O(nesting depth). Blocks made after
  /// findLoops (and unreachable ones) are in no loop. Valid while the
  /// DominanceInfo given to findLoops lives.
  bool contains(const ir::Block *b) const {
    const int i = nest_->dom->index(b);
    if (i < 0) return false;
    int l = nest_->innermost[static_cast<size_t>(i)];
    while (l >= 0 && l != id_) l = nest_->parent[static_cast<size_t>(l)];
    return l == id_;
  }
  /// Defined outside the loop: a global, an argument of a block outside it,
  /// or a result of an op outside it.
  bool isInvariant(const ir::Value *v) const;

private:
  friend std::vector<Loop> findLoops(ir::Function &f, const ir::DominanceInfo &dom);
  std::shared_ptr<const LoopNest> nest_;
  int id_ = -1; // position in findLoops' result
};

/// A loop over the rows of a tensor X, in the form `batch-input-projection`
/// and `loop-distribute` rewrite:
///
///   ^pre:  ... br ^h(%zero, ...)          %zero = constant 0 : tensor<i64>
///   ^h(%t: tensor<i64>, ...):
///     %done = greater_equal %t, %n        (or %more = less %t, %n, the body
///     cond_br %done, ^exit, ^body          on the true side)
///   ...    br ^h(%t1, ...)                 %t1 = add %t, %one  (every latch)
///                                          %one = constant 1 : tensor<i64>
///   with %n = dim %X, axis=0 and %X defined outside the loop, or %n a
///   constant and %X an invariant tensor of that many (static) rows that
///   the loop takes `dynamic_slice %X, %t, axis=0, size=1` of (a `dim` of
///   a static X folds to a constant).
///
/// The loop must have a preheader. `counter` is null when the loop is not of
/// this form.
struct CountedLoop {
  ir::BlockArgument *counter = nullptr; // %t
  ir::Value *rows = nullptr;            // %X
  ir::Operation *compare = nullptr;     // the header's greater_equal / less
  ir::Block *exit = nullptr;            // the header's successor outside the loop
};
CountedLoop matchCountedLoop(const Loop &loop);

/// True when `val` is a constant scalar i64 equal to `v`.
bool isI64Constant(const ir::Value *val, int64_t v);

/// The operand that terminator `term` passes to argument `i` of `target`.
ir::Value *passedTo(const ir::Operation *term, const ir::Block *target, unsigned i);

/// The loops of `f`, innermost first (fewer blocks first). Unreachable blocks
/// belong to no loop. O(blocks + edges + the sum of the loops' sizes): the
/// sum is the blocks times the nesting depth.
std::vector<Loop> findLoops(ir::Function &f, const ir::DominanceInfo &dom);

} // namespace nimble::passes

#endif // NIMBLE_PASSES_LOOPS_H
