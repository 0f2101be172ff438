//===- ShapeFnsTest.cpp - Type relations and shape functions --------------===//
//
// nimble::inferShapes over static and `?` dimensions. The `?` rules are the
// Nimble paper's (§3.1): broadcast(?, 1) = ?, broadcast(?, d) = d for d > 1
// with a run-time check, broadcast(?, ?) = ? with a run-time check; equality
// constraints with a `?` side are deferred. Data-dependent ops (§3.2) use
// operand values when they are known; upper-bound ops set `upperBound`.
// Expected shapes below are worked out by hand from numpy semantics.
//
//===----------------------------------------------------------------------===//

#include "ir/ShapeFns.h"
#include "test/unit/ShapeFnsTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

namespace nimble {
namespace {

using namespace shapefns_test;

//===-- Formatting --------------------------------------------------------===//

TEST(ShapeFns, Formatting) {
  EXPECT_EQ(formatDims({}), "scalar");
  EXPECT_EQ(formatDims({2, Q, 3}), "2x?x3");
  EXPECT_EQ(formatSig(F({2, Q})), "tensor<2x?xf32>");
  EXPECT_EQ(formatSig(I64({})), "tensor<i64>");
}

//===-- Broadcasting (paper §3.1) -----------------------------------------===//

TEST(Broadcast, AnyWithOneIsAny) {
  ShapeFnResult r = run(OpCode::Add, {F({Q}), F({1})});
  EXPECT_OK_SIG(r, F({Q}));
  EXPECT_TRUE(r.deferred.empty()) << "?, 1 needs no run-time check";
  ShapeFnResult r2 = run(OpCode::Add, {F({1}), F({Q})});
  EXPECT_OK_SIG(r2, F({Q}));
  EXPECT_TRUE(r2.deferred.empty());
}

TEST(Broadcast, AnyWithStaticTakesTheStaticSizeAndDefersACheck) {
  ShapeFnResult r = run(OpCode::Add, {F({Q, 4}), F({3, 4})});
  EXPECT_OK_SIG(r, F({3, 4}));
  ASSERT_EQ(r.deferred.size(), 1u);
  EXPECT_TRUE(has(r.deferred[0], "dimension 0")) << r.deferred[0];
  EXPECT_TRUE(has(r.deferred[0], "1 or 3")) << r.deferred[0];
  // Order does not matter.
  ShapeFnResult r2 = run(OpCode::Mul, {F({3, 4}), F({Q, 4})});
  EXPECT_OK_SIG(r2, F({3, 4}));
  EXPECT_EQ(r2.deferred.size(), 1u);
}

TEST(Broadcast, AnyWithAnyIsAnyAndDeferred) {
  ShapeFnResult r = run(OpCode::Sub, {F({Q, 2}), F({Q, 2})});
  EXPECT_OK_SIG(r, F({Q, 2}));
  ASSERT_EQ(r.deferred.size(), 1u);
  EXPECT_TRUE(has(r.deferred[0], "both ?")) << r.deferred[0];
}

TEST(Broadcast, StaticRules) {
  EXPECT_OK_SIG(run(OpCode::Add, {F({2, 1}), F({1, 3})}), F({2, 3}));
  EXPECT_OK_SIG(run(OpCode::Add, {F({1}), F({5})}), F({5}));
  EXPECT_OK_SIG(run(OpCode::Add, {F({}), F({})}), F({}));
  EXPECT_OK_SIG(run(OpCode::Add, {F({0}), F({1})}), F({0}));
  EXPECT_TRUE(run(OpCode::Add, {F({2, 3}), F({2, 3})}).deferred.empty());
}

TEST(Broadcast, RankExtension) {
  EXPECT_OK_SIG(run(OpCode::Add, {F({5, 1, 3}), F({4, 1})}), F({5, 4, 3}));
  EXPECT_OK_SIG(run(OpCode::Add, {F({}), F({2, 3})}), F({2, 3}));
  EXPECT_OK_SIG(run(OpCode::Add, {F({3}), F({Q, 1})}), F({Q, 3}));
  ShapeFnResult r = run(OpCode::Maximum, {F({Q}), F({7, 1, 4})});
  EXPECT_OK_SIG(r, F({7, 1, 4}));
  EXPECT_EQ(r.deferred.size(), 1u);
}

TEST(Broadcast, MixedAnyNeedsNoCheckWhenTheOtherSideIsOne) {
  ShapeFnResult r = run(OpCode::Add, {F({Q, 1}), F({1, Q})});
  EXPECT_OK_SIG(r, F({Q, Q}));
  EXPECT_TRUE(r.deferred.empty());
}

TEST(Broadcast, StaticConflictIsAnErrorNamingBothShapes) {
  ShapeFnResult r = run(OpCode::Add, {F({2, 3}), F({4, 3})});
  EXPECT_ERROR(r, "operands are not broadcast-compatible: dimension 0 is 2 in operand 0 and 4 "
                  "in operand 1 (2x3 vs 4x3)",
               1);
  // Rank-extended positions are numbered in the result.
  ShapeFnResult r2 = run(OpCode::Add, {F({5, 2}), F({3})});
  EXPECT_ERROR(r2, "dimension 1 is 2 in operand 0 and 3 in operand 1", 1);
}

TEST(Broadcast, ElementTypesMustMatch) {
  ShapeFnResult r = run(OpCode::Add, {F({2}), T(DType::I32, {2})});
  EXPECT_ERROR(r, "operand 1 has element type i32 but operand 0 has f32", 1);
}

TEST(Compare, ProducesI1) {
  ShapeFnResult r = run(OpCode::Less, {F({2, Q}), F({2, 1})});
  EXPECT_OK_SIG(r, B({2, Q}));
  EXPECT_OK_SIG(run(OpCode::Equal, {I64({}), I64({})}), B({}));
  EXPECT_OK_SIG(run(OpCode::GreaterEqual, {T(DType::I8, {3}), T(DType::I8, {1})}), B({3}));
  // equal accepts any element type, ordering comparisons do not take i1.
  EXPECT_OK_SIG(run(OpCode::NotEqual, {B({2}), B({2})}), B({2}));
  EXPECT_ERROR(run(OpCode::Less, {B({2}), B({2})}), "numeric element type (not i1)", 0);
}

TEST(DTypeRules, AreEnforcedPerOperand) {
  EXPECT_ERROR(run(OpCode::Exp, {I64({3})}),
               "operand 0 must have a floating-point element type (f16, bf16, f32, f64), got "
               "tensor<3xi64>",
               0);
  EXPECT_OK_SIG(run(OpCode::Exp, {T(DType::BF16, {3})}), T(DType::BF16, {3}));
  EXPECT_ERROR(run(OpCode::Neg, {B({})}), "numeric element type", 0);
  EXPECT_OK_SIG(run(OpCode::Relu, {T(DType::I32, {Q})}), T(DType::I32, {Q}));
  EXPECT_ERROR(run(OpCode::LogicalAnd, {F({2}), F({2})}), "element type i1", 0);
  EXPECT_OK_SIG(run(OpCode::LogicalOr, {B({2}), B({1})}), B({2}));
  EXPECT_ERROR(run(OpCode::LogicalNot, {T(DType::I8, {})}), "element type i1", 0);
  // The second operand is checked too.
  EXPECT_ERROR(run(OpCode::Pow, {F({2}), I64({2})}), "operand 1 must have a floating-point", 1);
  EXPECT_ERROR(run(OpCode::Mean, {T(DType::I32, {4})}), "floating-point", 0);
}

TEST(OperandCount, IsChecked) {
  EXPECT_ERROR(run(OpCode::Add, {F({2})}), "expects 2 operands, got 1", -1);
  EXPECT_ERROR(run(OpCode::Concat, {}), "expects at least 1 operands, got 0", -1);
}

//===-- select / cast -------------------------------------------------------===//

TEST(Select, BroadcastsAllThree) {
  ShapeFnResult r = run(OpCode::Select, {B({Q, 1}), F({1, 4}), F({3, 1})});
  EXPECT_OK_SIG(r, F({3, 4}));
  EXPECT_EQ(r.deferred.size(), 1u); // ? against 3
  EXPECT_ERROR(run(OpCode::Select, {F({2}), F({2}), F({2})}),
               "condition (operand 0) must have element type i1", 0);
  EXPECT_ERROR(run(OpCode::Select, {B({2}), F({2}), I64({2})}),
               "operand 2 has element type i64 but operand 1 has f32", 2);
}

TEST(Select, ConflictNamesTheOperandThatFixedTheSize) {
  // Dimension 0: `?` from the condition, 3 from operand 1, 4 from operand 2.
  // The message must blame operand 1 (the 3), not the condition.
  ShapeFnResult r = run(OpCode::Select, {B({Q}), F({3}), F({4})});
  EXPECT_ERROR(r, "dimension 0 is 3 in operand 1 and 4 in operand 2 (3 vs 4)", 2);
}

TEST(Cast, ChangesOnlyTheElementType) {
  EXPECT_OK_SIG(run(OpCode::Cast, {F({2, Q})}, {{"dtype", Attr::getDType(DType::I8)}}),
                T(DType::I8, {2, Q}));
  EXPECT_OK_SIG(run(OpCode::Cast, {B({})}, {{"dtype", Attr::getDType(DType::F16)}}),
                T(DType::F16, {}));
}

//===-- matmul / batch_matmul ------------------------------------------------===//

Attr t() { return Attr::getBool(true); }

TEST(MatMul, Shapes) {
  EXPECT_OK_SIG(run(OpCode::MatMul, {F({2, 3}), F({3, 4})}), F({2, 4}));
  EXPECT_OK_SIG(run(OpCode::MatMul, {F({3, 2}), F({3, 4})}, {{"transpose_a", t()}}), F({2, 4}));
  EXPECT_OK_SIG(run(OpCode::MatMul, {F({2, 3}), F({4, 3})}, {{"transpose_b", t()}}), F({2, 4}));
  EXPECT_OK_SIG(run(OpCode::MatMul, {F({3, 2}), F({4, 3})},
                    {{"transpose_a", t()}, {"transpose_b", t()}}),
                F({2, 4}));
  ShapeFnResult r = run(OpCode::MatMul, {F({Q, 3}), F({3, Q})});
  EXPECT_OK_SIG(r, F({Q, Q}));
  EXPECT_TRUE(r.deferred.empty());
}

TEST(MatMul, InnerDimensionMismatch) {
  EXPECT_ERROR(run(OpCode::MatMul, {F({2, 3}), F({5, 4})}),
               "the contracted dimensions of lhs and rhs must be equal, got 3 (lhs 2x3) and 5 (rhs 5x4)", 1);
  // Without the transpose the shapes do not fit.
  EXPECT_FALSE(run(OpCode::MatMul, {F({2, 3}), F({4, 3})}).ok());
}

TEST(MatMul, AnyInnerDimensionIsDeferred) {
  ShapeFnResult r = run(OpCode::MatMul, {F({2, Q}), F({3, 4})});
  EXPECT_OK_SIG(r, F({2, 4}));
  ASSERT_EQ(r.deferred.size(), 1u);
  EXPECT_TRUE(has(r.deferred[0], "contracted dimensions")) << r.deferred[0];
  ShapeFnResult r2 = run(OpCode::MatMul, {F({2, Q}), F({Q, 4})});
  EXPECT_OK_SIG(r2, F({2, 4}));
  ASSERT_EQ(r2.deferred.size(), 1u);
  EXPECT_TRUE(has(r2.deferred[0], "both ?")) << r2.deferred[0];
}

TEST(MatMul, RankAndTypeErrors) {
  EXPECT_ERROR(run(OpCode::MatMul, {F({2, 3, 4}), F({4, 5})}), "lhs must have rank 2", 0);
  EXPECT_ERROR(run(OpCode::MatMul, {F({2, 3}), F({3})}), "rhs must have rank 2", 1);
  EXPECT_ERROR(run(OpCode::MatMul, {F({2, 3}), T(DType::F16, {3, 4})}), "element type f16", 1);
  EXPECT_ERROR(run(OpCode::MatMul, {B({2, 3}), B({3, 4})}), "numeric", 0);
}

TEST(BatchMatMul, BatchDimensionsBroadcast) {
  EXPECT_OK_SIG(run(OpCode::BatchMatMul, {F({5, 2, 3}), F({5, 3, 4})}), F({5, 2, 4}));
  EXPECT_OK_SIG(run(OpCode::BatchMatMul, {F({1, 2, 3}), F({7, 3, 4})}), F({7, 2, 4}));
  EXPECT_OK_SIG(run(OpCode::BatchMatMul, {F({6, 2, 3}), F({6, 4, 3})}, {{"transpose_b", t()}}),
                F({6, 2, 4}));
  ShapeFnResult r = run(OpCode::BatchMatMul, {F({2, Q, 2, 3}), F({1, 5, 3, 4})});
  EXPECT_OK_SIG(r, F({2, 5, 2, 4}));
  ASSERT_EQ(r.deferred.size(), 1u);
  EXPECT_TRUE(has(r.deferred[0], "batch")) << r.deferred[0];
  ShapeFnResult r2 = run(OpCode::BatchMatMul, {F({Q, 2, Q}), F({Q, 3, 4})});
  EXPECT_OK_SIG(r2, F({Q, 2, 4}));
  EXPECT_EQ(r2.deferred.size(), 2u); // the inner dim and the batch dim (both ?)
}

TEST(BatchMatMul, Errors) {
  EXPECT_ERROR(run(OpCode::BatchMatMul, {F({2, 2, 3}), F({3, 3, 4})}),
               "batch dimensions: operands are not broadcast-compatible", -1);
  EXPECT_ERROR(run(OpCode::BatchMatMul, {F({2, 3}), F({3, 4})}), "lhs must have rank >= 3", 0);
  EXPECT_ERROR(run(OpCode::BatchMatMul, {F({2, 2, 3}), F({1, 2, 3, 4})}),
               "rhs must have the rank of lhs (3)", 1);
  EXPECT_ERROR(run(OpCode::BatchMatMul, {F({2, 2, 3}), F({2, 4, 4})}),
               "must be equal, got 3 (lhs 2x2x3) and 4 (rhs 2x4x4)", 1);
}

//===-- Reductions ---------------------------------------------------------===//

TEST(Reduce, AxesAndKeepdims) {
  EXPECT_OK_SIG(run(OpCode::Sum, {F({2, 3, 4})}), F({}));
  EXPECT_OK_SIG(run(OpCode::Sum, {F({2, 3, 4})}, {{"keepdims", t()}}), F({1, 1, 1}));
  EXPECT_OK_SIG(run(OpCode::Sum, {F({2, 3, 4})}, {{"axes", ints({1})}}), F({2, 4}));
  EXPECT_OK_SIG(run(OpCode::Sum, {F({2, 3, 4})}, {{"axes", ints({1})}, {"keepdims", t()}}),
                F({2, 1, 4}));
  EXPECT_OK_SIG(run(OpCode::Max, {F({2, 3, 4})}, {{"axes", ints({-1})}}), F({2, 3}));
  EXPECT_OK_SIG(run(OpCode::Min, {T(DType::I32, {2, 3, 4})},
                    {{"axes", ints({0, -1})}, {"keepdims", t()}}),
                T(DType::I32, {1, 3, 1}));
  EXPECT_OK_SIG(run(OpCode::Mean, {F({Q, 5})}, {{"axes", ints({1})}}), F({Q}));
  EXPECT_OK_SIG(run(OpCode::Sum, {F({Q, 5})}, {{"axes", ints({0})}}), F({5}));
}

TEST(Reduce, AxisErrors) {
  EXPECT_ERROR(run(OpCode::Sum, {F({2, 3, 4})}, {{"axes", ints({3})}}),
               "axis 3 is out of range for rank 3", -1);
  EXPECT_ERROR(run(OpCode::Sum, {F({2, 3, 4})}, {{"axes", ints({-4})}}),
               "axis -4 is out of range for rank 3", -1);
  EXPECT_ERROR(run(OpCode::Sum, {F({2, 3, 4})}, {{"axes", ints({1, -2})}}),
               "axis -2 is listed twice", -1);
  EXPECT_ERROR(run(OpCode::Sum, {B({2})}), "numeric", 0);
}

TEST(ArgMax, ProducesI64) {
  EXPECT_OK_SIG(run(OpCode::ArgMax, {F({2, 3, 4})}), I64({2, 3}));
  EXPECT_OK_SIG(run(OpCode::ArgMax, {T(DType::I8, {2, 3, 4})}, {{"axis", i(1)}, {"keepdims", t()}}),
                I64({2, 1, 4}));
  EXPECT_OK_SIG(run(OpCode::ArgMax, {F({Q, 7})}, {{"axis", i(0)}}), I64({7}));
  EXPECT_ERROR(run(OpCode::ArgMax, {F({2, 3})}, {{"axis", i(2)}}), "axis 2 is out of range", -1);
}

TEST(Softmax, KeepsShapeAndChecksAxis) {
  EXPECT_OK_SIG(run(OpCode::Softmax, {F({Q, 10})}), F({Q, 10}));
  EXPECT_ERROR(run(OpCode::Softmax, {F({2, 10})}, {{"axis", i(2)}}), "axis 2 is out of range", -1);
  EXPECT_ERROR(run(OpCode::Softmax, {I64({2})}), "floating-point", 0);
}

TEST(LayerNorm, NormalisesOverTheLastAxis) {
  EXPECT_OK_SIG(run(OpCode::LayerNorm, {F({2, Q, 8}), F({8}), F({8})}), F({2, Q, 8}));
  ShapeFnResult r = run(OpCode::LayerNorm, {F({2, 8}), F({Q}), F({8})});
  EXPECT_OK_SIG(r, F({2, 8}));
  EXPECT_EQ(r.deferred.size(), 1u);
  ShapeFnResult r2 = run(OpCode::LayerNorm, {F({2, Q}), F({8}), F({8})});
  EXPECT_OK_SIG(r2, F({2, Q}));
  EXPECT_EQ(r2.deferred.size(), 2u); // gamma and beta against `?`
  // The operand at fault is named.
  EXPECT_ERROR(run(OpCode::LayerNorm, {F({2, 8}), F({7}), F({8})}),
               "gamma size and the last dimension must be equal, got 7 and 8", 1);
  EXPECT_ERROR(run(OpCode::LayerNorm, {F({2, 8}), F({8}), F({9})}),
               "beta size and the last dimension must be equal, got 9 and 8", 2);
  EXPECT_ERROR(run(OpCode::LayerNorm, {F({2, 8}), F({1, 8}), F({8})}),
               "gamma (operand 1) must have rank 1", 1);
  EXPECT_ERROR(run(OpCode::LayerNorm, {F({2, 8}), F({8}), T(DType::F16, {8})}), "f16", 2);
  EXPECT_ERROR(run(OpCode::LayerNorm, {F({}), F({1}), F({1})}), "input must have rank >= 1", 0);
}

//===-- attention ------------------------------------------------------------===//

TEST(Attention, HeadsByStrides) {
  // BERT: q, k, v token-major (m x H x D), the result m x H x E.
  EXPECT_OK_SIG(run(OpCode::Attention, {F({Q, 12, 64}), F({Q, 12, 64}), F({Q, 12, 64})}), F({Q, 12, 64}));
  EXPECT_OK_SIG(run(OpCode::Attention, {F({3, 2, 4}), F({5, 2, 4}), F({5, 2, 7}), F({2, 1, 5})}), F({3, 2, 7}));
  // A key mask (rank 1) whose ? meets the keys' ?: checked at run time.
  ShapeFnResult r = run(OpCode::Attention, {F({Q, 2, 4}), F({Q, 2, 4}), F({Q, 2, 4}), F({Q})});
  EXPECT_OK_SIG(r, F({Q, 2, 4}));
  EXPECT_FALSE(r.deferred.empty());
}

TEST(Attention, Errors) {
  EXPECT_ERROR(run(OpCode::Attention, {F({3, 2, 4}), F({5, 3, 4}), F({5, 3, 4})}),
               "the heads of q and k (dim 1) must be equal, got 2 and 3", 1);
  EXPECT_ERROR(run(OpCode::Attention, {F({3, 2, 4}), F({5, 2, 8}), F({5, 2, 4})}),
               "the head size of q and k (dim 2) must be equal, got 4 and 8", 1);
  EXPECT_ERROR(run(OpCode::Attention, {F({3, 2, 4}), F({5, 2, 4}), F({6, 2, 4})}),
               "the keys of k and v (dim 0) must be equal, got 5 and 6", 2);
  EXPECT_ERROR(run(OpCode::Attention, {F({3, 2, 4}), F({5, 2, 4}), F({5, 2, 4}), F({4})}),
               "does not broadcast to the scores 2x3x5", 3);
  EXPECT_ERROR(run(OpCode::Attention, {F({3, 2, 4}), F({5, 2, 4}), F({5, 2, 4}), F({1, 2, 3, 5})}),
               "mask must have rank <= 3", 3);
  EXPECT_ERROR(run(OpCode::Attention, {F({3, 8}), F({5, 2, 4}), F({5, 2, 4})}), "q (operand 0) must have rank 3", 0);
  EXPECT_ERROR(run(OpCode::Attention, {T(DType::I32, {1, 1, 4}), T(DType::I32, {1, 1, 4}), T(DType::I32, {1, 1, 4})}),
               "floating-point", 0);
}

//===-- conv / max_pool / avg_pool -----------------------------------------===//

Attr b(bool v) { return Attr::getBool(v); }

TEST(Conv, OutputSizes) {
  // ResNet's stem: 7x7, stride 2, padding 3: 224 -> 112.
  EXPECT_OK_SIG(run(OpCode::Conv, {F({1, 3, 224, 224}), F({64, 3, 7, 7}), F({64})},
                    {{"strides", ints({2, 2})}, {"pads", ints({3, 3, 3, 3})}}),
                F({1, 64, 112, 112}));
  // Dilation and asymmetric padding, 1-D: (10 + 1 + 0 - (2*2+1)) / 3 + 1 = 3.
  EXPECT_OK_SIG(run(OpCode::Conv, {F({2, 4, 10}), F({6, 4, 3})},
                    {{"strides", ints({3})}, {"pads", ints({1, 0})}, {"dilations", ints({2})}}),
                F({2, 6, 3}));
  // Depthwise: groups = channels, weights dim 1 = 1.
  EXPECT_OK_SIG(run(OpCode::Conv, {F({1, 32, 8, 8}), F({32, 1, 3, 3})}, {{"groups", i(32)}}), F({1, 32, 6, 6}));
}

TEST(Conv, ChannelsLast) {
  // N x H x W x C in and out (the convert-layout pass); the weights keep M x C x K..
  EXPECT_OK_SIG(run(OpCode::Conv, {F({1, 224, 224, 3}), F({64, 3, 7, 7}), F({64})},
                    {{"strides", ints({2, 2})}, {"pads", ints({3, 3, 3, 3})}, {"channels_last", b(true)}}),
                F({1, 112, 112, 64}));
  EXPECT_ERROR(run(OpCode::Conv, {F({1, 8, 8, 3}), F({4, 4, 3, 3})}, {{"channels_last", b(true)}}),
               "the input channels and weights dim 1 times groups", 1);
  EXPECT_OK_SIG(run(OpCode::MaxPool, {F({Q, 112, 112, 64})},
                    {{"kernel", ints({3, 3})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})},
                     {"channels_last", b(true)}}),
                F({Q, 56, 56, 64}));
}

