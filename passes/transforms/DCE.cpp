//===- DCE.cpp - Dead code elimination -------------------------------------===//
//
// DLVM §3.1.4's "aggressive dead code elimination", without touching control
// flow. Per function:
//
//  1. Unreachable blocks (not in Function::reversePostOrder) are deleted. No
//     reachable op can use their values (SSA dominance), so dropping their
//     references and erasing them is safe.
//
//  2. Mark and sweep over values (instead of "delete unused ops until none
//     is left", which cannot see a dead loop-carried cycle such as
//     `^loop(%acc): %n = add %acc, %x; br ^loop(%n)` where %acc is used only
//     to compute its own next value):
//
//     roots   every op that may not be deleted (Effect ops, calls with side
//             effects, terminators) and the arguments DCE may not delete
//             (entry-block arguments: the signature; arguments of `match`
//             targets: the constructor's fields);
//     mark    a live op makes its operands live, except a br/cond_br whose
//             successor operands are live only when the target argument they
//             feed is (the condition of cond_br, the scrutinee of match and
//             ret's operands are always live); a live block argument makes
//             the operand every br/cond_br passes to it live;
//     sweep   every op left unmarked is deletable (Pure or Alloc rows and
//             calls to side-effect-free functions; see Analysis.h for why
//             non-termination and run-time shape checks are not kept), and
//             every unmarked argument of a block that only br/cond_br
//             target is deleted together with the operand each predecessor
//             passes to it (the terminator's operand list is rebuilt and its
//             successor slices renumbered).
//
// Everything unmarked is deleted in one sweep: references among dead ops (and
// from dead branch operands) are dropped first, so dead cycles go too.
//
//===----------------------------------------------------------------------===//

#include "passes/analysis/Analysis.h"
#include "passes/Pass.h"

#include <algorithm>
#include <cassert>
#include <span>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

/// Deletes blocks that cannot be reached from the entry. Returns true if any.
bool eraseUnreachableBlocks(Function &f) {
  const std::vector<Block *> &rpo = f.reversePostOrder();
  if (rpo.size() == f.blocks().size()) return false; // every block is reached
  // Reached blocks carry a fresh tag in their scratch word.
  const uint64_t reached = uint64_t(newScratchTag()) << 32;
  for (Block *b : rpo) b->setScratch(reached);
  std::vector<Block *> dead;
  for (auto &b : f.blocks())
    if (b->scratch() != reached) dead.push_back(b.get());
  // Their ops may use each other's values and branch to each other: drop all
  // references and terminators before erasing any block.
  for (Block *b : dead)
    for (Operation &op : *b) op.dropAllReferences();
  for (Block *b : dead)
    if (Operation *t = b->terminator()) t->erase();
  f.eraseBlocks(dead);
  return true;
}

/// Removes from `term` the operands passed to argument `argIndex` of `target`
/// (on every edge to `target`), renumbering the successor slices.
void dropSuccessorOperand(Operation &term, const Block *target, unsigned argIndex) {
  std::vector<Successor> &succs = term.mutableSuccessors();
  std::vector<bool> drop(term.numOperands(), false);
  for (const Successor &s : succs)
    if (s.block == target && argIndex < s.operandCount) drop[s.operandBegin + argIndex] = true;
  std::vector<Value *> kept;
  std::vector<unsigned> newIndex(term.numOperands() + 1, 0);
  for (unsigned i = 0; i < term.numOperands(); ++i) {
    newIndex[i] = static_cast<unsigned>(kept.size());
    if (!drop[i]) kept.push_back(term.operand(i));
  }
  newIndex[term.numOperands()] = static_cast<unsigned>(kept.size());
  for (Successor &s : succs) {
    unsigned end = newIndex[s.operandBegin + s.operandCount];
    s.operandBegin = newIndex[s.operandBegin];
    s.operandCount = end - s.operandBegin;
  }
  term.setOperands(kept);
}

class DeadCodeElimination {
public:
  explicit DeadCodeElimination(const EffectAnalysis &effects) : effects_(effects) {}

  bool run(Function &f) {
    bool changed = eraseUnreachableBlocks(f);
    tag_ = newScratchTag();
    collectEdges(f);
    markLive(f);
    return sweep(f) || changed;
  }

private:
  struct Edge {
    Operation *term;
    unsigned succ;
  };

  /// Numbers the blocks (in their scratch words, under this run's tag) and
  /// records, for each, the br/cond_br edges into it (grouped by target:
  /// edgeBegin_ / edges_) and whether some `match` targets it (its
  /// arguments are never removed). Vectors by block number, no hash table
  /// (issue 23: a loop of 140,000 blocks).
  void collectEdges(Function &f) {
    const size_t n = f.blocks().size();
    size_t i = 0;
    for (auto &b : f.blocks()) b->setScratch((tag_ << 32) | i++);
    matchTarget_.assign(n, false);
    edgeBegin_.assign(n + 1, 0);
    auto eachEdge = [&](auto &&fn) {
      for (auto &b : f.blocks()) {
        Operation *t = b->terminator();
        if (!t) continue;
        const bool branch = t->is(OpCode::Br) || t->is(OpCode::CondBr);
        for (unsigned k = 0; k < t->successors().size(); ++k) {
          const size_t target = blockNumber(t->successors()[k].block);
          if (branch) fn(target, Edge{t, k});
          else matchTarget_[target] = true;
        }
      }
    };
    eachEdge([&](size_t target, Edge) { ++edgeBegin_[target + 1]; });
    for (size_t k = 0; k < n; ++k) edgeBegin_[k + 1] += edgeBegin_[k];
    edges_.resize(edgeBegin_[n]);
    std::vector<uint32_t> fill(edgeBegin_.begin(), edgeBegin_.end() - 1);
    eachEdge([&](size_t target, Edge e) { edges_[fill[target]++] = e; });
  }
  /// The number collectEdges gave `b` (a successor is a block of the
  /// function: the verifier holds it).
  size_t blockNumber(const Block *b) const {
    assert((b->scratch() >> 32) == tag_ && "a block collectEdges numbered");
    return static_cast<uint32_t>(b->scratch());
  }
  std::span<const Edge> incoming(const Block *b) const {
    const size_t k = blockNumber(b);
    return {edges_.data() + edgeBegin_[k], edges_.data() + edgeBegin_[k + 1]};
  }

