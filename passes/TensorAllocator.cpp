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
#include <array>
#include <cassert>
#include <climits>
#include <numeric>
#include <tuple>

namespace nimble::passes {
namespace {

constexpr int kSource = -1;
constexpr int kSink = -2;

struct Edge {
  int src, dst;
  int64_t off, size;
  /// The round of the allocator that made it (a split, a merge or a new
  /// chain link): see Allocator::failedAt_.
  int born = 0;
};

/// A candidate for insertion: one tensor, or a tuple of up to three that
/// interfere with none of each other (NNC's tuples). Fixed-size: candidates
/// are rebuilt on every round of the allocator.
struct Tuple {
  std::array<int, 3> m{};
  unsigned n = 0;
  int64_t maxSize = 0, edges = 0; // sort keys, filled by candidates()
  void push(int t) { m[n++] = t; }
  size_t size() const { return n; }
  int operator[](size_t i) const { return m[i]; }
  const int *begin() const { return m.data(); }
  const int *end() const { return m.data() + n; }
  int *begin() { return m.data(); }
  int *end() { return m.data() + n; }
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
    placedNeighbours_.assign(n_, 0);
    failedAt_.assign(n_, 0);
    sol_.offsets.assign(n_, 0);
  }

  AllocSolution run() {
    for (int i = 0; i < n_; ++i)
      if (p_.sizes[i] == 0) placed_[i] = true;
    while (true) {
      ++round_;
      std::vector<Tuple> cands = candidates();
      if (cands.empty()) break;
      // Go through the ordered candidates; the first with a reusable edge
      // wins, else the first candidate gets fresh bytes.
      size_t chosen = 0;
      int edge = -1;
      for (size_t c = 0; c < cands.size() && edge < 0; ++c) {
        const Tuple &t = cands[c];
        // A tensor that fit no edge in an earlier round can only fit one
        // made since: placed tensors never move (its conflicts only grow)
        // and edges that stay are unchanged.
        int since = t.size() == 1 ? failedAt_[t[0]] : 0;
        edge = findEdge(t, since);
        if (edge >= 0) chosen = c;
        else if (t.size() == 1) failedAt_[t[0]] = round_;
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
  int64_t maxSize(const Tuple &t) const {
    int64_t m = 0;
    for (int i : t) m = std::max(m, p_.sizes[i]);
    return m;
  }
  int64_t edgesOf(const Tuple &t) const {
    int64_t e = 0;
    for (int i : t) e += degree_[i];
    return e;
  }

  /// NNC's candidate selection: the unplaced tensors with the most
  /// interference edges, each alone and in a tuple (up to 3) with larger
  /// tensors that interfere with none of the tuple; ordered by the tuple's
  /// largest size, then its total edge count (then by the first member's
  /// index, for determinism).
  std::vector<Tuple> candidates() const {
    int best = -1;
    for (int i = 0; i < n_; ++i)
      if (!placed_[i]) best = std::max(best, degree_[i]);
    std::vector<Tuple> out;
    if (best < 0) return out;
    for (int c = 0; c < n_; ++c) {
      if (placed_[c] || degree_[c] != best) continue;
      Tuple tuple;
      tuple.push(c);
      out.push_back(tuple);
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
        tuple.push(pick);
      }
      if (tuple.size() > 1) out.push_back(tuple);
    }
    for (Tuple &t : out) {
      t.maxSize = maxSize(t);
      t.edges = edgesOf(t);
    }
    std::stable_sort(out.begin(), out.end(), [](const Tuple &a, const Tuple &b) {
      return std::make_pair(-a.maxSize, -a.edges) < std::make_pair(-b.maxSize, -b.edges);
    });
    return out;
  }

  /// An edge of the allocation graph the tuple can be inserted into: large
  /// enough, not the fresh-bytes source->sink kind, and (our addition, see
  /// PlanMemory.cpp) no tensor already owning the bytes the tuple would take
  /// interferes with a member. Best fit: the smallest such edge, then the
  /// lowest offset. Returns -1 if none.
  int findEdge(const Tuple &tuple, int since) const {
    int64_t need = maxSize(tuple);
    // Every edge but source->sink touches a placed tensor (of nonzero
    // size): a member that interferes with all of them fits nowhere. In a
    // region where everything interferes this answers every query at once.
    for (int m : tuple)
      if (placedNeighbours_[m] == numPlaced_) return -1;
    // Per member, the byte ranges of the placed tensors it interferes with,
    // sorted by start, with the running maximum of their ends: whether any
    // overlaps [off, off + size) is then one binary search per edge instead
    // of a walk over the member's neighbours (the allocator was cubic in a
    // region's members through this check; docs/perf.md, "Compile time").
    struct Busy {
      std::vector<int64_t> starts, maxEnds;
      bool overlaps(int64_t off, int64_t size) const {
        // Ranges starting before off + size; any of them ending after off?
        size_t k = static_cast<size_t>(std::lower_bound(starts.begin(), starts.end(), off + size) - starts.begin());
        return k > 0 && maxEnds[k - 1] > off;
      }
    };
    auto worthChecking = [&](const Edge &ed) {
      return ed.born >= since && ed.size >= need && !(ed.src == kSource && ed.dst == kSink);
    };
    if (std::none_of(edges_.begin(), edges_.end(), worthChecking)) return -1;
    std::vector<Busy> busy(tuple.size());
    for (size_t i = 0; i < tuple.size(); ++i) {
      std::vector<std::pair<int64_t, int64_t>> ranges;
      for (int t : adj_[tuple[i]])
        if (placed_[t] && p_.sizes[t] != 0) ranges.push_back({sol_.offsets[t], sol_.offsets[t] + p_.sizes[t]});
      std::sort(ranges.begin(), ranges.end());
      int64_t maxEnd = INT64_MIN;
      for (const auto &[start, end] : ranges) {
        maxEnd = std::max(maxEnd, end);
        busy[i].starts.push_back(start);
        busy[i].maxEnds.push_back(maxEnd);
      }
    }
    int best = -1;
    for (size_t e = 0; e < edges_.size(); ++e) {
      const Edge &ed = edges_[e];
      if (!worthChecking(ed)) continue;
      if (best >= 0 && (ed.size > edges_[best].size || (ed.size == edges_[best].size && ed.off >= edges_[best].off)))
        continue; // cannot beat the best fit so far
      bool ok = true;
      for (size_t i = 0; i < tuple.size() && ok; ++i) {
        int m = tuple[i];
        ok = !interferes(m, ed.src) && !interferes(m, ed.dst) && !busy[i].overlaps(ed.off, p_.sizes[m]);
      }
      if (ok) best = static_cast<int>(e);
    }
    return best;
  }

  /// NNC's insertion: the tuple, in access order, takes the first
  /// maxSize bytes of the edge (or of a new source->sink edge that grows the
  /// buffer); every member starts at the edge's offset.
  void insert(Tuple tuple, int edge) {
    int64_t need = maxSize(tuple);
    Edge e;
    if (edge < 0) {
      e = {kSource, kSink, sol_.size, need, round_};
      sol_.size += need;
    } else {
      e = edges_[edge];
      edges_.erase(edges_.begin() + edge);
      if (e.size > need) edges_.push_back({e.src, e.dst, e.off + need, e.size - need, round_});
      e.size = need;
    }
    // Access order (at most three: insertion sort).
    for (size_t i = 1; i < tuple.size(); ++i)
      for (size_t j = i; j > 0 && std::make_pair(p_.order[tuple.m[j]], tuple.m[j]) <
                                      std::make_pair(p_.order[tuple.m[j - 1]], tuple.m[j - 1]);
           --j)
        std::swap(tuple.m[j], tuple.m[j - 1]);
    for (int m : tuple) {
      sol_.offsets[m] = e.off;
      placed_[m] = true;
      if (p_.sizes[m] == 0) continue;
      ++numPlaced_;
      for (int t : adj_[m]) ++placedNeighbours_[t];
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
        edges_.push_back({prev, m, e.off + cuts[k], cuts[k + 1] - cuts[k], round_});
        prev = m;
      }
      edges_.push_back({prev, e.dst, e.off + cuts[k], cuts[k + 1] - cuts[k], round_});
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
          out.back().off + out.back().size == e.off) {
        out.back().size += e.size;
        out.back().born = round_;
      } else {
        out.push_back(e);
      }
    }
    edges_ = std::move(out);
  }

  const AllocProblem &p_;
  int n_;
  std::vector<int> degree_;
  std::vector<std::vector<int>> adj_; // interfering tensors of each
  std::vector<int> bySize_;           // by size, then degree (descending), then index
  std::vector<bool> placed_;
  int round_ = 0;
  /// Per tensor: the last round in which it fit no edge alone (0: never).
  std::vector<int> failedAt_;
  int numPlaced_ = 0;                 // placed tensors of nonzero size
  std::vector<int> placedNeighbours_; // of each: interfering ones among those
  std::vector<Edge> edges_;
  AllocSolution sol_;
};

} // namespace

AllocSolution allocateTensors(const AllocProblem &p) {
  assert(p.order.size() == p.sizes.size() && p.interferes.size() == p.sizes.size());
  return Allocator(p).run();
}

} // namespace nimble::passes