TEST(Conv, DynamicDimsDefer) {
  ShapeFnResult r = run(OpCode::Conv, {F({Q, Q, Q, 9}), F({8, 4, 3, 3}), F({8})}, {{"pads", ints({1, 1, 1, 1})}});
  EXPECT_OK_SIG(r, F({Q, 8, Q, 9}));
  EXPECT_EQ(r.deferred.size(), 2u); // the channels, the window along the ? axis
}

TEST(Conv, Errors) {
  EXPECT_ERROR(run(OpCode::Conv, {F({1, 3, 8, 8}), F({4, 2, 3, 3})}),
               "the input channels and weights dim 1 times groups must be equal, got 3 and 2", 1);
  EXPECT_ERROR(run(OpCode::Conv, {F({1, 4, 8, 8}), F({3, 2, 3, 3})}, {{"groups", i(2)}}),
               "must be a multiple of groups", 1);
  EXPECT_ERROR(run(OpCode::Conv, {F({1, 3, 8, 8}), F({4, 3, 3, 3}), F({5})}),
               "the bias size and the output channels must be equal, got 5 and 4", 2);
  EXPECT_ERROR(run(OpCode::Conv, {F({1, 3, 2, 2}), F({4, 3, 3, 3})}), "is larger than the padded input (2 + 0)", 0);
  EXPECT_ERROR(run(OpCode::Conv, {F({1, 3, 8, 8}), F({4, 3, 3, 3})}, {{"strides", ints({1})}}),
               "strides must have 2 entries", -1);
  EXPECT_ERROR(run(OpCode::Conv, {F({1, 3, 8, 8}), F({4, 3, 3, 3})}, {{"pads", ints({1, 1, -1, 1})}}),
               "pads entries must be non-negative", -1);
  EXPECT_ERROR(run(OpCode::Conv, {F({1, 3, 8, 8}), F({4, 3, 3, 3})}, {{"groups", i(0)}}), "groups must be positive",
               -1);
  EXPECT_ERROR(run(OpCode::Conv, {F({3, 8}), F({4, 3})}), "input must have rank >= 3", 0);
  EXPECT_ERROR(run(OpCode::Conv, {T(DType::I32, {1, 1, 4}), T(DType::I32, {1, 1, 2})}), "floating-point", 0);
}

