//===- TypesTest.cpp - Uniqued types, the `?` lattice, sub-shaping --------===//
//
// Sub-shaping (Nimble paper §3.1) is checked against a semantic oracle: a type
// stands for the set of concrete shapes it admits (`?` ranges over a few
// sizes, including one no static dimension in the test uses), `a <: b` must
// mean "every shape of a is a shape of b" and "compatible" must mean "some
// shape is both". The lattice operations on single dimensions are checked
// exhaustively over {0, 1, 3, ?} the same way.
//
//===----------------------------------------------------------------------===//

#include "ir/Types.h"

#include "ir/Limits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace nimble::ir {
namespace {

constexpr int64_t Q = kDynamic;

//===-- Uniquing and printing -----------------------------------------------===//

TEST(Types, SameTypeSameHandle) {
  Context ctx;
  Type a = ctx.tensor(DType::F32, {2, Q});
  EXPECT_EQ(a, ctx.tensor(DType::F32, {2, Q}));
  EXPECT_EQ(a.impl(), ctx.tensor(TensorSig{DType::F32, {2, Q}}).impl());
  EXPECT_NE(a, ctx.tensor(DType::F32, {Q, 2}));
  EXPECT_NE(a, ctx.tensor(DType::F16, {2, Q}));
  EXPECT_NE(a, ctx.tensor(DType::F32, {2, Q, 1}));
  EXPECT_NE(ctx.tensor(DType::F32, {}), ctx.tensor(DType::F32, {1}));

  Type tup = ctx.tuple({a, ctx.adt("Tree")});
  EXPECT_EQ(tup, ctx.tuple({ctx.tensor(DType::F32, {2, Q}), ctx.adt("Tree")}));
  EXPECT_NE(tup, ctx.tuple({ctx.adt("Tree"), a}));
  EXPECT_EQ(ctx.tuple({}), ctx.tuple({}));
  EXPECT_EQ(ctx.adt("Tree"), ctx.adt("Tree"));
  EXPECT_NE(ctx.adt("Tree"), ctx.adt("List"));
  EXPECT_EQ(ctx.storage(), ctx.storage());
  Type fn = ctx.func({a}, {a, a});
  EXPECT_EQ(fn, ctx.func({a}, {a, a}));
  EXPECT_NE(fn, ctx.func({a, a}, {a}));
  EXPECT_NE(ctx.func({}, {}), ctx.tuple({}));
}

TEST(Types, KindsAndAccessors) {
  Context ctx;
  Type t = ctx.tensor(DType::I64, {3, Q});
  EXPECT_TRUE(t.isTensor());
  EXPECT_FALSE(t.isTuple());
  EXPECT_EQ(t.dtype(), DType::I64);
  EXPECT_EQ(t.rank(), 2);
  EXPECT_EQ(t.dims(), (std::vector<int64_t>{3, Q}));
  EXPECT_FALSE(t.hasStaticShape());
  EXPECT_TRUE(ctx.tensor(DType::I64, {3, 0}).hasStaticShape());
  EXPECT_TRUE(ctx.tensor(DType::I64, {}).hasStaticShape());
  EXPECT_EQ(t.sig(), (TensorSig{DType::I64, {3, Q}}));

  Type fn = ctx.func({t, ctx.storage()}, {ctx.adt("L")});
  EXPECT_TRUE(fn.isFunc());
  ASSERT_EQ(fn.elems().size(), 2u);
  EXPECT_EQ(fn.elems()[0], t);
  EXPECT_TRUE(fn.elems()[1].isStorage());
  ASSERT_EQ(fn.results().size(), 1u);
  EXPECT_EQ(fn.results()[0].adtName(), "L");
  EXPECT_TRUE(ctx.adt("L").isAdt());

  Type null;
  EXPECT_FALSE(static_cast<bool>(null));
  EXPECT_FALSE(null.isTensor());
  EXPECT_EQ(null.str(), "<<null type>>");
}

TEST(Types, Printing) {
  Context ctx;
  Type f = ctx.tensor(DType::F32, {}), v = ctx.tensor(DType::I64, {2});
  EXPECT_EQ(f.str(), "tensor<f32>");
  EXPECT_EQ(ctx.tensor(DType::BF16, {2, Q, 0}).str(), "tensor<2x?x0xbf16>");
  EXPECT_EQ(ctx.tensor(DType::I1, {Q}).str(), "tensor<?xi1>");
  EXPECT_EQ(ctx.tuple({f, ctx.adt("Tree")}).str(), "tuple<tensor<f32>, @Tree>");
  EXPECT_EQ(ctx.tuple({}).str(), "tuple<>");
  EXPECT_EQ(ctx.tuple({ctx.tuple({f})}).str(), "tuple<tuple<tensor<f32>>>");
  EXPECT_EQ(ctx.adt("Tree").str(), "@Tree");
  EXPECT_EQ(ctx.storage().str(), "storage");
  EXPECT_EQ(ctx.func({f, v}, {f}).str(), "(tensor<f32>, tensor<2xi64>) -> tensor<f32>");
  EXPECT_EQ(ctx.func({}, {}).str(), "() -> ()");
  EXPECT_EQ(ctx.func({f}, {f, v}).str(), "(tensor<f32>) -> (tensor<f32>, tensor<2xi64>)");
  // A function returning a function keeps its parentheses, so it reads back
  // unambiguously.
  EXPECT_EQ(ctx.func({}, {ctx.func({f}, {f})}).str(), "() -> ((tensor<f32>) -> tensor<f32>)");
}

//===-- The `?` lattice on one dimension -------------------------------------===//

// The sizes a dimension admits: a static d admits d; `?` admits any size
// (represented by every size used below plus one more, 5).
std::set<int64_t> concrete(int64_t d) {
  if (d == Q) return {0, 1, 3, 5};
  return {d};
}

template <class T> bool subset(const std::set<T> &a, const std::set<T> &b) {
  return std::includes(b.begin(), b.end(), a.begin(), a.end());
}
template <class T> bool intersects(const std::set<T> &a, const std::set<T> &b) {
  for (const T &x : a)
    if (b.count(x)) return true;
  return false;
}

const int64_t kDims[] = {0, 1, 3, Q};

TEST(DimLattice, JoinTable) {
  // Hand-written: equal dims join to themselves, anything else to `?`.
  struct Row {
    int64_t a, b, join;
  };
  const Row rows[] = {
      {0, 0, 0}, {0, 1, Q}, {0, 3, Q}, {0, Q, Q}, {1, 0, Q}, {1, 1, 1}, {1, 3, Q}, {1, Q, Q},
      {3, 0, Q}, {3, 1, Q}, {3, 3, 3}, {3, Q, Q}, {Q, 0, Q}, {Q, 1, Q}, {Q, 3, Q}, {Q, Q, Q},
  };
  for (const Row &r : rows) EXPECT_EQ(joinDim(r.a, r.b), r.join) << r.a << " join " << r.b;
}

TEST(DimLattice, ExhaustiveAgainstTheSetOracle) {
  for (int64_t a : kDims) {
    for (int64_t b : kDims) {
      EXPECT_EQ(isSubDim(a, b), subset(concrete(a), concrete(b))) << a << " <: " << b;
      EXPECT_EQ(dimsCompatible(a, b), intersects(concrete(a), concrete(b))) << a << " ~ " << b;
      EXPECT_EQ(dimsCompatible(a, b), dimsCompatible(b, a));
      // join is the least upper bound.
      int64_t j = joinDim(a, b);
      EXPECT_EQ(j, joinDim(b, a));
      EXPECT_TRUE(isSubDim(a, j) && isSubDim(b, j)) << a << ", " << b;
      for (int64_t c : kDims) {
        if (isSubDim(a, c) && isSubDim(b, c)) {
          EXPECT_TRUE(isSubDim(j, c)) << "join(" << a << ", " << b << ") is not least";
        }
      }
    }
  }
  EXPECT_TRUE(isSubDim(3, Q));
  EXPECT_FALSE(isSubDim(Q, 3));
  EXPECT_TRUE(dimsCompatible(Q, 3));
  EXPECT_FALSE(dimsCompatible(1, 3)); // compatibility is not broadcasting
}

//===-- Sub-shaping on types ----------------------------------------------------===//

TEST(Subtyping, StaticIsASubtypeOfDynamic) {
  Context ctx;
  Type s = ctx.tensor(DType::F32, {3, 4}), d0 = ctx.tensor(DType::F32, {Q, 4}),
       dd = ctx.tensor(DType::F32, {Q, Q});
  EXPECT_TRUE(s.isSubtypeOf(d0));
  EXPECT_TRUE(s.isSubtypeOf(dd));
  EXPECT_TRUE(d0.isSubtypeOf(dd));
  EXPECT_FALSE(d0.isSubtypeOf(s)) << "never the reverse";
  EXPECT_FALSE(dd.isSubtypeOf(d0));
  EXPECT_FALSE(s.isSubtypeOf(ctx.tensor(DType::F32, {3, 5})));
  EXPECT_FALSE(s.isSubtypeOf(ctx.tensor(DType::F32, {4, Q})));
}

TEST(Subtyping, DTypeAndRankMismatchNever) {
  Context ctx;
  Type s = ctx.tensor(DType::F32, {3});
  EXPECT_FALSE(s.isSubtypeOf(ctx.tensor(DType::F16, {Q})));
  EXPECT_FALSE(s.isSubtypeOf(ctx.tensor(DType::F32, {Q, Q})));
  EXPECT_FALSE(s.isSubtypeOf(ctx.tensor(DType::F32, {})));
  EXPECT_FALSE(s.isCompatibleWith(ctx.tensor(DType::I32, {3})));
  EXPECT_FALSE(s.isCompatibleWith(ctx.tensor(DType::F32, {3, 1})));
  EXPECT_FALSE(s.isSubtypeOf(ctx.tuple({s})));
  EXPECT_FALSE(s.isSubtypeOf(Type()));
  EXPECT_FALSE(Type().isSubtypeOf(s));
}

TEST(Subtyping, TuplesElementwiseAdtsByName) {
  Context ctx;
  Type s = ctx.tensor(DType::F32, {3}), d = ctx.tensor(DType::F32, {Q});
  Type tree = ctx.adt("Tree"), list = ctx.adt("List");
  EXPECT_TRUE(ctx.tuple({s, tree}).isSubtypeOf(ctx.tuple({d, tree})));
  EXPECT_FALSE(ctx.tuple({d, tree}).isSubtypeOf(ctx.tuple({s, tree})));
  EXPECT_FALSE(ctx.tuple({s, tree}).isSubtypeOf(ctx.tuple({d, list})));
  EXPECT_FALSE(ctx.tuple({s}).isSubtypeOf(ctx.tuple({d, tree})));
  EXPECT_TRUE(ctx.tuple({ctx.tuple({s})}).isSubtypeOf(ctx.tuple({ctx.tuple({d})})));
  EXPECT_TRUE(tree.isSubtypeOf(tree));
  EXPECT_FALSE(tree.isSubtypeOf(list));
  EXPECT_FALSE(tree.isCompatibleWith(list));
  EXPECT_TRUE(ctx.storage().isSubtypeOf(ctx.storage()));
  // Function types are related only when identical.
  EXPECT_FALSE(ctx.func({s}, {s}).isSubtypeOf(ctx.func({d}, {d})));
  EXPECT_TRUE(ctx.func({s}, {s}).isSubtypeOf(ctx.func({s}, {s})));
}

TEST(Compatibility, AnyMatchesAnySize) {
  Context ctx;
  Type a = ctx.tensor(DType::F32, {3, Q}), b = ctx.tensor(DType::F32, {Q, 4});
  EXPECT_TRUE(a.isCompatibleWith(b));
  EXPECT_TRUE(b.isCompatibleWith(a));
  EXPECT_FALSE(a.isSubtypeOf(b));
  EXPECT_FALSE(b.isSubtypeOf(a));
  EXPECT_FALSE(ctx.tensor(DType::F32, {3, 4}).isCompatibleWith(ctx.tensor(DType::F32, {4, 4})));
  EXPECT_TRUE(ctx.tuple({a}).isCompatibleWith(ctx.tuple({b})));
  EXPECT_FALSE(ctx.tuple({a}).isCompatibleWith(ctx.tuple({a, b})));
}

//===-- Properties over generated types -------------------------------------===//

/// Concrete values of a type, as strings: "f32:2x3", "(...,...)", "@Tree".
std::set<std::string> concreteValues(Type t) {
  switch (t.kind()) {
  case TypeKind::Tensor: {
    std::set<std::string> acc = {std::string(dtypeName(t.dtype())) + ":"};
    for (int64_t d : t.dims()) {
      std::set<std::string> next;
      for (const std::string &p : acc)
        for (int64_t c : concrete(d)) next.insert(p + std::to_string(c) + "x");
      acc = std::move(next);
    }
    return acc;
  }
  case TypeKind::Tuple: {
    std::set<std::string> acc = {"("};
    for (Type e : t.elems()) {
      std::set<std::string> next;
      for (const std::string &p : acc)
        for (const std::string &v : concreteValues(e)) next.insert(p + v + ",");
      acc = std::move(next);
    }
    std::set<std::string> closed;
    for (const std::string &p : acc) closed.insert(p + ")");
    return closed;
  }
  default: return {t.str()}; // nominal: only itself
  }
}

std::vector<Type> generateTypes(Context &ctx) {
  std::vector<Type> ts;
  for (DType dt : {DType::F32, DType::I64}) {
    ts.push_back(ctx.tensor(dt, {}));
    for (int64_t a : kDims) {
      ts.push_back(ctx.tensor(dt, {a}));
      for (int64_t b : kDims) ts.push_back(ctx.tensor(dt, {a, b}));
    }
  }
  std::vector<Type> tensors = ts;
  // Tuples over a few rank-1 tensors, and nested.
  std::vector<Type> r1 = {ctx.tensor(DType::F32, {1}), ctx.tensor(DType::F32, {3}),
                          ctx.tensor(DType::F32, {Q}), ctx.tensor(DType::I64, {Q})};
  for (Type a : r1) {
    ts.push_back(ctx.tuple({a}));
    for (Type b : r1) ts.push_back(ctx.tuple({a, b}));
    ts.push_back(ctx.tuple({ctx.tuple({a}), ctx.adt("Tree")}));
  }
  ts.push_back(ctx.tuple({}));
  ts.push_back(ctx.adt("Tree"));
  ts.push_back(ctx.adt("List"));
  ts.push_back(ctx.storage());
  ts.push_back(ctx.func({r1[0]}, {r1[1]}));
  ts.push_back(ctx.func({r1[2]}, {r1[1]}));
  return ts;
}

TEST(SubtypingProperties, MatchTheSetOracle) {
  Context ctx;
  std::vector<Type> ts = generateTypes(ctx);
  ASSERT_GE(ts.size(), 70u);
  std::vector<std::set<std::string>> vals;
  for (Type t : ts) vals.push_back(concreteValues(t));
  for (size_t i = 0; i < ts.size(); ++i) {
    for (size_t j = 0; j < ts.size(); ++j) {
      if (ts[i].isFunc() || ts[j].isFunc()) continue; // nominal, checked below
      EXPECT_EQ(ts[i].isSubtypeOf(ts[j]), subset(vals[i], vals[j]))
          << ts[i].str() << " <: " << ts[j].str();
      EXPECT_EQ(ts[i].isCompatibleWith(ts[j]), intersects(vals[i], vals[j]))
          << ts[i].str() << " ~ " << ts[j].str();
    }
  }
}

TEST(SubtypingProperties, PartialOrder) {
  Context ctx;
  std::vector<Type> ts = generateTypes(ctx);
  size_t n = ts.size();
  std::vector<std::vector<bool>> sub(n, std::vector<bool>(n));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) sub[i][j] = ts[i].isSubtypeOf(ts[j]);
  size_t related = 0;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(sub[i][i]) << "reflexive: " << ts[i].str();
    EXPECT_TRUE(ts[i].isCompatibleWith(ts[i]));
    for (size_t j = 0; j < n; ++j) {
      related += i != j && sub[i][j];
      if (sub[i][j] && sub[j][i]) {
        EXPECT_EQ(ts[i], ts[j]) << "antisymmetric";
      }
      // A subtype is always compatible; compatibility is symmetric.
      if (sub[i][j]) {
        EXPECT_TRUE(ts[i].isCompatibleWith(ts[j]));
      }
      EXPECT_EQ(ts[i].isCompatibleWith(ts[j]), ts[j].isCompatibleWith(ts[i]));
      if (!sub[i][j]) continue;
      for (size_t k = 0; k < n; ++k) {
        if (sub[j][k]) {
          EXPECT_TRUE(sub[i][k]) << "transitive: " << ts[i].str() << " <: " << ts[j].str()
                                 << " <: " << ts[k].str();
        }
      }
    }
  }
  EXPECT_GE(related, 90u) << "the generated set should exercise sub-shaping";
}

} // namespace
//===-- Limits (ir/Limits.h) -------------------------------------------------===//

