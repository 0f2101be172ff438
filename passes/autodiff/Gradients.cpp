//===- Gradients.cpp - Adjoint rules of Gradients.def as .nir ops ---------===//
//
// One case per `Rule` row of ir/Gradients.def (DLVM, seed 004, §3.1.3). The
// rules are exact for the reference kernels' semantics (docs/LangRef.md) and
// are checked against central finite differences in float64
// (test/grad/ops.test) and against PyTorch autograd on the models
// (scripts/check_grads.py).
//
// Shapes: adjoints of broadcasting operands are summed back (`unbroadcast`).
// A `?` operand dimension that meets a result dimension other than 1 may or
// may not have been broadcast (1 at run time or not): unbroadcast decides at
// run time, so the rules are exact for every shape the kernels accept.
//
//===----------------------------------------------------------------------===//

#include "passes/autodiff/Gradients.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace nimble::passes {

using namespace nimble::ir;

namespace {
struct GradRow {
  OpCode code;
  GradKind kind;
  std::string_view formula;
};
const GradRow kRows[] = {
#define NIMBLE_GRAD(Id, Kind, Formula) {OpCode::Id, GradKind::Kind, Formula},
#include "ir/Gradients.def"
};
constexpr size_t kNumRows = sizeof(kRows) / sizeof(kRows[0]);
static_assert(kNumRows == static_cast<size_t>(kNumOpCodes),
              "ir/Gradients.def needs exactly one row per op of ir/Ops.def");

const GradRow &row(OpCode c) {
  const GradRow &r = kRows[static_cast<size_t>(c)];
  assert(r.code == c && "Gradients.def rows must follow the order of Ops.def");
  return r;
}

int64_t normAxis(int64_t a, int64_t rank) { return a < 0 ? a + rank : a; }
} // namespace

GradKind gradKind(OpCode code) { return row(code).kind; }
std::string_view gradFormula(OpCode code) { return row(code).formula; }

bool isDifferentiableType(Type t) { return t.isTensor() && isFloat(t.dtype()); }

//===-- Helpers ------------------------------------------------------------===//

Value *AdjointEmitter::op(OpCode c, const std::vector<Value *> &ops,
                          const std::vector<std::pair<std::string, Attr>> &attrs) {
  for (Value *v : ops)
    if (!v) return nullptr;
  Operation *o = b_.create(c, ops, attrs);
  if (!o) {
    broken_ = true;
    return nullptr;
  }
  return o->result();
}

Value *AdjointEmitter::addToWindow(const Operation &slice, Value *acc, Value *g) {
  int64_t a = normAxis(slice.intAttr("axis"), slice.result(0)->type().rank());
  Value *start = fwd(slice.operand(1));
  Value *win = op(OpCode::DynamicSlice, {acc, start},
                  {{"axis", Attr::getInt(a)}, {"size", Attr::getInt(slice.intAttr("size"))}});
  Value *sum = win ? add(win, g) : nullptr;
  return op(OpCode::DynamicUpdateSlice, {acc, sum, start}, {{"axis", Attr::getInt(a)}});
}

Value *AdjointEmitter::scalar(Type like, double v) {
  return b_.splat(b_.context().tensor(like.dtype(), {}), v);
}

Value *AdjointEmitter::add(Value *a, Value *b) {
  if (!a) return b;
  if (!b) return a;
  return op(OpCode::Add, {a, b});
}

Value *AdjointEmitter::zeros(Type t, Value *shape) {
  if (t.hasStaticShape()) return b_.splat(t, 0.0);
  return op(OpCode::Zeros, {shape}, {{"dtype", Attr::getDType(t.dtype())}});
}

Value *AdjointEmitter::zerosLike(Value *x) {
  Type t = x->type();
  if (t.hasStaticShape()) return b_.splat(t, 0.0);
  return zeros(t, op(OpCode::ShapeOf, {fwd(x)}));
}