TEST(Pool, CeilModeDropsAWindowStartingInThePadding) {
  // 5 + 1 + 1 - 2 = 5: ceil(5/2) + 1 = 4, but window 3 would start at
  // 3*2 - 1 = 5, past the input: 3.
  EXPECT_OK_SIG(run(OpCode::MaxPool, {F({1, 1, 5})},
                    {{"kernel", ints({2})}, {"strides", ints({2})}, {"pads", ints({1, 1})}, {"ceil_mode", b(true)}}),
                F({1, 1, 3}));
  EXPECT_OK_SIG(run(OpCode::AvgPool, {F({1, 2, 4, 4})}, {{"kernel", ints({3, 3})}, {"strides", ints({2, 2})},
                                                         {"ceil_mode", b(true)}}),
                F({1, 2, 2, 2}));
  EXPECT_OK_SIG(run(OpCode::MaxPool, {F({Q, 64, 112, Q})},
                    {{"kernel", ints({3, 3})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}}),
                F({Q, 64, 56, Q}));
  EXPECT_ERROR(run(OpCode::MaxPool, {F({1, 1, 5})}, {{"kernel", ints({2, 2})}}), "kernel must have 1 entries", -1);
  EXPECT_ERROR(run(OpCode::MaxPool, {F({1, 1, 5})}, {{"kernel", ints({0})}}), "kernel entries must be positive", -1);
  EXPECT_ERROR(run(OpCode::AvgPool, {T(DType::I32, {1, 1, 5})}, {{"kernel", ints({2})}}), "floating-point", 0);
  EXPECT_OK_SIG(run(OpCode::MaxPool, {T(DType::I8, {1, 1, 5})}, {{"kernel", ints({2})}}), T(DType::I8, {1, 1, 4}));
}

