//===- DominatorsTest.cpp - ir::DominanceInfo and passes::Dominators ------===//
//
// The dominator queries the verifier, CSE, place-devices and plan-memory ask
// (dominates, idom, common dominators, the child of a dominator toward a
// block, whether a block lies on a cycle), on random control-flow graphs,
// against definitions computed the slow way here: b is dominated by a when
// removing a makes b unreachable from the entry; a block is on a cycle when
// one of its successors reaches it. Half of the graphs have their blocks'
// dominance words overwritten by a second analysis after the first is built
// (where it keeps its block numbers; it must then fall back to its map).
// The natural loops (passes/analysis/Loops.h) likewise: a loop of header h is h and
// every block reaching a latch without passing h.
//
//===----------------------------------------------------------------------===//

#include "ir/IR.h"
#include "ir/Verifier.h"
#include "passes/analysis/Dominators.h"
#include "passes/analysis/Loops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <vector>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

class DominatorsTest : public ::testing::Test {
protected:
  DominatorsTest() : m(ctx), diag(nullptr, diagOut) {}

  /// A function of `nb` blocks whose block i branches to `succs[i]` (ret
  /// when empty, br for one, cond_br for two). Blocks take no arguments.
  Function *makeCFG(const std::string &name, const std::vector<std::vector<size_t>> &succs) {
    Function *f = m.addFunction(std::make_unique<Function>(name, ctx.func({b1}, {b1}), Location{}));
    std::vector<Block *> blocks;
    for (size_t i = 0; i < succs.size(); ++i)
      blocks.push_back(f->addBlock(std::make_unique<Block>(i ? "b" + std::to_string(i) : std::string())));
    Value *c = blocks[0]->addArgument(b1, {});
    for (size_t i = 0; i < succs.size(); ++i) {
      if (succs[i].empty())
        blocks[i]->push_back(Operation::create(OpCode::Ret, {}, {c}, {}, defaultAttrs(OpCode::Ret)));
      else if (succs[i].size() == 1)
        blocks[i]->push_back(Operation::create(OpCode::Br, {}, {}, {}, defaultAttrs(OpCode::Br),
                                               {Successor{blocks[succs[i][0]], 0, 0, blocks[succs[i][0]]->label()}}));
      else
        blocks[i]->push_back(Operation::create(OpCode::CondBr, {}, {c}, {}, defaultAttrs(OpCode::CondBr),
                                               {Successor{blocks[succs[i][0]], 1, 0, blocks[succs[i][0]]->label()},
                                                Successor{blocks[succs[i][1]], 1, 0, blocks[succs[i][1]]->label()}}));
    }
    return f;
  }

  /// The successor lists of a random CFG of `nb` blocks: each block
  /// returns (a quarter of them) or branches to one or two blocks, never to
  /// the entry. `pick(n)` draws from [0, n).
  template <typename Pick> static std::vector<std::vector<size_t>> randomCFG(size_t nb, Pick &pick) {
    std::vector<std::vector<size_t>> succs(nb);
    for (size_t i = 0; i < nb; ++i) {
      size_t k = nb == 1 ? 0 : pick(4) == 0 ? 0 : 1 + pick(2);
      for (size_t s = 0; s < k; ++s) succs[i].push_back(1 + pick(nb - 1));
    }
    return succs;
  }

  /// Blocks reachable from block 0 without passing `removed` (none: -1).
  static std::vector<bool> reach(const std::vector<std::vector<size_t>> &succs, size_t from, long removed) {
    std::vector<bool> seen(succs.size(), false);
    if (static_cast<long>(from) == removed) return seen;
    std::vector<size_t> work{from};
    seen[from] = true;
    while (!work.empty()) {
      size_t b = work.back();
      work.pop_back();
      for (size_t s : succs[b])
        if (!seen[s] && static_cast<long>(s) != removed) {
          seen[s] = true;
          work.push_back(s);
        }
    }
    return seen;
  }

  Context ctx;
  Type b1 = ctx.tensor(DType::I1, {});
  Module m;
  std::ostringstream diagOut;
  DiagnosticEngine diag;
};

