//===- ShapeFnsSamplingTest.cpp - resize and grid_sample's relations ------===//
//
// Part of //test/unit:shape_fns_test, with ShapeFnsTestSupport.h's
// helpers. resize is data-dependent (Nimble paper §3.2): constant sizes or
// scales give static dims where the input's are static, unknown ones `?`;
// grid_sample's result is N x C from the input, the rest from the grid.
// Expected shapes are worked out by hand from ONNX's Resize and GridSample.
//
//===----------------------------------------------------------------------===//

#include "ir/ShapeFns.h"
#include "test/unit/ShapeFnsTestSupport.h"

#include <gtest/gtest.h>

namespace nimble {
namespace {

using namespace shapefns_test;

TEST(Resize, StaticDimsFromConstantScalesOrSizes) {
  DenseValue sc = val(DType::F32, {1, 1, 0.6, 2.5}), sz = val(DType::I64, {1, 3, 7, 2});
  DenseValue none = val(DType::F32, {}), nosz = val(DType::I64, {});
  // floor(4 * 0.6) = 2, floor(5 * 2.5) = 12; a `?` input dim stays `?`.
  EXPECT_OK_SIG(run(OpCode::Resize, {F({1, 3, 4, 5}), F({4}), I64({0})}, {}, {nullptr, &sc, &nosz}), F({1, 3, 2, 12}));
  EXPECT_OK_SIG(run(OpCode::Resize, {F({Q, 3, 4, Q}), F({4}), I64({0})}, {}, {nullptr, &sc, &nosz}), F({Q, 3, 2, Q}));
  // sizes win, whatever the input's dims.
  EXPECT_OK_SIG(run(OpCode::Resize, {F({Q, 3, 4, 5}), F({0}), I64({4})}, {}, {nullptr, &none, &sz}), F({1, 3, 7, 2}));
  // Unknown values: every resized axis `?`, the others kept.
  ShapeFnResult u = run(OpCode::Resize, {F({2, 3, 4, 5}), F({0}), I64({2})}, {{"axes", Attr::getInts({2, -1})}});
  EXPECT_OK_SIG(u, F({2, 3, Q, Q}));
  EXPECT_FALSE(u.deferred.empty());
  DenseValue two = val(DType::I64, {9, 1});
  EXPECT_OK_SIG(run(OpCode::Resize, {F({2, 3, 4, 5}), F({0}), I64({2})}, {{"axes", Attr::getInts({-1, 1})}},
                {nullptr, &none, &two}),
            F({2, 1, 4, 9}));
}

TEST(Resize, KeepAspectRatioPolicy) {
  DenseValue none = val(DType::F32, {}), sz = val(DType::I64, {6, 6});
  Attr axes = Attr::getInts({0, 1});
  // 3x5 to fit 6x6: not_larger scale min(2, 1.2) = 1.2 -> round(3.6), 6;
  // not_smaller scale 2 -> 6x10 (ONNX's shape-inference test).
  EXPECT_OK_SIG(run(OpCode::Resize, {F({3, 5}), F({0}), I64({2})},
                {{"axes", axes}, {"keep_aspect_ratio_policy", Attr::getStr("not_larger")}}, {nullptr, &none, &sz}),
            F({4, 6}));
  EXPECT_OK_SIG(run(OpCode::Resize, {F({3, 5}), F({0}), I64({2})},
                {{"axes", axes}, {"keep_aspect_ratio_policy", Attr::getStr("not_smaller")}}, {nullptr, &none, &sz}),
            F({6, 10}));
  EXPECT_OK_SIG(run(OpCode::Resize, {F({Q, 5}), F({0}), I64({2})},
                {{"keep_aspect_ratio_policy", Attr::getStr("not_smaller")}}, {nullptr, &none, &sz}),
            F({Q, Q}));
}

TEST(Resize, Errors) {
  DenseValue none = val(DType::F32, {}), nosz = val(DType::I64, {});
  DenseValue zero = val(DType::F32, {1, 0}), neg = val(DType::I64, {2, -1});
  EXPECT_ERROR(run(OpCode::Resize, {F({2, 3}), F({0}), I64({0})}), "one of scales (operand 1) and sizes", -1);
  EXPECT_ERROR(run(OpCode::Resize, {F({2, 3}), F({3}), I64({0})}), "must have 0 or 2 entries", 1);
  EXPECT_ERROR(run(OpCode::Resize, {F({2, 3}), I64({2}), I64({0})}), "1-D float tensor", 1);
  EXPECT_ERROR(run(OpCode::Resize, {F({2, 3}), F({0}), F({2})}), "1-D integer tensor", 2);
  EXPECT_ERROR(run(OpCode::Resize, {F({2, 3}), F({0}), I64({2}), F({3})}), "must have 0 or 4 entries", 3);
  EXPECT_ERROR(run(OpCode::Resize, {F({2, 3}), F({2}), I64({0})}, {}, {nullptr, &zero, &nosz}), "positive finite", 1);
  EXPECT_ERROR(run(OpCode::Resize, {F({2, 3}), F({0}), I64({2})}, {}, {nullptr, &none, &neg}), "is negative", 2);
  EXPECT_ERROR(run(OpCode::Resize, {T(DType::I1, {2}), F({1}), I64({0})}), "numeric", 0);
  ShapeFnResult m = run(OpCode::Resize, {F({2}), F({1}), I64({0})}, {{"mode", Attr::getStr("bilinear")}});
  EXPECT_FALSE(m.ok());
  EXPECT_NE(m.error.find("mode must be nearest, linear or cubic, got 'bilinear'"), std::string::npos) << m.error;
  EXPECT_EQ(m.errorAttr, 0);
  ShapeFnResult ax = run(OpCode::Resize, {F({2, 3}), F({1}), I64({0})}, {{"axes", Attr::getInts({1, -1})}});
  EXPECT_NE(ax.error.find("repeated"), std::string::npos) << ax.error;
  DenseValue huge = val(DType::F32, {1e30});
  ShapeFnResult big = run(OpCode::Resize, {F({1 << 30}), F({1}), I64({0})}, {}, {nullptr, &huge, &nosz});
  EXPECT_NE(big.error.find("2^62"), std::string::npos) << big.error;
}

TEST(GridSample, ShapeFromInputAndGrid) {
  EXPECT_OK_SIG(run(OpCode::GridSample, {F({2, 3, 8, 9}), F({2, 4, 5, 2})}), F({2, 3, 4, 5}));
  EXPECT_OK_SIG(run(OpCode::GridSample, {F({Q, 3, Q, Q, Q}), F({2, 4, 5, 6, 3})}), F({2, 3, 4, 5, 6}));
  ShapeFnResult d = run(OpCode::GridSample, {F({2, 3, 8}), F({Q, 7, Q})});
  EXPECT_OK_SIG(d, F({2, 3, 7}));
  EXPECT_EQ(d.deferred.size(), 2u); // the batch and the coordinate count
  EXPECT_ERROR(run(OpCode::GridSample, {F({2, 3, 8, 9}), F({2, 4, 5, 3})}), "must be 2", 1);
  EXPECT_ERROR(run(OpCode::GridSample, {F({2, 3, 8, 9}), F({2, 4, 2})}), "must have rank 4", 1);
  EXPECT_ERROR(run(OpCode::GridSample, {F({2, 3}), F({2, 3})}), "rank 3 or more", 0);
  EXPECT_ERROR(run(OpCode::GridSample, {F({2, 3, 8, 9}), F({3, 4, 5, 2})}), "batch dimensions", -1);
  EXPECT_ERROR(run(OpCode::GridSample, {I64({2, 3, 8}), F({2, 4, 1})}), "float element type", 0);
  ShapeFnResult p = run(OpCode::GridSample, {F({2, 3, 8}), F({2, 4, 1})}, {{"padding_mode", Attr::getStr("wrap")}});
  EXPECT_NE(p.error.find("padding_mode must be zeros, border or reflection"), std::string::npos) << p.error;
}

} // namespace
} // namespace nimble