//===-- reshape / dyn_reshape ----------------------------------------------===//

TEST(Reshape, Static) {
  EXPECT_OK_SIG(run(OpCode::Reshape, {F({2, 3, 4})}, {{"shape", ints({4, 6})}}), F({4, 6}));
  EXPECT_OK_SIG(run(OpCode::Reshape, {F({2, 3, 4})}, {{"shape", ints({6, -1})}}), F({6, 4}));
  EXPECT_OK_SIG(run(OpCode::Reshape, {F({2, 3, 4})}, {{"shape", ints({-1})}}), F({24}));
  EXPECT_OK_SIG(run(OpCode::Reshape, {F({1})}, {{"shape", ints({})}}), F({}));
  EXPECT_TRUE(run(OpCode::Reshape, {F({2, 3})}, {{"shape", ints({3, 2})}}).deferred.empty());
}

TEST(Reshape, ElementCountErrors) {
  EXPECT_ERROR(run(OpCode::Reshape, {F({2, 3, 4})}, {{"shape", ints({5, 5})}}),
               "cannot reshape 2x3x4 (24 elements) to 5x5 (25 elements)", -1);
  EXPECT_ERROR(run(OpCode::Reshape, {F({2, 3, 4})}, {{"shape", ints({5, -1})}}),
               "cannot reshape 2x3x4 (24 elements)", -1);
  EXPECT_ERROR(run(OpCode::Reshape, {F({6})}, {{"shape", ints({-1, -1})}}),
               "at most one -1", -1);
  EXPECT_ERROR(run(OpCode::Reshape, {F({6})}, {{"shape", ints({-2, 3})}}),
               "shape entry -2 is negative", -1);
}

TEST(Reshape, WithAnyInput) {
  ShapeFnResult r = run(OpCode::Reshape, {F({Q, 4})}, {{"shape", ints({-1, 2})}});
  EXPECT_OK_SIG(r, F({Q, 2}));
  ASSERT_EQ(r.deferred.size(), 1u);
  EXPECT_TRUE(has(r.deferred[0], "multiple of 2")) << r.deferred[0];
  ShapeFnResult r2 = run(OpCode::Reshape, {F({Q, 4})}, {{"shape", ints({8})}});
  EXPECT_OK_SIG(r2, F({8}));
  ASSERT_EQ(r2.deferred.size(), 1u);
  EXPECT_TRUE(has(r2.deferred[0], "must be 8")) << r2.deferred[0];
}

