//===- ParserPrinterTest.cpp - .nir text in, .nir text out ----------------===//
//
// The parser builds the structure the text describes (blocks, arguments, ops,
// attributes, inferred result types); the printer's output parses back and
// prints identically; each malformed input yields exactly one error at the
// right line:col; and names that clash (possible through the C++ API) are
// made unique by the printer in a way that still parses.
//
//===----------------------------------------------------------------------===//

#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <sstream>

namespace nimble::ir {
namespace {

class ParserTest : public ::testing::Test {
protected:
  ParserTest() : diag(nullptr, diagOut) {
    diag.setHandler([this](const Diagnostic &d) { diags.push_back(d); });
  }

  std::unique_ptr<Module> parse(std::string_view text) {
    diags.clear();
    return parseModule(text, "test.nir", ctx, diag);
  }

  /// Parses, verifies and prints; fails the test on any diagnostic.
  std::string roundTrip(std::string_view text) {
    std::unique_ptr<Module> m = parse(text);
    EXPECT_NE(m, nullptr) << allDiags() << "\nin:\n" << text;
    if (!m) return "";
    EXPECT_TRUE(succeeded(verifyModule(*m, diag))) << allDiags();
    EXPECT_TRUE(diags.empty()) << allDiags();
    return printModuleToString(*m);
  }

  std::string allDiags() const {
    std::string s;
    for (const Diagnostic &d : diags) s += d.loc.str() + ": " + d.message + "\n";
    return s;
  }

  static Operation *nthOp(Block *b, size_t n) {
    auto ops = b->opsSnapshot();
    return n < ops.size() ? ops[n] : nullptr;
  }

  Context ctx;
  std::ostringstream diagOut;
  DiagnosticEngine diag;
  std::vector<Diagnostic> diags;
};

//===-- Structure --------------------------------------------------------===//

const char *kDemo = R"(module @demo

type @List = Nil | Cons(tensor<4xf32>, @List)

const @w : tensor<4x2xf32> = external("w.safetensors", "w")

const @b : tensor<2xf32> = [0.5, -1.0]

func @main(%x: tensor<?x4xf32>, %n: tensor<i64>) -> tensor<?x2xf32> {
^entry:
  %y = matmul %x, @w
  %z = add %y, @b
  %c = constant 0 : tensor<i64>
  %p = greater %n, %c
  cond_br %p, ^pos(%z), ^neg
^pos(%v: tensor<?x2xf32>):
  ret %v
^neg:
  %t = relu %z
  ret %t
}
)";

TEST_F(ParserTest, BuildsTheDescribedStructure) {
  std::unique_ptr<Module> m = parse(kDemo);
  ASSERT_NE(m, nullptr) << allDiags();
  EXPECT_TRUE(diags.empty());
  EXPECT_EQ(m->name(), "demo");

  ASSERT_EQ(m->adts().size(), 1u);
  const AdtDecl &list = *m->adts()[0];
  EXPECT_EQ(list.name, "List");
  ASSERT_EQ(list.ctors.size(), 2u);
  EXPECT_EQ(list.ctors[0].name, "Nil");
  EXPECT_TRUE(list.ctors[0].fields.empty());
  EXPECT_EQ(list.ctors[1].fields,
            (std::vector<Type>{ctx.tensor(DType::F32, {4}), ctx.adt("List")}));

  Global *w = m->lookupGlobal("w");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->isExternal());
  EXPECT_EQ(w->file(), "w.safetensors");
  EXPECT_EQ(w->key(), "w");
  EXPECT_EQ(w->type(), ctx.tensor(DType::F32, {4, 2}));
  Global *b = m->lookupGlobal("b");
  ASSERT_NE(b, nullptr);
  ASSERT_FALSE(b->isExternal());
  const DenseValue &bv = b->literal().getDense();
  EXPECT_EQ(bv.shape, (std::vector<int64_t>{2}));
  EXPECT_FALSE(bv.splat);
  EXPECT_EQ(bv.getDouble(0), 0.5);
  EXPECT_EQ(bv.getDouble(1), -1.0);

