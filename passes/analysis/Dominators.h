//===- Dominators.h - Dominator tree and cycles for memory planning -*- C++ -*-===//
//
// The CFG facts plan-memory asks per storage and per use (passes/memory/PlanMemory.cpp):
// dominance between ops in O(1), nearest common dominators, the child of a
// dominator toward a block (all from ir::DominanceInfo, ir/Verifier.h), and
// whether a block lies on a cycle. Computed once per function; never walks
// the CFG per query.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_DOMINATORS_H
#define NIMBLE_PASSES_DOMINATORS_H

#include "ir/IR.h"
#include "ir/Verifier.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace nimble::passes {

/// ir::DominanceInfo (immediate dominators, the dominator tree numbered for
/// O(1) `dominates`, common dominators, children toward a block) plus which
/// blocks lie on a cycle (Tarjan's strongly connected components), so that
/// planning never walks the CFG per query.
class Dominators : public ir::DominanceInfo {
  using Block = ir::Block;
  using Function = ir::Function;

public:
  explicit Dominators(const Function &f) : DominanceInfo(f) {
    // Successors as compressed rows (a vector per block was a million
    // allocations on a function of a million blocks).
    const std::vector<Block *> &rpo = reversePostOrder();
    std::vector<uint32_t> begin(rpo.size() + 1, 0);
    std::vector<int> succs;
    for (size_t i = 0; i < rpo.size(); ++i) {
      if (ir::Operation *t = rpo[i]->terminator())
        for (const ir::Successor &s : t->successors())
          if (int j = index(s.block); j >= 0) succs.push_back(j);
      begin[i + 1] = static_cast<uint32_t>(succs.size());
    }
    markCycles(begin, succs);
  }
  /// True when `b` (reachable) can reach itself.
  bool inCycle(const Block *b) const { return cyclic_[index(b)]; }

private:
  /// Tarjan's SCCs, iteratively: a block is on a cycle when its component
  /// has several blocks or it branches to itself.
  /// The successors of block v are succs[begin[v], begin[v + 1]).
  void markCycles(const std::vector<uint32_t> &begin, const std::vector<int> &succs) {
    const int n = static_cast<int>(begin.size()) - 1;
    cyclic_.assign(n, false);
    std::vector<int> num(n, -1), low(n, 0), stack;
    std::vector<bool> onStack(n, false);
    int counter = 0;
    for (int root = 0; root < n; ++root) {
      if (num[root] >= 0) continue;
      std::vector<std::pair<int, size_t>> dfs = {{root, 0}};
      num[root] = low[root] = counter++;
      stack.push_back(root);
      onStack[root] = true;
      while (!dfs.empty()) {
        auto &[v, k] = dfs.back();
        if (k < begin[v + 1] - begin[v]) {
          int w = succs[begin[v] + k++];
          if (w == v) cyclic_[v] = true;
          if (num[w] < 0) {
            num[w] = low[w] = counter++;
            stack.push_back(w);
            onStack[w] = true;
            dfs.push_back({w, 0});
          } else if (onStack[w]) {
            low[v] = std::min(low[v], num[w]);
          }
          continue;
        }
        int done = v;
        dfs.pop_back();
        if (!dfs.empty()) low[dfs.back().first] = std::min(low[dfs.back().first], low[done]);
        if (low[done] != num[done]) continue;
        // The component is the stack from `done` up.
        const size_t from = static_cast<size_t>(std::find(stack.rbegin(), stack.rend(), done).base() - stack.begin()) - 1;
        const bool cycle = stack.size() - from > 1;
        for (size_t k = from; k < stack.size(); ++k) {
          onStack[stack[k]] = false;
          if (cycle) cyclic_[stack[k]] = true;
        }
        stack.resize(from);
      }
    }
  }
  std::vector<bool> cyclic_;
};

} // namespace nimble::passes

#endif // NIMBLE_PASSES_DOMINATORS_H