TEST(Limits, CheckedArithmeticReportsOverflow) {
  int64_t r = 0;
  EXPECT_TRUE(limits::checkedMul(int64_t(1) << 31, int64_t(1) << 31, r));
  EXPECT_EQ(r, int64_t(1) << 62);
  EXPECT_FALSE(limits::checkedMul(int64_t(1) << 32, int64_t(1) << 31, r));
  EXPECT_FALSE(limits::checkedAdd(INT64_MAX, int64_t(1), r));
  EXPECT_TRUE(limits::checkedAdd(INT64_MAX - 1, int64_t(1), r));
}

TEST(Limits, ElementCountsAreOrderIndependentAndBounded) {
  int64_t n = -1;
  EXPECT_TRUE(limits::checkedNumElements(std::vector<int64_t>{}, n));
  EXPECT_EQ(n, 1);
  // 2^32 * 2^32 wraps to 0 in int64: refused, not taken for an empty tensor.
  EXPECT_FALSE(limits::checkedNumElements({int64_t(1) << 32, int64_t(1) << 32}, n));
  // An empty tensor has 0 elements whatever its other dims, in any order.
  EXPECT_TRUE(limits::checkedNumElements({int64_t(1) << 40, int64_t(1) << 40, 0}, n));
  EXPECT_EQ(n, 0);
  EXPECT_TRUE(limits::checkedNumElements({0, int64_t(1) << 40, int64_t(1) << 40}, n));
  EXPECT_EQ(n, 0);
  EXPECT_FALSE(limits::checkedNumElements({2, -1}, n));
  EXPECT_TRUE(limits::checkedNumElements({limits::kMaxTensorElements}, n));
  EXPECT_FALSE(limits::checkedNumElements({limits::kMaxTensorElements + 1}, n));
  int64_t bytes = 0;
  EXPECT_TRUE(limits::checkedByteSize({int64_t(1) << 46}, 4, bytes));
  EXPECT_EQ(bytes, limits::kMaxTensorBytes);
  EXPECT_FALSE(limits::checkedByteSize({(int64_t(1) << 46) + 1}, 4, bytes));
  // `?` counts as 1 in the static bound.
  EXPECT_TRUE(limits::checkedStaticElements({Q, 3, Q}, n));
  EXPECT_EQ(n, 3);
}