TEST(DynReshape, KnownShapeValueActsLikeReshape) {
  DenseValue s = val(DType::I64, {3, 2});
  ShapeFnResult r = run(OpCode::DynReshape, {F({2, 3}), I64({2})}, {}, {nullptr, &s});
  EXPECT_OK_SIG(r, F({3, 2}));
  EXPECT_TRUE(r.deferred.empty());
  DenseValue inf = val(DType::I64, {-1, 2});
  EXPECT_OK_SIG(run(OpCode::DynReshape, {F({2, 3}), I64({2})}, {}, {nullptr, &inf}), F({3, 2}));
  DenseValue i32 = val(DType::I32, {6});
  EXPECT_OK_SIG(run(OpCode::DynReshape, {F({2, 3}), T(DType::I32, {1})}, {}, {nullptr, &i32}),
                F({6}));
  DenseValue bad = val(DType::I64, {4, 4});
  EXPECT_ERROR(run(OpCode::DynReshape, {F({2, 3}), I64({2})}, {}, {nullptr, &bad}),
               "cannot reshape 2x3 (6 elements) to 4x4 (16 elements)", 1);
  // Known target, `?` input: the static relation defers the count check.
  ShapeFnResult r2 = run(OpCode::DynReshape, {F({Q, 3}), I64({2})}, {}, {nullptr, &inf});
  EXPECT_OK_SIG(r2, F({Q, 2}));
  EXPECT_EQ(r2.deferred.size(), 1u);
}

TEST(DynReshape, UnknownShapeValue) {
  ShapeFnResult r = run(OpCode::DynReshape, {F({2, 3}), I64({3})});
  EXPECT_OK_SIG(r, F({Q, Q, Q}));
  EXPECT_EQ(r.deferred.size(), 1u);
  EXPECT_ERROR(run(OpCode::DynReshape, {F({2, 3}), I64({Q})}), "static length", 1);
  EXPECT_ERROR(run(OpCode::DynReshape, {F({2, 3}), F({2})}), "must be a 1-D integer tensor", 1);
  EXPECT_ERROR(run(OpCode::DynReshape, {F({2, 3}), I64({2, 1})}), "must be a 1-D integer tensor",
               1);
}

//===-- transpose / concat / split ------------------------------------------===//

TEST(Transpose, Perms) {
  EXPECT_OK_SIG(run(OpCode::Transpose, {F({2, 3, 4})}), F({4, 3, 2}));
  EXPECT_OK_SIG(run(OpCode::Transpose, {F({2, 3, 4})}, {{"perm", ints({1, 0, 2})}}), F({3, 2, 4}));
  EXPECT_OK_SIG(run(OpCode::Transpose, {F({2, 3, 4})}, {{"perm", ints({-1, 0, 1})}}),
                F({4, 2, 3}));
  EXPECT_OK_SIG(run(OpCode::Transpose, {F({Q, 5})}), F({5, Q}));
  EXPECT_OK_SIG(run(OpCode::Transpose, {F({})}), F({}));
}

TEST(Transpose, InvalidPerms) {
  EXPECT_ERROR(run(OpCode::Transpose, {F({2, 3, 4})}, {{"perm", ints({0, 0, 1})}}),
               "is not a permutation", -1);
  EXPECT_ERROR(run(OpCode::Transpose, {F({2, 3, 4})}, {{"perm", ints({2, -1, 0})}}),
               "is not a permutation", -1); // -1 is 2 again
  EXPECT_ERROR(run(OpCode::Transpose, {F({2, 3, 4})}, {{"perm", ints({0, 1})}}),
               "perm [0, 1] has 2 entries but the input has rank 3", -1);
  EXPECT_ERROR(run(OpCode::Transpose, {F({2, 3, 4})}, {{"perm", ints({0, 1, 3})}}),
               "perm entry 3 is out of range for rank 3", -1);
}

TEST(Concat, SumsTheAxis) {
  EXPECT_OK_SIG(run(OpCode::Concat, {F({2, 3}), F({4, 3})}), F({6, 3}));
  EXPECT_OK_SIG(run(OpCode::Concat, {F({2, 3}), F({2, 5})}, {{"axis", i(1)}}), F({2, 8}));
  EXPECT_OK_SIG(run(OpCode::Concat, {F({2, 3}), F({2, 4})}, {{"axis", i(-1)}}), F({2, 7}));
  EXPECT_OK_SIG(run(OpCode::Concat, {F({1, 3}), F({2, 3}), F({3, 3})}), F({6, 3}));
  EXPECT_OK_SIG(run(OpCode::Concat, {F({2, 3})}), F({2, 3}));
}

TEST(Concat, AnyPropagates) {
  ShapeFnResult r = run(OpCode::Concat, {F({Q, 3}), F({4, 3})});
  EXPECT_OK_SIG(r, F({Q, 3}));
  EXPECT_TRUE(r.deferred.empty()) << "the concatenated axis needs no check";
  ShapeFnResult r2 = run(OpCode::Concat, {F({2, Q}), F({4, 3})});
  EXPECT_OK_SIG(r2, F({6, 3}));
  ASSERT_EQ(r2.deferred.size(), 1u);
  EXPECT_TRUE(has(r2.deferred[0], "dimension 1 of operand 1 and operand 0")) << r2.deferred[0];
}

TEST(Concat, Mismatches) {
  EXPECT_ERROR(run(OpCode::Concat, {F({2, 3}), F({4, 5})}),
               "dimension 1 of operand 1 and operand 0 must be equal, got 5 and 3", 1);
  EXPECT_ERROR(run(OpCode::Concat, {F({2, 3}), F({2, 3}), F({2, 4})}), "got 4 and 3", 2);
  EXPECT_ERROR(run(OpCode::Concat, {F({2, 3}), F({2})}),
               "operand 1 has rank 1 but operand 0 has rank 2", 1);
  EXPECT_ERROR(run(OpCode::Concat, {F({2}), F({2}), I64({2})}), "element type i64", 2);
  EXPECT_ERROR(run(OpCode::Concat, {F({2}), F({2})}, {{"axis", i(1)}}),
               "axis 1 is out of range for rank 1", -1);
}

TEST(Split, EqualSections) {
  ShapeFnResult r = run(OpCode::Split, {F({6, 4})}, {{"sections", i(3)}});
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_EQ(r.results.size(), 3u);
  for (const TensorSig &s : r.results) EXPECT_EQ(formatSig(s), "tensor<2x4xf32>");
  ShapeFnResult r2 = run(OpCode::Split, {F({6, 4})}, {{"axis", i(-1)}, {"sections", i(2)}});
  ASSERT_EQ(r2.results.size(), 2u);
  EXPECT_EQ(formatSig(r2.results[1]), "tensor<6x2xf32>");
  ShapeFnResult r3 = run(OpCode::Split, {F({Q, 4})}, {{"sections", i(2)}});
  ASSERT_EQ(r3.results.size(), 2u);
  EXPECT_EQ(formatSig(r3.results[0]), "tensor<?x4xf32>");
  ASSERT_EQ(r3.deferred.size(), 1u);
  EXPECT_TRUE(has(r3.deferred[0], "divisible by 2")) << r3.deferred[0];
  EXPECT_ERROR(run(OpCode::Split, {F({5, 4})}, {{"sections", i(2)}}),
               "dimension 0 (5) is not divisible into 2 sections", -1);
  EXPECT_ERROR(run(OpCode::Split, {F({4})}, {{"sections", i(0)}}), "sections must be positive",
               -1);
}

//===-- slice / dynamic_slice / take ------------------------------------------===//

ShapeFnResult slice(TensorSig x, std::vector<int64_t> axes, std::vector<int64_t> starts,
                    std::vector<int64_t> ends) {
  return run(OpCode::Slice, {std::move(x)},
             {{"axes", ints(axes)}, {"starts", ints(starts)}, {"ends", ints(ends)}});
}