Value *AdjointEmitter::coerce(Value *v, Type t) {
  if (!v || v->type().isSubtypeOf(t)) return v;
  if (!v->type().isTensor() || !t.isTensor() || v->type().rank() != t.rank()) return nullptr;
  if (v->type().dtype() != t.dtype()) v = op(OpCode::Cast, {v}, {{"dtype", Attr::getDType(t.dtype())}});
  if (!v || v->type().isSubtypeOf(t)) return v;
  // Static sizes lost by inference come back through a reshape (a view),
  // which checks the element count at run time; at most one `?` can stay.
  std::vector<int64_t> shape = t.dims();
  if (std::count(shape.begin(), shape.end(), kDynamic) > 1) return nullptr;
  Value *r = op(OpCode::Reshape, {v}, {{"shape", Attr::getInts(shape)}});
  return r && r->type().isSubtypeOf(t) ? r : nullptr;
}

Value *AdjointEmitter::unbroadcast(Value *g, Value *x) {
  if (!g) return nullptr;
  Type xt = x->type();
  int64_t r = xt.rank(), R = g->type().rank();
  if (R > r) {
    std::vector<int64_t> lead(static_cast<size_t>(R - r));
    std::iota(lead.begin(), lead.end(), 0);
    g = op(OpCode::Sum, {g}, {{"axes", Attr::getInts(lead)}});
    if (!g) return nullptr;
  }
  std::vector<int64_t> axes, unsure;
  for (int64_t i = 0; i < r; ++i) {
    int64_t xd = xt.dims()[static_cast<size_t>(i)], gd = g->type().dims()[static_cast<size_t>(i)];
    if (xd == 1 && gd != 1) axes.push_back(i);
    else if (xd == kDynamic && gd != 1) unsure.push_back(i);
  }
  if (!axes.empty())
    g = op(OpCode::Sum, {g}, {{"axes", Attr::getInts(axes)}, {"keepdims", Attr::getBool(true)}});
  // A `?` dimension of x that meets a result dimension other than 1 was
  // broadcast exactly when it is 1 at run time (paper §3.1: what the types
  // cannot decide is decided at run time). Sum along it, pick the sum or g by
  // that test, and keep the first dim(x) entries: all of g, or the sum.
  for (int64_t i : unsure) {
    Value *d = op(OpCode::Dim, {fwd(x)}, {{"axis", Attr::getInt(i)}});
    Value *s = op(OpCode::Sum, {g}, {{"axes", Attr::getInts({i})}, {"keepdims", Attr::getBool(true)}});
    Value *h = op(OpCode::Select, {op(OpCode::Equal, {d, b_.constantI64(1)}), s, g});
    g = op(OpCode::Take, {h, op(OpCode::Arange, {b_.constantI64(0), d, b_.constantI64(1)})},
           {{"axis", Attr::getInt(i)}});
  }
  return g;
}

Value *AdjointEmitter::broadcastLike(Value *g, Value *x) {
  Type xt = x->type();
  if (xt.hasStaticShape()) {
    if (g->type() == xt) return g;
    return op(OpCode::BroadcastTo, {g}, {{"shape", Attr::getInts(xt.dims())}});
  }
  return op(OpCode::Add, {g, zerosLike(x)});
}

Value *AdjointEmitter::reshapeLike(Value *g, Value *x) {
  Type xt = x->type();
  if (xt.hasStaticShape()) return op(OpCode::Reshape, {g}, {{"shape", Attr::getInts(xt.dims())}});
  return op(OpCode::DynReshape, {g, op(OpCode::ShapeOf, {fwd(x)})});
}

Value *AdjointEmitter::padAxis(Value *g, int64_t axis, Value *before, int64_t beforeC,
                               Value *after, int64_t afterC) {
  Type gt = g->type();
  int64_t rank = gt.rank();
  auto piece = [&](Value *count, int64_t countC) -> Value * {
    if (!count && countC == 0) return nullptr;
    if (!count && gt.hasStaticShape()) {
      std::vector<int64_t> dims = gt.dims();
      dims[static_cast<size_t>(axis)] = countC;
      return b_.splat(b_.context().tensor(gt.dtype(), dims), 0.0);
    }
    // The shape of g with `count` along `axis`, built at run time.
    if (!count) count = b_.constantI64(countC);
    Value *s = op(OpCode::ShapeOf, {g});
    std::vector<Value *> parts;
    if (axis > 0)
      parts.push_back(op(OpCode::Slice, {s}, {{"axes", Attr::getInts({0})},
                                              {"starts", Attr::getInts({0})},
                                              {"ends", Attr::getInts({axis})}}));
    parts.push_back(op(OpCode::Reshape, {count}, {{"shape", Attr::getInts({1})}}));
    if (axis + 1 < rank)
      parts.push_back(op(OpCode::Slice, {s}, {{"axes", Attr::getInts({0})},
                                              {"starts", Attr::getInts({axis + 1})},
                                              {"ends", Attr::getInts({rank})}}));
    Value *shape = parts.size() == 1 ? parts[0] : op(OpCode::Concat, parts, {{"axis", Attr::getInt(0)}});
    return op(OpCode::Zeros, {shape}, {{"dtype", Attr::getDType(gt.dtype())}});
  };
  std::vector<Value *> parts;
  if (Value *z = piece(before, beforeC)) parts.push_back(z);
  parts.push_back(g);
  if (Value *z = piece(after, afterC)) parts.push_back(z);
  if (parts.size() == 1) return g;
  return op(OpCode::Concat, parts, {{"axis", Attr::getInt(axis)}});
}

