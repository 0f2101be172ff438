//===- TensorAllocatorTest.cpp - NNC's allocator on small graphs ---------===//
//
// The allocator core of plan-memory (passes/memory/TensorAllocator.h) on hand-made
// and random interference graphs: interfering tensors never overlap, the
// buffer is at least the max-live lower bound (and, on chains, exactly it),
// partial reuse of a larger region happens, the result is deterministic, and
// it is the plain implementation's (ReferenceTensorAllocator.h).
//
//===----------------------------------------------------------------------===//

#include "passes/memory/TensorAllocator.h"
#include "test/unit/ReferenceTensorAllocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

using nimble::passes::allocateTensors;
using nimble::passes::AllocProblem;
using nimble::passes::AllocSolution;

namespace {

/// Tensors with lifetimes [start, end] on a straight line: they interfere
/// when the intervals intersect (what liveness gives without control flow).
AllocProblem intervals(const std::vector<int64_t> &sizes, const std::vector<std::pair<int, int>> &life) {
  AllocProblem p;
  p.sizes = sizes;
  size_t n = sizes.size();
  p.interferes.assign(n, std::vector<bool>(n, false));
  for (size_t i = 0; i < n; ++i) {
    p.order.push_back(life[i].first);
    for (size_t j = 0; j < n; ++j)
      if (i != j && life[i].first <= life[j].second && life[j].first <= life[i].second)
        p.interferes[i][j] = true;
  }
  return p;
}

/// The peak of the summed sizes of simultaneously live tensors.
int64_t maxLive(const std::vector<int64_t> &sizes, const std::vector<std::pair<int, int>> &life) {
  int64_t best = 0;
  int last = 0;
  for (auto &l : life) last = std::max(last, l.second);
  for (int t = 0; t <= last; ++t) {
    int64_t s = 0;
    for (size_t i = 0; i < sizes.size(); ++i)
      if (life[i].first <= t && t <= life[i].second) s += sizes[i];
    best = std::max(best, s);
  }
  return best;
}

void expectValid(const AllocProblem &p, const AllocSolution &s) {
  size_t n = p.sizes.size();
  ASSERT_EQ(s.offsets.size(), n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_GE(s.offsets[i], 0);
    EXPECT_LE(s.offsets[i] + p.sizes[i], s.size) << "tensor " << i << " outside the buffer";
    EXPECT_EQ(s.offsets[i] % p.alignment, 0) << "tensor " << i << " misaligned";
    for (size_t j = 0; j < n; ++j) {
      if (i == j || !p.interferes[i][j] || p.sizes[i] == 0 || p.sizes[j] == 0) continue;
      bool overlap = s.offsets[i] < s.offsets[j] + p.sizes[j] && s.offsets[j] < s.offsets[i] + p.sizes[i];
      EXPECT_FALSE(overlap) << "interfering tensors " << i << " and " << j << " overlap";
    }
  }
}

TEST(TensorAllocator, ChainReusesAlternately) {
  // a -> b -> c -> d: each interferes with its neighbours only.
  std::vector<int64_t> sizes = {128, 128, 128, 128};
  std::vector<std::pair<int, int>> life = {{0, 1}, {1, 2}, {2, 3}, {3, 4}};
  AllocProblem p = intervals(sizes, life);
  AllocSolution s = allocateTensors(p);
  expectValid(p, s);
  EXPECT_EQ(s.size, 256);
  EXPECT_EQ(s.size, maxLive(sizes, life));
  EXPECT_EQ(s.offsets[0], s.offsets[2]);
  EXPECT_EQ(s.offsets[1], s.offsets[3]);
  EXPECT_NE(s.offsets[0], s.offsets[1]);
}

TEST(TensorAllocator, AllLiveAreDisjoint) {
  std::vector<int64_t> sizes = {64, 192, 128};
  std::vector<std::pair<int, int>> life = {{0, 5}, {1, 5}, {2, 5}};
  AllocProblem p = intervals(sizes, life);
  AllocSolution s = allocateTensors(p);
  expectValid(p, s);
  EXPECT_EQ(s.size, 384);
  EXPECT_EQ(s.reusedEdges, 0u);
}

TEST(TensorAllocator, PartialReuseOfALargerRegion) {
  // A big tensor dies; two smaller ones that live together afterwards both
  // fit in its region.
  std::vector<int64_t> sizes = {512, 64, 128};
  std::vector<std::pair<int, int>> life = {{0, 1}, {1, 3}, {2, 3}};
  AllocProblem p = intervals(sizes, life);
  AllocSolution s = allocateTensors(p);
  expectValid(p, s);
  EXPECT_EQ(s.size, 512 + 64) << "tensor 1 overlaps 0's life, 2 can take 0's bytes";
  EXPECT_EQ(s.size, maxLive(sizes, life));
  EXPECT_EQ(s.offsets[0], s.offsets[2]);
}

TEST(TensorAllocator, ZeroSizedAndEmpty) {
  AllocProblem empty;
  EXPECT_EQ(allocateTensors(empty).size, 0);
  AllocProblem p = intervals({0, 64}, {{0, 1}, {0, 1}});
  AllocSolution s = allocateTensors(p);
  expectValid(p, s);
  EXPECT_EQ(s.size, 64);
}

TEST(TensorAllocator, RandomGraphsAreValidAndDeterministic) {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 300; ++iter) {
    int n = 1 + static_cast<int>(rng() % 12);
    std::vector<int64_t> sizes;
    std::vector<std::pair<int, int>> life;
    for (int i = 0; i < n; ++i) {
      sizes.push_back(64 * (1 + static_cast<int64_t>(rng() % 8)));
      int a = static_cast<int>(rng() % 20), len = static_cast<int>(rng() % 6);
      life.push_back({a, a + len});
    }
    AllocProblem p = intervals(sizes, life);
    AllocSolution s = allocateTensors(p);
    expectValid(p, s);
    int64_t total = 0;
    for (int64_t sz : sizes) total += sz;
    EXPECT_GE(s.size, maxLive(sizes, life));
    EXPECT_LE(s.size, total);
    AllocSolution again = allocateTensors(p);
    EXPECT_EQ(again.offsets, s.offsets);
    EXPECT_EQ(again.size, s.size);
    if (HasFailure()) {
      ADD_FAILURE() << "at iteration " << iter;
      return;
    }
  }
}

