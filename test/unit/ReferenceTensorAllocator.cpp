//===- ReferenceTensorAllocator.cpp - NNC's allocator, the plain way ------===//
//
// See ReferenceTensorAllocator.h. The rules (which edge a tuple may take,
// the order of candidates, how an insertion splits an edge) are the ones
// passes/memory/TensorAllocator.cpp and passes/memory/PlanMemory.cpp document; only the
// bookkeeping differs. Quadratic-to-cubic per problem: for tests only.
//
//===----------------------------------------------------------------------===//

#include "test/unit/ReferenceTensorAllocator.h"

#include <algorithm>
#include <tuple>

namespace nimble::testing {
namespace {

using passes::AllocProblem;
using passes::AllocSolution;

constexpr int kSource = -1, kSink = -2;

struct Edge {
  int src, dst;
  int64_t off, size;
};

class Reference {
public:
  explicit Reference(const AllocProblem &p) : p_(p), n_(static_cast<int>(p.sizes.size())) {
    degree_.assign(n_, 0);
    for (int i = 0; i < n_; ++i)
      for (int j = 0; j < n_; ++j) degree_[i] += conflict(i, j);
    placed_.assign(n_, false);
    sol_.offsets.assign(n_, 0);
  }

  AllocSolution run() {
    for (int i = 0; i < n_; ++i) placed_[i] = p_.sizes[i] == 0;
    for (;;) {
      std::vector<std::vector<int>> cands = candidates();
      if (cands.empty()) return sol_;
      int edge = -1;
      size_t chosen = 0;
      for (size_t c = 0; c < cands.size() && edge < 0; ++c)
        if ((edge = fit(cands[c])) >= 0) chosen = c;
      if (edge >= 0) ++sol_.reusedEdges;
      insert(cands[chosen], edge);
    }
  }

private:
  bool conflict(int a, int b) const { return a >= 0 && b >= 0 && a != b && p_.interferes[a][b]; }
  int64_t largest(const std::vector<int> &t) const {
    int64_t m = 0;
    for (int i : t) m = std::max(m, p_.sizes[i]);
    return m;
  }
  int64_t edgeCount(const std::vector<int> &t) const {
    int64_t e = 0;
    for (int i : t) e += degree_[i];
    return e;
  }

  /// Every unplaced tensor of the largest degree, alone and with up to two
  /// larger non-conflicting partners (largest first, then most edges, then
  /// lowest index), stably sorted by (largest size, edge count) descending.
  std::vector<std::vector<int>> candidates() const {
    int best = -1;
    for (int i = 0; i < n_; ++i)
      if (!placed_[i]) best = std::max(best, degree_[i]);
    std::vector<std::vector<int>> out;
    for (int c = 0; c < n_ && best >= 0; ++c) {
      if (placed_[c] || degree_[c] != best) continue;
      std::vector<int> t = {c};
      out.push_back(t);
      while (t.size() < 3) {
        int pick = -1;
        for (int u = 0; u < n_; ++u) {
          if (placed_[u] || p_.sizes[u] <= p_.sizes[c] || std::count(t.begin(), t.end(), u)) continue;
          bool free = true;
          for (int m : t) free &= !conflict(m, u);
          if (free && (pick < 0 || std::make_tuple(-p_.sizes[u], -degree_[u], u) <
                                       std::make_tuple(-p_.sizes[pick], -degree_[pick], pick)))
            pick = u;
        }
        if (pick < 0) break;
        t.push_back(pick);
      }
      if (t.size() > 1) out.push_back(t);
    }
    std::stable_sort(out.begin(), out.end(), [&](const std::vector<int> &a, const std::vector<int> &b) {
      return std::make_pair(-largest(a), -edgeCount(a)) < std::make_pair(-largest(b), -edgeCount(b));
    });
    return out;
  }

  /// The best-fitting usable edge (smallest, then lowest offset, then first
  /// in (src, dst, off) order), or -1.
  int fit(const std::vector<int> &t) const {
    int64_t need = largest(t);
    int best = -1;
    for (size_t e = 0; e < edges_.size(); ++e) {
      const Edge &ed = edges_[e];
      if (ed.size < need || (ed.src == kSource && ed.dst == kSink)) continue;
      bool ok = true;
      for (int m : t) {
        ok &= !conflict(m, ed.src) && !conflict(m, ed.dst);
        // No placed tensor conflicting with m may own bytes m would take.
        for (int u = 0; u < n_ && ok; ++u)
          if (placed_[u] && p_.sizes[u] != 0 && conflict(m, u))
            ok = sol_.offsets[u] + p_.sizes[u] <= ed.off || ed.off + p_.sizes[m] <= sol_.offsets[u];
      }
      if (ok && (best < 0 || std::make_pair(ed.size, ed.off) < std::make_pair(edges_[best].size, edges_[best].off)))
        best = static_cast<int>(e);
    }
    return best;
  }

  void insert(std::vector<int> t, int edge) {
    int64_t need = largest(t);
    Edge e;
    if (edge < 0) {
      e = {kSource, kSink, sol_.size, need};
      sol_.size += need;
    } else {
      e = edges_[edge];
      edges_.erase(edges_.begin() + edge);
      if (e.size > need) edges_.push_back({e.src, e.dst, e.off + need, e.size - need});
    }
    std::stable_sort(t.begin(), t.end(), [&](int a, int b) { return std::make_pair(p_.order[a], a) < std::make_pair(p_.order[b], b); });
    for (int m : t) {
      sol_.offsets[m] = e.off;
      placed_[m] = true;
    }
    std::vector<int64_t> cuts = {0, need};
    for (int m : t) cuts.push_back(p_.sizes[m]);
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      int prev = e.src;
      for (int m : t)
        if (p_.sizes[m] >= cuts[k + 1]) {
          edges_.push_back({prev, m, e.off + cuts[k], cuts[k + 1] - cuts[k]});
          prev = m;
        }
      edges_.push_back({prev, e.dst, e.off + cuts[k], cuts[k + 1] - cuts[k]});
    }
    // One edge per pair and contiguous range.
    std::sort(edges_.begin(), edges_.end(), [](const Edge &a, const Edge &b) {
      return std::tie(a.src, a.dst, a.off) < std::tie(b.src, b.dst, b.off);
    });
    std::vector<Edge> merged;
    for (const Edge &x : edges_) {
      if (!merged.empty() && merged.back().src == x.src && merged.back().dst == x.dst &&
          merged.back().off + merged.back().size == x.off)
        merged.back().size += x.size;
      else
        merged.push_back(x);
    }
    edges_ = std::move(merged);
  }

  const AllocProblem &p_;
  int n_;
  std::vector<int> degree_;
  std::vector<bool> placed_;
  std::vector<Edge> edges_;
  AllocSolution sol_;
};

} // namespace

AllocSolution referenceAllocateTensors(const AllocProblem &p) { return Reference(p).run(); }

} // namespace nimble::testing