TEST(Slice, NumpySemantics) {
  EXPECT_OK_SIG(slice(F({10, 20}), {0}, {2}, {5}), F({3, 20}));
  // x[:, -5:-1] of width 20: 15..19.
  EXPECT_OK_SIG(slice(F({10, 20}), {1}, {-5}, {-1}), F({10, 4}));
  // Ends clamp to the dimension, starts below -d clamp to 0.
  EXPECT_OK_SIG(slice(F({10, 20}), {0}, {2}, {100}), F({8, 20}));
  EXPECT_OK_SIG(slice(F({10, 20}), {0}, {-100}, {3}), F({3, 20}));
  // start >= end is empty, not negative.
  EXPECT_OK_SIG(slice(F({10, 20}), {0}, {7}, {3}), F({0, 20}));
  EXPECT_OK_SIG(slice(F({10, 20}), {-1, 0}, {0, 1}, {5, 2}), F({1, 5}));
  // A `?` extent stays unknown.
  EXPECT_OK_SIG(slice(F({Q, 20}), {0}, {0}, {3}), F({Q, 20}));
}

TEST(Slice, Errors) {
  EXPECT_ERROR(slice(F({10}), {0}, {0, 1}, {3}), "axes, starts and ends must have the same length",
               -1);
  EXPECT_ERROR(slice(F({10, 4}), {0, -2}, {0, 0}, {1, 1}), "axis -2 is listed twice", -1);
  EXPECT_ERROR(slice(F({10}), {1}, {0}, {1}), "axis 1 is out of range", -1);
}

TEST(DynamicSlice, FixedSizeRunTimeStart) {
  ShapeFnResult r =
      run(OpCode::DynamicSlice, {F({10, 4}), I64({})}, {{"size", i(3)}});
  EXPECT_OK_SIG(r, F({3, 4}));
  EXPECT_EQ(r.deferred.size(), 1u) << "start + size is checked at run time";
  EXPECT_OK_SIG(run(OpCode::DynamicSlice, {F({Q, 300}), T(DType::I32, {})},
                    {{"axis", i(0)}, {"size", i(1)}}),
                F({1, 300}));
  EXPECT_OK_SIG(run(OpCode::DynamicSlice, {F({10, 4}), I64({})}, {{"axis", i(-1)}, {"size", i(4)}}),
                F({10, 4}));
  EXPECT_ERROR(run(OpCode::DynamicSlice, {F({10, 4}), I64({})}, {{"size", i(11)}}),
               "size 11 exceeds dimension 0 (10)", -1);
  EXPECT_ERROR(run(OpCode::DynamicSlice, {F({10, 4}), I64({})}, {{"size", i(-1)}}),
               "size must be non-negative", -1);
  EXPECT_ERROR(run(OpCode::DynamicSlice, {F({10, 4}), I64({1})}, {{"size", i(1)}}),
               "start (operand 1) must be a scalar tensor", 1);
  EXPECT_ERROR(run(OpCode::DynamicSlice, {F({10, 4}), F({})}, {{"size", i(1)}}),
               "start (operand 1) must be an integer", 1);
}

TEST(DynamicUpdateSlice, KeepsTheOperandShape) {
  ShapeFnResult r = run(OpCode::DynamicUpdateSlice, {F({10, 4}), F({2, 4}), I64({})});
  EXPECT_OK_SIG(r, F({10, 4}));
  EXPECT_EQ(r.deferred.size(), 1u) << "start + the update's size is checked at run time";
  // A `?` in the operand stays; one in the update along another axis takes
  // the operand's size (checked at run time).
  EXPECT_OK_SIG(run(OpCode::DynamicUpdateSlice, {F({Q, 512}), F({1, 512}), T(DType::I32, {})}),
                F({Q, 512}));
  EXPECT_OK_SIG(run(OpCode::DynamicUpdateSlice, {F({3, 4}), F({3, Q}), I64({})}, {{"axis", i(-1)}}),
                F({3, 4}));
  EXPECT_ERROR(run(OpCode::DynamicUpdateSlice, {F({10, 4}), F({11, 4}), I64({})}),
               "update (operand 1) has 11 entries along axis 0, more than operand 0's 10", 1);
  EXPECT_ERROR(run(OpCode::DynamicUpdateSlice, {F({10, 4}), F({2, 3}), I64({})}),
               "dimension 1 of the update (operand 1) and operand 0 must be equal, got 3 and 4", 1);
  EXPECT_ERROR(run(OpCode::DynamicUpdateSlice, {F({10, 4}), F({4}), I64({})}),
               "update (operand 1) has rank 1 but operand 0 has rank 2", 1);
  EXPECT_ERROR(run(OpCode::DynamicUpdateSlice, {F({10, 4}), I64({2, 4}), I64({})}),
               "operand 1 has element type i64 but operand 0 has f32", 1);
  EXPECT_ERROR(run(OpCode::DynamicUpdateSlice, {F({10, 4}), F({2, 4}), I64({1})}),
               "start (operand 2) must be a scalar tensor", 2);
  EXPECT_ERROR(run(OpCode::DynamicUpdateSlice, {F({10, 4}), F({2, 4}), F({})}),
               "start (operand 2) must be an integer", 2);
  EXPECT_ERROR(run(OpCode::DynamicUpdateSlice, {F({10, 4}), F({2, 4}), I64({})}, {{"axis", i(2)}}),
               "axis 2 is out of range", -1);
}

TEST(Take, GathersAlongOneAxis) {
  ShapeFnResult r = run(OpCode::Take, {F({5, 6}), I64({3})});
  EXPECT_OK_SIG(r, F({3, 6}));
  EXPECT_EQ(r.deferred.size(), 1u);
  EXPECT_OK_SIG(run(OpCode::Take, {F({5, 6}), T(DType::I32, {2, 2})}, {{"axis", i(1)}}),
                F({5, 2, 2}));
  EXPECT_OK_SIG(run(OpCode::Take, {F({5, 6, 7}), I64({})}, {{"axis", i(-2)}}), F({5, 7}));
  EXPECT_OK_SIG(run(OpCode::Take, {F({Q, 6}), I64({Q})}), F({Q, 6}));
  EXPECT_ERROR(run(OpCode::Take, {F({5, 6}), F({3})}), "indices (operand 1) must have an integer", 1);
  EXPECT_ERROR(run(OpCode::Take, {F({5, 6}), I64({3})}, {{"axis", i(2)}}), "out of range", -1);
}

//===-- expand_dims / squeeze / broadcast_to ----------------------------------===//

TEST(ExpandDims, InsertsAOne) {
  EXPECT_OK_SIG(run(OpCode::ExpandDims, {F({2, 3})}, {{"axis", i(0)}}), F({1, 2, 3}));
  EXPECT_OK_SIG(run(OpCode::ExpandDims, {F({2, 3})}, {{"axis", i(2)}}), F({2, 3, 1}));
  EXPECT_OK_SIG(run(OpCode::ExpandDims, {F({2, 3})}, {{"axis", i(-1)}}), F({2, 3, 1}));
  EXPECT_OK_SIG(run(OpCode::ExpandDims, {F({2, 3})}, {{"axis", i(-3)}}), F({1, 2, 3}));
  EXPECT_OK_SIG(run(OpCode::ExpandDims, {F({})}, {{"axis", i(0)}}), F({1}));
  EXPECT_ERROR(run(OpCode::ExpandDims, {F({2, 3})}, {{"axis", i(3)}}),
               "axis 3 is out of range for rank 3", -1);
  EXPECT_ERROR(run(OpCode::ExpandDims, {F({2, 3})}, {{"axis", i(-4)}}), "out of range", -1);
}

TEST(Squeeze, DropsOnes) {
  EXPECT_OK_SIG(run(OpCode::Squeeze, {F({1, 3, 1})}), F({3}));
  EXPECT_OK_SIG(run(OpCode::Squeeze, {F({1, 3, 1})}, {{"axes", ints({0})}}), F({3, 1}));
  EXPECT_OK_SIG(run(OpCode::Squeeze, {F({3, 1})}, {{"axes", ints({-1})}}), F({3}));
  EXPECT_OK_SIG(run(OpCode::Squeeze, {F({2, 3})}), F({2, 3}));
  ShapeFnResult r = run(OpCode::Squeeze, {F({Q, 3})}, {{"axes", ints({0})}});
  EXPECT_OK_SIG(r, F({3}));
  ASSERT_EQ(r.deferred.size(), 1u);
  EXPECT_TRUE(has(r.deferred[0], "dimension 0 (?) must be 1")) << r.deferred[0];
}

