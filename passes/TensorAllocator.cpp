//===- TensorAllocator.cpp - NNC's static tensor allocation algorithm -----===//
//
// The allocation graph: a DAG whose edges carry byte ranges of the buffer.
// An edge a -> b with range [o, o+w) says that tensor b reuses those bytes
// after tensor a; the dummy source (kSource) hands out fresh bytes and the
// dummy sink (kSink) takes them back at the end. Every byte of the buffer lies
// on exactly one source-to-sink chain, and the tensors of a chain own it one
// after another. Inserting a tuple of non-interfering tensors into an edge
// puts all of them at the start of the edge's range, one after another on the
// chain (NNC's insertion, seed 002); the part of the range they do not need
// stays on the old edge (partial reuse of a larger region).
//
//===----------------------------------------------------------------------===//

#include "passes/TensorAllocator.h"

#include <algorithm>
#include <cassert>
#include <numeric>
#include <tuple>

namespace nimble::passes {
namespace {

constexpr int kSource = -1;
constexpr int kSink = -2;

struct Edge {
  int src, dst;
  int64_t off, size;
};

class Allocator {
public:
  explicit Allocator(const AllocProblem &p) : p_(p), n_(static_cast<int>(p.sizes.size())) {
    degree_.assign(n_, 0);
    adj_.assign(n_, {});
    for (int i = 0; i < n_; ++i)
      for (int j = 0; j < n_; ++j)
        if (i != j && interferes(i, j)) {
          ++degree_[i];
          adj_[i].push_back(j);
        }
    // Tuple partners are picked by size, then edge count, then index.
    bySize_.resize(n_);
    std::iota(bySize_.begin(), bySize_.end(), 0);
    std::sort(bySize_.begin(), bySize_.end(), [&](int a, int b) {
      return std::make_tuple(-p_.sizes[a], -degree_[a], a) < std::make_tuple(-p_.sizes[b], -degree_[b], b);
    });
    placed_.assign(n_, false);
    sol_.offsets.assign(n_, 0);
  }

  AllocSolution run() {
    for (int i = 0; i < n_; ++i)
      if (p_.sizes[i] == 0) placed_[i] = true;
    while (true) {
      std::vector<std::vector<int>> cands = candidates();
      if (cands.empty()) break;
      // Go through the ordered candidates; the first with a reusable edge
      // wins, else the first candidate gets fresh bytes.
      size_t chosen = 0;
      int edge = -1;
      for (size_t c = 0; c < cands.size() && edge < 0; ++c) {
        edge = findEdge(cands[c]);
        if (edge >= 0) chosen = c;
      }
      if (edge >= 0) ++sol_.reusedEdges;
      insert(cands[chosen], edge);
    }
    return sol_;
  }

private:
  bool interferes(int a, int b) const {
    return a >= 0 && b >= 0 && a != b && p_.interferes[a][b];
  }
  int64_t maxSize(const std::vector<int> &t) const {
    int64_t m = 0;
    for (int i : t) m = std::max(m, p_.sizes[i]);
    return m;
  }
  int64_t edgesOf(const std::vector<int> &t) const {
    int64_t e = 0;
    for (int i : t) e += degree_[i];
    return e;
  }

  /// NNC's candidate selection: the unplaced tensors with the most
  /// interference edges, each alone and in a tuple (up to 3) with larger
  /// tensors that interfere with none of the tuple; ordered by the tuple's
  /// largest size, then its total edge count (then by the first member's
  /// index, for determinism).
  std::vector<std::vector<int>> candidates() const {
    int best = -1;
    for (int i = 0; i < n_; ++i)
      if (!placed_[i]) best = std::max(best, degree_[i]);
    std::vector<std::vector<int>> out;
    if (best < 0) return out;
    for (int c = 0; c < n_; ++c) {
      if (placed_[c] || degree_[c] != best) continue;
      out.push_back({c});
      std::vector<int> tuple = {c};
      while (tuple.size() < 3) {
        // The largest unplaced tensor (then most edges, then lowest index)
        // larger than c that interferes with no member: the first in bySize_.
        int pick = -1;
        for (int t : bySize_) {
          if (p_.sizes[t] <= p_.sizes[c]) break;
          if (placed_[t]) continue;
          if (std::find(tuple.begin(), tuple.end(), t) != tuple.end()) continue;
          bool ok = true;
          for (int m : tuple) ok &= !interferes(m, t);
          if (!ok) continue;
          pick = t;
          break;
        }
        if (pick < 0) break;
        tuple.push_back(pick);
      }
      if (tuple.size() > 1) out.push_back(tuple);
    }
    std::stable_sort(out.begin(), out.end(), [&](const std::vector<int> &a, const std::vector<int> &b) {
      return std::make_tuple(-maxSize(a), -edgesOf(a)) < std::make_tuple(-maxSize(b), -edgesOf(b));
    });
    return out;
  }

