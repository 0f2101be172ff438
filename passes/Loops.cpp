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

std::vector<Loop> findLoops(Function &f, const DominanceInfo &dom) {
  std::vector<Block *> rpo = f.reversePostOrder();
  std::unordered_map<const Block *, size_t> order;
  for (size_t i = 0; i < rpo.size(); ++i) order[rpo[i]] = i;
  std::unordered_map<const Block *, std::vector<Block *>> preds;
  for (Block *b : rpo)
    for (Block *s : b->successors())
      if (order.count(s)) preds[s].push_back(b);

  std::vector<Loop> loops;
  for (Block *h : rpo) {
    Loop l;
    l.header = h;
    for (Block *p : preds[h])
      if (dom.dominates(h, p)) l.latches.push_back(p);
    if (l.latches.empty()) continue;
    // Walk backwards from the latches up to the header.
    l.members.insert(h);
    std::vector<Block *> work(l.latches.begin(), l.latches.end());
    while (!work.empty()) {
      Block *b = work.back();
      work.pop_back();
      if (!l.members.insert(b).second) continue;
      for (Block *p : preds[b]) work.push_back(p);
    }
    for (Block *b : rpo)
      if (l.members.count(b)) l.blocks.push_back(b);
    // The preheader: the one outside predecessor, ending in `br ^header`.
    Block *outside = nullptr;
    unsigned outsideCount = 0;
    for (Block *p : preds[h])
      if (!l.members.count(p)) {
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