TEST(Squeeze, Errors) {
  EXPECT_ERROR(run(OpCode::Squeeze, {F({Q, 3})}), "squeeze without axes needs a static shape", -1);
  EXPECT_ERROR(run(OpCode::Squeeze, {F({1, 3})}, {{"axes", ints({1})}}),
               "cannot squeeze dimension 1 of size 3", -1);
  EXPECT_ERROR(run(OpCode::Squeeze, {F({1, 3})}, {{"axes", ints({2})}}), "out of range", -1);
  // numpy: "repeated axis"; reductions and slice reject it too.
  EXPECT_ERROR(run(OpCode::Squeeze, {F({1, 3})}, {{"axes", ints({0, -2})}}),
               "axis -2 is listed twice", -1);
}

TEST(BroadcastTo, Shapes) {
  EXPECT_OK_SIG(run(OpCode::BroadcastTo, {F({3})}, {{"shape", ints({2, 3})}}), F({2, 3}));
  EXPECT_OK_SIG(run(OpCode::BroadcastTo, {F({1, 3})}, {{"shape", ints({4, 3})}}), F({4, 3}));
  ShapeFnResult r = run(OpCode::BroadcastTo, {F({Q})}, {{"shape", ints({2, 5})}});
  EXPECT_OK_SIG(r, F({2, 5}));
  ASSERT_EQ(r.deferred.size(), 1u);
  EXPECT_TRUE(has(r.deferred[0], "1 or 5")) << r.deferred[0];
  EXPECT_ERROR(run(OpCode::BroadcastTo, {F({2})}, {{"shape", ints({3})}}),
               "cannot broadcast 2 to 3", -1);
  EXPECT_ERROR(run(OpCode::BroadcastTo, {F({2, 3})}, {{"shape", ints({3})}}), "lower rank", -1);
  EXPECT_ERROR(run(OpCode::BroadcastTo, {F({2})}, {{"shape", ints({-1, 2})}}),
               "shape entry -1 is negative", -1);
}

//===-- Data-dependent and upper-bound shapes (paper §3.1-3.2) -----------------===//

TEST(Arange, LengthFromConstantValues) {
  DenseValue s = val(DType::I64, {0}, true), e = val(DType::I64, {10}, true),
             st = val(DType::I64, {3}, true);
  ShapeFnResult r = run(OpCode::Arange, {I64({}), I64({}), I64({})}, {}, {&s, &e, &st});
  EXPECT_OK_SIG(r, I64({4})); // 0 3 6 9
  EXPECT_FALSE(r.upperBound);
  // Negative step counts down: 10 8 6 4 2.
  DenseValue m2 = val(DType::I64, {-2}, true), z = val(DType::I64, {0}, true);
  EXPECT_OK_SIG(run(OpCode::Arange, {I64({}), I64({}), I64({})}, {}, {&e, &z, &m2}), I64({5}));
  // An empty range has length 0, never negative.
  DenseValue one = val(DType::I64, {1}, true), five = val(DType::I64, {5}, true);
  EXPECT_OK_SIG(run(OpCode::Arange, {I64({}), I64({}), I64({})}, {}, {&five, &one, &one}),
                I64({0}));
  // Floats: ceil((1 - 0) / 0.25) = 4.
  DenseValue f0 = val(DType::F32, {0}, true), f1 = val(DType::F32, {1}, true),
             fq = val(DType::F32, {0.25}, true);
  EXPECT_OK_SIG(run(OpCode::Arange, {F({}), F({}), F({})}, {}, {&f0, &f1, &fq}), F({4}));
  DenseValue f3 = val(DType::F32, {0.3}, true);
  EXPECT_OK_SIG(run(OpCode::Arange, {F({}), F({}), F({})}, {}, {&f0, &f1, &f3}), F({4}));
}

TEST(Arange, UnknownValuesGiveAny) {
  EXPECT_OK_SIG(run(OpCode::Arange, {I64({}), I64({}), I64({})}), I64({Q}));
  DenseValue s = val(DType::I64, {0}, true), e = val(DType::I64, {10}, true);
  // Only two of the three values known: still unknown.
  EXPECT_OK_SIG(run(OpCode::Arange, {I64({}), I64({}), I64({})}, {}, {&s, &e, nullptr}),
                I64({Q}));
}

TEST(Arange, Errors) {
  DenseValue s = val(DType::I64, {0}, true), e = val(DType::I64, {10}, true),
             z = val(DType::I64, {0}, true);
  EXPECT_ERROR(run(OpCode::Arange, {I64({}), I64({}), I64({})}, {}, {&s, &e, &z}),
               "step must not be zero", 2);
  EXPECT_ERROR(run(OpCode::Arange, {I64({}), I64({1}), I64({})}),
               "stop (operand 1) must be a scalar tensor", 1);
  EXPECT_ERROR(run(OpCode::Arange, {I64({}), I64({}), T(DType::I32, {})}), "element type i32", 2);
  EXPECT_ERROR(run(OpCode::Arange, {B({}), B({}), B({})}), "numeric", 0);
  // A length beyond int64 (or infinite) is an error, not an undefined cast.
  DenseValue big = val(DType::F64, {1e30}, true), inf = val(DType::F64, {INFINITY}, true),
             f0 = val(DType::F64, {0}, true), f1 = val(DType::F64, {1}, true);
  TensorSig d = T(DType::F64, {});
  EXPECT_ERROR(run(OpCode::Arange, {d, d, d}, {}, {&f0, &big, &f1}), "arange would produce", -1);
  EXPECT_ERROR(run(OpCode::Arange, {d, d, d}, {}, {&f0, &inf, &f1}), "arange would produce", -1);
  DenseValue lo = val(DType::I64, {-9e18}, true), hi = val(DType::I64, {9e18}, true),
             one = val(DType::I64, {1}, true);
  EXPECT_ERROR(run(OpCode::Arange, {I64({}), I64({}), I64({})}, {}, {&lo, &hi, &one}),
               "arange would produce", -1);
}

TEST(UpperBound, UniqueAndNonzero) {
  ShapeFnResult u = run(OpCode::Unique, {T(DType::I32, {7})});
  EXPECT_OK_SIG(u, T(DType::I32, {7}));
  EXPECT_TRUE(u.upperBound);
  ShapeFnResult uq = run(OpCode::Unique, {F({Q})});
  EXPECT_OK_SIG(uq, F({Q}));
  EXPECT_TRUE(uq.upperBound);
  EXPECT_ERROR(run(OpCode::Unique, {F({2, 3})}), "input (operand 0) must have rank 1", 0);

  ShapeFnResult n = run(OpCode::Nonzero, {F({2, 3})});
  EXPECT_OK_SIG(n, I64({6, 2}));
  EXPECT_TRUE(n.upperBound);
  EXPECT_OK_SIG(run(OpCode::Nonzero, {B({Q, 3, 4})}), I64({Q, 3}));
  EXPECT_OK_SIG(run(OpCode::Nonzero, {F({})}), I64({1, 0}));
  // Ordinary ops never claim an upper bound.
  EXPECT_FALSE(run(OpCode::Add, {F({2}), F({2})}).upperBound);
}

