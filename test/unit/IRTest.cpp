//===- IRTest.cpp - Building and editing IR through the C++ API -----------===//
//
// Use-lists must stay exact through every edit (setOperand, setOperands,
// replaceAllUsesWith, erase), the block list must stay linked (moveBefore),
// argument indices must follow eraseArgument, and the CFG utilities
// (reversePostOrder, DominanceInfo) must agree with hand-drawn graphs.
//
//===----------------------------------------------------------------------===//

#include "ir/FlatMap.h"
#include "ir/IR.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nimble::ir {
namespace {

class IRTest : public ::testing::Test {
protected:
  IRTest() : m(ctx), diag(nullptr, diagOut) {
    diag.setHandler([this](const Diagnostic &d) { diags.push_back(d); });
  }

  /// A function `name` of type (t, t) -> t whose entry block has the two
  /// parameters as arguments.
  Function *makeFunction(const std::string &name = "f") {
    Type sig = ctx.func({t, t}, {t});
    Function *f = m.addFunction(std::make_unique<Function>(name, sig, Location{}));
    Block *e = f->addBlock(std::make_unique<Block>());
    e->addArgument(t, {});
    e->addArgument(t, {});
    return f;
  }
  Block *addBlock(Function *f, const std::string &label) {
    return f->addBlock(std::make_unique<Block>(label));
  }
  Operation *op(Block *b, OpCode code, std::vector<Value *> operands, unsigned numResults = 1) {
    std::vector<Type> types(numResults, t);
    return b->push_back(Operation::create(code, {}, operands, types, defaultAttrs(code)));
  }
  Operation *ret(Block *b, Value *v) { return op(b, OpCode::Ret, {v}, 0); }
  Operation *br(Block *b, Block *dest, std::vector<Value *> args = {}) {
    Successor s{dest, 0, static_cast<unsigned>(args.size()), ""};
    return b->push_back(
        Operation::create(OpCode::Br, {}, args, {}, defaultAttrs(OpCode::Br), {s}));
  }
  Operation *condBr(Block *b, Value *cond, Block *t1, Block *f1) {
    Successor s1{t1, 1, 0, ""}, s2{f1, 1, 0, ""};
    return b->push_back(
        Operation::create(OpCode::CondBr, {}, {cond}, {}, defaultAttrs(OpCode::CondBr), {s1, s2}));
  }

  static std::multiset<std::pair<Operation *, unsigned>> useSet(const Value *v) {
    std::multiset<std::pair<Operation *, unsigned>> r;
    for (OpOperand &u : v->uses()) {
      EXPECT_EQ(u.get(), v) << "a use of a value must point back at it";
      r.insert({u.owner(), u.index()});
    }
    return r;
  }