  /// An edge of the allocation graph the tuple can be inserted into: large
  /// enough, not the fresh-bytes source->sink kind, and (our addition, see
  /// PlanMemory.cpp) no tensor already owning the bytes the tuple would take
  /// interferes with a member. Best fit: the smallest such edge, then the
  /// lowest offset. Returns -1 if none.
  int findEdge(const std::vector<int> &tuple) const {
    int64_t need = maxSize(tuple);
    int best = -1;
    for (size_t e = 0; e < edges_.size(); ++e) {
      const Edge &ed = edges_[e];
      if (ed.size < need || (ed.src == kSource && ed.dst == kSink)) continue;
      bool ok = true;
      for (int m : tuple) {
        ok &= !interferes(m, ed.src) && !interferes(m, ed.dst);
        for (size_t k = 0; k < adj_[m].size() && ok; ++k) {
          int t = adj_[m][k];
          if (!placed_[t] || p_.sizes[t] == 0) continue;
          bool overlap = sol_.offsets[t] < ed.off + p_.sizes[m] && ed.off < sol_.offsets[t] + p_.sizes[t];
          if (overlap && interferes(m, t)) ok = false;
        }
      }
      if (!ok) continue;
      if (best < 0 || ed.size < edges_[best].size ||
          (ed.size == edges_[best].size && ed.off < edges_[best].off))
        best = static_cast<int>(e);
    }
    return best;
  }

  /// NNC's insertion: the tuple, in access order, takes the first
  /// maxSize bytes of the edge (or of a new source->sink edge that grows the
  /// buffer); every member starts at the edge's offset.
  void insert(std::vector<int> tuple, int edge) {
    int64_t need = maxSize(tuple);
    Edge e;
    if (edge < 0) {
      e = {kSource, kSink, sol_.size, need};
      sol_.size += need;
    } else {
      e = edges_[edge];
      edges_.erase(edges_.begin() + edge);
      if (e.size > need) edges_.push_back({e.src, e.dst, e.off + need, e.size - need});
      e.size = need;
    }
    std::sort(tuple.begin(), tuple.end(), [&](int a, int b) {
      return std::make_pair(p_.order[a], a) < std::make_pair(p_.order[b], b);
    });
    for (int m : tuple) {
      sol_.offsets[m] = e.off;
      placed_[m] = true;
    }
    // Split [off, off+need) at the members' sizes; on each piece the chain
    // runs src -> (members covering it, in access order) -> dst.
    std::vector<int64_t> cuts = {0, need};
    for (int m : tuple) cuts.push_back(p_.sizes[m]);
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      int prev = e.src;
      for (int m : tuple) {
        if (p_.sizes[m] < cuts[k + 1]) continue;
        edges_.push_back({prev, m, e.off + cuts[k], cuts[k + 1] - cuts[k]});
        prev = m;
      }
      edges_.push_back({prev, e.dst, e.off + cuts[k], cuts[k + 1] - cuts[k]});
    }
    normalize();
  }

  /// Merges contiguous edges between the same two nodes (one edge of the
  /// allocation graph per pair and region, as in NNC's weighted edges).
  void normalize() {
    std::sort(edges_.begin(), edges_.end(), [](const Edge &a, const Edge &b) {
      return std::make_tuple(a.src, a.dst, a.off) < std::make_tuple(b.src, b.dst, b.off);
    });
    std::vector<Edge> out;
    for (const Edge &e : edges_) {
      if (!out.empty() && out.back().src == e.src && out.back().dst == e.dst &&
          out.back().off + out.back().size == e.off)
        out.back().size += e.size;
      else
        out.push_back(e);
    }
    edges_ = std::move(out);
  }

  const AllocProblem &p_;
  int n_;
  std::vector<int> degree_;
  std::vector<std::vector<int>> adj_; // interfering tensors of each
  std::vector<int> bySize_;           // by size, then degree (descending), then index
  std::vector<bool> placed_;
  std::vector<Edge> edges_;
  AllocSolution sol_;
};

} // namespace

AllocSolution allocateTensors(const AllocProblem &p) {
  assert(p.order.size() == p.sizes.size() && p.interferes.size() == p.sizes.size());
  return Allocator(p).run();
}

} // namespace nimble::passes