  Function *f = m->lookupFunction("main");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->type(), ctx.func({ctx.tensor(DType::F32, {kDynamic, 4}), ctx.tensor(DType::I64, {})},
                                {ctx.tensor(DType::F32, {kDynamic, 2})}));
  ASSERT_EQ(f->blocks().size(), 3u);
  Block *entry = f->entry(), *pos = f->blocks()[1].get(), *neg = f->blocks()[2].get();
  EXPECT_EQ(entry->label(), "entry");
  EXPECT_EQ(pos->label(), "pos");
  EXPECT_EQ(neg->label(), "neg");
  ASSERT_EQ(entry->numArguments(), 2u);
  EXPECT_EQ(entry->argument(0)->name(), "x");
  EXPECT_EQ(entry->argument(1)->type(), ctx.tensor(DType::I64, {}));
  ASSERT_EQ(pos->numArguments(), 1u);
  EXPECT_EQ(pos->argument(0)->name(), "v");

  std::vector<OpCode> codes;
  for (Operation &op : *entry) codes.push_back(op.code());
  EXPECT_EQ(codes, (std::vector<OpCode>{OpCode::MatMul, OpCode::Add, OpCode::Constant,
                                        OpCode::Greater, OpCode::CondBr}));
  Operation *mm = nthOp(entry, 0);
  EXPECT_EQ(mm->operand(0), entry->argument(0));
  EXPECT_EQ(mm->operand(1), w) << "a symbol operand is the global itself";
  EXPECT_TRUE(w->hasOneUse());
  // Inferred result types.
  EXPECT_EQ(mm->result()->type(), ctx.tensor(DType::F32, {kDynamic, 2}));
  EXPECT_EQ(mm->result()->name(), "y");
  EXPECT_EQ(nthOp(entry, 1)->result()->type(), ctx.tensor(DType::F32, {kDynamic, 2}));
  EXPECT_EQ(nthOp(entry, 3)->result()->type(), ctx.tensor(DType::I1, {}));
  const DenseValue &c = nthOp(entry, 2)->attr("value").getDense();
  EXPECT_EQ(c.dtype, DType::I64);
  EXPECT_TRUE(c.shape.empty());
  EXPECT_EQ(c.getInt(0), 0);

  Operation *br = entry->terminator();
  ASSERT_NE(br, nullptr);
  EXPECT_EQ(br->code(), OpCode::CondBr);
  EXPECT_EQ(br->numNonSuccessorOperands(), 1u);
  ASSERT_EQ(br->successors().size(), 2u);
  EXPECT_EQ(br->successors()[0].block, pos);
  EXPECT_EQ(br->successorOperands(0), (std::vector<Value *>{nthOp(entry, 1)->result()}));
  EXPECT_EQ(br->successors()[1].block, neg);
  EXPECT_TRUE(br->successorOperands(1).empty());
  EXPECT_EQ(entry->successors(), (std::vector<Block *>{pos, neg}));

  // %z is used by the branch and by relu in ^neg.
  EXPECT_EQ(nthOp(entry, 1)->result()->numUses(), 2u);
  // Locations: file, line and column of the op (its first result name).
  Location l = mm->loc();
  ASSERT_TRUE(l.known());
  EXPECT_STREQ(l.file, "test.nir");
  EXPECT_EQ(l.line, 11u);
  EXPECT_EQ(l.col, 3u);
  EXPECT_TRUE(succeeded(verifyModule(*m, diag))) << allDiags();
}