  Context ctx;
  Type t = ctx.tensor(DType::F32, {2, 3});
  Module m;
  std::ostringstream diagOut;
  DiagnosticEngine diag;
  std::vector<Diagnostic> diags;
};

using Uses = std::multiset<std::pair<Operation *, unsigned>>;

//===-- Building -----------------------------------------------------------===//

TEST_F(IRTest, BuildWithTheApi) {
  Function *f = makeFunction();
  Block *e = f->entry();
  Operation *add = op(e, OpCode::Add, {e->argument(0), e->argument(1)});
  Operation *mm = op(e, OpCode::MatMul, {add->result(), e->argument(1)});
  ret(e, mm->result());

  EXPECT_EQ(f->module(), &m);
  EXPECT_TRUE(e->isEntry());
  EXPECT_EQ(e->function(), f);
  EXPECT_EQ(e->size(), 3u);
  EXPECT_EQ(e->front(), add);
  EXPECT_EQ(e->terminator(), e->back());
  EXPECT_TRUE(e->back()->isTerminator());
  EXPECT_FALSE(add->isTerminator());
  EXPECT_EQ(add->block(), e);
  EXPECT_EQ(add->function(), f);
  EXPECT_EQ(add->nextOp(), mm);
  EXPECT_EQ(mm->prevOp(), add);
  EXPECT_EQ(add->name(), "add");
  EXPECT_EQ(add->result()->definingOp(), add);
  EXPECT_EQ(add->result()->owner(), add);
  EXPECT_EQ(e->argument(0)->definingOp(), nullptr);
  EXPECT_EQ(e->argument(1)->index(), 1u);
  EXPECT_EQ(e->argument(1)->owner(), e);
  EXPECT_TRUE(isa<BlockArgument>(e->argument(0)));
  EXPECT_TRUE(isa<OpResult>(add->result()));
  EXPECT_EQ(dyn_cast<Global>(static_cast<Value *>(add->result())), nullptr);

  // defaultAttrs fills the schema: matmul's two flags, at false.
  ASSERT_EQ(mm->attrs().size(), 2u);
  EXPECT_FALSE(mm->boolAttr("transpose_a"));
  mm->setAttr("transpose_b", Attr::getBool(true));
  EXPECT_TRUE(mm->boolAttr("transpose_b"));
  EXPECT_EQ(mm->attr(1), Attr::getBool(true));
  std::vector<Attr> split = defaultAttrs(OpCode::Split);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(split[0], Attr::getInt(0));
  EXPECT_TRUE(split[1].isNull()) << "required attributes start null";

  // Iterating the block visits the ops in order, both ways.
  std::vector<Operation *> fwd;
  for (Operation &o : *e) fwd.push_back(&o);
  EXPECT_EQ(fwd, e->opsSnapshot());
  auto it = e->end();
  --it;
  EXPECT_EQ(&*it, e->back());
  EXPECT_EQ(f->argTypes(), (std::vector<Type>{t, t}));
  EXPECT_EQ(f->resultTypes(), (std::vector<Type>{t}));
}

TEST_F(IRTest, ModuleLookup) {
  Function *f = makeFunction("main");
  makeFunction("helper");
  Global *w = m.addGlobal(std::make_unique<Global>("w", t, Location{}));
  w->setExternal("weights.safetensors", "w");
  auto adt = std::make_unique<AdtDecl>();
  adt->name = "Tree";
  adt->ctors.push_back({"Leaf", {t}, {}});
  adt->ctors.push_back({"Node", {ctx.adt("Tree"), ctx.adt("Tree")}, {}});
  m.addAdt(std::move(adt));

  EXPECT_EQ(m.lookupFunction("main"), f);
  EXPECT_NE(m.lookupFunction("helper"), nullptr);
  EXPECT_EQ(m.lookupFunction("nope"), nullptr);
  EXPECT_EQ(m.lookupGlobal("w"), w);
  EXPECT_EQ(m.lookupGlobal("main"), nullptr) << "functions and globals are separate";
  EXPECT_TRUE(w->isExternal());
  EXPECT_EQ(w->name(), "w");
  ASSERT_NE(m.lookupAdt("Tree"), nullptr);
  EXPECT_EQ(m.lookupAdt("Tree")->ctorIndex("Node"), 1);
  EXPECT_EQ(m.lookupAdt("Tree")->ctorIndex("Nil"), -1);
  // A hint is tried first; a wrong or out-of-range one is only a hint.
  EXPECT_EQ(m.lookupAdt("Tree")->ctorIndex("Node", 1), 1);
  EXPECT_EQ(m.lookupAdt("Tree")->ctorIndex("Node", 0), 1);
  EXPECT_EQ(m.lookupAdt("Tree")->ctorIndex("Node", 7), 1);
  EXPECT_EQ(m.lookupAdt("Tree")->ctorIndex("Nil", 1), -1);
  EXPECT_EQ(m.lookupAdt("List"), nullptr);
  {
    // Many constructors: the hashed index, looked up by string_view, with
    // and without hints, and rebuilt when the list grows.
    AdtDecl big;
    for (int i = 0; i < 40; ++i) big.ctors.push_back({"C" + std::to_string(i), {}, Location{}});
    EXPECT_EQ(big.ctorIndex("C17"), 17);
    EXPECT_EQ(big.ctorIndex("C17", 17), 17);
    EXPECT_EQ(big.ctorIndex("C17", 3), 17);
    EXPECT_EQ(big.ctorIndex(std::string_view("C39xyz", 3)), 39);
    EXPECT_EQ(big.ctorIndex("C40"), -1);
    big.ctors.push_back({"C40", {}, Location{}});
    EXPECT_EQ(big.ctorIndex("C40"), 40);
  }

  m.eraseFunction(m.lookupFunction("helper"));
  EXPECT_EQ(m.lookupFunction("helper"), nullptr);
  EXPECT_EQ(m.functions().size(), 1u);
  m.eraseGlobal(w);
  EXPECT_EQ(m.lookupGlobal("w"), nullptr);
}

TEST_F(IRTest, GlobalsAreOperands) {
  Function *f = makeFunction();
  Global *w = m.addGlobal(std::make_unique<Global>("w", t, Location{}));
  Block *e = f->entry();
  Operation *a = op(e, OpCode::Add, {e->argument(0), w});
  ret(e, a->result());
  EXPECT_TRUE(w->hasOneUse());
  EXPECT_EQ(w->users(), (std::vector<Operation *>{a}));
  EXPECT_TRUE(isa<Global>(a->operand(1)));
  // The module destroys functions before globals: no dangling use.
}

//===-- Use-lists ----------------------------------------------------------===//

TEST_F(IRTest, UseListsCountEveryOperandSlot) {
  Function *f = makeFunction();
  Block *e = f->entry();
  Value *a = e->argument(0), *b = e->argument(1);
  Operation *sq = op(e, OpCode::Mul, {a, a});
  Operation *use = op(e, OpCode::Sub, {sq->result(), b});
  ret(e, use->result());

  EXPECT_EQ(a->numUses(), 2u);
  EXPECT_FALSE(a->hasOneUse());
  EXPECT_TRUE(a->hasUses());
  EXPECT_EQ(useSet(a), (Uses{{sq, 0}, {sq, 1}}));
  EXPECT_EQ(a->users(), (std::vector<Operation *>{sq, sq})) << "one entry per use";
  EXPECT_TRUE(sq->result()->hasOneUse());
  EXPECT_EQ(sq->result()->users(), (std::vector<Operation *>{use}));
  EXPECT_EQ(useSet(b), (Uses{{use, 1}}));
  EXPECT_TRUE(use->result()->hasOneUse());
  EXPECT_TRUE(sq->hasResultUses());
  for (unsigned i = 0; i < 2; ++i) {
    EXPECT_EQ(sq->opOperand(i).owner(), sq);
    EXPECT_EQ(sq->opOperand(i).index(), i);
    EXPECT_EQ(sq->opOperand(i).get(), a);
  }
}

TEST_F(IRTest, SetOperandMovesTheUse) {
  Function *f = makeFunction();
  Block *e = f->entry();
  Value *a = e->argument(0), *b = e->argument(1);
  Operation *sq = op(e, OpCode::Mul, {a, a});
  ret(e, sq->result());

  sq->setOperand(1, b);
  EXPECT_EQ(useSet(a), (Uses{{sq, 0}}));
  EXPECT_EQ(useSet(b), (Uses{{sq, 1}}));
  EXPECT_EQ(sq->operand(1), b);
  sq->setOperand(0, b);
  EXPECT_FALSE(a->hasUses());
  EXPECT_EQ(useSet(b), (Uses{{sq, 0}, {sq, 1}}));
  // Setting the same value again leaves one use per slot.
  sq->setOperand(0, b);
  EXPECT_EQ(b->numUses(), 2u);
}

TEST_F(IRTest, SetOperandsReplacesTheWholeList) {
  Function *f = makeFunction();
  Block *e = f->entry();
  Value *a = e->argument(0), *b = e->argument(1);
  Operation *c = op(e, OpCode::Concat, {a, b});
  ret(e, c->result());

  c->setOperands({b, b, b});
  EXPECT_EQ(c->numOperands(), 3u);
  EXPECT_FALSE(a->hasUses());
  EXPECT_EQ(useSet(b), (Uses{{c, 0}, {c, 1}, {c, 2}}));
  c->setOperands({a});
  EXPECT_FALSE(b->hasUses());
  EXPECT_EQ(useSet(a), (Uses{{c, 0}}));
  EXPECT_EQ(c->operands(), (std::vector<Value *>{a}));
}

// The side structure (Operation::Extra) holds grown operand slots, written
// locations and member locations together: each survives what it should
// when another is set, and an op with all of them is destroyed cleanly.
TEST_F(IRTest, OutOfLineOperandsAndWrittenLocations) {
  Function *f = makeFunction();
  Block *e = f->entry();
  Value *a = e->argument(0), *b = e->argument(1);
  Operation *c = op(e, OpCode::Concat, {a, b});
  ret(e, c->result());
  Location here{m.context().intern("x.nir"), 3, 5}, there{m.context().intern("x.nir"), 4, 7};
  c->setMemberLocs({here, there});
  c->setOperandLoc(1, there);
  EXPECT_EQ(c->operandLoc(1).line, 4u);
  c->setOperands({b, a, b, a}); // past the two inline slots
  ASSERT_EQ(c->numOperands(), 4u);
  for (unsigned i = 0; i < 4; ++i) {
    EXPECT_EQ(c->opOperand(i).index(), i);
    EXPECT_EQ(c->opOperand(i).owner(), c);
  }
  EXPECT_EQ(useSet(a), (Uses{{c, 1}, {c, 3}}));
  EXPECT_EQ(c->operandLoc(1).line, c->loc().line); // a new list: written locations forgotten
  ASSERT_EQ(c->memberLocs().size(), 2u);            // the members' stay
  EXPECT_EQ(c->memberLocs()[1].line, 4u);
  c->setOperandLoc(3, here);
  EXPECT_EQ(c->operandLoc(3).line, 3u);
  c->setOperand(3, b);
  EXPECT_EQ(useSet(b), (Uses{{c, 0}, {c, 2}, {c, 3}}));
  EXPECT_TRUE(c->successors().empty());
  // Erasing it leaves no use behind (ASan checks the slots are freed once).
  e->terminator()->erase();
  c->erase();
  EXPECT_FALSE(a->hasUses());
  EXPECT_FALSE(b->hasUses());
}

TEST_F(IRTest, OperandAndResultRangesSeeWhatTheCopiesSee) {
  Function *f = makeFunction();
  Block *e = f->entry();
  Value *a = e->argument(0), *b = e->argument(1);
  Operation *c = op(e, OpCode::Concat, {a, b, a});
  Operation *two = op(e, OpCode::Concat, {c->result()}, 2);
  ret(e, two->result(1));
  for (Operation *o : {c, two}) {
    std::vector<Value *> ops, res;
    for (Value *v : o->operandValues()) ops.push_back(v);
    for (Value *v : o->resultValues()) res.push_back(v);
    EXPECT_EQ(ops, o->operands());
    EXPECT_EQ(res, o->results());
    EXPECT_EQ(o->operandValues().size(), o->numOperands());
  }
  // A range follows setOperand (it reads the operand slots in place).
  Operation::OperandRange r = c->operandValues();
  c->setOperand(1, a);
  std::vector<Value *> after;
  for (Value *v : r) after.push_back(v);
  EXPECT_EQ(after, (std::vector<Value *>{a, a, a}));
}

//===-- replaceAllUsesWith -------------------------------------------------===//

TEST_F(IRTest, ReplaceAllUsesMovesEveryUse) {
  Function *f = makeFunction();
  Block *e = f->entry();
  Block *exit = addBlock(f, "exit");
  BlockArgument *r = exit->addArgument(t, {});
  ret(exit, r);
  Value *a = e->argument(0), *b = e->argument(1);
  Operation *twice = op(e, OpCode::Add, {a, a});
  Operation *other = op(e, OpCode::Sub, {twice->result(), a});
  Operation *jump = br(e, exit, {a});
  (void)other;
  ASSERT_EQ(a->numUses(), 4u);

  a->replaceAllUsesWith(b);
  EXPECT_FALSE(a->hasUses());
  EXPECT_EQ(useSet(b), (Uses{{twice, 0}, {twice, 1}, {other, 1}, {jump, 0}}));
  EXPECT_EQ(twice->operand(0), b);
  EXPECT_EQ(twice->operand(1), b);
  EXPECT_EQ(jump->successorOperands(0), (std::vector<Value *>{b}));
  EXPECT_EQ(jump->successors()[0].block, exit);
}

TEST_F(IRTest, EraseAfterReplaceAllUses) {
  Function *f = makeFunction();
  Block *e = f->entry();
  Value *a = e->argument(0);
  Operation *neg = op(e, OpCode::Neg, {a});
  Operation *relu = op(e, OpCode::Relu, {neg->result()});
  Operation *r = ret(e, relu->result());
  // Replace neg by abs, inserted in its place.
  Operation *abs = e->insertBefore(
      neg, Operation::create(OpCode::Abs, {}, {a}, {t}, defaultAttrs(OpCode::Abs)));
  neg->result()->replaceAllUsesWith(abs->result());
  EXPECT_EQ(a->numUses(), 2u);
  neg->erase();
  EXPECT_EQ(a->numUses(), 1u) << "erase drops the erased op's operand uses";
  EXPECT_EQ(useSet(a), (Uses{{abs, 0}}));
  EXPECT_EQ(e->opsSnapshot(), (std::vector<Operation *>{abs, relu, r}));
  EXPECT_EQ(relu->operand(0), abs->result());
  EXPECT_TRUE(succeeded(verifyStructure(*f, diag))) << diagOut.str();
}

TEST_F(IRTest, EraseOpWithoutUses) {
  Function *f = makeFunction();
  Block *e = f->entry();
  Value *a = e->argument(0), *b = e->argument(1);
  Operation *dead = op(e, OpCode::Add, {a, b});
  Operation *r = ret(e, a);
  EXPECT_EQ(a->numUses(), 2u);
  EXPECT_FALSE(dead->hasResultUses());
  dead->erase();
  EXPECT_EQ(e->size(), 1u);
  EXPECT_EQ(e->front(), r);
  EXPECT_EQ(useSet(a), (Uses{{r, 0}}));
  EXPECT_FALSE(b->hasUses());
  EXPECT_EQ(r->prevOp(), nullptr);
}

// isBeforeInBlock uses order numbers kept by insertion (gap halving, then a
// relabelled range): it must agree with the list after insertions at one
// point (which exhaust gaps), at the front, at the back, and after moves.
TEST_F(IRTest, IsBeforeInBlockFollowsEveryInsertion) {
  Function *f = makeFunction();
  Block *e = f->entry();
  Value *a = e->argument(0);
  Operation *r = ret(e, a);
  Operation *mid = e->insertBefore(r, Operation::create(OpCode::Neg, {}, {a}, {t}, defaultAttrs(OpCode::Neg)));
  for (int i = 0; i < 3000; ++i) {
    // Alternately just before `mid` (one gap, over and over), at the front,
    // and before the terminator.
    Operation *at = i % 3 == 0 ? mid : i % 3 == 1 ? e->front() : r;
    e->insertBefore(at, Operation::create(OpCode::Neg, {}, {a}, {t}, defaultAttrs(OpCode::Neg)));
    if (i % 500 == 0) e->front()->moveBefore(r);
  }
  std::vector<Operation *> ops = e->opsSnapshot();
  ASSERT_EQ(ops.size(), 3002u);
  for (size_t k = 0; k + 1 < ops.size(); ++k) {
    ASSERT_TRUE(ops[k]->isBeforeInBlock(ops[k + 1])) << "at " << k;
    ASSERT_FALSE(ops[k + 1]->isBeforeInBlock(ops[k])) << "at " << k;
  }
  EXPECT_TRUE(ops.front()->isBeforeInBlock(ops.back()));
  EXPECT_FALSE(ops[7]->isBeforeInBlock(ops[7]));
  for (Operation *o : ops)
    if (o != r) o->erase();
}

// Batched insertBlockAfter (begin/endBlockInsertions) ends in the order the
// same insertions give one by one.
TEST_F(IRTest, BatchedBlockInsertionsKeepTheOrder) {
  auto build = [&](const std::string &name, bool batch) {
    Function *f = makeFunction(name);
    Block *b1 = addBlock(f, "b1");
    addBlock(f, "b2");
    if (batch) f->beginBlockInsertions();
    Block *x = f->insertBlockAfter(f->entry(), std::make_unique<Block>("x"));
    f->insertBlockAfter(f->entry(), std::make_unique<Block>("y"));
    f->insertBlockAfter(x, std::make_unique<Block>("z"));
    f->insertBlockAfter(b1, std::make_unique<Block>("w"));
    f->insertBlockAfter(x, std::make_unique<Block>("v"));
    if (batch) f->endBlockInsertions();
    std::string order;
    for (auto &b : f->blocks()) order += (b->label().empty() ? "entry" : b->label()) + " ";
    return order;
  };
  std::string direct = build("direct", false);
  EXPECT_EQ(direct, "entry y x v z b1 w b2 ");
  EXPECT_EQ(build("batched", true), direct);
}

// Symbol tables follow additions, renames and erasures.
TEST_F(IRTest, SymbolTablesFollowRenames) {
  Function *f = makeFunction("a");
  Function *g = makeFunction("b");
  EXPECT_EQ(m.lookupFunction("a"), f);
  f->setName("c");
  EXPECT_EQ(m.lookupFunction("a"), nullptr);
  EXPECT_EQ(m.lookupFunction("c"), f);
  EXPECT_EQ(m.freshFunctionName("b"), "b_0");
  g->setName("b_0");
  EXPECT_EQ(m.freshFunctionName("b"), "b_1");
  m.eraseFunction(g);
  EXPECT_EQ(m.lookupFunction("b_0"), nullptr);
}

// The symbol-attribute lookup (keyed by the interned name) agrees with the
// name lookup through additions, renames, duplicate names and erasures.
TEST_F(IRTest, SymbolAttrLookupFollowsTheNameTable) {
  auto sym = [](const char *n) { return Attr::getSym(n); };
  Function *f = makeFunction("p");
  EXPECT_EQ(m.lookupFunction(sym("p")), f);
  EXPECT_EQ(m.lookupFunction(sym("q")), nullptr);
  f->setName("q");
  EXPECT_EQ(m.lookupFunction(sym("p")), nullptr);
  EXPECT_EQ(m.lookupFunction(sym("q")), f);
  // A second function of the same name (invalid IR) is found only once the
  // first is gone, by both lookups.
  Function *g = makeFunction("q");
  EXPECT_EQ(m.lookupFunction(sym("q")), f);
  m.eraseFunction(f);
  EXPECT_EQ(m.lookupFunction("q"), g);
  EXPECT_EQ(m.lookupFunction(sym("q")), g);
  g->setName("r");
  EXPECT_EQ(m.lookupFunction(sym("q")), nullptr);
  EXPECT_EQ(m.lookupFunction(sym("r")), g);
  m.eraseFunction(g);
  EXPECT_EQ(m.lookupFunction(sym("r")), nullptr);
  // A string attribute of the same text is the same key.
  Function *h = makeFunction("s");
  EXPECT_EQ(m.lookupFunction(Attr::getStr("s")), h);
}

TEST_F(IRTest, RemoveReturnsOwnershipAndKeepsUses) {
  Function *f = makeFunction();
  Block *e = f->entry();
  Value *a = e->argument(0);
  Operation *n = op(e, OpCode::Neg, {a});
  ret(e, a);
  std::unique_ptr<Operation> owned = n->remove();
  EXPECT_EQ(owned->block(), nullptr);
  EXPECT_EQ(e->size(), 1u);
  EXPECT_EQ(a->numUses(), 2u) << "a detached op still uses its operands";
  owned.reset();
  EXPECT_EQ(a->numUses(), 1u);
}

#ifndef NDEBUG
using IRDeathTest = IRTest;

TEST_F(IRDeathTest, ErasingAnOpWhoseResultIsUsedAsserts) {
  Function *f = makeFunction();
  Block *e = f->entry();
  Operation *n = op(e, OpCode::Neg, {e->argument(0)});
  ret(e, n->result());
  EXPECT_DEATH(n->erase(), "erasing an operation whose results are still used");
}

TEST_F(IRDeathTest, ErasingAUsedBlockArgumentAsserts) {
  Function *f = makeFunction();
  Block *e = f->entry();
  ret(e, e->argument(1));
  EXPECT_DEATH(e->eraseArgument(1), "erasing a block argument that is still used");
}

TEST_F(IRDeathTest, ErasingAUsedGlobalAsserts) {
  Function *f = makeFunction();
  Global *w = m.addGlobal(std::make_unique<Global>("w", t, Location{}));
  ret(f->entry(), w);
  EXPECT_DEATH(m.eraseGlobal(w), "erasing a global that is still used");
}
#endif

TEST_F(IRTest, EraseBlockAndInsertBlockAfter) {
  Function *f = makeFunction();
  Block *e = f->entry();
  Block *exit = addBlock(f, "exit");
  ret(exit, e->argument(0));
  Block *mid = f->insertBlockAfter(e, std::make_unique<Block>("mid"));
  ASSERT_EQ(f->blocks().size(), 3u);
  EXPECT_EQ(f->blocks()[1].get(), mid);
  EXPECT_EQ(mid->function(), f);
  br(e, exit);
  // mid: unreachable, its ops use each other, its argument and the entry's
  // arguments, and it branches to itself.
  BlockArgument *arg = mid->addArgument(t, {});
  Operation *n1 = op(mid, OpCode::Add, {arg, e->argument(1)});
  Operation *n2 = op(mid, OpCode::Neg, {n1->result()});
  br(mid, mid, {n2->result()});
  EXPECT_EQ(e->argument(1)->numUses(), 1u);
  f->eraseBlock(mid);
  EXPECT_EQ(f->blocks().size(), 2u);
  EXPECT_FALSE(e->argument(1)->hasUses()) << "uses from the erased block are gone";
  EXPECT_TRUE(succeeded(verifyStructure(*f, diag))) << diagOut.str();
}

//===-- Order within a block -----------------------------------------------===//

TEST_F(IRTest, MoveBeforeAndIsBeforeInBlock) {
  Function *f = makeFunction();
  Block *e = f->entry();
  Value *a = e->argument(0);
  Operation *o1 = op(e, OpCode::Neg, {a});
  Operation *o2 = op(e, OpCode::Abs, {a});
  Operation *o3 = op(e, OpCode::Relu, {a});
  Operation *r = ret(e, a);

  EXPECT_TRUE(o1->isBeforeInBlock(o2));
  EXPECT_TRUE(o1->isBeforeInBlock(r));
  EXPECT_FALSE(o2->isBeforeInBlock(o1));
  EXPECT_FALSE(o1->isBeforeInBlock(o1));

  o3->moveBefore(o1);
  EXPECT_EQ(e->opsSnapshot(), (std::vector<Operation *>{o3, o1, o2, r}));
  EXPECT_EQ(e->front(), o3);
  EXPECT_EQ(o3->prevOp(), nullptr);
  EXPECT_EQ(o2->nextOp(), r);
  EXPECT_TRUE(o3->isBeforeInBlock(o1));
  EXPECT_FALSE(o1->isBeforeInBlock(o3));
  EXPECT_EQ(o3->block(), e);

  o1->moveBefore(r); // to the end (before the terminator)
  EXPECT_EQ(e->opsSnapshot(), (std::vector<Operation *>{o3, o2, o1, r}));
  EXPECT_EQ(r->prevOp(), o1);
  // Walking backwards from the end agrees.
  std::vector<Operation *> back;
  for (Operation *o = e->back(); o; o = o->prevOp()) back.push_back(o);
  EXPECT_EQ(back, (std::vector<Operation *>{r, o1, o2, o3}));
  // Uses are untouched by moves.
  EXPECT_EQ(a->numUses(), 4u);

  // Moving into another block.
  Block *other = addBlock(f, "other");
  Operation *r2 = ret(other, a);
  o2->moveBefore(r2);
  EXPECT_EQ(o2->block(), other);
  EXPECT_EQ(other->front(), o2);
  EXPECT_EQ(e->opsSnapshot(), (std::vector<Operation *>{o3, o1, r}));
}

//===-- Block arguments ----------------------------------------------------===//

TEST_F(IRTest, EraseArgumentRenumbers) {
  Function *f = makeFunction();
  Block *b = addBlock(f, "bb");
  Type i = ctx.tensor(DType::I64, {});
  BlockArgument *x = b->addArgument(t, {});
  BlockArgument *y = b->addArgument(i, {});
  BlockArgument *z = b->addArgument(ctx.storage(), {});
  ret(b, z);
  EXPECT_EQ(z->index(), 2u);

  b->eraseArgument(1);
  ASSERT_EQ(b->numArguments(), 2u);
  EXPECT_EQ(b->argument(0), x);
  EXPECT_EQ(b->argument(1), z);
  EXPECT_EQ(x->index(), 0u);
  EXPECT_EQ(z->index(), 1u);
  EXPECT_EQ(b->argumentTypes(), (std::vector<Type>{t, ctx.storage()}));
  EXPECT_TRUE(z->hasOneUse()) << "the surviving argument keeps its uses";
  b->eraseArgument(0);
  EXPECT_EQ(z->index(), 0u);
  EXPECT_EQ(b->arguments(), (std::vector<Value *>{z}));
  (void)y;
}

//===-- CFG: reverse post-order and dominance --------------------------------===//

// entry -> {then, else} -> merge
struct Diamond {
  Block *entry, *then, *els, *merge;
};

class CFGTest : public IRTest {
protected:
  Value *cond(Block *b) {
    return op(b, OpCode::Less, {b->function()->entry()->argument(0),
                                b->function()->entry()->argument(1)})
        ->result();
  }
  Diamond diamond(Function *f) {
    Diamond d{f->entry(), addBlock(f, "then"), addBlock(f, "else"), addBlock(f, "merge")};
    condBr(d.entry, cond(d.entry), d.then, d.els);
    br(d.then, d.merge);
    br(d.els, d.merge);
    ret(d.merge, f->entry()->argument(0));
    return d;
  }

