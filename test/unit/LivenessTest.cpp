//===- LivenessTest.cpp - passes/analysis/Liveness numbering and live sets -===//
//
// Liveness keeps each value's number in the value's scratch word under a tag
// of its own (passes/analysis/Liveness.h). These check the numbers a lookup returns
// against the analysis' own value list, with two analyses of one function
// alive at once (the second retags every value: the first must still answer
// right, through its fallback map), with a word another user overwrote, and
// for globals and another function's values (-1). And the live sets of
// random control-flow graphs against the textbook dataflow fixpoint
// (live-in = upward-exposed uses + live-out - defs; live-out = the union of
// the successors' live-in), computed densely here.
//
//===----------------------------------------------------------------------===//

#include "ir/IR.h"
#include "passes/analysis/Liveness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <span>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

class LivenessTest : public ::testing::Test {
protected:
  LivenessTest() : m(ctx) {}

  /// @f(%a, %b): ^entry: %c = add %a, %b; br ^next(%c)  ^next(%x): %d = add %x, %a; ret %d
  Function *makeFunction(const std::string &name) {
    Type sig = ctx.func({t, t}, {t});
    Function *f = m.addFunction(std::make_unique<Function>(name, sig, Location{}));
    Block *e = f->addBlock(std::make_unique<Block>());
    Value *a = e->addArgument(t, {});
    Value *b = e->addArgument(t, {});
    Block *next = f->addBlock(std::make_unique<Block>("next"));
    Value *x = next->addArgument(t, {});
    Operation *c = e->push_back(Operation::create(OpCode::Add, {}, {a, b}, {t}, defaultAttrs(OpCode::Add)));
    Successor s{next, 0, 1, ""};
    e->push_back(Operation::create(OpCode::Br, {}, {c->result()}, {}, defaultAttrs(OpCode::Br), {s}));
    Operation *d = next->push_back(Operation::create(OpCode::Add, {}, {x, a}, {t}, defaultAttrs(OpCode::Add)));
    next->push_back(Operation::create(OpCode::Ret, {}, {d->result()}, {}, defaultAttrs(OpCode::Ret)));
    return f;
  }
  static void expectNumbering(const Liveness &lv) {
    for (size_t i = 0; i < lv.numValues(); ++i) EXPECT_EQ(lv.id(lv.value(static_cast<int>(i))), static_cast<int>(i));
  }

  Context ctx;
  Type t = ctx.tensor(DType::F32, {2});
  Module m;
};

TEST_F(LivenessTest, NumbersAndLiveSets) {
  Function *f = makeFunction("f");
  Liveness lv(*f);
  ASSERT_EQ(lv.numValues(), 5u); // %a %b %c, then %x %d
  expectNumbering(lv);
  Block *e = f->entry(), *next = f->blocks()[1].get();
  const int a = lv.id(e->argument(0));
  EXPECT_EQ(a, 0);
  EXPECT_TRUE(lv.isLiveOut(e, a)); // used in ^next
  EXPECT_TRUE(lv.isLiveIn(next, a));
  EXPECT_FALSE(lv.isLiveOut(e, lv.id(e->argument(1))));
}

TEST_F(LivenessTest, TwoAnalysesOfOneFunctionBothAnswer) {
  Function *f = makeFunction("f");
  Liveness first(*f);
  Liveness second(*f); // retags every value of f
  expectNumbering(first);
  expectNumbering(second);
}

TEST_F(LivenessTest, OverwrittenScratchWordsAndForeignValues) {
  Function *f = makeFunction("f");
  Function *g = makeFunction("g");
  auto *w = m.addGlobal(std::make_unique<Global>("w", t, Location{}));
  Liveness lv(*f);
  // Another user of the scratch words (an analysis' epoch-tagged word).
  for (size_t i = 0; i < lv.numValues(); ++i) lv.value(static_cast<int>(i))->setScratch((7u << 1) | 1);
  expectNumbering(lv);
  EXPECT_EQ(lv.id(w), -1);
  Liveness lg(*g);
  EXPECT_EQ(lv.id(g->entry()->argument(0)), -1);
  EXPECT_EQ(lg.id(f->entry()->argument(0)), -1);
  EXPECT_EQ(lg.id(g->entry()->argument(0)), 0);
}

