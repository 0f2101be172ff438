//===- Inline.cpp - Inlining of non-recursive calls -----------------------===//
//
// Replaces `call @g(args)` by a copy of @g's body (DLVM §2 names inlining
// among the interprocedural optimizations a modular SSA IR enables). A
// callee of one block (its entry ends in `ret`: a layer, a cell, a fused
// group) is copied in place, before the call, and the call's results are
// replaced by the returned values, as MLIR's inliner does for a
// single-block region: nothing to split, and nothing for canonicalize to
// merge afterwards (issue 23: 111,000 inlined calls in one function made
// 222,000 blocks to merge back). Otherwise the mechanics are LLVM's
// InlineFunction on block arguments instead of phis:
//
//   ^bb:                                ^bb:
//     %pre = ...                          %pre = ...
//     %r = call @g(%a)          ==>       br ^g.entry
//     %post = use %r                    ^g.entry:            (g's params → %a)
//     ret %post                           ... g's body, each `ret %v`
//                                         br ^g.exit(%v)
//                                       ^g.exit(%r: T):      (the call's results)
//                                         %post = use %r
//                                         ret %post
//
// The caller's block is split after the call: what follows moves to a
// continuation block whose arguments take the call's results (with the call
// results' types and names). The callee's reachable blocks are cloned in
// between (Analysis.h: cloneBlocksInto), labelled `<callee>.<label>`, with
// values keeping their names (the printer makes clashes unique). The cloned
// ops keep the callee's types: the call's arguments may be more precise than
// the parameters (sub-shaping), which every use accepts. The entry block is
// never a branch target (Verifier S2), so its copy needs no arguments. A
// call of a fused kernel (fuse) carries its members' locations
// (Operation::memberLocs): the copied members take those, since identical
// groups share one body that holds only the first group's.
//
// Which calls: the callee must not be in a recursive SCC of the call graph
// (inlining recursion would never end; a recursive caller may still receive
// non-recursive callees), and either its cost (the number of ops in its body)
// is at most `max-cost` or it carries `attributes {inline = "always"}`;
// `inline = "never"` forbids it, and so does a `phase` attribute (a program
// phase of auto-batching belongs to the function's body). Functions are processed bottom-up over the
// SCCs (callees first), so a callee's own calls are already inlined when it is
// copied and its cost is measured after that. A call whose declared result
// type is more precise than what the callee returns (a run-time check) is
// left alone: the continuation argument could not take the returned value.
// Callees are never deleted (they may be entry points; a later dead-function
// pass may remove them).
//
// Growth. Since callees stay, a chain of calls each under max-cost multiplies
// the module: bottom-up, every function absorbs the next few (a chain of
// ten-op functions grows 3x at the default cost, and the compile time and
// memory of every later pass with it). As GCC bounds its inliner
// (--param inline-unit-growth over --param large-unit-insns), the module may
// grow by at most `max-growth` percent of its size before the pass, that size
// counted as at least `growth-base` ops so that a small module (where
// inlining a big callee three times is sane) is never limited. A call whose
// copy would pass the budget is left alone, unless its callee is
// `inline = "always"`. A copy counts as the callee's cost: at most what
// it adds (a split copy turns the call and each `ret` into one `br` each; an
// in-place copy drops both).
//
// Options: inline{max-cost=N, max-growth=P, growth-base=B}, non-negative
// integers (defaults 40, 100 and 10000).
//
//===----------------------------------------------------------------------===//

#include "passes/analysis/Analysis.h"
#include "passes/Pass.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

size_t cost(const Function &f) {
  size_t n = 0;
  for (auto &b : f.blocks()) n += b->size();
  return n;
}

class InlinePass : public Pass {
public:
  std::string_view name() const override { return "inline"; }

  std::string setOption(std::string_view key, std::string_view value) override {
    size_t *target = key == "max-cost" ? &maxCost_ : key == "max-growth" ? &maxGrowth_
                   : key == "growth-base" ? &growthBase_ : nullptr;
    if (!target) return Pass::setOption(key, value);
    // At most 2^40, so that the budget (run) is computed exactly.
    int64_t n = -1;
    if (!parseIntOption(value, 0, int64_t(1) << 40, n))
      return "option '" + std::string(key) + "' of 'inline' takes a non-negative integer (at most 2^40), got '" +
             std::string(value) + "'";
    *target = static_cast<size_t>(n);
    return "";
  }

