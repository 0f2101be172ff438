//===- BatchPhases.cpp - Program phases for auto-batching (ACROBAT §4.1) --===//
//
// Seed 001 (ACROBAT) §4.1 and appendix A.3: depth-based scheduling is eager.
// When instances leave a loop or a recursion at different times, the work
// after it (an RNN's output transform, a decoder after an encoder, the head
// after an early exit) is issued by the early instances first and launched
// apart from the late instances' same work. ACROBAT splits the program into
// *phases* and schedules no operator of a phase until every operator of the
// earlier phases has run; its heuristic takes each semantic phase of the
// computation as a phase, and users may override it with annotations.
//
// Here the run-time scheduler (vm/interpreter/AutoBatch.cpp) runs no kernel of
// phase k while a call of a lower phase is pending (after every fiber has run
// until it suspends, a pending call is where its instance is: an instance
// whose next call is of phase k issues no lower-phase work again unless its
// program goes back to an earlier phase, which the heuristic never assigns).
// A phase belongs to a kernel (the .nbc's batch-phases section: one number
// per kernel), so a kernel called in two phases takes the lower one.
//
// The phase of a call site:
//   - Annotation: when some function of the module has a `phase = N`
//     attribute, the heuristic is off; a kernel call's phase is that of the
//     function making it, a function without the attribute takes the lowest
//     phase of its call sites, and the root (below) phase 0. The inliner
//     leaves the calls of a function with a phase alone (Inline.cpp).
//   - Heuristic (no annotation): a semantic phase ends where the instances'
//     control flow diverges in length: after a call that enters a recursion
//     (a call from outside a recursive component into it) and after a loop.
//     An op's local phase is the number of such ends that dominate it: the
//     calls before it on every path, and the loops that every path to it has
//     left (a loop L counts for block B when B's immediate dominator is in L
//     and B is not: the dominator chain leaves each loop once). A function's
//     phase is the lowest of its call sites' (the caller's phase plus the
//     site's local phase); a call site's kernels are at the function's
//     phase plus their local phase.
//
// Phases change speed, never results: the scheduler only chooses which
// pending calls run together.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/BatchPhases.h"

#include "passes/analysis/Analysis.h"
#include "passes/analysis/Loops.h"

#include <deque>

