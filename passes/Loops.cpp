//===- Loops.cpp - Natural loops of a function's CFG ----------------------===//

#include "passes/Loops.h"

#include <algorithm>
#include <unordered_map>

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
  if (!dim || !dim->is(OpCode::Dim) || dim->attr(0).getInt() != 0 || !loop.isInvariant(dim->result(0)))
    return {};
  Value *x = dim->operand(0);
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
  // block, not a hash: issue 23).
  const std::vector<Block *> &rpo = dom.reversePostOrder();
  std::vector<std::vector<Block *>> predsOf(rpo.size());
  for (Block *b : rpo)
    if (const Operation *t = b->terminator())
      for (const Successor &s : t->successors())
        if (s.block && dom.isReachable(s.block)) predsOf[static_cast<size_t>(dom.index(s.block))].push_back(b);
  auto preds = [&](const Block *b) -> const std::vector<Block *> & {
    return predsOf[static_cast<size_t>(dom.index(b))];
  };

  std::vector<Loop> loops;
  for (Block *h : rpo) {
    Loop l;
    l.header = h;
    for (Block *p : preds(h))
      if (dom.dominates(h, p)) l.latches.push_back(p);
    if (l.latches.empty()) continue;
    // Walk backwards from the latches up to the header.
    l.members.tryEmplace(h, 1);
    std::vector<Block *> work(l.latches.begin(), l.latches.end());
    while (!work.empty()) {
      Block *b = work.back();
      work.pop_back();
      if (!l.members.tryEmplace(b, 1).second) continue;
      for (Block *p : preds(b)) work.push_back(p);
    }
    for (Block *b : rpo)
      if (l.contains(b)) l.blocks.push_back(b);
    // The preheader: the one outside predecessor, ending in `br ^header`.
    Block *outside = nullptr;
    unsigned outsideCount = 0;
    for (Block *p : preds(h))
      if (!l.contains(p)) {
        outside = p;
        ++outsideCount;
      }
    if (outsideCount == 1 && outside->back() && outside->back()->is(OpCode::Br) &&
        outside->back()->successors().size() == 1)
      l.preheader = outside;
    loops.push_back(std::move(l));
  }
  std::stable_sort(loops.begin(), loops.end(),
                   [](const Loop &a, const Loop &b) { return a.blocks.size() < b.blocks.size(); });
  return loops;
}

} // namespace nimble::passes