TEST(TensorAllocator, ArbitraryGraphsFromBranches) {
  // Interference that no interval order gives (control flow: a cycle of
  // four, a-b-c-d-a): still no overlap, and the non-adjacent pairs share.
  AllocProblem p;
  p.sizes = {128, 128, 128, 128};
  p.order = {0, 1, 2, 3};
  p.interferes.assign(4, std::vector<bool>(4, false));
  auto edge = [&](int a, int b) { p.interferes[a][b] = p.interferes[b][a] = true; };
  edge(0, 1);
  edge(1, 2);
  edge(2, 3);
  edge(3, 0);
  AllocSolution s = allocateTensors(p);
  expectValid(p, s);
  EXPECT_EQ(s.size, 256);
  // Random graphs too.
  std::mt19937 rng(7);
  for (int iter = 0; iter < 200; ++iter) {
    int n = 1 + static_cast<int>(rng() % 10);
    AllocProblem q;
    q.interferes.assign(n, std::vector<bool>(n, false));
    for (int i = 0; i < n; ++i) {
      q.sizes.push_back(64 * (1 + static_cast<int64_t>(rng() % 6)));
      q.order.push_back(static_cast<int64_t>(rng() % 5));
      for (int j = 0; j < i; ++j)
        if (rng() % 3 == 0) q.interferes[i][j] = q.interferes[j][i] = true;
    }
    AllocSolution r = allocateTensors(q);
    expectValid(q, r);
    if (HasFailure()) {
      ADD_FAILURE() << "at iteration " << iter;
      return;
    }
  }
}