TEST_F(ParserTest, AttributesAndMultipleResults) {
  std::unique_ptr<Module> m = parse(R"(
func @attrs(%x: tensor<2x3x4xf32>) -> tensor<4x3xf32> {
  %s = sum %x, axes=[0], keepdims=false
  %t = transpose %s, perm=[1, 0]
  %r = reshape %t, shape=[4, -1]
  %a, %b = split %x, axis=2, sections=2
  %i = cast %a, dtype=i32
  %k = argmax %b, axis=-1, keepdims=true
  %g = constant 1.0 : tensor<4xf32>
  %n = layer_norm %x, %g, %g, eps=0.001
  %m = matmul %s, %s, transpose_b=true
  ret %r
}
)");
  ASSERT_NE(m, nullptr) << allDiags();
  Block *e = m->lookupFunction("attrs")->entry();
  Operation *sum = nthOp(e, 0);
  EXPECT_EQ(sum->attr("axes").getInts(), (std::vector<int64_t>{0}));
  EXPECT_FALSE(sum->boolAttr("keepdims"));
  EXPECT_EQ(sum->result()->type(), ctx.tensor(DType::F32, {3, 4}));
  EXPECT_EQ(nthOp(e, 1)->attr("perm").getInts(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(nthOp(e, 1)->result()->type(), ctx.tensor(DType::F32, {4, 3}));
  EXPECT_EQ(nthOp(e, 2)->attr("shape").getInts(), (std::vector<int64_t>{4, -1}));
  EXPECT_EQ(nthOp(e, 2)->result()->type(), ctx.tensor(DType::F32, {4, 3}));
  Operation *split = nthOp(e, 3);
  ASSERT_EQ(split->numResults(), 2u);
  EXPECT_EQ(split->intAttr("sections"), 2);
  EXPECT_EQ(split->intAttr("axis"), 2);
  EXPECT_EQ(split->result(0)->name(), "a");
  EXPECT_EQ(split->result(1)->name(), "b");
  EXPECT_EQ(split->result(1)->type(), ctx.tensor(DType::F32, {2, 3, 2}));
  EXPECT_EQ(nthOp(e, 4)->attr("dtype").getDType(), DType::I32);
  EXPECT_EQ(nthOp(e, 4)->result()->type(), ctx.tensor(DType::I32, {2, 3, 2}));
  EXPECT_EQ(nthOp(e, 5)->intAttr("axis"), -1);
  EXPECT_EQ(nthOp(e, 5)->result()->type(), ctx.tensor(DType::I64, {2, 3, 1}));
  const DenseValue &g = nthOp(e, 6)->attr("value").getDense();
  EXPECT_TRUE(g.splat) << "a scalar literal for a 4-element type is a splat";
  EXPECT_EQ(g.getDouble(3), 1.0);
  EXPECT_DOUBLE_EQ(nthOp(e, 7)->attr("eps").getFloat(), 0.001);
  EXPECT_TRUE(nthOp(e, 8)->boolAttr("transpose_b"));
  EXPECT_FALSE(nthOp(e, 8)->boolAttr("transpose_a"));
  EXPECT_EQ(nthOp(e, 8)->result()->type(), ctx.tensor(DType::F32, {3, 3}));

  // The printer leaves out attributes at their default.
  std::string out = printModuleToString(*m);
  EXPECT_NE(out.find("%s = sum %x, axes=[0] : tensor<3x4xf32>\n"), std::string::npos) << out;
  EXPECT_NE(out.find("%m = matmul %s, %s, transpose_b=true : tensor<3x3xf32>\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("%a, %b = split %x, axis=2, sections=2 : tensor<2x3x2xf32>, "
                     "tensor<2x3x2xf32>\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("%g = constant 1.0 : tensor<4xf32>\n"), std::string::npos) << out;
  EXPECT_NE(out.find("eps=0.001"), std::string::npos) << out;
}

//===-- Print / parse round trips -------------------------------------------===//

const char *kRoundTrip[] = {
    kDemo,

    // A loop with block arguments and `?` dims.
    R"(func @count(%xs: tensor<?x4xf32>) -> tensor<i64> {
  %n = dim %xs, axis=0
  %zero = constant 0 : tensor<i64>
  br ^loop(%zero)
^loop(%i: tensor<i64>):
  %done = greater_equal %i, %n
  cond_br %done, ^exit, ^body
^body:
  %one = constant 1 : tensor<i64>
  %next = add %i, %one
  br ^loop(%next)
^exit:
  ret %i
})",

    // ADTs, match, recursion, construct, call without declared types.
    R"(type @Tree = Leaf(tensor<4xf32>) | Node(@Tree, @Tree)

func @total(%t: @Tree) -> tensor<4xf32> {
  match %t [Leaf: ^leaf, Node: ^node]
^leaf(%v: tensor<4xf32>):
  ret %v
^node(%l: @Tree, %r: @Tree):
  %a = call @total(%l)
  %b = call @total(%r)
  %s = add %a, %b
  ret %s
}

func @make(%v: tensor<4xf32>) -> @Tree {
  %l = construct @Tree::Leaf(%v)
  %n = construct @Tree::Node(%l, %l)
  ret %n
})",

    // Match with a default case, tuples.
    R"(type @Opt = None | Some(tensor<f32>)

func @get(%o: @Opt, %d: tensor<f32>) -> tensor<f32> {
  match %o [Some: ^some, _: ^none]
^some(%v: tensor<f32>):
  %t = tuple %v, %d
  %x = get_tuple %t, index=0
  ret %x
^none:
  ret %d
})",

    // Constants of every element type, splats, empty tensors, non-finite
    // floats (printed as raw bits), inline-literal globals.
    R"(const @k : tensor<2x2xi8> = [[1, -2], [3, 127]]

func @consts() -> tensor<2xf16> attributes {inline = "never", cost = 3, pure = true} {
  %a = constant [1.5, -0.25] : tensor<2xf16>
  %b = constant 0.1 : tensor<2x2xbf16>
  %c = constant [true, false] : tensor<2xi1>
  %d = constant 0x7FC00000 : tensor<f32>
  %e = constant 0xFC00 : tensor<3xf16>
  %f = constant 1e-3 : tensor<f64>
  %g = constant [] : tensor<0xf32>
  %h = constant -9007199254740993 : tensor<i64>
  %i = constant [0.1, 3.4028234663852886e+38] : tensor<2xf32>
  %j = add @k, @k
  ret %a
})",

    // Data-dependent and upper-bound ops, explicit memory.
    R"(func @kernel(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = relu %a
  ret %r
}

func @dyn(%x: tensor<?xf32>, %shape: tensor<2xi64>) -> tensor<4xf32> {
  %s = constant 0 : tensor<i64>
  %e = constant 10 : tensor<i64>
  %st = constant 3 : tensor<i64>
  %r = arange %s, %e, %st
  %u = unique %x
  %nz = nonzero %x
  %z = zeros %shape, dtype=i32
  %rs = dyn_reshape %x, %shape
  %sz = constant 16 : tensor<i64>
  %mem = alloc_storage %sz, alignment=32, device="cpu"
  %o = alloc_tensor %mem, %s, shape=[4]
  %in = constant 1.0 : tensor<4xf32>
  invoke_mut @kernel(%in) -> (%o)
  kill %mem
  ret %o
})",

    // Several functions, forward references to blocks and constants.
    R"(func @a(%x: tensor<2xf32>) -> tensor<2xf32> {
  br ^later
