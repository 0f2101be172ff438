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

#include "passes/memory/TensorAllocator.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <climits>
#include <map>
#include <numeric>
#include <set>
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
  /// Names this edge until it changes (a merge or a split makes a new
  /// edge): its place in Allocator::pool_.
  int id = -1;
};

/// A candidate for insertion: one tensor, or a tuple of up to three that
/// interfere with none of each other (NNC's tuples). Fixed-size: candidates
/// are rebuilt on every round of the allocator.
struct Tuple {
  std::array<int, 3> m{};
  unsigned n = 0;
  int64_t maxSize = 0, edges = 0; // sort keys, filled by withKeys()
  int seq = 0;                     // position in the making order
  void push(int t) { m[n++] = t; }
  size_t size() const { return n; }
  int operator[](size_t i) const { return m[i]; }
  const int *begin() const { return m.data(); }
  const int *end() const { return m.data() + n; }
  int *begin() { return m.data(); }
  int *end() { return m.data() + n; }
};

/// Per member of a tuple under test: the byte ranges of the placed tensors
/// it interferes with, sorted by start, with the running maximum of their
/// ends: whether any overlaps [off, off + size) is then one binary search per
/// edge instead of a walk over the member's neighbours (the allocator was
/// cubic in a region's members through this check; docs/perf.md, "Compile
/// time").
struct Busy {
  std::vector<int64_t> starts, maxEnds;
  bool overlaps(int64_t off, int64_t size) const {
    // Ranges starting before off + size; any of them ending after off?
    size_t k = static_cast<size_t>(std::lower_bound(starts.begin(), starts.end(), off + size) - starts.begin());
    return k > 0 && maxEnds[k - 1] > off;
  }
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
    busyOf_.resize(n_);
    busyCount_.assign(n_, -1);
    sol_.offsets.assign(n_, 0);
  }

  AllocSolution run() {
    for (int i = 0; i < n_; ++i)
      if (p_.sizes[i] == 0) placed_[i] = true;
    tupleOf_.assign(n_, Tuple{});
    logStart_.assign(1, 0);
    partnerOf_.assign(n_, {});
    while (true) {
      ++round_;
      logStart_.push_back(bornLog_.size()); // logStart_[round_]
      if (cands_.empty()) fillCandidates();
      if (cands_.empty()) break;
      // Go through the ordered candidates; the first with a reusable edge
      // wins, else the first candidate gets fresh bytes.
      Tuple chosen = *cands_.begin();
      int edge = -1;
      for (auto it = cands_.begin(); it != cands_.end() && edge < 0; ++it) {
        const Tuple &t = *it;
        // A tensor that fit no edge in an earlier round can only fit one
        // made since: placed tensors never move (its conflicts only grow)
        // and edges that stay are unchanged.
        int since = t.size() == 1 ? failedAt_[t[0]] : 0;
        edge = findEdge(t, since);
        if (edge >= 0) chosen = t;
        else if (t.size() == 1) failedAt_[t[0]] = round_;
      }
      if (edge >= 0) ++sol_.reusedEdges;
      insert(chosen, edge);
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
  /// largest size, then its total edge count, then the order of making
  /// (by tensor, each alone before its tuple).
  ///
  /// Kept across rounds (rebuilding every candidate each round made the
  /// allocator cubic in a region's members; issue 23): the set holds the
  /// candidates of the current degree and is refilled when it empties
  /// (degrees are fixed and placement only removes tensors, so the largest
  /// unplaced degree drops exactly then). A tensor's tuple is the first
  /// eligible partner in a fixed order, twice, so placing a tensor changes
  /// only the tuples it is a member of: those are remade (partnerOf_).
  struct CandidateOrder {
    bool operator()(const Tuple &a, const Tuple &b) const {
      if (a.maxSize != b.maxSize) return a.maxSize > b.maxSize;
      if (a.edges != b.edges) return a.edges > b.edges;
      return a.seq < b.seq;
    }
  };
  void fillCandidates() {
    int best = -1;
    for (int i = 0; i < n_; ++i)
      if (!placed_[i]) best = std::max(best, degree_[i]);
    if (best < 0) return;
    for (int c = 0; c < n_; ++c) {
      if (placed_[c] || degree_[c] != best) continue;
      Tuple alone;
      alone.push(c);
      cands_.insert(withKeys(alone, 2 * c));
      makeTuple(c);
    }
  }
  /// `t` with its sort keys; `seq` is 2 * (its tensor) + (1 for a tuple).
  Tuple withKeys(Tuple t, int seq) const {
    t.maxSize = maxSize(t);
    t.edges = edgesOf(t);
    t.seq = seq;
    return t;
  }
  /// The tuple of candidate `c` (c and up to two larger partners), added
  /// when it has a partner.
  void makeTuple(int c) {
    Tuple tuple;
    tuple.push(c);
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
      partnerOf_[pick].push_back(c);
    }
    tupleOf_[c] = tuple;
    if (tuple.size() > 1) cands_.insert(withKeys(tuple, 2 * c + 1));
  }
  /// After `m` is placed: its own candidates go, and every tuple it was a
  /// partner in is remade.
  void placedCandidate(int m) {
    if (tupleOf_[m].size() > 0) {
      Tuple alone;
      alone.push(m);
      cands_.erase(withKeys(alone, 2 * m));
      if (tupleOf_[m].size() > 1) cands_.erase(withKeys(tupleOf_[m], 2 * m + 1));
      tupleOf_[m] = Tuple{};
    }
    std::vector<int> users;
    users.swap(partnerOf_[m]);
    for (int c : users) {
      const Tuple &t = tupleOf_[c];
      if (placed_[c] || t.size() < 2 || std::find(t.begin() + 1, t.end(), m) == t.end()) continue;
      cands_.erase(withKeys(t, 2 * c + 1));
      makeTuple(c);
    }
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
    auto worthChecking = [&](const Edge &ed) {
      return ed.born >= since && ed.size >= need && !(ed.src == kSource && ed.dst == kSink);
    };
    // Made on the first edge that needs them; kept per tensor until one of
    // its neighbours is placed (a tensor that keeps failing is retried
    // every round: issue 23).
    bool haveBusy = false;
    auto makeBusy = [&] {
      haveBusy = true;
      for (int m : tuple) {
        if (busyCount_[m] == placedNeighbours_[m]) continue; // still right
        busyCount_[m] = placedNeighbours_[m];
        std::vector<std::pair<int64_t, int64_t>> &ranges = rangeScratch_;
        ranges.clear();
        for (int t : adj_[m])
          if (placed_[t] && p_.sizes[t] != 0) ranges.push_back({sol_.offsets[t], sol_.offsets[t] + p_.sizes[t]});
        std::sort(ranges.begin(), ranges.end());
        Busy &b = busyOf_[m];
        b.starts.clear();
        b.maxEnds.clear();
        int64_t maxEnd = INT64_MIN;
        for (const auto &[start, end] : ranges) {
          maxEnd = std::max(maxEnd, end);
          b.starts.push_back(start);
          b.maxEnds.push_back(maxEnd);
        }
      }
    };
    // Best fit: the least in FitLess's order (size, offset, then the
    // pair of tensors).
    int best = -1;
    auto consider = [&](int e) {
      const Edge &ed = pool_[static_cast<size_t>(e)];
      if (!worthChecking(ed)) return;
      if (best >= 0 && !FitLess()(ed, pool_[static_cast<size_t>(best)])) return; // cannot beat the best fit so far
      bool ok = true;
      for (size_t i = 0; i < tuple.size() && ok; ++i) {
        int m = tuple[i];
        ok = !interferes(m, ed.src) && !interferes(m, ed.dst);
      }
      if (ok && !haveBusy) makeBusy();
      for (size_t i = 0; i < tuple.size() && ok; ++i) ok = !busyOf_[tuple[i]].overlaps(ed.off, p_.sizes[tuple[i]]);
      if (ok) best = e;
    };
    // The edges born since `since` are in the log of their rounds; when
    // they are fewer than all the edges, only they are looked at. A tensor
    // retried after failing is then checked against the few edges made
    // since, not every edge of the graph (issue 23). A tensor that failed in
    // the last round (the common case: a failing tensor is retried every
    // round) has not seen only the edges that round made; older rounds'
    // edges may have gone since (an edge that changes is a new edge).
    if (since > 0 && since == round_ - 1) {
      for (int e : lastBorn_) consider(e);
      return best;
    }
    if (since > 0 && since <= round_ && bornLog_.size() - logStart_[static_cast<size_t>(since)] < numEdges_) {
      for (size_t k = logStart_[static_cast<size_t>(since)]; k < bornLog_.size(); ++k)
        if (const int e = bornLog_[k]; alive_[static_cast<size_t>(e)]) consider(e);
      return best;
    }
    // Every edge: in best-fit order, so the first that takes the tuple is
    // the answer (a scan of every edge per query made each region
    // quadratic; issue 23).
    for (auto it = byFit_.lower_bound(Edge{INT_MIN, INT_MIN, INT64_MIN, need}); it != byFit_.end(); ++it) {
      if (it->src == kSource && it->dst == kSink) continue;
      consider(it->id);
      if (best >= 0) return best;
    }
    return -1;
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
      e = pool_[static_cast<size_t>(edge)];
      removeEdge(edge);
      if (e.size > need) added_.push_back({e.src, e.dst, e.off + need, e.size - need, round_});
      e.size = need;
    }
    // Access order (at most three: insertion sort).
    for (size_t i = 1; i < tuple.size(); ++i)
      for (size_t j = i; j > 0 && std::make_pair(p_.order[tuple.m[j]], tuple.m[j]) <
                                      std::make_pair(p_.order[tuple.m[j - 1]], tuple.m[j - 1]);
           --j)
        std::swap(tuple.m[j], tuple.m[j - 1]);
    for (int m : tuple) placed_[m] = true;
    for (int m : tuple) placedCandidate(m);
    for (int m : tuple) {
      sol_.offsets[m] = e.off;
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
        added_.push_back({prev, m, e.off + cuts[k], cuts[k + 1] - cuts[k], round_});
        prev = m;
      }
      added_.push_back({prev, e.dst, e.off + cuts[k], cuts[k + 1] - cuts[k], round_});
    }
    normalize();
  }

  /// Adds the edges of `added_` and merges contiguous edges between the
  /// same two nodes (one edge of the allocation graph per pair and region,
  /// as in NNC's weighted edges). The edges are kept by (src, dst, off), a
  /// key no two edges share (a chain passes a pair of tensors at most once
  /// per byte), so an added edge merges with at most its two neighbours in
  /// that order: a round costs O(log edges) per added edge (a merge of the
  /// sorted list of every edge per round made each region quadratic;
  /// issue 23).
  void normalize() {
    std::sort(added_.begin(), added_.end(),
              [](const Edge &a, const Edge &b) { return std::tie(a.src, a.dst, a.off) < std::tie(b.src, b.dst, b.off); });
    size_t firstNew = pool_.size();
    for (Edge e : added_) {
      auto next = byKey_.lower_bound({e.src, e.dst, e.off});
      assert((next == byKey_.end() || next->first != std::make_tuple(e.src, e.dst, e.off)) && "two edges share a key");
      if (next != byKey_.begin()) {
        const Edge &p = pool_[static_cast<size_t>(std::prev(next)->second)];
        if (p.src == e.src && p.dst == e.dst && p.off + p.size == e.off) {
          e.off = p.off;
          e.size += p.size;
          removeEdge(p.id);
        }
      }
      if (next != byKey_.end()) {
        const Edge &q = pool_[static_cast<size_t>(next->second)];
        if (q.src == e.src && q.dst == e.dst && e.off + e.size == q.off) {
          e.size += q.size;
          removeEdge(q.id);
        }
      }
      e.born = round_;
      e.id = static_cast<int>(pool_.size());
      pool_.push_back(e);
      alive_.push_back(1);
      byKey_.emplace(std::make_tuple(e.src, e.dst, e.off), e.id);
      byFit_.insert(e);
      ++numEdges_;
    }
    added_.clear();
    // The edges made this round and still there (one may have merged into
    // a later one), in the order made.
    lastBorn_.clear();
    for (size_t id = firstNew; id < pool_.size(); ++id)
      if (alive_[id]) {
        lastBorn_.push_back(static_cast<int>(id));
        bornLog_.push_back(static_cast<int>(id));
      }
  }
  void removeEdge(int id) {
    const Edge &e = pool_[static_cast<size_t>(id)];
    byFit_.erase(e);
    byKey_.erase({e.src, e.dst, e.off});
    alive_[static_cast<size_t>(id)] = 0;
    --numEdges_;
  }

  /// Best-fit order: size, then offset, then the pair (the order of the
  /// edges' keys, the offsets being equal).
  struct FitLess {
    bool operator()(const Edge &a, const Edge &b) const {
      return std::tie(a.size, a.off, a.src, a.dst) < std::tie(b.size, b.off, b.src, b.dst);
    }
  };

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
  std::vector<Edge> pool_;           // every edge ever made, by id
  std::vector<char> alive_;          // per id: not yet split, merged or taken
  size_t numEdges_ = 0;              // alive ones
  std::map<std::tuple<int, int, int64_t>, int> byKey_; // alive ones by (src, dst, off): their ids
  std::set<Edge, FitLess> byFit_;    // the same edges, in best-fit order
  std::vector<Edge> added_;          // scratch of insert / normalize
  std::vector<int> bornLog_;         // the ids of the edges made in each round, in round order
  std::vector<int> lastBorn_;        // the ids of the edges made in the last round
  std::vector<size_t> logStart_;     // per round: where its edges start in bornLog_
  std::set<Tuple, CandidateOrder> cands_; // the current candidates
  std::vector<Tuple> tupleOf_;        // per candidate tensor: its tuple (size 0: none)
  std::vector<std::vector<int>> partnerOf_; // per tensor: candidates whose tuple may hold it
  /// Per tensor: its Busy ranges, made when placedNeighbours_ was
  /// busyCount_ (-1: never made); scratch of findEdge.
  mutable std::vector<Busy> busyOf_;
  mutable std::vector<int> busyCount_;
  mutable std::vector<std::pair<int64_t, int64_t>> rangeScratch_;
  AllocSolution sol_;
};

} // namespace

AllocSolution allocateTensors(const AllocProblem &p) {
  assert(p.order.size() == p.sizes.size() && p.interferes.size() == p.sizes.size());
  return Allocator(p).run();
}

} // namespace nimble::passes
