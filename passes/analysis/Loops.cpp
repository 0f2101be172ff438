//===- Loops.cpp - Natural loops of a function's CFG ----------------------===//

#include "passes/analysis/Loops.h"

#include <algorithm>
#include <cassert>

namespace nimble::passes {

using namespace ir;

bool Loop::isInvariant(const Value *v) const {
  if (const auto *r = dyn_cast<OpResult>(v)) return !contains(r->owner()->block());
  if (const auto *a = dyn_cast<BlockArgument>(v)) return !contains(a->owner());
  return true; // a global
}

bool isI64Constant(const Value *val, int64_t v) {
  const Operation *op = val->definingOp();
  if (!op || !op->is(OpCode::Constant)) return false;
  Type t = op->result(0)->type();
  if (!t.isTensor() || t.dtype() != DType::I64 || t.rank() != 0) return false;
  const DenseValue &d = op->attr(0).getDense();
  return d.numElements() == 1 && d.getInt(0) == v;
}

Value *passedTo(const Operation *term, const Block *target, unsigned i) {
  for (const Successor &s : term->successors())
    if (s.block == target && i < s.operandCount) return term->operand(s.operandBegin + i);
  return nullptr;
}

CountedLoop matchCountedLoop(const Loop &loop) {
  Block *h = loop.header;
  if (!loop.preheader) return {};
  Operation *term = h->back();
  if (!term || !term->is(OpCode::CondBr) || term->successors().size() != 2) return {};
  const Operation *cmp = term->operand(0)->definingOp();
  if (!cmp || cmp->block() != h || cmp->numOperands() != 2) return {};
  Block *onTrue = term->successors()[0].block, *onFalse = term->successors()[1].block;
  bool exitOnTrue;
  if (cmp->is(OpCode::GreaterEqual)) exitOnTrue = true;
  else if (cmp->is(OpCode::Less)) exitOnTrue = false;
  else return {};
  if (loop.contains(exitOnTrue ? onTrue : onFalse) || !loop.contains(exitOnTrue ? onFalse : onTrue))
    return {};
  auto *t = dyn_cast<BlockArgument>(cmp->operand(0));
  if (!t || t->owner() != h) return {};
  const Operation *dim = cmp->operand(1)->definingOp();
  Value *x = nullptr;
  if (dim && dim->is(OpCode::Dim) && dim->attr(0).getInt() == 0 && loop.isInvariant(dim->result(0))) {
    x = dim->operand(0);
  } else if (dim && dim->is(OpCode::Constant) && dim->result(0)->type().isTensor() &&
             dim->result(0)->type().rank() == 0 && dim->result(0)->type().dtype() == DType::I64) {
    // A constant bound: canonicalize folds `dim %X, axis=0` of a static X
    // (a copy the `dispatch` pass made static, issue 49). X is then an
    // invariant tensor of exactly that many rows that the loop slices by t.
    const int64_t n = dim->attr(0).getDense().getInt(0);
    for (Block *b : loop.blocks)
      for (Operation &op : *b)
        if (!x && op.is(OpCode::DynamicSlice) && op.operand(1) == t && op.intAttr("axis") == 0 &&
            loop.isInvariant(op.operand(0)) && op.operand(0)->type().isTensor() &&
            op.operand(0)->type().rank() >= 1 && op.operand(0)->type().dims()[0] == n)
          x = op.operand(0);
  }
  if (!x) return {};
  // Starts at 0, steps by 1 on every back edge.
  Value *init = passedTo(loop.preheader->back(), h, t->index());
  if (!init || !isI64Constant(init, 0)) return {};
  for (Block *latch : loop.latches) {
    Operation *lt = latch->back();
    if (!lt || !lt->is(OpCode::Br)) return {};
    const Operation *inc = passedTo(lt, h, t->index()) ? passedTo(lt, h, t->index())->definingOp() : nullptr;
    if (!inc || !inc->is(OpCode::Add)) return {};
    bool ok = (inc->operand(0) == t && isI64Constant(inc->operand(1), 1)) ||
              (inc->operand(1) == t && isI64Constant(inc->operand(0), 1));
    if (!ok) return {};
  }
  CountedLoop c;
  c.counter = t;
  c.rows = x;
  c.compare = const_cast<Operation *>(cmp);
  c.exit = exitOnTrue ? onTrue : onFalse;
  return c;
}

std::vector<Loop> findLoops(Function &, const DominanceInfo &dom) {
  // Blocks are numbered by their RPO position in `dom` (a load from the
  // block, not a hash: issue 23), and their predecessors are dom's.
  const std::vector<Block *> &rpo = dom.reversePostOrder();
  const size_t n = rpo.size();

  std::vector<Loop> loops;
  std::vector<std::vector<int>> members; // per loop: RPO positions, ascending
  // The header (RPO position) whose loop last reached each block: the
  // visited set of every walk at once, never cleared.
  std::vector<int> reachedBy(n, -1);
  for (size_t hi = 0; hi < n; ++hi) {
    const int h = static_cast<int>(hi);
    Loop l;
    l.header = rpo[hi];
    for (int p : dom.predecessors(h))
      if (dom.dominates(rpo[hi], rpo[static_cast<size_t>(p)])) l.latches.push_back(rpo[static_cast<size_t>(p)]);
    if (l.latches.empty()) continue;
    // Walk backwards from the latches up to the header.
    std::vector<int> in{h};
    reachedBy[hi] = h;
    std::vector<int> work;
    for (Block *b : l.latches) work.push_back(dom.index(b));
    while (!work.empty()) {
      const int b = work.back();
      work.pop_back();
      if (reachedBy[static_cast<size_t>(b)] == h) continue;
      reachedBy[static_cast<size_t>(b)] = h;
      in.push_back(b);
      for (int p : dom.predecessors(b)) work.push_back(p);
    }
    std::sort(in.begin(), in.end()); // the header (smallest) first, then RPO
    for (int b : in) l.blocks.push_back(rpo[static_cast<size_t>(b)]);
    // The preheader: the one outside predecessor, ending in `br ^header`.
    Block *outside = nullptr;
    unsigned outsideCount = 0;
    for (int p : dom.predecessors(h))
      if (reachedBy[static_cast<size_t>(p)] != h) {
        outside = rpo[static_cast<size_t>(p)];
        ++outsideCount;
      }
    if (outsideCount == 1 && outside->back() && outside->back()->is(OpCode::Br) &&
        outside->back()->successors().size() == 1)
      l.preheader = outside;
    loops.push_back(std::move(l));
    members.push_back(std::move(in));
  }
  std::vector<size_t> order(loops.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return loops[a].blocks.size() < loops[b].blocks.size(); });

