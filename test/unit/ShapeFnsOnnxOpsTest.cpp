//===- ShapeFnsOnnxOpsTest.cpp - Relations of the ops issue 47 added -----===//
//
// Part of //test/unit:shape_fns_test: the relations of the ops the ONNX
// importer needed (prod, cumsum, tile, pad, gather/scatter, one_hot, the
// shifts, top_k, conv_transpose, non_max_suppression), over static and `?`
// dimensions, with run-time operand values where the op is data-dependent
// (Nimble paper §3.2). Expected shapes are worked out by hand from ONNX's
// operator definitions.
//
//===----------------------------------------------------------------------===//

#include "ir/ShapeFns.h"
#include "test/unit/ShapeFnsTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>

namespace nimble {
namespace {

using namespace shapefns_test;

//===-- trigonometric rows, fmod, prod, cumsum, tile, pad, gather/scatter ---===//

TEST(Issue47, ElementwiseAndProd) {
  EXPECT_OK_SIG(run(OpCode::Sin, {F({Q, 3})}), F({Q, 3}));
  EXPECT_OK_SIG(run(OpCode::Atanh, {T(DType::F16, {2})}), T(DType::F16, {2}));
  EXPECT_ERROR(run(OpCode::Cos, {I64({2})}), "floating-point", 0);
  EXPECT_OK_SIG(run(OpCode::Fmod, {F({2, 3}), F({3})}), F({2, 3}));
  EXPECT_OK_SIG(run(OpCode::Fmod, {I64({Q}), I64({})}), I64({Q}));
  EXPECT_ERROR(run(OpCode::Fmod, {B({2}), B({2})}), "numeric", 0);
  EXPECT_OK_SIG(run(OpCode::Prod, {F({2, Q, 4})}, {{"axes", ints({1})}}), F({2, 4}));
  EXPECT_OK_SIG(run(OpCode::Prod, {I64({2, 3})}, {{"keepdims", Attr::getBool(true)}}), I64({1, 1}));
}

TEST(Issue47, CumSumAxisIsAValue) {
  DenseValue a1 = val(DType::I64, {1}, true), a5 = val(DType::I32, {-3}, true);
  ShapeFnResult r = run(OpCode::CumSum, {F({Q, 3}), I64({})}, {}, {nullptr, &a1});
  EXPECT_OK_SIG(r, F({Q, 3}));
  EXPECT_TRUE(r.deferred.empty());
  ShapeFnResult u = run(OpCode::CumSum, {F({2, 3}), I64({})});
  EXPECT_OK_SIG(u, F({2, 3}));
  EXPECT_EQ(u.deferred.size(), 1u); // the axis's range, at run time
  EXPECT_ERROR(run(OpCode::CumSum, {F({2, 3}), T(DType::I32, {})}, {}, {nullptr, &a5}),
               "axis -3 is out of range for rank 2", 1);
  EXPECT_ERROR(run(OpCode::CumSum, {F({2, 3}), I64({1})}), "must be a scalar", 1);
  EXPECT_ERROR(run(OpCode::CumSum, {F({2, 3}), F({})}), "must be an integer", 1);
  EXPECT_ERROR(run(OpCode::CumSum, {B({2}), I64({})}), "numeric", 0);
  EXPECT_ERROR(run(OpCode::CumSum, {F({}), I64({})}), "rank >= 1", 0);
}

TEST(Issue47, TileFromRepeatsValue) {
  DenseValue reps = val(DType::I64, {2, 0, 3});
  EXPECT_OK_SIG(run(OpCode::Tile, {F({2, Q, Q}), I64({3})}, {}, {nullptr, &reps}), F({4, 0, Q}));
  ShapeFnResult u = run(OpCode::Tile, {F({2, 3}), I64({2})});
  EXPECT_OK_SIG(u, F({Q, Q}));
  EXPECT_FALSE(u.deferred.empty());
  EXPECT_OK_SIG(run(OpCode::Tile, {F({2, 3}), I64({Q})}), F({Q, Q}));
  EXPECT_ERROR(run(OpCode::Tile, {F({2, 3}), I64({3})}), "must have 2 entries", 1);
  DenseValue neg = val(DType::I64, {1, -2});
  EXPECT_ERROR(run(OpCode::Tile, {F({2, 3}), I64({2})}, {}, {nullptr, &neg}), "negative", 1);
  DenseValue huge = val(DType::I64, {double(int64_t(1) << 40), double(int64_t(1) << 40)});
  EXPECT_ERROR(run(OpCode::Tile, {F({int64_t(1) << 40, 2}), I64({2})}, {}, {nullptr, &huge}), "64 bits", 1);
  EXPECT_ERROR(run(OpCode::Tile, {F({2}), F({1})}), "1-D integer tensor", 1);
}

TEST(Issue47, PadFromPadsValue) {
  DenseValue p = val(DType::I64, {1, -1, 2, 0});
  Attr reflect = Attr::getStr("reflect");
  EXPECT_OK_SIG(run(OpCode::Pad, {F({3, 4}), I64({4})}, {}, {nullptr, &p}), F({6, 3}));
  EXPECT_OK_SIG(run(OpCode::Pad, {F({Q, 4}), I64({4}), F({})}, {}, {nullptr, &p, nullptr}), F({Q, 3}));
  EXPECT_OK_SIG(run(OpCode::Pad, {F({3, 4}), I64({4})}), F({Q, Q}));
  EXPECT_OK_SIG(run(OpCode::Pad, {F({3, 4}), I64({4})}, {{"mode", reflect}}, {nullptr, &p}), F({6, 3}));
  EXPECT_ERROR(run(OpCode::Pad, {F({3, 4}), I64({2})}), "must have 4 entries", 1);
  DenseValue crop = val(DType::I64, {0, -3, 0, -2});
  EXPECT_ERROR(run(OpCode::Pad, {F({3, 4}), I64({4})}, {}, {nullptr, &crop}), "remove more than dimension 1", 1);
  DenseValue one = val(DType::I64, {1, 0});
  EXPECT_ERROR(run(OpCode::Pad, {F({0}), I64({2})}, {{"mode", Attr::getStr("edge")}}, {nullptr, &one}),
               "cannot pad the empty dimension 0", 1);
  EXPECT_OK_SIG(run(OpCode::Pad, {F({0}), I64({2})}, {}, {nullptr, &one}), F({1}));
  EXPECT_ERROR(run(OpCode::Pad, {F({3}), I64({2}), F({})}, {{"mode", reflect}}), "needs mode constant", 2);
  EXPECT_ERROR(run(OpCode::Pad, {F({3}), I64({2}), T(DType::F64, {})}), "element type", 2);
  EXPECT_ERROR(run(OpCode::Pad, {F({3}), I64({2}), F({1})}), "must be a scalar", 2);
  ShapeFnResult bad = run(OpCode::Pad, {F({3}), I64({2})}, {{"mode", Attr::getStr("mirror")}});
  EXPECT_FALSE(bad.ok());
  EXPECT_TRUE(has(bad.error, "mode must be constant, reflect, edge or wrap")) << bad.error;
  EXPECT_EQ(bad.errorAttr, 0);
}

TEST(Issue47, GatherScatterOneHot) {
  EXPECT_OK_SIG(run(OpCode::GatherND, {F({Q, 4, 5}), I64({3, 2})}), F({3, 5}));
  EXPECT_OK_SIG(run(OpCode::GatherND, {F({2, 4, 5}), I64({Q, 2, 1})}, {{"batch_dims", i(1)}}), F({2, 2, 5}));
  EXPECT_ERROR(run(OpCode::GatherND, {F({2, 4, 5}), I64({3, Q})}), "must be static", 1);
  EXPECT_ERROR(run(OpCode::GatherND, {F({2, 4}), I64({3, 3})}), "do not fit", 1);
  EXPECT_ERROR(run(OpCode::GatherND, {F({2, 4}), I64({3, 1})}, {{"batch_dims", i(1)}}),
               "batch dimension 0 of data and indices must be equal", 1);
  ShapeFnResult bd = run(OpCode::GatherND, {F({2, 4}), I64({2, 1})}, {{"batch_dims", i(2)}});
  EXPECT_FALSE(bd.ok());
  EXPECT_TRUE(has(bd.error, "batch_dims 2 must lie in [0, 2)")) << bd.error;
  EXPECT_OK_SIG(run(OpCode::ScatterElements, {F({Q, 5}), I64({2, 3}), F({2, 3})}, {{"axis", i(1)}}), F({Q, 5}));
  EXPECT_ERROR(run(OpCode::ScatterElements, {F({2, 5}), I64({3, 3}), F({3, 3})}, {{"axis", i(1)}}),
               "more than data's 2", 1);
  EXPECT_ERROR(run(OpCode::ScatterElements, {F({2, 5}), I64({2, 3}), F({2, 2})}), "indices and updates", 2);
  EXPECT_ERROR(run(OpCode::ScatterElements, {F({2, 5}), F({2, 3}), F({2, 3})}), "integer element type", 1);
  ShapeFnResult red = run(OpCode::ScatterElements, {B({2}), I64({1}), B({1})}, {{"reduction", Attr::getStr("add")}});
  EXPECT_FALSE(red.ok());
  EXPECT_TRUE(has(red.error, "needs a numeric element type")) << red.error;
  EXPECT_OK_SIG(run(OpCode::ScatterND, {F({4, 4, 4}), I64({2, 1}), F({2, 4, 4})}), F({4, 4, 4}));
  EXPECT_OK_SIG(run(OpCode::ScatterND, {F({4, Q}), I64({Q, 2}), F({Q})}), F({4, Q}));
  EXPECT_ERROR(run(OpCode::ScatterND, {F({4, 4}), I64({2, 1}), F({2, 3})}), "dimension 1 of updates", 2);
  EXPECT_ERROR(run(OpCode::ScatterND, {F({4, 4}), I64({2, 1}), T(DType::F64, {2, 4})}), "element type", 2);
  DenseValue depth = val(DType::I64, {10}, true);
  EXPECT_OK_SIG(run(OpCode::OneHot, {I64({Q}), I64({}), F({2})}, {}, {nullptr, &depth, nullptr}), F({Q, 10}));
  EXPECT_OK_SIG(run(OpCode::OneHot, {T(DType::I32, {2, 3}), I64({}), B({2})}, {{"axis", i(0)}}), B({Q, 2, 3}));
  EXPECT_ERROR(run(OpCode::OneHot, {I64({3}), I64({}), F({3})}), "the number of values (off, on) and 2", 2);
  EXPECT_ERROR(run(OpCode::OneHot, {F({3}), I64({}), F({2})}), "integer element type", 0);
  DenseValue neg = val(DType::I64, {-2}, true);
  EXPECT_ERROR(run(OpCode::OneHot, {I64({3}), I64({}), F({2})}, {}, {nullptr, &neg, nullptr}), "depth -2 is negative", 1);
}

// Issue 47's third batch: shifts (broadcast, integers only), top_k (k from
// its value: two results), conv_transpose's output size, and
// non_max_suppression's upper bound.
TEST(Issue47, ShiftsTopKConvTransposeNms) {
  EXPECT_OK_SIG(run(OpCode::ShiftLeft, {T(DType::U8, {2, 3}), T(DType::U8, {3})}), T(DType::U8, {2, 3}));
  EXPECT_OK_SIG(run(OpCode::ShiftRight, {I64({Q}), I64({})}), I64({Q}));
  EXPECT_ERROR(run(OpCode::ShiftLeft, {F({2}), F({2})}), "integer", 0);

  DenseValue k2 = val(DType::I64, {2}, true), k9 = val(DType::I64, {9}, true);
  ShapeFnResult t = run(OpCode::TopK, {F({3, 4}), I64({})}, {{"axis", i(1)}}, {nullptr, &k2});
  ASSERT_TRUE(t.ok()) << t.error;
  ASSERT_EQ(t.results.size(), 2u);
  EXPECT_EQ(formatSig(t.results[0]), formatSig(F({3, 2})));
  EXPECT_EQ(formatSig(t.results[1]), formatSig(I64({3, 2})));
  ShapeFnResult tq = run(OpCode::TopK, {T(DType::I32, {3, 4}), I64({})});
  ASSERT_TRUE(tq.ok()) << tq.error;
  EXPECT_EQ(formatSig(tq.results[0]), formatSig(T(DType::I32, {3, Q})));
  EXPECT_ERROR(run(OpCode::TopK, {F({3, 4}), I64({})}, {}, {nullptr, &k9}), "k 9 is out of range [0, 4]", 1);
  EXPECT_ERROR(run(OpCode::TopK, {F({3, 4}), F({})}), "k (operand 1) must be an integer", 1);
  EXPECT_ERROR(run(OpCode::TopK, {B({3}), I64({})}), "numeric", 0);

  // out = s (D - 1) + output_padding + d (K - 1) + 1 - pads
  EXPECT_OK_SIG(run(OpCode::ConvTranspose, {F({1, 2, 3, 3}), F({2, 4, 3, 3})},
                    {{"strides", ints({3, 2})}, {"output_padding", ints({1, 1})}}),
                F({1, 4, 10, 8}));
  EXPECT_OK_SIG(run(OpCode::ConvTranspose, {F({Q, 4, Q, 5}), F({4, 3, 2, 2}), F({6})},
                    {{"pads", ints({0, 1, 0, 1})}, {"dilations", ints({2, 2})}, {"groups", i(2)}}),
                F({Q, 6, Q, 5}));
  EXPECT_ERROR(run(OpCode::ConvTranspose, {F({1, 3, 4}), F({2, 1, 3})}), "the input channels and weights dim 0", 1);
  EXPECT_ERROR(run(OpCode::ConvTranspose, {F({1, 1, 2}), F({1, 1, 1})}, {{"pads", ints({1, 1})}}), "the pads exceed it",
               0);
  EXPECT_ERROR(run(OpCode::ConvTranspose, {F({1, 3, 4}), F({3, 1, 3})}, {{"groups", i(2)}}),
               "must be a multiple of groups", 0);

  ShapeFnResult n = run(OpCode::NonMaxSuppression, {F({2, 5, 4}), F({2, 3, 5}), I64({}), F({}), F({})});
  EXPECT_OK_SIG(n, I64({30, 3}));
  EXPECT_TRUE(n.upperBound);
  EXPECT_OK_SIG(run(OpCode::NonMaxSuppression, {F({1, Q, 4}), F({1, 2, Q}), I64({}), F({}), F({})}), I64({Q, 3}));
  EXPECT_ERROR(run(OpCode::NonMaxSuppression, {F({1, 5, 4}), F({1, 2, 4}), I64({}), F({}), F({})}),
               "the boxes of boxes (dim 1) and of scores (dim 2) must be equal", 1);
  EXPECT_ERROR(run(OpCode::NonMaxSuppression, {F({1, 5, 3}), F({1, 2, 5}), I64({}), F({}), F({})}), "coordinates", 0);
}

} // namespace
} // namespace nimble