^later:
  %y = mul %x, @late
  ret %y
}

const @late : tensor<2xf32> = 2.0

func @b() {
  ret
})",
};

// Inferred result types come from a per-thread cache of relations keyed by
// op, operand types and attributes (ir/Inference.cpp): a later Context may
// reuse the addresses of an earlier one's types (the allocator hands them
// out again), so entries must not carry over. Contexts made and destroyed
// in turn, with a different extent each time, must each infer their own.
TEST(RelationCache, ResultsDoNotCarryOverBetweenContexts) {
  for (int i = 1; i <= 40; ++i) {
    auto ctx = std::make_unique<Context>();
    std::ostringstream out;
    DiagnosticEngine diag(nullptr, out);
    // Every other module makes its types in another order, so that a
    // reused address holds another type than it did.
    std::string n = std::to_string(i % 2 ? i : 2 * i);
    std::string extra = i % 3 ? "" : "%u: tensor<" + std::to_string(i) + "xi64>, ";
    std::string cast = i % 2 ? "" : "  %q = cast %y, dtype=f16\n";
    std::string text = "func @f(" + extra + "%x: tensor<" + n + "x3xf32>, %w: tensor<3x" + n + "xf32>) -> tensor<" +
                       n + "x" + n + "xf32> {\n  %y = add %x, %x\n" + cast + "  %z = matmul %y, %w\n  ret %z\n}\n";
    std::unique_ptr<Module> m = parseModule(text, "t.nir", *ctx, diag);
    ASSERT_NE(m, nullptr) << out.str();
    ASSERT_TRUE(succeeded(verifyModule(*m, diag))) << out.str();
    Block *b = m->functions()[0]->entry();
    EXPECT_EQ(b->front()->result(0)->type().str(), "tensor<" + n + "x3xf32>");
    EXPECT_EQ(b->terminator()->operand(0)->type().str(), "tensor<" + n + "x" + n + "xf32>");
  }
}

// The same op in one Context, inferred twice (cached the second time), gets
// the same type; an op differing only in an attribute does not share it.
TEST_F(ParserTest, CachedRelationsMatchAttributes) {
  std::unique_ptr<Module> m = parse(
      "func @f(%x: tensor<4x3xf32>) -> tensor<4x4xf32> {\n"
      "  %a = matmul %x, %x, transpose_b=true\n"
      "  %b = matmul %x, %x, transpose_b=true\n"
      "  %c = matmul %x, %x, transpose_a=true\n"
      "  ret %b\n"
      "}\n");
  ASSERT_NE(m, nullptr) << allDiags();
  auto ops = m->functions()[0]->entry()->opsSnapshot();
  EXPECT_EQ(ops[0]->result(0)->type().str(), "tensor<4x4xf32>");
  EXPECT_EQ(ops[1]->result(0)->type(), ops[0]->result(0)->type());
  EXPECT_EQ(ops[2]->result(0)->type().str(), "tensor<3x3xf32>");
}

TEST_F(ParserTest, PrintParsePrintIsStable) {
  for (const char *text : kRoundTrip) {
    std::string once = roundTrip(text);
    ASSERT_FALSE(once.empty()) << text;
    std::string twice = roundTrip(once);
    EXPECT_EQ(once, twice) << "input:\n" << text;
    EXPECT_EQ(twice, roundTrip(twice));
  }
}