  LogicalResult run(Module &m, DiagnosticEngine &diag, bool &changed) override {
    if (failed(checkAttributes(m, diag))) return failure();
    size_t before = 0;
    for (auto &f : m.functions()) before += cost(*f);
    size_ = before;
    // Both factors are at most 2^40 (setOption): exact in 128 bits.
    const unsigned __int128 budget =
        static_cast<unsigned __int128>(std::max(before, growthBase_)) * (100 + maxGrowth_) / 100;
    budget_ = budget > std::numeric_limits<size_t>::max() ? std::numeric_limits<size_t>::max()
                                                          : static_cast<size_t>(budget);
    CallGraph cg(m);
    for (const std::vector<Function *> &scc : cg.sccs())
      for (Function *f : scc) {
        // Only the calls written in `f`: calls copied in with a callee were
        // already judged (and kept) when that callee was processed.
        std::vector<Operation *> calls;
        for (auto &b : f->blocks())
          for (Operation &op : *b)
            if (op.is(OpCode::Call)) calls.push_back(&op);
        // Last call first: inlining a call moves the rest of its block into
        // the continuation, which is then short (first call first moved the
        // rest of the function once per call: quadratic in one long block).
        // The resulting IR is the same in either order.
        f->beginBlockInsertions();
        for (auto it = calls.rbegin(); it != calls.rend(); ++it) {
          size_t calleeCost = 0;
          if (const Function *callee = shouldInline(**it, cg, calleeCost)) {
            size_ += calleeCost;
            inlineCall(**it, *callee);
            changed = true;
          }
        }
        f->endBlockInsertions();
      }
    return success();
  }

private:
  /// `inline` must be "always" or "never": a typo must not silently change
  /// what gets inlined.
  static LogicalResult checkAttributes(const Module &m, DiagnosticEngine &diag) {
    bool ok = true;
    for (auto &f : m.functions()) {
      const Attr *a = f->fnAttr("inline");
      if (!a || (a->kind() == AttrKind::Str && (a->getStr() == "always" || a->getStr() == "never")))
        continue;
      diag.error(f->loc(), "function attribute 'inline' of @" + f->name() +
                               " must be \"always\" or \"never\"");
      ok = false;
    }
    return success(ok);
  }

  /// The callee when `call` is to be inlined (its cost in `calleeCost`),
  /// else null.
  const Function *shouldInline(const Operation &call, const CallGraph &cg, size_t &calleeCost) const {
    const Function *callee = call.function()->module()->lookupFunction(call.attr("callee"));
    if (!callee || callee->blocks().empty() || cg.isRecursive(callee)) return nullptr;
    const Attr *hint = callee->fnAttr("inline");
    if (hint && hint->getStr() == "never") return nullptr;
    // A program phase (auto-batch, docs/autobatch.md) belongs to the body
    // of the function that carries it: inlined, the body would lose it.
    if (callee->fnAttr("phase")) return nullptr;
    calleeCost = cost(*callee);
    if (!(hint && hint->getStr() == "always") && (calleeCost > maxCost_ || size_ + calleeCost > budget_))
      return nullptr;
    return returnsFit(call, *callee) ? callee : nullptr;
  }

  /// True when every value the callee returns can flow into the call's
  /// result types (the continuation block's arguments).
  static bool returnsFit(const Operation &call, const Function &callee) {
    for (Block *b : callee.reversePostOrder()) {
      Operation *t = b->terminator();
      if (!t || !t->is(OpCode::Ret)) continue;
      if (t->numOperands() != call.numResults()) return false;
      for (unsigned i = 0; i < t->numOperands(); ++i) {
        Value *v = t->operand(i);
        const BlockArgument *a = dyn_cast<BlockArgument>(v);
        if (a && a->owner() == callee.entry()) v = call.operand(a->index());
        if (!v->type().isSubtypeOf(call.result(i)->type())) return false;
      }
    }
    return true;
  }

