//===- KernelsTest.cpp - The kernel registry and behaviour numpy cannot check ==//
//
// The numpy comparisons of every kernel are in the lit suite
// (Inputs/check_ops.py). Here: the registry's completeness, and the choices
// numpy does not define or the shape functions keep out of its reach
// (saturating float -> int casts, the upper-bound convention, the literal
// checks of constant, thread-pool determinism).
//
//===----------------------------------------------------------------------===//

#include "ir/ShapeFns.h"
#include "vm/Kernel.h"
#include "vm/support/ThreadPool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace nimble;
using namespace nimble::vm;

namespace {

template <class T> TensorRef tensor(DType d, std::vector<int64_t> shape, std::vector<T> vals) {
  TensorRef t = makeTensor(d, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t->numElements()), vals.size());
  if (!vals.empty()) std::memcpy(t->rawData(), vals.data(), vals.size() * sizeof(T));
  return t;
}

template <class T> std::vector<T> values(const Tensor &t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numElements());
}

/// Runs `op`'s reference kernel with default attributes (or `attrs`).
Status run(OpCode op, std::vector<const Tensor *> ins, std::vector<Tensor *> outs,
           std::vector<Attr> attrs = {}, ThreadPool *pool = nullptr) {
  const OpInfo &info = opInfo(op);
  if (attrs.empty())
    for (const AttrSpec &a : info.attrs) attrs.push_back(*a.defaultValue);
  KernelContext ctx{pool};
  KernelArgs args{std::move(ins), std::move(outs), &attrs, &ctx};
  return referenceKernel(op)(args);
}

TEST(Registry, EveryComputeOpHasAKernel) {
  int kernels = 0;
  for (int i = 0; i < kNumOpCodes; ++i) {
    const OpInfo &info = opInfo(static_cast<OpCode>(i));
    bool structural = info.relation == Relation::Structural;
    EXPECT_EQ(referenceKernel(info.code) == nullptr, structural) << info.mnemonic;
    kernels += !structural;
  }
  EXPECT_GT(kernels, 50);
  EXPECT_EQ(referenceKernel(static_cast<OpCode>(kNumOpCodes)), nullptr);
}

TEST(Kernels, FloatToIntCastSaturatesAndZeroesNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  TensorRef x = tensor<float>(DType::F32, {6}, {nan, inf, -inf, 3e9f, -3e9f, -2.9f});
  TensorRef out = makeTensor(DType::I32, {6});
  ASSERT_TRUE(run(OpCode::Cast, {x.get()}, {out.get()}, {Attr::getDType(DType::I32)}).ok());
  EXPECT_EQ(values<int32_t>(*out),
            (std::vector<int32_t>{0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, -2}));
  TensorRef big = tensor<double>(DType::F64, {2}, {1e300, -9.3e18});
  TensorRef o64 = makeTensor(DType::I64, {2});
  ASSERT_TRUE(run(OpCode::Cast, {big.get()}, {o64.get()}, {Attr::getDType(DType::I64)}).ok());
  EXPECT_EQ(values<int64_t>(*o64), (std::vector<int64_t>{INT64_MAX, INT64_MIN}));
}

TEST(Kernels, UpperBoundConvention) {
  // unique: the bound is the input length; the true shape goes to output 1
  // and the values are compact at the start of output 0.
  TensorRef x = tensor<int64_t>(DType::I64, {6}, {5, -1, 5, 5, 2, -1});
  TensorRef out = tensor<int64_t>(DType::I64, {6}, {9, 9, 9, 9, 9, 9});
  TensorRef shape = makeTensor(DType::I64, {1});
  ASSERT_TRUE(run(OpCode::Unique, {x.get()}, {out.get(), shape.get()}).ok());
  EXPECT_EQ(values<int64_t>(*shape), std::vector<int64_t>{3});
  EXPECT_EQ(values<int64_t>(*out), (std::vector<int64_t>{-1, 2, 5, 9, 9, 9}));
  // nonzero: [count, rank] of a [n, rank] bound.
  TensorRef m = tensor<uint8_t>(DType::I1, {2, 2}, {0, 1, 1, 0});
  TensorRef coords = makeTensor(DType::I64, {4, 2});
  TensorRef cshape = makeTensor(DType::I64, {2});
  ASSERT_TRUE(run(OpCode::Nonzero, {m.get()}, {coords.get(), cshape.get()}).ok());
  EXPECT_EQ(values<int64_t>(*cshape), (std::vector<int64_t>{2, 2}));
  std::vector<int64_t> c = values<int64_t>(*coords);
  EXPECT_EQ(std::vector<int64_t>(c.begin(), c.begin() + 4), (std::vector<int64_t>{0, 1, 1, 0}));
}

TEST(Kernels, ThreadPoolGivesTheSameResults) {
  // Large enough to be split; results must be bit-identical to one thread.
  ThreadPool pool(4);
  const int64_t n = 256, k = 300;
  TensorRef a = makeTensor(DType::F32, {n, k}), b = makeTensor(DType::F32, {k, n});
  for (int64_t i = 0; i < n * k; ++i) {
    a->data<float>()[i] = std::sin(static_cast<float>(i));
    b->data<float>()[i] = std::cos(static_cast<float>(i));
  }
  for (OpCode op : {OpCode::MatMul, OpCode::Add}) {
    std::vector<int64_t> shape = op == OpCode::MatMul ? std::vector<int64_t>{n, n}
                                                      : std::vector<int64_t>{n, k};
    TensorRef bb = op == OpCode::MatMul ? b : a;
    TensorRef one = makeTensor(DType::F32, shape), many = makeTensor(DType::F32, shape);
    ASSERT_TRUE(run(op, {a.get(), bb.get()}, {one.get()}).ok());
    ASSERT_TRUE(run(op, {a.get(), bb.get()}, {many.get()}, {}, &pool).ok());
    EXPECT_EQ(std::memcmp(one->rawData(), many->rawData(), one->numBytes()), 0);
  }
  // An error raised inside a parallel chunk is reported once the loop ends.
  TensorRef x = makeTensor(DType::I64, {1 << 16}), y = makeTensor(DType::I64, {1 << 16});
  for (int64_t i = 0; i < (1 << 16); ++i) {
    x->data<int64_t>()[i] = i;
    y->data<int64_t>()[i] = i == 40000 ? 0 : 3;
  }
  TensorRef z = makeTensor(DType::I64, {1 << 16});
  EXPECT_EQ(run(OpCode::Div, {x.get(), y.get()}, {z.get()}, {}, &pool).message,
            "integer division by zero");
}

TEST(Kernels, ConstantChecksItsLiteral) {
  DenseValue v;
  v.dtype = DType::F32;
  v.shape = {2};
  v.bytes = {0, 0, 128, 63}; // one float for two elements, not a splat
  TensorRef out = makeTensor(DType::F32, {2});
  Status s = run(OpCode::Constant, {}, {out.get()}, {Attr::getDense(v)});
  EXPECT_NE(s.message.find("literal has 4 bytes, expected 8"), std::string::npos) << s.message;
  v.splat = true;
  ASSERT_TRUE(run(OpCode::Constant, {}, {out.get()}, {Attr::getDense(v)}).ok());
  EXPECT_EQ(values<float>(*out), (std::vector<float>{1.0f, 1.0f}));
}

} // namespace