TEST_F(ParserTest, PrintedFormOfSelectedOps) {
  std::string out = roundTrip(kRoundTrip[4]);
  EXPECT_NE(out.find("%d = constant 0x7FC00000 : tensor<f32>\n"), std::string::npos) << out;
  EXPECT_NE(out.find("%e = constant 0xFC00 : tensor<3xf16>\n"), std::string::npos) << out;
  EXPECT_NE(out.find("%c = constant [true, false] : tensor<2xi1>\n"), std::string::npos) << out;
  EXPECT_NE(out.find("%g = constant [] : tensor<0xf32>\n"), std::string::npos) << out;
  EXPECT_NE(out.find("%h = constant -9007199254740993 : tensor<i64>\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("const @k : tensor<2x2xi8> = [[1, -2], [3, 127]]\n"), std::string::npos)
      << out;
  // Function attributes come out sorted by name.
  EXPECT_NE(out.find("attributes {cost = 3, inline = \"never\", pure = true}"), std::string::npos)
      << out;
  std::string mem = roundTrip(kRoundTrip[5]);
  EXPECT_NE(mem.find("invoke_mut @kernel(%in) -> (%o)\n"), std::string::npos) << mem;
  EXPECT_NE(mem.find("%r = arange %s, %e, %st : tensor<4xi64>\n"), std::string::npos) << mem;
  EXPECT_NE(mem.find("%nz = nonzero %x : tensor<?x1xi64>\n"), std::string::npos) << mem;
  EXPECT_NE(mem.find("%mem = alloc_storage %sz, alignment=32 : storage\n"), std::string::npos)
      << mem;
}

TEST_F(ParserTest, LiteralValuesSurviveTheRoundTrip) {
  std::unique_ptr<Module> m1 = parse(kRoundTrip[4]);
  ASSERT_NE(m1, nullptr) << allDiags();
  std::unique_ptr<Module> m2 = parse(printModuleToString(*m1));
  ASSERT_NE(m2, nullptr) << allDiags();
  Block *e1 = m1->lookupFunction("consts")->entry(), *e2 = m2->lookupFunction("consts")->entry();
  ASSERT_EQ(e1->size(), e2->size());
  for (auto i1 = e1->begin(), i2 = e2->begin(); i1 != e1->end(); ++i1, ++i2) {
    if (!i1->is(OpCode::Constant)) continue;
    EXPECT_EQ(i1->attr("value"), i2->attr("value")) << "bit-exact: " << printOperation(*i1);
  }
  const DenseValue &d = nthOp(e2, 3)->attr("value").getDense();
  EXPECT_TRUE(std::isnan(d.getDouble(0)));
  const DenseValue &e = nthOp(e2, 4)->attr("value").getDense();
  EXPECT_TRUE(e.splat);
  EXPECT_EQ(e.getDouble(2), -INFINITY);
  EXPECT_EQ(nthOp(e2, 7)->attr("value").getDense().getInt(0), -9007199254740993);
}

//===-- Errors: one diagnostic, right place, no crash -----------------------===//

struct BadInput {
  const char *text;
  uint32_t line, col;
  const char *message;
};

const BadInput kBad[] = {
    {"func @f() {\n  %x = frobnicate\n}\n", 2, 8, "unknown operation 'frobnicate'"},
    {"func @f(%a: tensor<f32>) -> tensor<f32> {\n  ret %b\n}\n", 2, 7,
     "use of undefined value %b"},
    {"func @f(%a: tensor<2xf32>, %b: tensor<3xf32>) -> tensor<2xf32> {\n  %c = add %a, %b\n"
     "  ret %c\n}\n",
     2, 16, "'add' op operands are not broadcast-compatible"},
    {"func @f(%a: tensor<2xf32>) -> tensor<2xf32> {\n  %c = reshape %a\n  ret %c\n}\n", 2, 3,
     "'reshape' requires attribute 'shape'"},
    {"func @f(%a: tensor<2xf33>) {\n  ret\n}\n", 1, 22, "unknown element type 'f33'"},
    {"func @f(%a: tensor<2x-1xf32>) {\n  ret\n}\n", 1, 22, "invalid dimension '-1'"},
    {"func @f(%a: tensor<f32>) -> tensor<f32> {\n  %a = neg %a\n  ret %a\n}\n", 2, 3,
     "redefinition of value %a"},
    {"func @f(", 1, 9, "expected parameter name"},
    {"func @f(%a: tensor<f32>) -> tensor<f32> {\n  %b = neg %a\n}\n", 2, 3,
     "does not end with a terminator"},
    {"func @f() {\n  br ^nowhere\n}\n", 2, 6, "use of undefined block ^nowhere"},
    {"func @f(%a: tensor<2x3xf32>) {\n  %t = transpose %a, perm=[1, 0], perm=[1, 0]\n  ret\n}\n",
     2, 35, "attribute 'perm' is given twice"},
    {"func @f(%a: tensor<f32>) {\n  %n = neg %a, axis=0\n  ret\n}\n", 2, 16,
     "'neg' has no attribute 'axis'"},
    {"func @f() {\n  %c = constant [1.0, 2.0, 3.0] : tensor<2xf32>\n  ret\n}\n", 2, 17,
     "literal has 3 elements in dimension 0"},
    {"func @f() {\n  %c = constant 300 : tensor<i8>\n  ret\n}\n", 2, 17,
     "does not fit in i8"},
    {"func @f() {\n  ret\n}\nfunc @f() {\n  ret\n}\n", 4, 6, "redefinition of function @f"},
    {"func @f() {\n  ret\n}\nbogus\n", 4, 1, "expected 'func', 'const' or 'type'"},
    {"func @f() {\n  %s = constant 8 : tensor<i64>\n  %m = alloc_storage %s, device=\"cpu\n"
     "  ret\n}\n",
     3, 33, "unterminated string"},
    // A float attribute must be decimal: hex is for the raw bits of float
    // literals (hex integers are allowed and mean their value).
    {"func @f(%a: tensor<4xf32>, %g: tensor<4xf32>) {\n"
     "  %n = layer_norm %a, %g, %g, eps=0x1\n  ret\n}\n",
     2, 35, "0x1"},
};

TEST_F(ParserTest, ErrorsAreReportedOnceAtTheRightPlace) {
  for (const BadInput &bad : kBad) {
    SCOPED_TRACE(bad.text);
    std::unique_ptr<Module> m = parse(bad.text);
    EXPECT_TRUE(m == nullptr);
    if (diags.size() != 1u) { // keep checking the other inputs
      ADD_FAILURE() << "expected exactly one diagnostic, got " << diags.size() << ":\n"
                    << allDiags();
      continue;
    }
    const Diagnostic &d = diags[0];
    EXPECT_EQ(d.severity, Severity::Error);
    EXPECT_TRUE(d.loc.known());
    if (!d.loc.known()) continue;
    EXPECT_STREQ(d.loc.file, "test.nir");
    EXPECT_EQ(d.loc.line, bad.line) << d.message;
    EXPECT_EQ(d.loc.col, bad.col) << d.message;
    EXPECT_NE(d.message.find(bad.message), std::string::npos) << d.message;
  }
}

// Every prefix of a valid module, and every one-character deletion from it,
// either parses cleanly or fails with located errors: never a crash, never a
// silent failure (the asan config runs this too).
TEST_F(ParserTest, DamagedInputNeverCrashes) {
  size_t parsed = 0, rejected = 0;
  for (const char *src : kRoundTrip) {
    std::string text = src;
    std::vector<std::string> variants;
    for (size_t n = 0; n < text.size(); ++n) variants.push_back(text.substr(0, n));
    for (size_t n = 0; n < text.size(); ++n) variants.push_back(text.substr(0, n) + text.substr(n + 1));
    for (const std::string &v : variants) {
      std::unique_ptr<Module> m = parse(v);
      if (m) {
        EXPECT_TRUE(diags.empty()) << v;
        ++parsed;
        // Whatever parsed prints and parses back.
        std::string once = printModuleToString(*m);
        std::unique_ptr<Module> again = parse(once);
        EXPECT_NE(again, nullptr) << allDiags() << "\nprinted from:\n" << v;
        continue;
      }
      ++rejected;
      EXPECT_FALSE(diags.empty()) << "rejected without a diagnostic:\n" << v;
      for (const Diagnostic &d : diags) {
        EXPECT_EQ(d.severity, Severity::Error);
        EXPECT_TRUE(d.loc.known()) << d.message << "\n" << v;
      }
    }
  }
  EXPECT_GT(parsed, 0u);
  EXPECT_GT(rejected, 1000u);
}

TEST_F(ParserTest, ErrorsCarryNotesWhereUseful) {
  std::unique_ptr<Module> m = parse(kBad[6].text); // redefinition of %a
  ASSERT_EQ(diags.size(), 1u);
  ASSERT_EQ(diags[0].notes.size(), 1u);
  EXPECT_EQ(diags[0].notes[0].message, "previous definition is here");
  EXPECT_EQ(diags[0].notes[0].loc.line, 1u);
  EXPECT_EQ(diags[0].notes[0].loc.col, 9u);
  m = parse(kBad[2].text); // broadcast error names operand 1
  ASSERT_EQ(diags.size(), 1u);
  ASSERT_EQ(diags[0].notes.size(), 1u);
  EXPECT_EQ(diags[0].notes[0].loc.line, 1u);
  EXPECT_EQ(diags[0].notes[0].loc.col, 28u); // %b
  EXPECT_EQ(diag.errorCount(), 2u) << "one error per failed parse";
}

// Parsing only checks structure; the verifier checks the types. invoke_mut's
// input/output split must be counted from one operand list.
TEST_F(ParserTest, VerifierCountsInvokeMutOperands) {
  std::unique_ptr<Module> m = parse(R"(func @k(%a: tensor<4xf32>) -> tensor<4xf32> {
  ret %a
}

func @g(%x: tensor<4xf32>, %y: tensor<4xf32>) {
  invoke_mut @k(%x, %y) -> ()
  ret
})");
  ASSERT_NE(m, nullptr) << allDiags();
  EXPECT_TRUE(diags.empty());
  EXPECT_TRUE(failed(verifyModule(*m, diag)));
  ASSERT_EQ(diags.size(), 1u) << allDiags();
  EXPECT_EQ(diags[0].message,
            "'invoke_mut' of @k passes 2 inputs and 0 outputs but @k takes 1 and returns 1");
  EXPECT_EQ(diags[0].loc.line, 6u);
}

// One walk checks a function's structure and verifies its ops (issue 23);
// an op's error met before a structural error further down the function is
// held and dropped, so the structural error reports alone, as when the ops
// were verified after the structure. Once the structure is sound, the op's
// error is reported.
TEST_F(ParserTest, VerifierReportsAStructuralErrorAlone) {
  std::unique_ptr<Module> m = parse(R"(func @k(%a: tensor<4xf32>) -> tensor<4xf32> {
  ret %a
}

func @g(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  invoke_mut @k(%x, %y) -> ()
  %z = neg %x
  %w = neg %z
  ret %w
})");
  ASSERT_NE(m, nullptr) << allDiags();
  Function *g = m->lookupFunction("g");
  ASSERT_NE(g, nullptr);
  std::vector<Operation *> ops;
  for (Operation &op : *g->entry()) ops.push_back(&op);
  ASSERT_EQ(ops.size(), 4u);
  Value *x = ops[1]->operand(0), *w = ops[2]->result();
  ops[1]->setOperand(0, w); // %z = neg %w: a use before the definition
  diags.clear();
  EXPECT_TRUE(failed(verifyModule(*m, diag)));
  ASSERT_EQ(diags.size(), 1u) << allDiags();
  EXPECT_EQ(diags[0].message, "operand 0 (%w) does not dominate this use: it is used before its definition");
  EXPECT_EQ(diags[0].loc.line, 7u);
  ops[1]->setOperand(0, x);
  diags.clear();
  EXPECT_TRUE(failed(verifyModule(*m, diag)));
  ASSERT_EQ(diags.size(), 1u) << allDiags();
  EXPECT_EQ(diags[0].message,
            "'invoke_mut' of @k passes 2 inputs and 0 outputs but @k takes 1 and returns 1");
  EXPECT_EQ(diags[0].loc.line, 6u);
}