TEST_F(DominatorsTest, TreeQueriesOnALoopNest) {
  // 0 -> 1; 1 -> 2 | 6; 2 -> 3 | 4; 3 -> 5; 4 -> 5; 5 -> 1; 6 -> ret
  std::vector<std::vector<size_t>> succs = {{1}, {2, 6}, {3, 4}, {5}, {5}, {1}, {}};
  Function *f = makeCFG("nest", succs);
  std::vector<Block *> b;
  for (auto &blk : f->blocks()) b.push_back(blk.get());
  Dominators dom(*f);
  EXPECT_EQ(dom.common(b[3], b[4]), b[2]);
  EXPECT_EQ(dom.common(b[5], b[6]), b[1]);
  EXPECT_EQ(dom.common(std::vector<const Block *>{b[3], b[4], b[6]}), b[1]);
  EXPECT_EQ(dom.common(std::vector<const Block *>{b[3]}), b[3]);
  EXPECT_EQ(dom.childToward(b[1], b[3]), b[2]);
  EXPECT_EQ(dom.childToward(b[1], b[6]), b[6]);
  EXPECT_EQ(dom.childToward(b[0], b[5]), b[1]);
  EXPECT_EQ(dom.childToward(b[2], b[5]), b[5]);
  for (int i : {1, 2, 3, 4, 5}) EXPECT_TRUE(dom.inCycle(b[i])) << i;
  for (int i : {0, 6}) EXPECT_FALSE(dom.inCycle(b[i])) << i;
  EXPECT_TRUE(dom.dominates(b[1]->front(), b[5]->front()));
  EXPECT_FALSE(dom.dominates(b[5]->front(), b[1]->front()));
}

TEST_F(DominatorsTest, RandomGraphsMatchTheDefinitions) {
  std::mt19937 rng(29);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  int checkedChild = 0, cyclic = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const size_t nb = 1 + pick(10);
    std::vector<std::vector<size_t>> succs = randomCFG(nb, pick);
    Function *f = makeCFG("r" + std::to_string(iter), succs);
    ASSERT_TRUE(succeeded(verifyStructure(*f, diag))) << iter << diagOut.str();
    std::vector<Block *> b;
    for (auto &blk : f->blocks()) b.push_back(blk.get());
    Dominators dom(*f);
    // Every other graph: another DominanceInfo of the function overwrites
    // the blocks' dominance words while `dom` lives (its lookups then take
    // the map).
    std::optional<DominanceInfo> other;
    if (iter % 2) other.emplace(*f);
    std::vector<bool> live = reach(succs, 0, -1);
    // dom[a][x]: a dominates x (both reachable).
    std::vector<std::vector<bool>> D(nb, std::vector<bool>(nb, false));
    for (size_t a = 0; a < nb; ++a) {
      std::vector<bool> without = reach(succs, 0, static_cast<long>(a));
      for (size_t x = 0; x < nb; ++x) D[a][x] = live[a] && live[x] && !without[x];
    }
    for (size_t a = 0; a < nb; ++a) {
      EXPECT_EQ(dom.isReachable(b[a]), live[a]) << iter << " " << a;
      for (size_t x = 0; x < nb; ++x) EXPECT_EQ(dom.dominates(b[a], b[x]), D[a][x]) << iter << " " << a << " " << x;
    }
    auto idomOf = [&](size_t x) -> long { // the strict dominator that every other strict dominator dominates
      for (size_t a = 0; a < nb; ++a) {
        if (a == x || !D[a][x]) continue;
        bool nearest = true;
        for (size_t c = 0; c < nb; ++c)
          if (c != x && c != a && D[c][x] && !D[c][a]) nearest = false;
        if (nearest) return static_cast<long>(a);
      }
      return -1;
    };
    for (size_t x = 0; x < nb; ++x) {
      if (!live[x]) continue;
      long id = idomOf(x);
      EXPECT_EQ(dom.idom(b[x]), id < 0 ? nullptr : b[id]) << iter << " " << x;
      // Cycles: some successor reaches x.
      bool cyc = false;
      for (size_t s : succs[x]) cyc |= reach(succs, s, -1)[x];
      EXPECT_EQ(dom.inCycle(b[x]), cyc) << iter << " " << x;
      cyclic += cyc;
      for (size_t y = 0; y < nb; ++y) {
        if (!live[y]) continue;
        // The nearest common dominator: dominates both, dominated by every other that does.
        long want = -1;
        for (size_t a = 0; a < nb; ++a) {
          if (!D[a][x] || !D[a][y]) continue;
          bool nearest = true;
          for (size_t c = 0; c < nb; ++c)
            if (D[c][x] && D[c][y] && !D[c][a]) nearest = false;
          if (nearest) want = static_cast<long>(a);
        }
        EXPECT_EQ(dom.common(b[x], b[y]), b[want]) << iter << " " << x << " " << y;
        EXPECT_EQ(dom.common(std::vector<const Block *>{b[y], b[x], b[y]}), b[want]) << iter;
        if (x != y && D[x][y]) { // the child of x on the tree path to y
          Block *child = dom.childToward(b[x], b[y]);
          EXPECT_EQ(dom.idom(child), b[x]) << iter;
          EXPECT_TRUE(dom.dominates(child, b[y])) << iter;
          ++checkedChild;
        }
      }
    }
  }
  // The generator makes the cases it is meant to.
  EXPECT_GT(checkedChild, 1000);
  EXPECT_GT(cyclic, 300);
}