namespace nimble::passes {

using namespace nimble::ir;

namespace {

/// A kernel or function call in a function, at its local phase.
struct Site {
  const Function *callee;
  uint32_t local;
};

/// The calls and kernel invocations of `f` with their local phases
/// (heuristic: ends of phases that dominate them; annotation: 0).
std::vector<Site> sitesOf(const Function &f, const Module &m, const CallGraph *cg) {
  std::vector<Site> out;
  std::unordered_map<const Block *, uint32_t> exitCount, extra;
  std::unique_ptr<DominanceInfo> dom;
  if (cg) {
    dom = std::make_unique<DominanceInfo>(f);
    // Loops left between a block's immediate dominator and the block.
    std::vector<Loop> loops = findLoops(const_cast<Function &>(f), *dom);
    if (!loops.empty()) {
      std::unordered_map<const Block *, std::vector<const Block *>> children;
      for (Block *b : dom->reversePostOrder())
        if (Block *d = dom->idom(b)) children[d].push_back(b);
      for (const Loop &l : loops)
        for (const Block *x : l.blocks)
          for (const Block *b : children[x])
            if (!l.contains(b)) ++extra[b];
    }
  }
  const unsigned scc = cg ? cg->sccOf(&f) : 0;
  auto visit = [&](const Block &b, uint32_t cur) {
    for (const Operation &op : b) {
      const Function *callee = nullptr;
      if (op.is(OpCode::Call) || op.is(OpCode::InvokeMut)) callee = m.lookupFunction(op.attr("callee"));
      if (!callee) continue;
      out.push_back({callee, cur});
      // Past a call into a recursion begins the next phase.
      if (cg && !isPrimitive(*callee) && cg->isRecursive(callee) && cg->sccOf(callee) != scc) ++cur;
    }
    return cur;
  };
  if (!cg) {
    for (const auto &b : f.blocks()) visit(*b, 0);
    return out;
  }
  for (Block *b : dom->reversePostOrder()) {
    const Block *d = dom->idom(b);
    uint32_t cur = (d ? exitCount[d] : 0) + (extra.count(b) ? extra[b] : 0);
    exitCount[b] = visit(*b, cur);
  }
  return out;
}

} // namespace

bool assignBatchPhases(const Module &m, DiagnosticEngine &diag,
                       std::unordered_map<const Function *, uint32_t> &phases) {
  phases.clear();
  std::vector<const Function *> fns;
  bool annotated = false, ok = true;
  for (const auto &f : m.functions()) {
    if (isPrimitive(*f) || !f->entry()) continue;
    fns.push_back(f.get());
    const Attr *p = f->fnAttr("phase");
    if (!p) continue;
    annotated = true;
    if (p->kind() != AttrKind::Int || p->getInt() < 0 || p->getInt() > kMaxBatchPhase) {
      diag.error(f->loc(), "@" + f->name() + ": 'phase' must be an integer in 0.." + std::to_string(kMaxBatchPhase));
      ok = false;
    }
  }
  if (!ok || fns.empty()) return ok;

  std::unique_ptr<CallGraph> cg;
  if (!annotated) cg = std::make_unique<CallGraph>(m);
  std::unordered_map<const Function *, std::vector<Site>> sites;
  std::unordered_map<const Function *, bool> called;
  for (const Function *f : fns) {
    sites[f] = sitesOf(*f, m, cg.get());
    for (const Site &s : sites[f])
      if (s.callee != f) called[s.callee] = true;
  }
  // A function's phase: its annotation, else the lowest over its call
  // sites; a root's is 0. The root is @main, nimble-run's default entry,
  // when there is one: the copies of functions that inlining left behind
  // are called by nobody, and taking them as roots would put their kernels
  // (which @main's inlined copies call too) in phase 0. Without @main every
  // function nobody calls is a root. Kernels called only from functions no
  // root reaches keep phase 0 (run as entries, such functions see their
  // kernels' phases all shifted alike). Shortest paths with non-negative
  // offsets: a function is re-queued when its phase drops.
  std::unordered_map<const Function *, uint32_t> in;
  std::deque<const Function *> work;
  auto fixed = [&](const Function *f) -> const Attr * { return annotated ? f->fnAttr("phase") : nullptr; };
  const Function *main = m.lookupFunction("main");
  if (main && (isPrimitive(*main) || !main->entry())) main = nullptr;
  for (const Function *f : fns)
    if (main ? f == main : !called.count(f)) {
      const Attr *p = fixed(f);
      in[f] = p ? static_cast<uint32_t>(p->getInt()) : 0;
      work.push_back(f);
    }
  auto drain = [&] {
    while (!work.empty()) {
      const Function *f = work.front();
      work.pop_front();
      for (const Site &s : sites[f]) {
        if (isPrimitive(*s.callee) || !s.callee->entry()) continue;
        const Attr *a = fixed(s.callee);
        uint32_t p = a ? static_cast<uint32_t>(a->getInt()) : in[f] + s.local;
        auto it = in.find(s.callee);
        if (it == in.end() || (!a && p < it->second)) {
          in[s.callee] = p;
          work.push_back(s.callee);
        }
      }
    }
  };
  drain();
  for (const Function *f : fns) {
    if (!in.count(f)) continue; // no root reaches it
    for (const Site &s : sites[f]) {
      if (!isPrimitive(*s.callee)) continue;
      uint32_t p = in[f] + s.local;
      auto it = phases.find(s.callee);
      if (it == phases.end() || p < it->second) phases[s.callee] = p;
    }
  }
  return true;
}

} // namespace nimble::passes