TEST_F(ParserTest, LineNumbersStartAtFirstLine) {
  diags.clear();
  auto m = parseModule("func @f() {\n  %x = nope\n}\n", "chunk.nir", ctx, diag, 40);
  EXPECT_EQ(m, nullptr);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].loc.line, 41u);
  EXPECT_STREQ(diags[0].loc.file, "chunk.nir");
}

TEST_F(ParserTest, EmptyInputIsAnEmptyModule) {
  std::unique_ptr<Module> m = parse("// nothing here\n");
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->functions().empty());
  EXPECT_EQ(printModuleToString(*m), "");
}

//===-- Names the printer has to invent ---------------------------------------===//

class PrinterNamesTest : public ParserTest {
protected:
  /// func @f(%a: t) -> t with ops whose results get `names`, each op taking
  /// the previous result, returning the last.
  std::unique_ptr<Module> build(const std::vector<std::string> &names,
                                const std::string &argName = "a") {
    auto m = std::make_unique<Module>(ctx);
    Type t = ctx.tensor(DType::F32, {2});
    Function *f = m->addFunction(std::make_unique<Function>("f", ctx.func({t}, {t}), Location{}));
    Block *e = f->addBlock(std::make_unique<Block>());
    Value *cur = e->addArgument(t, {});
    cur->setName(argName);
    for (const std::string &n : names) {
      Operation *op = e->push_back(
          Operation::create(OpCode::Neg, {}, {cur}, {t}, defaultAttrs(OpCode::Neg)));
      op->result()->setName(n);
      cur = op->result();
    }
    e->push_back(Operation::create(OpCode::Ret, {}, {cur}, {}, defaultAttrs(OpCode::Ret)));
    return m;
  }
};