/// A fingerprint of the plans for a fixed set of random problems, larger than
/// the ones above (up to 120 tensors, mixed sizes, interval and arbitrary
/// interference): the search is optimised (incremental edge checks, binary
/// searches over each tensor's conflicts) and must keep making exactly the
/// choices of the plain NNC search it replaced, so that plans do not change
/// (docs/perf.md, "Compile time at scale"). The expected value was computed
/// with that plain search (commit 95aafac).
uint64_t planFingerprint() {
  std::mt19937 rng(2026);
  uint64_t h = 0;
  auto mix = [&](int64_t v) { // boost::hash_combine's mixing
    h ^= static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  for (int iter = 0; iter < 60; ++iter) {
    int n = 20 + static_cast<int>(rng() % 100);
    AllocProblem p;
    p.interferes.assign(n, std::vector<bool>(n, false));
    bool byIntervals = iter % 2 == 0;
    std::vector<std::pair<int, int>> life;
    for (int i = 0; i < n; ++i) {
      // Mostly one size (shape buffers), some larger.
      p.sizes.push_back(rng() % 4 == 0 ? 64 * (1 + static_cast<int64_t>(rng() % 6)) : 64);
      int a = static_cast<int>(rng() % (2 * n)), len = static_cast<int>(rng() % 12);
      life.push_back({a, a + len});
      p.order.push_back(byIntervals ? a : static_cast<int64_t>(rng() % 50));
    }
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < i; ++j) {
        bool x = byIntervals ? life[i].first <= life[j].second && life[j].first <= life[i].second
                             : rng() % 5 == 0;
        p.interferes[i][j] = p.interferes[j][i] = x;
      }
    AllocSolution s = allocateTensors(p);
    expectValid(p, s);
    mix(s.size);
    mix(s.reusedEdges);
    for (int64_t o : s.offsets) mix(o);
  }
  return h;
}

TEST(TensorAllocator, PlansArePinned) {
  EXPECT_EQ(planFingerprint(), 0xed45907d7785cc86ull);
}

} // namespace

/// The optimised allocator (candidates kept across rounds, edges looked up
/// by the round that made them) against the plain one
/// (test/unit/ReferenceTensorAllocator.cpp) on random problems: interval
/// graphs and arbitrary graphs, sparse to complete, sizes equal or mixed
/// (zero included), access orders shuffled. The same offsets, buffer size
/// and reuse count every time.
TEST(TensorAllocator, AgreesWithThePlainImplementation) {
  std::mt19937 rng(2026);
  const std::vector<std::vector<int64_t>> sizeSets = {{64}, {64, 128}, {64, 128, 192, 256, 1024}, {0, 64, 640, 4096}};
  const std::vector<int> densities = {0, 2, 10, 30, 70, 100}; // percent
  for (int iter = 0; iter < 400; ++iter) {
    const int n = 1 + static_cast<int>(rng() % 48);
    const std::vector<int64_t> &set = sizeSets[rng() % sizeSets.size()];
    const int density = densities[rng() % densities.size()];
    AllocProblem p;
    p.interferes.assign(n, std::vector<bool>(n, false));
    std::vector<std::pair<int, int>> life;
    for (int i = 0; i < n; ++i) {
      p.sizes.push_back(set[rng() % set.size()]);
      p.order.push_back(i);
      int a = static_cast<int>(rng() % (2 * n)), len = static_cast<int>(rng() % (1 + n * density / 100));
      life.push_back({a, a + len});
    }
    const bool byIntervals = rng() % 2 == 0;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) {
        bool x = byIntervals ? life[i].first <= life[j].second && life[j].first <= life[i].second
                             : static_cast<int>(rng() % 100) < density;
        p.interferes[i][j] = p.interferes[j][i] = x;
      }
    if (rng() % 3 == 0) std::shuffle(p.order.begin(), p.order.end(), rng);
    AllocSolution fast = allocateTensors(p), plain = nimble::testing::referenceAllocateTensors(p);
    expectValid(p, fast);
    EXPECT_EQ(fast.offsets, plain.offsets) << "iteration " << iter;
    EXPECT_EQ(fast.size, plain.size) << "iteration " << iter;
    EXPECT_EQ(fast.reusedEdges, plain.reusedEdges) << "iteration " << iter;
    if (HasFailure()) return;
  }
}
