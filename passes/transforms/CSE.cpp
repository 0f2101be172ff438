//===- CSE.cpp - Common subexpression elimination -------------------------===//
//
// DLVM §3.1.4 lists CSE among the general-purpose SSA optimizations it reuses;
// this is the classic dominator-tree formulation (as in MLIR's CSE pass):
//
//   Walk each function's dominator tree in pre-order with a scoped hash table.
//   On entering a block, every side-effect-free op is looked up: if an
//   equivalent op is in the table, it was met earlier in this block or in a
//   block that dominates this one, so its results are available here and
//   replace this op's (RAUW, erase). Otherwise the op is added to the current
//   scope. Leaving a block pops its scope, so ops of sibling branches (which
//   do not dominate each other) are never matched.
//
// Equivalent means: same opcode, same operands (as a multiset for ops flagged
// Commutative: add(a, b) ≡ add(b, a)), equal attributes (Attr::==, so
// constants with the same literal and type merge; floats compare bitwise,
// keeping 0.0 and -0.0 apart) and identical result types. Terminators, which
// alone have successors, are never candidates.
//
// Candidates are the ops EffectAnalysis calls pure: Pure rows of Ops.def and
// calls to functions that neither have side effects nor allocate
// (Analysis.h). Alloc ops (each makes a fresh buffer), calls to functions
// that allocate, and Effect ops (invoke_mut, invoke_shape_func, kill, calls
// with effects) are never merged.
//
// Unreachable blocks are not in the dominator tree and are left alone, and so
// are ops whose results are killed (explicit memory: after manifest-memory or
// plan-memory): merging would move a kill onto the surviving value.
//
//===----------------------------------------------------------------------===//

#include "passes/analysis/Analysis.h"
#include "passes/Pass.h"

#include "ir/FlatMap.h"
#include "ir/Verifier.h"

#include <algorithm>
#include <unordered_set>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

/// The operands in matching order: sorted for commutative ops, so that both
/// orders hash and compare alike.
std::vector<Value *> keyOperands(const Operation &op) {
  std::vector<Value *> ops = op.operands();
  if (op.info().hasFlag(opflags::Commutative))
    std::sort(ops.begin(), ops.end(), std::less<Value *>());
  return ops;
}

struct OpHash {
  /// Without allocating (the table hashes every pure op): a commutative op's
  /// operands are combined by a sum, which does not depend on their order
  /// (OpEqual compares them sorted).
  size_t operator()(const Operation *op) const {
    size_t h = std::hash<unsigned>()(static_cast<unsigned>(op->code()));
    auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    if (op->info().hasFlag(opflags::Commutative)) {
      size_t sum = 0;
      for (Value *v : op->operandValues()) sum += std::hash<const Value *>()(v) * 0x9e3779b97f4a7c15ull;
      mix(sum);
    } else {
      for (Value *v : op->operandValues()) mix(std::hash<const Value *>()(v));
    }
    for (const Attr &a : op->attrs()) mix(a.hash());
    for (Value *r : op->resultValues()) mix(std::hash<const void *>()(r->type().impl()));
    return h;
  }
};

struct OpEqual {
  bool operator()(const Operation *a, const Operation *b) const {
    if (a == b) return true;
    if (a->code() != b->code() || a->numOperands() != b->numOperands() ||
        a->numResults() != b->numResults() ||
        !std::ranges::equal(a->attrs(), b->attrs()))
      return false;
    for (unsigned i = 0; i < a->numResults(); ++i)
      if (a->result(i)->type() != b->result(i)->type()) return false;
    return keyOperands(*a) == keyOperands(*b);
  }
};

class CSE {
public:
  explicit CSE(const EffectAnalysis &effects) : effects_(effects) {}

  /// Returns the number of ops erased from `f`.
  unsigned run(Function &f) {
    DominanceInfo dom(f);
    const std::vector<Block *> &rpo = dom.reversePostOrder();
    if (rpo.empty()) return 0;
    // Dominator-tree children in RPO order, so the walk is deterministic.

    // Iterative pre-order walk; each frame owns the table entries its block
    // added and removes them when the walk leaves the block's subtree.
    unsigned erased = 0;
    std::vector<Frame> stack;
    stack.push_back({rpo.front(), 0, 0, {}});
    erased += visit(stack.back());
    while (!stack.empty()) {
      Frame &fr = stack.back();
      std::span<const int> kids = dom.children(fr.index);
      if (fr.nextChild < kids.size()) {
        int child = kids[fr.nextChild++];
        stack.push_back({rpo[static_cast<size_t>(child)], child, 0, {}});
        erased += visit(stack.back());
        continue;
      }
      // Leaving the root empties the table: clear it at once (erasing a
      // million entries one by one rehashes each key).
      if (stack.size() == 1) table_.clear();
      else
        for (Operation *op : fr.added) table_.erase(op);
      stack.pop_back();
    }
    return erased;
  }

private:
  struct Frame {
    Block *block;
    int index; // RPO position
    size_t nextChild;
    std::vector<Operation *> added;
  };

  unsigned visit(Frame &fr) {
    unsigned erased = 0;
    // Only the op visited is erased: keep its successor, no snapshot.
    for (Operation *op = fr.block->front(), *next; op; op = next) {
      next = op->nextOp();
      if (op->numResults() == 0 || op->isTerminator() || !effects_.isPure(*op) ||
          hasKilledResult(*op))
        continue;
      auto [it, fresh] = table_.tryEmplace(op, op);
      if (fresh) {
        fr.added.push_back(op);
        continue;
      }
      Operation *existing = *it;
      for (unsigned i = 0; i < op->numResults(); ++i)
        op->result(i)->replaceAllUsesWith(existing->result(i));
      op->erase();
      ++erased;
    }
    return erased;
  }

  const EffectAnalysis &effects_;
  /// Each equivalence class's first op (key and value), in a flat table:
  /// a node-based set cost an allocation per op and two misses per lookup.
  FlatMap<Operation *, Operation *, OpHash, OpEqual> table_;
};

class CSEPass : public Pass {
public:
  std::string_view name() const override { return "cse"; }
  /// A fixpoint: run again on what it left, it finds nothing (Pass::idempotent).
  bool idempotent() const override { return true; }
  /// CSE erases pure ops only, each for an equal one that stays (a call
  /// for a call of the same callee): no function's effects or callees
  /// change.
  bool preservesEffects() const override { return true; }
  LogicalResult run(Module &m, DiagnosticEngine &, bool &changed) override {
    AnalysisCache local(m); // built only when run alone
    const EffectAnalysis &effects = (analyses() ? *analyses() : local).effects();
    CSE cse(effects);
    for (auto &f : m.functions())
      if (cse.run(*f)) changed = true;
    return success();
  }
};

} // namespace

std::unique_ptr<Pass> createCSEPass() { return std::make_unique<CSEPass>(); }

} // namespace nimble::passes