TEST(Limits, TypesWithinAndPastEachLimit) {
  Context ctx;
  Type t = ctx.tensor(DType::F32, {});
  for (int d = 1; d < limits::kMaxTypeDepth; ++d) t = ctx.tuple({t});
  EXPECT_EQ(t.depth(), limits::kMaxTypeDepth);
  EXPECT_EQ(checkTypeLimits(t), "");
  Type deeper = ctx.tuple({t});
  EXPECT_EQ(checkTypeLimits(deeper), "type is nested more than 32 levels deep (the limit)");
  EXPECT_EQ(ctx.func({t}, {}).depth(), limits::kMaxTypeDepth + 1);

  EXPECT_EQ(checkTypeLimits(ctx.tensor(DType::F32, std::vector<int64_t>(64, 1))), "");
  EXPECT_EQ(checkTypeLimits(ctx.tensor(DType::F32, std::vector<int64_t>(65, 1))),
            "tensor type has rank 65, more than the limit of 64");
  EXPECT_EQ(checkTypeLimits(ctx.tensor(DType::I8, {limits::kMaxTensorBytes})), "");
  EXPECT_NE(checkTypeLimits(ctx.tensor(DType::F16, {limits::kMaxTensorBytes})), "");
  // Inside a tuple too.
  EXPECT_NE(checkTypeLimits(ctx.tuple({ctx.tensor(DType::F32, {int64_t(1) << 47, Q})})), "");
}

} // namespace nimble::ir