/// Random functions: blocks with arguments, ops reading values defined
/// earlier in their block or anywhere in another block (liveness does not
/// need dominance), and br / cond_br terminators passing values to random
/// successors (back edges and self loops included) or ret. The live sets
/// must equal the dense fixpoint, and lastUses the last position of each
/// use in each block.
TEST_F(LivenessTest, RandomGraphsMatchDataflowFixpoint) {
  std::mt19937 rng(23);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  for (int iter = 0; iter < 300; ++iter) {
    Function *f = m.addFunction(std::make_unique<Function>("r" + std::to_string(iter), ctx.func({t}, {t}), Location{}));
    const size_t nb = 1 + pick(8);
    std::vector<Block *> blocks;
    std::vector<std::vector<Value *>> defs(nb);
    for (size_t i = 0; i < nb; ++i) {
      blocks.push_back(f->addBlock(std::make_unique<Block>(i ? "b" + std::to_string(i) : std::string())));
      for (size_t a = i ? pick(3) : 1; a > 0; --a) defs[i].push_back(blocks[i]->addArgument(t, {}));
    }
    // Every block's values first (ops without operands yet), so that any
    // block may read any other's.
    std::vector<std::vector<Operation *>> ops(nb);
    for (size_t i = 0; i < nb; ++i)
      for (size_t k = pick(5); k > 0; --k) {
        Operation *op = blocks[i]->push_back(Operation::create(OpCode::Add, {}, {}, {t}, defaultAttrs(OpCode::Add)));
        ops[i].push_back(op);
        defs[i].push_back(op->result());
      }
    std::vector<Value *> all;
    for (auto &d : defs) all.insert(all.end(), d.begin(), d.end());
    auto operandFor = [&](size_t i, size_t before) -> Value * {
      // A value of this block defined before position `before` of defs[i],
      // or any value of another block.
      // all[0] (the entry's argument) always qualifies.
      for (int tries = 0; tries < 8; ++tries) {
        Value *v = all[pick(all.size())];
        auto it = std::find(defs[i].begin(), defs[i].end(), v);
        if (it == defs[i].end() || static_cast<size_t>(it - defs[i].begin()) < before) return v;
      }
      return all[0];
    };
    for (size_t i = 0; i < nb; ++i) {
      const size_t firstOp = defs[i].size() - ops[i].size();
      for (size_t k = 0; k < ops[i].size(); ++k) {
        std::vector<Value *> in;
        for (int j = 0; j < 2; ++j) in.push_back(operandFor(i, firstOp + k));
        ops[i][k]->setOperands(in);
      }
      const size_t end = defs[i].size();
      if (nb == 1 || pick(5) == 0) {
        blocks[i]->push_back(Operation::create(OpCode::Ret, {}, {operandFor(i, end)}, {}, defaultAttrs(OpCode::Ret)));
        continue;
      }
      std::vector<Value *> operands;
      std::vector<Successor> succs;
      const bool cond = pick(2) == 0;
      if (cond) operands.push_back(operandFor(i, end));
      for (int s = 0; s < (cond ? 2 : 1); ++s) {
        Block *target = blocks[1 + pick(nb - 1)];
        Successor sc{target, static_cast<unsigned>(operands.size()), 0, target->label()};
        for (size_t a = 0; a < target->numArguments(); ++a) operands.push_back(operandFor(i, end));
        sc.operandCount = static_cast<unsigned>(target->numArguments());
        succs.push_back(sc);
      }
      blocks[i]->push_back(Operation::create(cond ? OpCode::CondBr : OpCode::Br, {}, operands, {},
                                             defaultAttrs(cond ? OpCode::CondBr : OpCode::Br), succs));
    }

    // The dense fixpoint.
    std::vector<std::set<const Value *>> use(nb), def(nb), in(nb), out(nb);
    for (size_t i = 0; i < nb; ++i) {
      def[i].insert(defs[i].begin(), defs[i].end());
      for (Operation &op : *blocks[i])
        for (Value *v : op.operandValues())
          if (!def[i].count(v)) use[i].insert(v);
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = nb; i-- > 0;) {
        std::set<const Value *> o;
        for (Block *s : blocks[i]->successors()) {
          size_t j = static_cast<size_t>(std::find(blocks.begin(), blocks.end(), s) - blocks.begin());
          o.insert(in[j].begin(), in[j].end());
        }
        std::set<const Value *> n = use[i];
        for (const Value *v : o)
          if (!def[i].count(v)) n.insert(v);
        if (o != out[i] || n != in[i]) changed = true;
        out[i] = std::move(o);
        in[i] = std::move(n);
      }
    }

    Liveness lv(*f);
    ASSERT_EQ(lv.numValues(), all.size());
    expectNumbering(lv);
    auto asSet = [&](std::span<const int> ids) {
      EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
      std::set<const Value *> r;
      for (int id : ids) r.insert(lv.value(id));
      return r;
    };
    for (size_t i = 0; i < nb; ++i) {
      EXPECT_EQ(asSet(lv.liveIn(blocks[i])), in[i]) << "iteration " << iter << ", block " << i;
      EXPECT_EQ(asSet(lv.liveOut(blocks[i])), out[i]) << "iteration " << iter << ", block " << i;
      const std::vector<int32_t> &last = lv.lastUses(blocks[i]);
      std::vector<int32_t> expect(all.size(), -1);
      int32_t k = 0;
      for (Operation &op : *blocks[i]) {
        for (Value *v : op.operandValues()) expect[lv.id(v)] = k;
        ++k;
      }
      EXPECT_EQ(std::vector<int32_t>(last.begin(), last.end()), expect) << "iteration " << iter << ", block " << i;
    }
  }
}

} // namespace
} // namespace nimble::passes