  // The nest, innermost first: natural loops with different headers are
  // disjoint or nested, so a block's first loop is its innermost, and a
  // loop reaching a block already in a loop encloses that loop's outermost
  // ancestor so far.
  auto nest = std::make_shared<LoopNest>();
  nest->dom = &dom;
  nest->innermost.assign(n, -1);
  nest->parent.assign(loops.size(), -1);
  std::vector<Loop> sorted;
  sorted.reserve(loops.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const int id = static_cast<int>(k);
    for (int b : members[order[k]]) {
      int &in = nest->innermost[static_cast<size_t>(b)];
      if (in < 0) {
        in = id;
        continue;
      }
      int top = in;
      while (nest->parent[static_cast<size_t>(top)] >= 0 && nest->parent[static_cast<size_t>(top)] != id)
        top = nest->parent[static_cast<size_t>(top)];
      if (top != id) nest->parent[static_cast<size_t>(top)] = id;
    }
    sorted.push_back(std::move(loops[order[k]]));
    sorted.back().id_ = id;
  }
  for (Loop &l : sorted) l.nest_ = nest;
#ifndef NDEBUG
  for (size_t k = 0; k < sorted.size(); ++k)
    for (int b : members[order[k]]) assert(sorted[k].contains(rpo[static_cast<size_t>(b)]) && "natural loops overlap");
#endif
  return sorted;
}

} // namespace nimble::passes