  /// A call's member locations (fuse shares one body between identical
  /// groups) go to the copied members, in order, when they match in number.
  static void applyMemberLocs(const Operation &call, const std::vector<Operation *> &body) {
    const std::vector<Location> &ml = call.memberLocs();
    if (ml.empty() || body.size() != ml.size()) return;
    for (size_t i = 0; i < body.size(); ++i)
      if (ml[i].known()) body[i]->setLoc(ml[i]);
  }

  void inlineCall(Operation &call, const Function &callee) {
    Block *block = call.block();
    Function &caller = *block->function();
    Block *entry = callee.entry();

    // A callee of one block ending in `ret` (the common case: a layer, a
    // cell, a fused group) is copied in place, before the call, whose
    // results become the returned values: no split, no blocks to merge
    // afterwards (MLIR's inliner does the same for a single-block region).
    // Only the entry is reachable when its terminator is `ret`.
    if (Operation *ret = entry->terminator(); ret && ret->is(OpCode::Ret)) {
      IRMapping map;
      for (unsigned i = 0; i < entry->numArguments(); ++i)
        map.values[entry->argument(i)] = call.operand(i);
      std::vector<Operation *> body;
      for (Operation &op : *entry)
        if (&op != ret) body.push_back(block->insertBefore(&call, cloneOp(op, map)));
      applyMemberLocs(call, body);
      for (unsigned i = 0; i < call.numResults(); ++i)
        call.result(i)->replaceAllUsesWith(map.lookup(ret->operand(i)));
      call.erase();
      return;
    }

    // Split: the ops after the call move to the continuation block, whose
    // arguments stand for the call's results.
    auto contOwned = std::make_unique<Block>(callee.name() + ".exit");
    contOwned->setLoc(call.loc());
    Block *cont = caller.insertBlockAfter(block, std::move(contOwned));
    for (unsigned i = 0; i < call.numResults(); ++i) {
      BlockArgument *a = cont->addArgument(call.result(i)->type(), call.loc());
      a->setName(call.result(i)->name());
      call.result(i)->replaceAllUsesWith(a);
    }
    while (Operation *next = call.nextOp()) cont->push_back(next->remove());

    // Clone the reachable blocks between the two halves.
    IRMapping map;
    for (unsigned i = 0; i < entry->numArguments(); ++i)
      map.values[entry->argument(i)] = call.operand(i);
    std::vector<Block *> order;
    std::vector<Block *> rpo = callee.reversePostOrder();
    std::unordered_set<Block *> reachable(rpo.begin(), rpo.end());
    for (auto &b : callee.blocks())
      if (reachable.count(b.get())) order.push_back(b.get());
    std::vector<Block *> clones =
        cloneBlocksInto(order, caller, block, map, callee.name() + ".");
    // A call of a fused kernel knows where this site's members were written
    // (fuse shares one body between identical groups): the copies get those
    // locations rather than the body's.
    if (!call.memberLocs().empty() && clones.size() == 1) {
      std::vector<Operation *> body;
      for (Operation &op : *clones.front())
        if (!op.isTerminator()) body.push_back(&op);
      applyMemberLocs(call, body);
    }

    // Each `ret` becomes a branch to the continuation.
    for (Block *b : clones) {
      Operation *ret = b->terminator();
      if (!ret || !ret->is(OpCode::Ret)) continue;
      std::vector<Value *> vals = ret->operands();
      Successor s{cont, 0, static_cast<unsigned>(vals.size()), "", ret->loc()};
      b->push_back(Operation::create(OpCode::Br, ret->loc(), vals, {}, defaultAttrs(OpCode::Br), {s}));
      ret->erase();
    }

    // The call becomes a branch into the copy.
    Successor s{map.lookup(entry), 0, 0, "", call.loc()};
    block->push_back(Operation::create(OpCode::Br, call.loc(), {}, {}, defaultAttrs(OpCode::Br), {s}));
    call.erase();
  }

  size_t maxCost_ = 40;
  size_t maxGrowth_ = 100;   // percent
  size_t growthBase_ = 10000; // ops
  size_t size_ = 0, budget_ = 0;
};

} // namespace

std::unique_ptr<Pass> createInlinePass() { return std::make_unique<InlinePass>(); }

} // namespace nimble::passes
