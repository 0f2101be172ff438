//===- Dominators.h - Dominator tree and cycles for memory planning -*- C++ -*-===//
//
// The CFG facts plan-memory asks per storage and per use (passes/PlanMemory.cpp):
// dominance between ops in O(1), nearest common dominators, the child of a
// dominator toward a block, and whether a block lies on a cycle. Computed
// once per function; never walks the CFG per query.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_DOMINATORS_H
#define NIMBLE_PASSES_DOMINATORS_H

#include "ir/IR.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace nimble::passes {

/// Immediate dominators over the reachable blocks (Cooper, Harvey, Kennedy),
/// with the dominator tree numbered in DFS pre- and post-order so that
/// `dominates` is O(1), and which blocks lie on a cycle (Tarjan's strongly
/// connected components), so that planning never walks the CFG per query.
class Dominators {
  using Block = ir::Block;
  using Function = ir::Function;
  using Operation = ir::Operation;

public:
  explicit Dominators(const Function &f) {
    rpo_ = f.reversePostOrder();
    for (size_t i = 0; i < rpo_.size(); ++i) index_[rpo_[i]] = static_cast<int>(i);
    const int n = static_cast<int>(rpo_.size());
    std::vector<std::vector<int>> preds(rpo_.size()), succs(rpo_.size());
    for (int i = 0; i < n; ++i)
      for (Block *s : rpo_[i]->successors())
        if (int j = index(s); j != INT32_MAX) {
          preds[j].push_back(i);
          succs[i].push_back(j);
        }
    idom_.assign(rpo_.size(), -1);
    if (rpo_.empty()) return;
    idom_[0] = 0;
    for (bool changed = true; changed;) {
      changed = false;
      for (int i = 1; i < n; ++i) {
        int nd = -1;
        for (int pi : preds[i]) {
          if (idom_[pi] < 0) continue;
          nd = nd < 0 ? pi : intersect(pi, nd);
        }
        if (nd != idom_[i]) {
          idom_[i] = nd;
          changed = true;
        }
      }
    }
    kids_.assign(rpo_.size(), {});
    for (int i = 1; i < n; ++i) kids_[idom_[i]].push_back(i);
    pre_.assign(rpo_.size(), 0);
    post_.assign(rpo_.size(), 0);
    int clock = 0;
    std::vector<std::pair<int, size_t>> stack = {{0, 0}};
    pre_[0] = clock++;
    while (!stack.empty()) {
      auto &[b, k] = stack.back();
      if (k < kids_[b].size()) {
        int c = kids_[b][k++];
        pre_[c] = clock++;
        stack.push_back({c, 0});
      } else {
        post_[b] = clock++;
        stack.pop_back();
      }
    }
    // Children in pre-order (they are pushed in increasing RPO index, which
    // is the order the DFS visits them): childToward binary-searches them.
    markCycles(succs);
  }
  /// RPO position, or INT_MAX for unreachable blocks.
  int index(const Block *b) const {
    auto it = index_.find(b);
    return it == index_.end() ? INT32_MAX : it->second;
  }
  bool dominates(const Block *a, const Block *b) const {
    int ia = index(a), ib = index(b);
    if (ia == INT32_MAX || ib == INT32_MAX) return false;
    return pre_[ia] <= pre_[ib] && post_[ib] <= post_[ia];
  }
  /// The nearest block dominating both (both reachable).
  Block *common(const Block *a, const Block *b) const {
    return rpo_[intersect(index(a), index(b))];
  }
  /// The nearest block dominating every block of `bs` (all reachable): the
  /// common dominator of the two with the smallest and largest pre-order
  /// numbers.
  Block *common(const std::vector<const Block *> &bs) const {
    int lo = -1, hi = -1;
    for (const Block *b : bs) {
      int i = index(b);
      if (lo < 0 || pre_[i] < pre_[lo]) lo = i;
      if (hi < 0 || pre_[i] > pre_[hi]) hi = i;
    }
    return rpo_[intersect(lo, hi)];
  }
  /// The immediate dominator, or null for the entry.
  Block *idom(const Block *b) const {
    int i = index(b);
    return i == 0 || i == INT32_MAX ? nullptr : rpo_[idom_[i]];
  }
  /// The child of `d` in the dominator tree that dominates `c` (`d` strictly
  /// dominates `c`).
  Block *childToward(const Block *d, const Block *c) const {
    const std::vector<int> &ks = kids_[index(d)];
    int pc = pre_[index(c)];
    auto it = std::upper_bound(ks.begin(), ks.end(), pc, [&](int p, int k) { return p < pre_[k]; });
    assert(it != ks.begin());
    return rpo_[*(it - 1)];
  }
  bool dominates(const Operation *a, const Operation *b) const {
    if (a->block() == b->block()) return a == b || a->isBeforeInBlock(b);
    return dominates(a->block(), b->block());
  }
  /// True when `b` (reachable) can reach itself.
  bool inCycle(const Block *b) const { return cyclic_[index(b)]; }

private:
  int intersect(int a, int b) const {
    while (a != b) {
      while (a > b) a = idom_[a];
      while (b > a) b = idom_[b];
    }
    return a;
  }
  /// Tarjan's SCCs, iteratively: a block is on a cycle when its component
  /// has several blocks or it branches to itself.
  void markCycles(const std::vector<std::vector<int>> &succs) {
    const int n = static_cast<int>(succs.size());
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
        if (k < succs[v].size()) {
          int w = succs[v][k++];
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
        std::vector<int> comp;
        int w;
        do {
          w = stack.back();
          stack.pop_back();
          onStack[w] = false;
          comp.push_back(w);
        } while (w != done);
        if (comp.size() > 1)
          for (int c : comp) cyclic_[c] = true;
      }
    }
  }
  std::vector<Block *> rpo_;
  std::unordered_map<const Block *, int> index_;
  std::vector<int> idom_;
  std::vector<std::vector<int>> kids_;
  std::vector<int> pre_, post_;
  std::vector<bool> cyclic_;
};

} // namespace nimble::passes

#endif // NIMBLE_PASSES_DOMINATORS_H
