//===- LivenessTest.cpp - passes/Liveness numbering and live sets ----------===//
//
// Liveness keeps each value's number in the value's scratch word under a tag
// of its own (passes/Liveness.h). These check the numbers a lookup returns
// against the analysis' own value list, with two analyses of one function
// alive at once (the second retags every value: the first must still answer
// right, through its fallback map), with a word another user overwrote, and
// for globals and another function's values (-1).
//
//===----------------------------------------------------------------------===//

#include "ir/IR.h"
#include "passes/Liveness.h"

#include <gtest/gtest.h>

#include <memory>

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

} // namespace
} // namespace nimble::passes