TEST_F(PrinterNamesTest, ClashingNamesAreNumbered) {
  std::unique_ptr<Module> m = build({"x", "x"});
  std::string out = printModuleToString(*m);
  EXPECT_EQ(out, "func @f(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
                 "^entry:\n"
                 "  %x = neg %a : tensor<2xf32>\n"
                 "  %x_1 = neg %x : tensor<2xf32>\n"
                 "  ret %x_1\n"
                 "}\n");
  std::unique_ptr<Module> back = parse(out);
  ASSERT_NE(back, nullptr) << allDiags();
  Block *e = back->lookupFunction("f")->entry();
  EXPECT_EQ(nthOp(e, 0)->result()->name(), "x");
  EXPECT_EQ(nthOp(e, 1)->result()->name(), "x_1");
  EXPECT_EQ(nthOp(e, 1)->operand(0), nthOp(e, 0)->result()) << "uses follow the renaming";
  EXPECT_EQ(printModuleToString(*back), out);
}

TEST_F(PrinterNamesTest, InventedNamesAvoidExistingOnes) {
  // "x", "x", "x_1": the second "x" cannot take "x_1", which is spoken for...
  // whichever it gets, all three must be distinct and parse back.
  std::unique_ptr<Module> m = build({"x", "x", "x_1", "a"});
  std::string out = printModuleToString(*m);
  std::unique_ptr<Module> back = parse(out);
  ASSERT_NE(back, nullptr) << allDiags() << out;
  EXPECT_TRUE(succeeded(verifyModule(*back, diag))) << allDiags();
  Block *e = back->lookupFunction("f")->entry();
  std::set<std::string> names = {e->argument(0)->name()};
  for (Operation &op : *e)
    if (op.numResults()) {
      EXPECT_TRUE(names.insert(op.result()->name()).second) << out;
    }
  EXPECT_EQ(names.size(), 5u);
  // The chain of uses is intact: each neg takes the previous value.
  Value *prev = e->argument(0);
  for (Operation &op : *e) {
    EXPECT_EQ(op.operand(0), prev) << out;
    if (op.numResults()) prev = op.result();
  }
  EXPECT_EQ(printModuleToString(*back), out);
}