// Function::reversePostOrder keeps its result until the CFG changes. Random
// edits through every API that changes a CFG (a successor retargeted through
// Operation::successors, a terminator erased and another appended, blocks
// added, inserted and erased) must each show in the next order, compared
// with a recursive DFS written here (same successor order).
TEST_F(DominatorsTest, ReversePostOrderFollowsEveryEdit) {
  std::mt19937 rng(31);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  Function *f = makeCFG("edits", {{1}, {2, 3}, {4}, {4}, {}});
  Value *c = f->entry()->argument(0);
  auto expected = [&] {
    std::vector<Block *> post;
    std::set<const Block *> seen;
    std::function<void(Block *)> dfs = [&](Block *b) {
      seen.insert(b);
      if (Operation *t = b->terminator())
        for (const Successor &s : t->successors())
          if (s.block && !seen.count(s.block)) dfs(s.block);
      post.push_back(b);
    };
    dfs(f->entry());
    return std::vector<Block *>(post.rbegin(), post.rend());
  };
  auto branch = [&](Block *to) {
    if (!to) return Operation::create(OpCode::Ret, {}, {c}, {}, defaultAttrs(OpCode::Ret));
    return Operation::create(OpCode::Br, {}, {}, {}, defaultAttrs(OpCode::Br), {Successor{to, 0, 0, to->label()}});
  };
  int kinds[5] = {};
  for (int step = 0; step < 2000; ++step) {
    ASSERT_EQ(f->reversePostOrder(), expected()) << "step " << step;
    std::vector<Block *> b;
    for (auto &blk : f->blocks()) b.push_back(blk.get());
    Block *x = b[pick(b.size())];
    Block *target = b.size() > 1 ? b[1 + pick(b.size() - 1)] : nullptr; // never the entry
    const size_t kind = pick(5);
    switch (kind) {
    case 0: // retarget one successor in place
      if (Operation *t = x->terminator(); t && !t->successors().empty() && target) {
        std::vector<Successor> &ss = t->mutableSuccessors();
        ss[pick(ss.size())].block = target;
        ++kinds[0];
      }
      break;
    case 1: // replace the terminator
      if (Operation *t = x->terminator()) {
        t->erase();
        x->push_back(branch(pick(3) ? target : nullptr));
        ++kinds[1];
      }
      break;
    case 2:   // a new block at the end, targeted from x
    case 3: { // a new block after x, targeted from x
      if (b.size() > 40) break;
      const bool atEnd = kind == 2;
      auto fresh = std::make_unique<Block>((atEnd ? "n" : "i") + std::to_string(step));
      Block *n = atEnd ? f->addBlock(std::move(fresh)) : f->insertBlockAfter(x, std::move(fresh));
      n->push_back(branch(target));
      if (Operation *t = x->terminator()) {
        t->erase();
        x->push_back(branch(n));
      }
      ++kinds[kind];
      break;
    }
    case 4: { // erase the first block (not the entry) that no terminator targets
      std::set<const Block *> targeted;
      for (Block *y : b)
        if (Operation *t = y->terminator())
          for (const Successor &s : t->successors()) targeted.insert(s.block);
      for (Block *y : b)
        if (y != f->entry() && !targeted.count(y)) {
          f->eraseBlock(y);
          ++kinds[4];
          break;
        }
      break;
    }
    }
  }
  for (int k = 0; k < 5; ++k) EXPECT_GT(kinds[k], 20) << "edit kind " << k << " was rarely made";
}