//===-- The rules ----------------------------------------------------------===//

bool AdjointEmitter::emit(const Operation &o, const std::vector<Value *> &resultAdj,
                          std::vector<Value *> &dx) {
  broken_ = false;
  dx.assign(o.numOperands(), nullptr);
  Value *g = resultAdj.empty() ? nullptr : resultAdj[0];
  auto x = [&](unsigned i) { return o.operand(i); };
  auto X = [&](unsigned i) { return fwd(o.operand(i)); };
  auto Y = [&]() { return fwd(o.result(0)); };
  auto diff = [&](unsigned i) { return isDifferentiableType(o.operand(i)->type()); };
  Type yt = o.numResults() ? o.result(0)->type() : Type();
  auto sc = [&](double v) { return scalar(yt, v); };

  switch (o.code()) {
  case OpCode::Neg: dx[0] = op(OpCode::Neg, {g}); break;
  case OpCode::Abs: {
    Value *zero = sc(0.0);
    Value *pos = op(OpCode::Select, {op(OpCode::Greater, {X(0), zero}), g, zero});
    Value *neg = op(OpCode::Select, {op(OpCode::Less, {X(0), zero}), g, zero});
    dx[0] = op(OpCode::Sub, {pos, neg});
    break;
  }
  case OpCode::Exp: dx[0] = op(OpCode::Mul, {g, Y()}); break;
  case OpCode::Log: dx[0] = op(OpCode::Div, {g, X(0)}); break;
  case OpCode::Sqrt: dx[0] = op(OpCode::Div, {g, op(OpCode::Mul, {Y(), sc(2.0)})}); break;
  case OpCode::Rsqrt: {
    Value *y = Y();
    Value *y3 = op(OpCode::Mul, {op(OpCode::Mul, {y, y}), y});
    dx[0] = op(OpCode::Mul, {g, op(OpCode::Mul, {y3, sc(-0.5)})});
    break;
  }
  case OpCode::Tanh: {
    Value *y = Y();
    dx[0] = op(OpCode::Mul, {g, op(OpCode::Sub, {sc(1.0), op(OpCode::Mul, {y, y})})});
    break;
  }
  case OpCode::Sigmoid: {
    Value *y = Y();
    dx[0] = op(OpCode::Mul, {op(OpCode::Mul, {g, y}), op(OpCode::Sub, {sc(1.0), y})});
    break;
  }
  case OpCode::Relu:
    dx[0] = op(OpCode::Select, {op(OpCode::Greater, {X(0), sc(0.0)}), g, sc(0.0)});
    break;
  case OpCode::Gelu: {
    Value *xv = X(0);
    Value *cdf = op(OpCode::Mul, {op(OpCode::Add, {op(OpCode::Erf, {op(OpCode::Mul, {xv, sc(M_SQRT1_2)})}),
                                                   sc(1.0)}),
                                  sc(0.5)});
    Value *pdf = op(OpCode::Mul, {op(OpCode::Exp, {op(OpCode::Mul, {op(OpCode::Mul, {xv, xv}), sc(-0.5)})}),
                                  sc(0.5 * M_2_SQRTPI * M_SQRT1_2)}); // 1/sqrt(2 pi)
    dx[0] = op(OpCode::Mul, {g, op(OpCode::Add, {cdf, op(OpCode::Mul, {xv, pdf})})});
    break;
  }
  case OpCode::Erf: {
    Value *xv = X(0);
    Value *e = op(OpCode::Exp, {op(OpCode::Neg, {op(OpCode::Mul, {xv, xv})})});
    dx[0] = op(OpCode::Mul, {g, op(OpCode::Mul, {e, sc(M_2_SQRTPI)})});
    break;
  }

  case OpCode::Sin: dx[0] = op(OpCode::Mul, {g, op(OpCode::Cos, {X(0)})}); break;
  case OpCode::Cos: dx[0] = op(OpCode::Neg, {op(OpCode::Mul, {g, op(OpCode::Sin, {X(0)})})}); break;
  case OpCode::Tan: {
    Value *y = Y();
    dx[0] = op(OpCode::Mul, {g, op(OpCode::Add, {sc(1.0), op(OpCode::Mul, {y, y})})});
    break;
  }
  case OpCode::Sinh: dx[0] = op(OpCode::Mul, {g, op(OpCode::Cosh, {X(0)})}); break;
  case OpCode::Cosh: dx[0] = op(OpCode::Mul, {g, op(OpCode::Sinh, {X(0)})}); break;
  case OpCode::Asin: case OpCode::Acos: case OpCode::Asinh: case OpCode::Acosh: {
    // g / sqrt(1 - x^2) (acos: negated), g / sqrt(x^2 + 1), g / sqrt(x^2 - 1).
    Value *xv = X(0), *x2 = op(OpCode::Mul, {xv, xv});
    Value *r = o.is(OpCode::Asinh)   ? op(OpCode::Add, {x2, sc(1.0)})
               : o.is(OpCode::Acosh) ? op(OpCode::Sub, {x2, sc(1.0)})
                                     : op(OpCode::Sub, {sc(1.0), x2});
    dx[0] = op(OpCode::Mul, {g, op(OpCode::Rsqrt, {r})});
    if (o.is(OpCode::Acos)) dx[0] = op(OpCode::Neg, {dx[0]});
    break;
  }
  case OpCode::Atan: case OpCode::Atanh: {
    Value *xv = X(0), *x2 = op(OpCode::Mul, {xv, xv});
    Value *den = o.is(OpCode::Atan) ? op(OpCode::Add, {sc(1.0), x2}) : op(OpCode::Sub, {sc(1.0), x2});
    dx[0] = op(OpCode::Div, {g, den});
    break;
  }
  case OpCode::Fmod:
    // y = a - trunc(a / b) b, piecewise: da = g, db = -g trunc(a / b), and
    // trunc(a / b) = (a - y) / b exactly where it is an integer.
    if (diff(0)) dx[0] = unbroadcast(g, x(0));
    if (diff(1))
      dx[1] = unbroadcast(
          op(OpCode::Neg, {op(OpCode::Mul, {g, op(OpCode::Div, {op(OpCode::Sub, {X(0), Y()}), X(1)})})}), x(1));
    break;
  case OpCode::CumSum:
    // The transpose of a running sum is the running sum the other way.
    dx[0] = op(OpCode::CumSum, {g, X(1)},
               {{"exclusive", Attr::getBool(o.boolAttr("exclusive"))}, {"reverse", Attr::getBool(!o.boolAttr("reverse"))}});
    break;

  case OpCode::Add:
    if (diff(0)) dx[0] = unbroadcast(g, x(0));
    if (diff(1)) dx[1] = unbroadcast(g, x(1));
    break;
  case OpCode::Sub:
    if (diff(0)) dx[0] = unbroadcast(g, x(0));
    if (diff(1)) dx[1] = unbroadcast(op(OpCode::Neg, {g}), x(1));
    break;
  case OpCode::Mul:
    if (diff(0)) dx[0] = unbroadcast(op(OpCode::Mul, {g, X(1)}), x(0));
    if (diff(1)) dx[1] = unbroadcast(op(OpCode::Mul, {g, X(0)}), x(1));
    break;
  case OpCode::Div:
    if (diff(0)) dx[0] = unbroadcast(op(OpCode::Div, {g, X(1)}), x(0));
    if (diff(1))
      dx[1] = unbroadcast(op(OpCode::Neg, {op(OpCode::Div, {op(OpCode::Mul, {g, Y()}), X(1)})}), x(1));
    break;
  case OpCode::Pow: {
    Value *a = X(0), *bb = X(1);
    dx[0] = unbroadcast(
        op(OpCode::Mul, {op(OpCode::Mul, {g, bb}), op(OpCode::Pow, {a, op(OpCode::Sub, {bb, sc(1.0)})})}),
        x(0));
    Value *ylog = op(OpCode::Mul, {Y(), op(OpCode::Log, {a})});
    Value *safe = op(OpCode::Select, {op(OpCode::Equal, {a, sc(0.0)}), sc(0.0), ylog});
    dx[1] = unbroadcast(op(OpCode::Mul, {g, safe}), x(1));
    break;
  }
  case OpCode::Maximum:
  case OpCode::Minimum: {
    Value *first = op(o.is(OpCode::Maximum) ? OpCode::GreaterEqual : OpCode::LessEqual, {X(0), X(1)});
    if (diff(0)) dx[0] = unbroadcast(op(OpCode::Select, {first, g, sc(0.0)}), x(0));
    if (diff(1)) dx[1] = unbroadcast(op(OpCode::Select, {first, sc(0.0), g}), x(1));
    break;
  }
  case OpCode::Select:
    if (diff(1)) dx[1] = unbroadcast(op(OpCode::Select, {X(0), g, sc(0.0)}), x(1));
    if (diff(2)) dx[2] = unbroadcast(op(OpCode::Select, {X(0), sc(0.0), g}), x(2));
    break;
  case OpCode::Cast:
    if (diff(0)) dx[0] = op(OpCode::Cast, {g}, {{"dtype", Attr::getDType(x(0)->type().dtype())}});
    break;

  case OpCode::MatMul:
  case OpCode::BatchMatMul: {
    bool ta = o.boolAttr("transpose_a"), tb = o.boolAttr("transpose_b");
    Value *A = X(0), *B = X(1);
    auto mm = [&](Value *l, Value *r, bool t1, bool t2) {
      return op(o.code(), {l, r}, {{"transpose_a", Attr::getBool(t1)}, {"transpose_b", Attr::getBool(t2)}});
    };
    Value *da, *db;
    if (!ta && !tb) { da = mm(g, B, false, true); db = mm(A, g, true, false); }
    else if (!ta && tb) { da = mm(g, B, false, false); db = mm(g, A, true, false); }
    else if (ta && !tb) { da = mm(B, g, false, true); db = mm(A, g, false, false); }
    else { da = mm(B, g, true, true); db = mm(g, A, true, true); }
    if (o.is(OpCode::BatchMatMul)) {
      da = unbroadcast(da, x(0));
      db = unbroadcast(db, x(1));
    }
    dx[0] = da;
    dx[1] = db;
    break;
  }

  case OpCode::Sum:
  case OpCode::Mean:
  case OpCode::Max:
  case OpCode::Min: {
    int64_t rank = x(0)->type().rank();
    std::vector<int64_t> axes = o.attr("axes").getInts();
    if (axes.empty()) {
      axes.resize(static_cast<size_t>(rank));
      std::iota(axes.begin(), axes.end(), 0);
    }
    for (int64_t &a : axes) a = normAxis(a, rank);
    std::sort(axes.begin(), axes.end());
    Value *gk = g, *yk = o.is(OpCode::Max) || o.is(OpCode::Min) ? Y() : nullptr;
    if (!o.boolAttr("keepdims"))
      for (int64_t a : axes) {
        gk = op(OpCode::ExpandDims, {gk}, {{"axis", Attr::getInt(a)}});
        if (yk) yk = op(OpCode::ExpandDims, {yk}, {{"axis", Attr::getInt(a)}});
      }
    if (o.is(OpCode::Sum)) {
      dx[0] = broadcastLike(gk, x(0));
    } else if (o.is(OpCode::Mean)) {
      int64_t count = 1;
      Value *dynCount = nullptr;
      for (int64_t a : axes) {
        int64_t d = x(0)->type().dims()[static_cast<size_t>(a)];
        if (d != kDynamic) count *= d;
        else dynCount = dynCount ? op(OpCode::Mul, {dynCount, op(OpCode::Dim, {X(0)}, {{"axis", Attr::getInt(a)}})})
                                 : op(OpCode::Dim, {X(0)}, {{"axis", Attr::getInt(a)}});
      }
      Value *n = sc(static_cast<double>(count));
      if (dynCount)
        n = op(OpCode::Mul, {n, op(OpCode::Cast, {dynCount}, {{"dtype", Attr::getDType(yt.dtype())}})});
      dx[0] = broadcastLike(op(OpCode::Div, {gk, n}), x(0));
    } else {
      Value *mask = op(OpCode::Cast, {op(OpCode::Equal, {X(0), yk})}, {{"dtype", Attr::getDType(yt.dtype())}});
      Value *cnt = op(OpCode::Sum, {mask}, {{"axes", Attr::getInts(axes)}, {"keepdims", Attr::getBool(true)}});
      dx[0] = op(OpCode::Mul, {mask, op(OpCode::Div, {gk, cnt})});
    }
    break;
  }
  case OpCode::Softmax: {
    Value *y = Y();
    Value *gy = op(OpCode::Mul, {g, y});
    Value *s = op(OpCode::Sum, {gy}, {{"axes", Attr::getInts({o.intAttr("axis")})}, {"keepdims", Attr::getBool(true)}});
    dx[0] = op(OpCode::Mul, {y, op(OpCode::Sub, {g, s})});
    break;
  }
  case OpCode::LayerNorm: {
    Value *xv = X(0), *gamma = X(1);
    auto meanLast = [&](Value *v) {
      return op(OpCode::Mean, {v}, {{"axes", Attr::getInts({-1})}, {"keepdims", Attr::getBool(true)}});
    };
    Value *xc = op(OpCode::Sub, {xv, meanLast(xv)});
    Value *var = meanLast(op(OpCode::Mul, {xc, xc}));
    Value *rstd = op(OpCode::Rsqrt, {op(OpCode::Add, {var, sc(o.attr("eps").getFloat())})});
    Value *xh = op(OpCode::Mul, {xc, rstd});
    if (diff(2)) dx[2] = unbroadcast(g, x(2));
    if (diff(1)) dx[1] = unbroadcast(op(OpCode::Mul, {g, xh}), x(1));
    Value *d = op(OpCode::Mul, {g, gamma});
    Value *inner = op(OpCode::Sub, {op(OpCode::Sub, {d, meanLast(d)}),
                                    op(OpCode::Mul, {xh, meanLast(op(OpCode::Mul, {d, xh}))})});
    dx[0] = op(OpCode::Mul, {rstd, inner});
    break;
  }

  case OpCode::Reshape:
  case OpCode::DynReshape:
  case OpCode::Squeeze:
    dx[0] = reshapeLike(g, x(0));
    break;
  case OpCode::Transpose: {
    std::vector<int64_t> perm = o.attr("perm").getInts(), inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i)
      inv[static_cast<size_t>(normAxis(perm[i], static_cast<int64_t>(perm.size())))] = static_cast<int64_t>(i);
    dx[0] = op(OpCode::Transpose, {g}, {{"perm", Attr::getInts(inv)}});
    break;
  }
  case OpCode::Concat: {
    int64_t rank = yt.rank(), axis = normAxis(o.intAttr("axis"), rank);
    int64_t off = 0;        // static offset while every size before is static
    Value *dynOff = nullptr; // run-time offset once one is not
    for (unsigned i = 0; i < o.numOperands(); ++i) {
      int64_t d = x(i)->type().dims()[static_cast<size_t>(axis)];
      if (!dynOff && d != kDynamic) {
        if (diff(i))
          dx[i] = op(OpCode::Slice, {g}, {{"axes", Attr::getInts({axis})}, {"starts", Attr::getInts({off})},
                                          {"ends", Attr::getInts({off + d})}});
        off += d;
        continue;
      }
      if (!dynOff) dynOff = b_.constantI64(off);
      Value *len = op(OpCode::Dim, {X(i)}, {{"axis", Attr::getInt(axis)}});
      Value *stop = op(OpCode::Add, {dynOff, len});
      if (diff(i))
        dx[i] = op(OpCode::Take, {g, op(OpCode::Arange, {dynOff, stop, b_.constantI64(1)})},
                   {{"axis", Attr::getInt(axis)}});
      dynOff = stop;
    }
    break;
  }
  case OpCode::Split: {
    std::vector<Value *> parts;
    for (unsigned i = 0; i < o.numResults(); ++i)
      parts.push_back(resultAdj[i] ? resultAdj[i] : zerosLike(o.result(i)));
    dx[0] = op(OpCode::Concat, parts, {{"axis", Attr::getInt(o.intAttr("axis"))}});
    break;
  }
  case OpCode::Slice: {
    const auto &axes = o.attr("axes").getInts(), &starts = o.attr("starts").getInts(),
               &ends = o.attr("ends").getInts();
    int64_t rank = yt.rank();
    Value *cur = g;
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t a = normAxis(axes[k], rank), d = x(0)->type().dims()[static_cast<size_t>(a)];
      if (d == kDynamic) {
        if (starts[k] < 0 || ends[k] < 0)
          return fail("'slice' with a negative start or end on a dimension unknown at compile "
                      "time is not differentiable (the padding would depend on run-time clamping)");
        Value *dv = op(OpCode::Dim, {X(0)}, {{"axis", Attr::getInt(a)}});
        Value *s = op(OpCode::Minimum, {b_.constantI64(starts[k]), dv});
        Value *e = op(OpCode::Maximum, {op(OpCode::Minimum, {b_.constantI64(ends[k]), dv}), s});
        cur = padAxis(cur, a, s, 0, op(OpCode::Sub, {dv, e}), 0);
      } else {
        int64_t s = starts[k] < 0 ? starts[k] + d : starts[k], e = ends[k] < 0 ? ends[k] + d : ends[k];
        s = std::clamp<int64_t>(s, 0, d);
        e = std::clamp<int64_t>(e, s, d);
        cur = padAxis(cur, a, nullptr, s, nullptr, d - e);
      }
    }
    dx[0] = cur;
    break;
  }
  case OpCode::DynamicSlice: {
    int64_t a = normAxis(o.intAttr("axis"), yt.rank());
    Value *start = X(1);
    Value *dv = op(OpCode::Dim, {X(0)}, {{"axis", Attr::getInt(a)}});
    Value *after = op(OpCode::Sub, {op(OpCode::Sub, {dv, start}), b_.constantI64(o.intAttr("size"))});
    Value *st = start->type().rank() == 0 ? start : op(OpCode::Reshape, {start}, {{"shape", Attr::getInts({})}});
    dx[0] = padAxis(g, a, st, 0, after, 0);
    break;
  }
  case OpCode::DynamicUpdateSlice: {
    // y = x with the window [s, s + n) along a replaced by u: the window's
    // adjoint goes to u, the rest to x.
    int64_t a = normAxis(o.intAttr("axis"), yt.rank());
    Value *start = X(2);
    if (diff(0)) dx[0] = op(OpCode::DynamicUpdateSlice, {g, zerosLike(x(1)), start}, {{"axis", Attr::getInt(a)}});
    if (diff(1)) {
      int64_t n = x(1)->type().dims()[static_cast<size_t>(a)];
      if (n != kDynamic) {
        dx[1] = op(OpCode::DynamicSlice, {g, start}, {{"axis", Attr::getInt(a)}, {"size", Attr::getInt(n)}});
      } else {
        Value *s64 = start->type().dtype() == DType::I64
                         ? start
                         : op(OpCode::Cast, {start}, {{"dtype", Attr::getDType(DType::I64)}});
        Value *len = op(OpCode::Dim, {X(1)}, {{"axis", Attr::getInt(a)}});
        Value *stop = op(OpCode::Add, {s64, len});
        dx[1] = op(OpCode::Take, {g, op(OpCode::Arange, {s64, stop, b_.constantI64(1)})},
                   {{"axis", Attr::getInt(a)}});
      }
    }
    break;
  }
  case OpCode::Take: {
    // Scatter-add as a product with the one-hot matrix of the indices, for
    // any axis a, rank r and index shape: with M = numel(indices), the
    // indices' dims of g (a .. a+q-1) go to the front and g becomes [M, K]
    // (K: the other dims); onehot(indices)^T [V, M] . g [M, K] = [V, K];
    // back to [V, pre..., post...] and axis 0 moved to a: x's shape.
    Type xt = x(0)->type(), it = x(1)->type();
    const int64_t r = xt.rank(), q = it.rank(), a = normAxis(o.intAttr("axis"), r);
    Value *idx = op(OpCode::Reshape, {X(1)}, {{"shape", Attr::getInts({-1})}});
    if (it.dtype() != DType::I64) idx = op(OpCode::Cast, {idx}, {{"dtype", Attr::getDType(DType::I64)}});
    Value *v = op(OpCode::Dim, {X(0)}, {{"axis", Attr::getInt(a)}});
    Value *range = op(OpCode::Arange, {b_.constantI64(0), v, b_.constantI64(1)});
    Value *hot = op(OpCode::Equal, {op(OpCode::ExpandDims, {idx}, {{"axis", Attr::getInt(1)}}), range});
    hot = op(OpCode::Cast, {hot}, {{"dtype", Attr::getDType(yt.dtype())}});
    Value *gt = g;
    if (a > 0 && q > 0) {
      std::vector<int64_t> perm;
      for (int64_t i = 0; i < q; ++i) perm.push_back(a + i);
      for (int64_t i = 0; i < a; ++i) perm.push_back(i);
      for (int64_t i = a + q; i < yt.rank(); ++i) perm.push_back(i);
      gt = op(OpCode::Transpose, {g}, {{"perm", Attr::getInts(perm)}});
    }
    auto one = [&](Value *n) { return op(OpCode::Reshape, {n}, {{"shape", Attr::getInts({1})}}); };
    Value *m = one(op(OpCode::Dim, {idx}, {{"axis", Attr::getInt(0)}}));
    Value *mk = op(OpCode::Concat, {m, b_.splat(b_.context().tensor(DType::I64, {1}), -1.0)}, {{"axis", Attr::getInt(0)}});
    Value *g2 = op(OpCode::DynReshape, {gt, mk});
    Value *d = op(OpCode::MatMul, {hot, g2}, {{"transpose_a", Attr::getBool(true)}});
    if (r > 1) {
      Value *xs = op(OpCode::ShapeOf, {X(0)});
      std::vector<Value *> parts{one(v)};
      if (a > 0)
        parts.push_back(op(OpCode::Slice, {xs}, {{"axes", Attr::getInts({0})}, {"starts", Attr::getInts({0})},
                                                 {"ends", Attr::getInts({a})}}));
      if (a + 1 < r)
        parts.push_back(op(OpCode::Slice, {xs}, {{"axes", Attr::getInts({0})}, {"starts", Attr::getInts({a + 1})},
                                                 {"ends", Attr::getInts({r})}}));
      d = op(OpCode::DynReshape, {d, op(OpCode::Concat, parts, {{"axis", Attr::getInt(0)}})});
      if (a > 0) {
        std::vector<int64_t> perm;
        for (int64_t i = 1; i <= a; ++i) perm.push_back(i);
        perm.push_back(0);
        for (int64_t i = a + 1; i < r; ++i) perm.push_back(i);
        d = op(OpCode::Transpose, {d}, {{"perm", Attr::getInts(perm)}});
      }
    }
    dx[0] = reshapeLike(d, x(0));
    break;
  }
  case OpCode::ExpandDims:
    dx[0] = op(OpCode::Squeeze, {g}, {{"axes", Attr::getInts({normAxis(o.intAttr("axis"), yt.rank())})}});
    break;
  case OpCode::BroadcastTo: dx[0] = unbroadcast(g, x(0)); break;
  case OpCode::Full:
    if (diff(1)) dx[1] = unbroadcast(g, x(1));
    break;
  case OpCode::DeviceCopy:
    dx[0] = op(OpCode::DeviceCopy, {g}, {{"src", Attr::getStr(o.strAttr("dst"))},
                                         {"dst", Attr::getStr(o.strAttr("src"))}});
    break;
  default:
    return fail("no adjoint rule for '" + std::string(o.name()) + "'");
  }
  // Only floating-point operands take adjoints.
  for (unsigned i = 0; i < o.numOperands(); ++i)
    if (!diff(i)) dx[i] = nullptr;
  if (broken_) return fail("internal error: an adjoint op of '" + std::string(o.name()) + "' did not type-check");
  for (unsigned i = 0; i < o.numOperands(); ++i)
    if (dx[i]) {
      Value *c = coerce(dx[i], o.operand(i)->type());
      if (!c) return fail("internal error: the adjoint of operand " + std::to_string(i) + " of '" +
                          std::string(o.name()) + "' has type " + dx[i]->type().str() + ", not " +
                          o.operand(i)->type().str());
      dx[i] = c;
    }
  return true;
}

} // namespace nimble::passes