  bool argRemovable(const BlockArgument *a) const {
    const Block *b = a->owner();
    return !b->isEntry() && !matchTarget_[blockNumber(b)];
  }

  // Marks live in the values' scratch words under a tag of this run (a
  // lookup is a load, not a hash: issue 23): bit 0, the value is live; bit
  // 1 on an op's first result, the op is. An op without results is marked
  // only at the start (a terminator, or an op with an effect), never
  // through a use: it is live exactly when it is one of those.
  static constexpr uint64_t kLiveValue = 1, kLiveOp = 2;
  bool hasMark(const Value *v, uint64_t bit) const {
    const uint64_t w = v->scratch();
    return (w >> 32) == tag_ && (w & bit);
  }
  void setMark(const Value *v, uint64_t bit) const {
    uint64_t w = v->scratch();
    if ((w >> 32) != tag_) w = tag_ << 32;
    v->setScratch(w | bit);
  }
  bool isLive(const Operation *op) const {
    return op->numResults() ? hasMark(op->result(0), kLiveOp) : liveAtStart(*op);
  }
  bool liveAtStart(const Operation &op) const { return op.isTerminator() || !effects_.isRemovableIfUnused(op); }

  void markValue(Value *v) {
    if (!v || hasMark(v, kLiveValue)) return;
    setMark(v, kLiveValue);
    worklist_.push_back(v);
  }

  void markOp(Operation *op) {
    if (op->numResults()) {
      if (hasMark(op->result(0), kLiveOp)) return;
      setMark(op->result(0), kLiveOp);
    }
    // A branch's successor operands are live only through the argument they
    // feed; everything else an op reads is live with it.
    bool branch = op->is(OpCode::Br) || op->is(OpCode::CondBr);
    unsigned n = branch ? op->numNonSuccessorOperands() : op->numOperands();
    for (unsigned i = 0; i < n; ++i) markValue(op->operand(i));
  }

  void markLive(Function &f) {
    worklist_.clear();
    for (auto &b : f.blocks()) {
      for (unsigned i = 0; i < b->numArguments(); ++i)
        if (!argRemovable(b->argument(i))) markValue(b->argument(i));
      for (Operation &op : *b)
        if (liveAtStart(op)) markOp(&op);
    }
    while (!worklist_.empty()) {
      Value *v = worklist_.back();
      worklist_.pop_back();
      if (Operation *def = v->definingOp()) {
        markOp(def);
      } else if (BlockArgument *a = dyn_cast<BlockArgument>(v)) {
        for (const Edge &e : incoming(a->owner())) {
          const Successor &s = e.term->successors()[e.succ];
          if (a->index() < s.operandCount) markValue(e.term->operand(s.operandBegin + a->index()));
        }
      }
    }
  }

  bool sweep(Function &f) {
    std::vector<Operation *> deadOps;
    for (auto &b : f.blocks())
      for (Operation &op : *b)
        if (!isLive(&op)) deadOps.push_back(&op);
    for (Operation *op : deadOps) op->dropAllReferences();

    bool changed = !deadOps.empty();
    // A dead argument may be passed on to another dead argument: remove every
    // dead branch operand first, then the arguments (highest index first, so
    // the lower indices stay valid).
    std::vector<BlockArgument *> deadArgs;
    for (auto &b : f.blocks()) {
      for (unsigned i = b->numArguments(); i-- > 0;) {
        if (hasMark(b->argument(i), kLiveValue)) continue;
        deadArgs.push_back(b->argument(i));
        std::vector<Operation *> preds; // each terminator once
        for (const Edge &e : incoming(b.get())) preds.push_back(e.term);
        std::sort(preds.begin(), preds.end());
        preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
        for (Operation *t : preds) dropSuccessorOperand(*t, b.get(), i);
      }
    }
    for (BlockArgument *a : deadArgs) a->owner()->eraseArgument(a->index());
    changed |= !deadArgs.empty();
    for (Operation *op : deadOps) op->erase();
    return changed;
  }

  const EffectAnalysis &effects_;
  uint64_t tag_ = 0; // of the current run: block numbers and live marks
  std::vector<uint32_t> edgeBegin_; // per block number: where its incoming edges start in edges_
  std::vector<Edge> edges_;
  std::vector<bool> matchTarget_;
  std::vector<Value *> worklist_;
};

class DCEPass : public Pass {
public:
  std::string_view name() const override { return "dce"; }
  /// A fixpoint: run again on what it left, it finds nothing (Pass::idempotent).
  bool idempotent() const override { return true; }
  LogicalResult run(Module &m, DiagnosticEngine &, bool &changed) override {
    AnalysisCache local(m); // built only when run alone
    const EffectAnalysis &effects = (analyses() ? *analyses() : local).effects();
    DeadCodeElimination dce(effects);
    for (auto &f : m.functions())
      if (dce.run(*f)) changed = true;
    return success();
  }
};

} // namespace

std::unique_ptr<Pass> createDCEPass() { return std::make_unique<DCEPass>(); }

} // namespace nimble::passes