TEST(Zeros, ShapeFromValue) {
  DenseValue s = val(DType::I64, {2, 3});
  EXPECT_OK_SIG(run(OpCode::Zeros, {I64({2})}, {}, {&s}), F({2, 3}));
  EXPECT_OK_SIG(run(OpCode::Zeros, {I64({2})}, {{"dtype", Attr::getDType(DType::I32)}}, {&s}),
                T(DType::I32, {2, 3}));
  EXPECT_OK_SIG(run(OpCode::Zeros, {I64({2})}), F({Q, Q}));
  DenseValue neg = val(DType::I64, {2, -1});
  EXPECT_ERROR(run(OpCode::Zeros, {I64({2})}, {}, {&neg}), "shape entry -1 is negative", 0);
  EXPECT_ERROR(run(OpCode::Zeros, {F({2})}), "shape (operand 0) must be a 1-D integer tensor", 0);
  EXPECT_ERROR(run(OpCode::Zeros, {I64({Q})}), "static length", 0);
}

TEST(Full, ShapeFromValueTypeFromFill) {
  DenseValue s = val(DType::I64, {4});
  EXPECT_OK_SIG(run(OpCode::Full, {I64({1}), T(DType::F16, {})}, {}, {&s, nullptr}),
                T(DType::F16, {4}));
  EXPECT_OK_SIG(run(OpCode::Full, {I64({3}), B({})}), B({Q, Q, Q}));
  EXPECT_ERROR(run(OpCode::Full, {I64({1}), F({2})}, {}, {&s, nullptr}),
               "fill value (operand 1) must be a scalar tensor", 1);
}

TEST(Shapes, ShapeOfAndDim) {
  EXPECT_OK_SIG(run(OpCode::ShapeOf, {F({2, Q, 3})}), I64({3}));
  EXPECT_OK_SIG(run(OpCode::ShapeOf, {B({})}), I64({0}));
  EXPECT_OK_SIG(run(OpCode::Dim, {F({2, Q})}, {{"axis", i(1)}}), I64({}));
  EXPECT_OK_SIG(run(OpCode::Dim, {F({2, Q})}, {{"axis", i(-2)}}), I64({}));
  EXPECT_ERROR(run(OpCode::Dim, {F({2, Q})}, {{"axis", i(2)}}),
               "axis 2 is out of range for rank 2", -1);
}

TEST(Constant, TypeIsTheLiteralsType) {
  DenseValue v;
  v.dtype = DType::I32;
  v.shape = {2, 2};
  for (int k = 0; k < 4; ++k) v.appendInt(k);
  EXPECT_OK_SIG(run(OpCode::Constant, {}, {{"value", Attr::getDense(v)}}), T(DType::I32, {2, 2}));
}

TEST(RunTime, ConcreteShapesNeedNoDeferredChecks) {
  // With every dimension known the relation is the run-time shape function:
  // nothing is left to defer.
  std::vector<ShapeFnResult> rs = {
      run(OpCode::Add, {F({4, 1}), F({3})}),
      run(OpCode::MatMul, {F({2, 3}), F({3, 4})}),
      run(OpCode::Concat, {F({2, 3}), F({2, 3})}),
      run(OpCode::Reshape, {F({2, 3})}, {{"shape", ints({-1})}}),
      run(OpCode::LayerNorm, {F({2, 8}), F({8}), F({8})}),
      run(OpCode::BroadcastTo, {F({1})}, {{"shape", ints({3})}}),
  };
  for (const ShapeFnResult &r : rs) {
    EXPECT_TRUE(r.ok()) << r.error;
    EXPECT_TRUE(r.deferred.empty());
  }
}

/// shapeIdentityOperand with the schema defaults, overriding named attributes.
int identity(OpCode code, std::vector<TensorSig> ops, std::map<std::string, Attr> attrs = {}) {
  const OpInfo &info = opInfo(code);
  std::vector<Attr> list;
  for (const AttrSpec &s : info.attrs) {
    auto it = attrs.find(s.name);
    list.push_back(it != attrs.end() ? it->second : s.defaultValue ? *s.defaultValue : Attr());
  }
  return shapeIdentityOperand(code, ops, list);
}

// The shape function would only copy an operand's shape: manifest-memory
// sizes the output from that operand instead of calling it.
TEST(ShapeIdentity, ProvedCases) {
  EXPECT_EQ(identity(OpCode::Tanh, {F({Q, 8})}), 0);
  EXPECT_EQ(identity(OpCode::Softmax, {F({Q, Q})}), 0);
  EXPECT_EQ(identity(OpCode::Cast, {F({Q, 3})}, {{"dtype", Attr::getDType(DType::F16)}}), 0);
  EXPECT_EQ(identity(OpCode::LayerNorm, {F({Q, 8}), F({8}), F({8})}), 0);
  EXPECT_EQ(identity(OpCode::Add, {F({Q, 8}), F({8})}), 0);      // a bias
  EXPECT_EQ(identity(OpCode::Mul, {F({1, 8}), F({Q, 8})}), 1);   // a row, on the left
  EXPECT_EQ(identity(OpCode::Sub, {F({Q, 8}), F({})}), 0);       // a scalar
  EXPECT_EQ(identity(OpCode::Less, {F({Q, 1}), F({1, 1})}), 0);  // i1 out, same shape
  EXPECT_EQ(identity(OpCode::Select, {B({Q, 4}), F({4}), F({1})}), 0);
  EXPECT_EQ(identity(OpCode::Add, {F({2, 3}), F({2, 3})}), 0);   // static: either
  EXPECT_EQ(identity(OpCode::Add, {F({8}), F({2, 8})}), 1);      // the larger one
  EXPECT_EQ(identity(OpCode::Add, {F({1}), F({Q})}), 1);
  EXPECT_EQ(identity(OpCode::Add, {F({Q}), F({1})}), 0);
  EXPECT_EQ(identity(OpCode::MatMul, {F({Q, 8}), F({8, 8})}), 0);
  EXPECT_EQ(identity(OpCode::MatMul, {F({Q, 8}), F({8, 8})}, {{"transpose_b", Attr::getBool(true)}}), 0);
}

// Anything that leaves a check for run time, or computes a new shape, is
// not an identity: the shape function stays.
TEST(ShapeIdentity, RefusedCases) {
  EXPECT_EQ(identity(OpCode::Add, {F({Q, 8}), F({Q, 8})}), -1);  // ? against ?
  EXPECT_EQ(identity(OpCode::Add, {F({Q, 8}), F({Q})}), -1);     // ? must be 1 or 8
  EXPECT_EQ(identity(OpCode::Add, {F({Q, 1}), F({1, 8})}), -1);  // a new shape
  EXPECT_EQ(identity(OpCode::Add, {F({1, 8}), F({Q, 1})}), -1);
  EXPECT_EQ(identity(OpCode::Add, {F({2, 3}), F({3, 2})}), -1);  // an error
  EXPECT_EQ(identity(OpCode::LayerNorm, {F({Q, Q}), F({8}), F({8})}), -1);  // ? against 8
  EXPECT_EQ(identity(OpCode::MatMul, {F({Q, Q}), F({8, 8})}), -1);  // ? contracted
  EXPECT_EQ(identity(OpCode::MatMul, {F({Q, 8}), F({8, 4})}), -1);  // a new width
  EXPECT_EQ(identity(OpCode::MatMul, {F({8, Q}), F({8, 8})}, {{"transpose_a", Attr::getBool(true)}}), -1);
  EXPECT_EQ(identity(OpCode::BatchMatMul, {F({Q, 2, 2}), F({Q, 2, 2})}), -1);
  EXPECT_EQ(identity(OpCode::Sum, {F({Q, 8})}, {{"axes", ints({1})}}), -1);
  EXPECT_EQ(identity(OpCode::Transpose, {F({Q, Q})}, {{"perm", ints({0, 1})}}), -1);
  EXPECT_EQ(identity(OpCode::Unique, {T(DType::I64, {Q})}), -1);  // upper bound
}

} // namespace
} // namespace nimble