TEST_F(DominatorsTest, LoopNest) {
  // 0 -> 1; 1 -> 2 | 6 (outer header); 2 -> 3 (inner preheader);
  // 3 -> 4 | 5 (inner header); 4 -> 3; 5 -> 1; 6 -> ret
  std::vector<std::vector<size_t>> succs = {{1}, {2, 6}, {3}, {4, 5}, {3}, {1}, {}};
  Function *f = makeCFG("loops", succs);
  std::vector<Block *> b;
  for (auto &blk : f->blocks()) b.push_back(blk.get());
  DominanceInfo dom(*f);
  std::vector<Loop> loops = findLoops(*f, dom);
  ASSERT_EQ(loops.size(), 2u);
  const Loop &inner = loops[0], &outer = loops[1]; // innermost first
  EXPECT_EQ(inner.header, b[3]);
  EXPECT_EQ(inner.preheader, b[2]);
  EXPECT_EQ(inner.blocks, (std::vector<Block *>{b[3], b[4]}));
  EXPECT_EQ(inner.latches, (std::vector<Block *>{b[4]}));
  EXPECT_EQ(outer.header, b[1]);
  EXPECT_EQ(outer.preheader, b[0]);
  EXPECT_EQ(outer.latches, (std::vector<Block *>{b[5]}));
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(inner.contains(b[i]), i == 3 || i == 4) << i;
    EXPECT_EQ(outer.contains(b[i]), i >= 1 && i <= 5) << i;
  }
  // A block made after the analysis is in no loop.
  Block *late = f->addBlock(std::make_unique<Block>("late"));
  EXPECT_FALSE(outer.contains(late));
  EXPECT_FALSE(inner.contains(late));
}

TEST_F(DominatorsTest, RandomLoopsMatchTheDefinition) {
  std::mt19937 rng(31);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  int loopsSeen = 0, nested = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const size_t nb = 2 + pick(12);
    std::vector<std::vector<size_t>> succs = randomCFG(nb, pick);
    Function *f = makeCFG("l" + std::to_string(iter), succs);
    std::vector<Block *> b;
    for (auto &blk : f->blocks()) b.push_back(blk.get());
    DominanceInfo dom(*f);
    std::vector<Loop> loops = findLoops(*f, dom);
    // Every header (a block dominating a predecessor) has exactly one loop,
    // and the loops come innermost first.
    std::vector<const Loop *> loopOf(nb, nullptr);
    for (size_t k = 0; k < loops.size(); ++k) {
      const Loop &l = loops[k];
      size_t h = static_cast<size_t>(std::find(b.begin(), b.end(), l.header) - b.begin());
      ASSERT_LT(h, nb);
      EXPECT_EQ(loopOf[h], nullptr) << iter;
      loopOf[h] = &l;
      if (k) {
        EXPECT_LE(loops[k - 1].blocks.size(), l.blocks.size()) << iter;
      }
    }
    for (size_t h = 0; h < nb; ++h) {
      std::vector<size_t> latches;
      for (size_t p = 0; p < nb; ++p)
        if (dom.isReachable(b[p]) && std::count(succs[p].begin(), succs[p].end(), h) &&
            dom.dominates(b[h], b[p]))
          latches.push_back(p);
      ASSERT_EQ(loopOf[h] != nullptr, !latches.empty()) << iter << " " << h;
      if (latches.empty()) continue;
      ++loopsSeen;
      // The members: h, and every block reaching a latch without passing h.
      std::vector<bool> in(nb, false);
      in[h] = true;
      std::vector<size_t> work(latches.begin(), latches.end());
      while (!work.empty()) {
        size_t x = work.back();
        work.pop_back();
        if (in[x]) continue;
        in[x] = true;
        for (size_t p = 0; p < nb; ++p)
          if (dom.isReachable(b[p]) && std::count(succs[p].begin(), succs[p].end(), x)) work.push_back(p);
      }
      const Loop &l = *loopOf[h];
      std::vector<Block *> want; // in reverse post-order, the header first
      for (Block *x : dom.reversePostOrder())
        if (in[static_cast<size_t>(std::find(b.begin(), b.end(), x) - b.begin())]) want.push_back(x);
      EXPECT_EQ(l.blocks, want) << iter << " " << h;
      for (size_t x = 0; x < nb; ++x) {
        EXPECT_EQ(l.contains(b[x]), static_cast<bool>(in[x])) << iter << " " << h << " " << x;
      }
      for (size_t g = 0; g < nb; ++g) nested += g != h && loopOf[g] && in[g];
    }
  }
  EXPECT_GT(loopsSeen, 200); // the graphs have loops
  EXPECT_GT(nested, 20);     // and nests
}

} // namespace
} // namespace nimble::passes