TEST_F(PrinterNamesTest, UnnamedValuesAndBlocksGetNumbers) {
  std::unique_ptr<Module> m = build({"", ""}, "");
  Function *f = m->lookupFunction("f");
  f->addBlock(std::make_unique<Block>()); // unlabeled, unreachable
  Operation *r = f->blocks()[1]->push_back(
      Operation::create(OpCode::Ret, {}, {f->entry()->argument(0)}, {}, defaultAttrs(OpCode::Ret)));
  (void)r;
  std::string out = printModuleToString(*m);
  EXPECT_NE(out.find("func @f(%0: tensor<2xf32>)"), std::string::npos) << out;
  EXPECT_NE(out.find("%1 = neg %0"), std::string::npos) << out;
  EXPECT_NE(out.find("%2 = neg %1"), std::string::npos) << out;
  EXPECT_NE(out.find("^bb0:\n  ret %0"), std::string::npos) << out;
  std::unique_ptr<Module> back = parse(out);
  ASSERT_NE(back, nullptr) << allDiags() << out;
  EXPECT_EQ(printModuleToString(*back), out);
}

TEST_F(PrinterNamesTest, ClashingBlockLabels) {
  std::unique_ptr<Module> m = build({"y"});
  Function *f = m->lookupFunction("f");
  Block *e = f->entry();
  Block *b1 = f->addBlock(std::make_unique<Block>("entry"));
  Block *b2 = f->addBlock(std::make_unique<Block>("entry"));
  // entry -> b1 -> b2 (ret moves to b2).
  Operation *oldRet = e->terminator();
  Value *y = oldRet->operand(0);
  std::unique_ptr<Operation> retOp = oldRet->remove();
  b2->push_back(std::move(retOp));
  e->push_back(Operation::create(OpCode::Br, {}, {}, {}, defaultAttrs(OpCode::Br), {{b1, 0, 0, ""}}));
  b1->push_back(Operation::create(OpCode::Br, {}, {}, {}, defaultAttrs(OpCode::Br), {{b2, 0, 0, ""}}));
  EXPECT_EQ(b2->front()->operand(0), y);
  std::string out = printModuleToString(*m);
  std::unique_ptr<Module> back = parse(out);
  ASSERT_NE(back, nullptr) << allDiags() << out;
  EXPECT_EQ(back->lookupFunction("f")->blocks().size(), 3u);
  std::set<std::string> labels;
  for (auto &b : back->lookupFunction("f")->blocks()) labels.insert(b->label());
  EXPECT_EQ(labels.size(), 3u) << out;
  EXPECT_EQ(printModuleToString(*back), out);
}

TEST_F(PrinterNamesTest, NamesTheLexerWouldRejectAreRewritten) {
  // Names given through the API are arbitrary strings; printed after `%` they
  // must still lex as one value name.
  std::unique_ptr<Module> m = build({"a b", "a_b", "-x", "x(1)"}, "in put");
  Function *f = m->lookupFunction("f");
  f->entry()->setLabel("my block");
  std::string out = printModuleToString(*m);
  std::unique_ptr<Module> back = parse(out);
  ASSERT_NE(back, nullptr) << allDiags() << out;
  Block *e = back->lookupFunction("f")->entry();
  EXPECT_EQ(e->label(), "my_block");
  EXPECT_EQ(e->argument(0)->name(), "in_put");
  std::vector<std::string> names;
  for (Operation &op : *e)
    if (op.numResults()) names.push_back(op.result()->name());
  EXPECT_EQ(names, (std::vector<std::string>{"a_b", "a_b_1", "_x", "x_1_"})) << out;
  EXPECT_EQ(printModuleToString(*back), out);
}

TEST(Diagnostics, RenderShowsTheLineAndACaret) {
  SourceMgr sm;
  std::string text = "func @f() {\n  %x = frobnicate\n}\n";
  sm.addBuffer("test.nir", text);
  std::ostringstream os;
  DiagnosticEngine diag(&sm, os);
  Context ctx;
  EXPECT_EQ(parseModule(text, "test.nir", ctx, diag), nullptr);
  EXPECT_EQ(diag.errorCount(), 1u);
  EXPECT_EQ(os.str(), "test.nir:2:8: error: unknown operation 'frobnicate'\n"
                      "  %x = frobnicate\n"
                      "       ^\n");
}

TEST(PrintAttr, Forms) {
  EXPECT_EQ(printAttr(Attr::getInts({0, -1})), "[0, -1]");
  EXPECT_EQ(printAttr(Attr::getInts({})), "[]");
  EXPECT_EQ(printAttr(Attr::getBool(true)), "true");
  EXPECT_EQ(printAttr(Attr::getStr("a\"b")), "\"a\\\"b\"");
  EXPECT_EQ(printAttr(Attr::getSym("f")), "@f");
  EXPECT_EQ(printAttr(Attr::getDType(DType::BF16)), "bf16");
  EXPECT_EQ(printAttr(Attr::getFloat(2.0)), "2.0");
  EXPECT_EQ(printAttr(Attr::getFloat(1e-5)), "1e-05");
  DenseValue v;
  v.dtype = DType::I32;
  v.shape = {2, 1};
  v.appendInt(4);
  v.appendInt(-5);
  EXPECT_EQ(printLiteral(v), "[[4], [-5]]");
}

} // namespace
} // namespace nimble::ir