  /// Every forward edge (not to a block that dominates its source) goes
  /// from an earlier to a later block in `rpo`.
  static void expectTopological(const std::vector<Block *> &rpo,
                                const std::set<std::pair<Block *, Block *>> &backEdges) {
    std::map<Block *, size_t> pos;
    for (size_t i = 0; i < rpo.size(); ++i) pos[rpo[i]] = i;
    for (Block *b : rpo)
      for (Block *s : b->successors()) {
        if (backEdges.count({b, s})) continue;
        EXPECT_LT(pos.at(b), pos.at(s)) << "^" << b->label() << " -> ^" << s->label();
      }
  }
};

TEST_F(CFGTest, ReversePostOrderOfADiamond) {
  Function *f = makeFunction();
  Diamond d = diamond(f);
  std::vector<Block *> rpo = f->reversePostOrder();
  ASSERT_EQ(rpo.size(), 4u);
  EXPECT_EQ(rpo.front(), d.entry);
  EXPECT_EQ(rpo.back(), d.merge);
  EXPECT_EQ((std::set<Block *>{rpo[1], rpo[2]}), (std::set<Block *>{d.then, d.els}));
  expectTopological(rpo, {});
  EXPECT_EQ(d.entry->successors(), (std::vector<Block *>{d.then, d.els}));
}

TEST_F(CFGTest, ReversePostOrderOfALoop) {
  // entry -> header; header -> body | exit; body -> header
  Function *f = makeFunction();
  Block *header = addBlock(f, "header"), *body = addBlock(f, "body"),
        *exit = addBlock(f, "exit");
  br(f->entry(), header);
  condBr(header, cond(header), body, exit);
  br(body, header);
  ret(exit, f->entry()->argument(0));
  std::vector<Block *> rpo = f->reversePostOrder();
  ASSERT_EQ(rpo.size(), 4u);
  EXPECT_EQ(rpo[0], f->entry());
  EXPECT_EQ(rpo[1], header);
  expectTopological(rpo, {{body, header}});
}

TEST_F(CFGTest, ReversePostOrderIsNotPreOrder) {
  // entry -> {b, a}, a -> b: a pre-order walk that follows the first edge
  // visits b before a; reverse post-order must put a before b.
  Function *f = makeFunction();
  Block *b = addBlock(f, "b"), *a = addBlock(f, "a");
  condBr(f->entry(), cond(f->entry()), b, a);
  br(a, b);
  ret(b, f->entry()->argument(0));
  std::vector<Block *> rpo = f->reversePostOrder();
  EXPECT_EQ(rpo, (std::vector<Block *>{f->entry(), a, b}));
  DominanceInfo dom(*f);
  EXPECT_EQ(dom.idom(b), f->entry());
  EXPECT_EQ(dom.idom(a), f->entry());
}

TEST_F(CFGTest, ReversePostOrderOmitsUnreachableBlocks) {
  Function *f = makeFunction();
  Diamond d = diamond(f);
  Block *dead = addBlock(f, "dead");
  br(dead, d.merge); // unreachable, but branches into reachable code
  Block *island = addBlock(f, "island");
  br(island, island);
  std::vector<Block *> rpo = f->reversePostOrder();
  EXPECT_EQ(rpo.size(), 4u);
  EXPECT_EQ(std::count(rpo.begin(), rpo.end(), dead), 0);
  EXPECT_EQ(std::count(rpo.begin(), rpo.end(), island), 0);
  expectTopological(rpo, {});

  DominanceInfo dom(*f);
  EXPECT_FALSE(dom.isReachable(dead));
  EXPECT_FALSE(dom.dominates(dead, d.merge));
  EXPECT_FALSE(dom.dominates(d.entry, dead));
  EXPECT_FALSE(dom.dominates(dead, dead));
  // The dead predecessor does not weaken dominance of the reachable code.
  EXPECT_EQ(dom.idom(d.merge), d.entry);
}

TEST_F(CFGTest, ReversePostOrderOfAnEmptyFunction) {
  Function *f = m.addFunction(std::make_unique<Function>("empty", ctx.func({}, {}), Location{}));
  EXPECT_TRUE(f->reversePostOrder().empty());
}

TEST_F(CFGTest, DominanceOnADiamond) {
  Function *f = makeFunction();
  Diamond d = diamond(f);
  DominanceInfo dom(*f);
  for (Block *b : {d.entry, d.then, d.els, d.merge}) {
    EXPECT_TRUE(dom.isReachable(b));
    EXPECT_TRUE(dom.dominates(b, b)) << "reflexive";
    EXPECT_TRUE(dom.dominates(d.entry, b));
  }
  EXPECT_FALSE(dom.dominates(d.then, d.merge));
  EXPECT_FALSE(dom.dominates(d.els, d.merge));
  EXPECT_FALSE(dom.dominates(d.then, d.els));
  EXPECT_FALSE(dom.dominates(d.merge, d.entry));
  EXPECT_EQ(dom.idom(d.entry), nullptr);
  EXPECT_EQ(dom.idom(d.then), d.entry);
  EXPECT_EQ(dom.idom(d.els), d.entry);
  EXPECT_EQ(dom.idom(d.merge), d.entry);
}

TEST_F(CFGTest, DominanceOnALoop) {
  // entry -> header; header -> body | exit; body -> latch -> header
  Function *f = makeFunction();
  Block *header = addBlock(f, "header"), *body = addBlock(f, "body"),
        *latch = addBlock(f, "latch"), *exit = addBlock(f, "exit");
  br(f->entry(), header);
  condBr(header, cond(header), body, exit);
  br(body, latch);
  br(latch, header);
  ret(exit, f->entry()->argument(0));
  DominanceInfo dom(*f);
  EXPECT_EQ(dom.idom(header), f->entry());
  EXPECT_EQ(dom.idom(body), header);
  EXPECT_EQ(dom.idom(latch), body);
  EXPECT_EQ(dom.idom(exit), header);
  EXPECT_TRUE(dom.dominates(header, latch));
  EXPECT_TRUE(dom.dominates(header, exit));
  EXPECT_FALSE(dom.dominates(body, exit));
  EXPECT_FALSE(dom.dominates(latch, header)) << "the back edge does not make the latch dominate";
  EXPECT_FALSE(dom.dominates(body, header));
}

TEST_F(CFGTest, ValueDominance) {
  Function *f = makeFunction();
  Diamond d = diamond(f);
  Value *a = f->entry()->argument(0);
  Operation *inThen = d.then->insertBefore(
      d.then->front(), Operation::create(OpCode::Neg, {}, {a}, {t}, defaultAttrs(OpCode::Neg)));
  Operation *later = d.then->insertBefore(
      d.then->terminator(),
      Operation::create(OpCode::Abs, {}, {inThen->result()}, {t}, defaultAttrs(OpCode::Abs)));
  Operation *mergeRet = d.merge->terminator();
  DominanceInfo dom(*f);
  EXPECT_TRUE(dom.valueDominates(a, mergeRet));
  EXPECT_TRUE(dom.valueDominates(inThen->result(), later));
  EXPECT_FALSE(dom.valueDominates(later->result(), inThen)) << "defined after the use";
  EXPECT_FALSE(dom.valueDominates(inThen->result(), mergeRet)) << "then does not dominate merge";
  EXPECT_TRUE(succeeded(verifyStructure(*f, diag))) << diagOut.str();

  // Using %inThen in merge breaks SSA dominance; the verifier says so.
  mergeRet->setOperand(0, inThen->result());
  diags.clear();
  EXPECT_TRUE(failed(verifyStructure(*f, diag)));
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_NE(diags[0].message.find("does not dominate this use"), std::string::npos)
      << diags[0].message;
}


//===-- FlatMap ------------------------------------------------------------===//

// Every insert, lookup and erase of a random sequence agrees with
// std::unordered_map, through growth, a clear of a small and of a large
// table, and keys whose hashes all collide (long runs, which erasing must
// close up without cutting off the entries after the hole).
template <class Hash>
void checkFlatMapAgainstStd(unsigned seed, size_t keys, size_t steps) {
  std::mt19937 rng(seed);
  std::vector<std::string> pool;
  for (size_t i = 0; i < keys; ++i) pool.push_back("v" + std::to_string(rng() % (4 * keys)));
  FlatMap<std::string_view, int, Hash> flat;
  std::unordered_map<std::string_view, int> ref;
  for (size_t step = 0; step < steps; ++step) {
    std::string_view k = pool[rng() % pool.size()];
    if (step == steps / 3 || step == 2 * steps / 3) {
      flat.clear();
      ref.clear();
      ASSERT_TRUE(flat.empty());
    }
    if (rng() % 5 == 0) {
      ASSERT_EQ(flat.erase(k), ref.erase(k) == 1) << k;
    } else if (rng() % 2) {
      int v = static_cast<int>(step);
      auto [got, inserted] = flat.tryEmplace(k, v);
      auto [it, refInserted] = ref.try_emplace(k, v);
      ASSERT_EQ(inserted, refInserted) << k;
      ASSERT_EQ(*got, it->second) << k;
    } else {
      const int *got = flat.find(k);
      auto it = ref.find(k);
      ASSERT_EQ(got != nullptr, it != ref.end()) << k;
      if (got) {
        ASSERT_EQ(*got, it->second) << k;
      }
    }
    ASSERT_EQ(flat.size(), ref.size());
  }
}

struct CollidingHash {
  size_t operator()(std::string_view s) const { return s.size(); } // few distinct values
};

TEST(FlatMap, AgreesWithUnorderedMap) {
  checkFlatMapAgainstStd<std::hash<std::string_view>>(1, 20000, 200000); // grows past 4096 slots
  checkFlatMapAgainstStd<std::hash<std::string_view>>(2, 50, 5000);      // stays small
  checkFlatMapAgainstStd<CollidingHash>(3, 500, 20000);
}

TEST(FlatMap, PointerKeys) {
  std::vector<int> objs(1000);
  FlatMap<const int *, size_t> pos;
  for (size_t i = 0; i < objs.size(); ++i) EXPECT_TRUE(pos.tryEmplace(&objs[i], i).second);
  for (size_t i = 0; i < objs.size(); ++i) {
    ASSERT_NE(pos.find(&objs[i]), nullptr);
    EXPECT_EQ(*pos.find(&objs[i]), i);
    EXPECT_FALSE(pos.tryEmplace(&objs[i], 0).second); // present: not replaced
    EXPECT_EQ(*pos.find(&objs[i]), i);
  }
  int other = 0;
  EXPECT_EQ(pos.find(&other), nullptr);
  EXPECT_EQ(pos.size(), objs.size());
}

} // namespace
} // namespace nimble::ir
