//===- OpMap.cpp - ONNX ops as Nimble ops ----------------------------------===//
//
// One row per ONNX op type the importer reads (opsets 7 to 21 of the
// default domain): the converter, and for the manual the Nimble ops it
// becomes and its limits. A converter emits one Nimble op where one fits and
// otherwise a short composite of existing ops (Gemm: matmul, mul, add;
// LeakyRelu: less, mul, select; BatchNormalization: sub, div, sqrt, ...).
// Attributes that ONNX moved to inputs across opsets (the axes of the
// reductions, Squeeze and Unsqueeze from 13 or 18; Split's sizes from 13 and
// its num_outputs from 18) are read from where the node's opset puts them;
// such inputs must be known when the model is imported (initializers,
// Constant nodes, or shapes of static tensors folded here), because Nimble
// takes them as attributes. Ops that need an op Nimble does not have are in
// the second table, with the reason (docs/import-onnx.md lists both).
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Convert.h"
#include "frontend/onnx/Graph.h"

#include <algorithm>
#include <cmath>

namespace nimble::onnx_import {

using namespace ir;

namespace {

using Out = std::vector<Value *>;
using Attrs = std::vector<std::pair<std::string, Attr>>;

DType dt(Value *v) { return v->type().dtype(); }
int64_t rankOf(Value *v) { return v->type().rank(); }
Value *like(Conv &c, Value *x, double v) { return c.scalar(dt(x), v); }
Attr ints(const std::vector<int64_t> &v) { return Attr::getInts(v); }

bool done(Out &out, Value *v) {
  out = {v};
  return v != nullptr;
}

/// A small integer constant's elements (for folding shape computations).
bool smallInts(const DenseValue *d) { return d && isInteger(d->dtype) && d->shape.size() <= 1 && d->numElements() <= 64; }

Value *foldInts(Conv &c, DType t, std::vector<int64_t> shape, const std::vector<int64_t> &vals) {
  DenseValue d;
  d.dtype = t;
  d.shape = std::move(shape);
  for (int64_t v : vals) d.appendInt(v);
  return c.constant(std::move(d));
}

std::vector<int64_t> intsOf(const DenseValue *d) {
  std::vector<int64_t> r;
  for (int64_t k = 0, n = d->numElements(); k < n; ++k) r.push_back(d->getInt(k));
  return r;
}

template <OpCode K> bool unary(Conv &c, Out &out) { return done(out, c.op(K, {c.input(0)})); }

template <OpCode K> bool binary(Conv &c, Out &out) {
  Value *a = c.input(0), *b = c.input(1);
  const DenseValue *ka = c.known(a), *kb = c.known(b);
  // Shape arithmetic on known integers (torch exports compute Reshape's
  // target from Shape with Add/Mul/Div): folded, so the target stays known.
  if ((K == OpCode::Add || K == OpCode::Sub || K == OpCode::Mul || K == OpCode::Div) && smallInts(ka) &&
      smallInts(kb) && ka->dtype == kb->dtype && (ka->shape == kb->shape || kb->shape.empty() || ka->shape.empty())) {
    std::vector<int64_t> x = intsOf(ka), y = intsOf(kb), r;
    size_t n = std::max(x.size(), y.size());
    for (size_t i = 0; i < n; ++i) {
      int64_t p = x[x.size() == 1 ? 0 : i], q = y[y.size() == 1 ? 0 : i];
      if (K == OpCode::Div && q == 0) goto emit;
      r.push_back(K == OpCode::Add ? p + q : K == OpCode::Sub ? p - q : K == OpCode::Mul ? p * q : p / q);
    }
    return done(out, foldInts(c, ka->dtype, ka->shape.empty() ? kb->shape : ka->shape, r));
  }
emit:
  return done(out, c.op(K, {a, b}));
}

bool identity(Conv &c, Out &out) {
  if (!c.input(0)) return c.fail("has no input");
  out = {c.input(0)};
  return true;
}

bool dropout(Conv &c, Out &out) {
  if (const DenseValue *t = c.known(c.input(2)); c.input(2) && (!t || t->getInt(0)))
    return c.fail("training mode (a training_mode input that is not a known false) is not supported");
  out = {c.input(0)};
  if (c.wantsOutput(1)) {
    Value *s = c.op(OpCode::ShapeOf, {c.input(0)});
    out.push_back(c.op(OpCode::Full, {s, c.scalar(DType::I1, 1)}));
  }
  return out[0] != nullptr;
}

/// Sum, Max, Min, Mean of any number of inputs, broadcasting.
template <OpCode K> bool variadic(Conv &c, Out &out) {
  if (c.in.empty() || !c.input(0)) return c.fail("has no input");
  Value *acc = c.input(0);
  for (size_t i = 1; i < c.in.size() && acc; ++i) acc = c.op(K == OpCode::Mean ? OpCode::Add : K, {acc, c.input(i)});
  if (acc && K == OpCode::Mean && c.in.size() > 1)
    acc = c.op(OpCode::Div, {acc, like(c, acc, static_cast<double>(c.in.size()))});
  return done(out, acc);
}

bool pow(Conv &c, Out &out) {
  Value *b = c.input(0), *e = c.input(1);
  if (b && e && dt(e) != dt(b)) e = c.op(OpCode::Cast, {e}, {{"dtype", Attr::getDType(dt(b))}});
  return done(out, c.op(OpCode::Pow, {b, e}));
}

bool reciprocal(Conv &c, Out &out) {
  Value *x = c.input(0);
  return x && done(out, c.op(OpCode::Div, {like(c, x, 1), x}));
}

bool xorOp(Conv &c, Out &out) { return done(out, c.op(OpCode::NotEqual, {c.input(0), c.input(1)})); }

bool isNaN(Conv &c, Out &out) { return done(out, c.op(OpCode::NotEqual, {c.input(0), c.input(0)})); }

bool isInf(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  bool pos = c.attrInt("detect_positive", 1), neg = c.attrInt("detect_negative", 1);
  Value *p = pos ? c.op(OpCode::Equal, {x, like(c, x, INFINITY)}) : nullptr;
  Value *n = neg ? c.op(OpCode::Equal, {x, like(c, x, -INFINITY)}) : nullptr;
  if (p && n) return done(out, c.op(OpCode::LogicalOr, {p, n}));
  if (p || n) return done(out, p ? p : n);
  Value *s = c.op(OpCode::ShapeOf, {x});
  return done(out, c.op(OpCode::Zeros, {s}, {{"dtype", Attr::getDType(DType::I1)}}));
}

bool sign(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  Value *zero = like(c, x, 0);
  Value *pos = c.op(OpCode::Greater, {x, zero}), *neg = c.op(OpCode::Less, {x, zero});
  Value *inner = c.op(OpCode::Select, {neg, like(c, x, -1), zero});
  return done(out, c.op(OpCode::Select, {pos, like(c, x, 1), inner}));
}

bool clip(Conv &c, Out &out) {
  Value *y = c.input(0);
  if (!y) return c.fail("has no input");
  Value *lo = c.input(1), *hi = c.input(2);
  if (c.opset < 11) { // min and max were attributes
    if (c.attr("min")) lo = like(c, y, c.attrFloat("min", 0));
    if (c.attr("max")) hi = like(c, y, c.attrFloat("max", 0));
  }
  if (y && lo) y = c.op(OpCode::Maximum, {y, lo});
  if (y && hi) y = c.op(OpCode::Minimum, {y, hi});
  return done(out, y);
}

//===-- Activations (composites) ---------------------------------------------===//

/// x < 0 ? neg : x  (LeakyRelu, PRelu, Elu).
Value *belowZero(Conv &c, Value *x, Value *neg) {
  Value *lt = c.op(OpCode::Less, {x, like(c, x, 0)});
  return c.op(OpCode::Select, {lt, neg, x});
}

bool leakyRelu(Conv &c, Out &out) {
  Value *x = c.input(0);
  return x && done(out, belowZero(c, x, c.op(OpCode::Mul, {x, like(c, x, c.attrFloat("alpha", 0.01))})));
}

bool prelu(Conv &c, Out &out) {
  Value *x = c.input(0);
  return x && done(out, belowZero(c, x, c.op(OpCode::Mul, {x, c.input(1)})));
}

bool elu(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  Value *em1 = c.op(OpCode::Sub, {c.op(OpCode::Exp, {x}), like(c, x, 1)});
  return done(out, belowZero(c, x, c.op(OpCode::Mul, {em1, like(c, x, c.attrFloat("alpha", 1.0))})));
}

bool selu(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  double alpha = c.attrFloat("alpha", 1.67326319217681884765625), gamma = c.attrFloat("gamma", 1.05070102214813232421875);
  Value *neg = c.op(OpCode::Mul, {c.op(OpCode::Sub, {c.op(OpCode::Exp, {x}), like(c, x, 1)}), like(c, x, alpha)});
  Value *le = c.op(OpCode::LessEqual, {x, like(c, x, 0)});
  return done(out, c.op(OpCode::Mul, {c.op(OpCode::Select, {le, neg, x}), like(c, x, gamma)}));
}

bool celu(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  double alpha = c.attrFloat("alpha", 1.0);
  Value *e = c.op(OpCode::Sub, {c.op(OpCode::Exp, {c.op(OpCode::Div, {x, like(c, x, alpha)})}), like(c, x, 1)});
  Value *neg = c.op(OpCode::Minimum, {like(c, x, 0), c.op(OpCode::Mul, {e, like(c, x, alpha)})});
  return done(out, c.op(OpCode::Add, {c.op(OpCode::Maximum, {x, like(c, x, 0)}), neg}));
}

/// max(0, min(1, a * x + b)).
Value *hardSigmoidOf(Conv &c, Value *x, double a, double b) {
  Value *lin = c.op(OpCode::Add, {c.op(OpCode::Mul, {x, like(c, x, a)}), like(c, x, b)});
  return c.op(OpCode::Maximum, {c.op(OpCode::Minimum, {lin, like(c, x, 1)}), like(c, x, 0)});
}

bool hardSigmoid(Conv &c, Out &out) {
  Value *x = c.input(0);
  return x && done(out, hardSigmoidOf(c, x, c.attrFloat("alpha", 0.2), c.attrFloat("beta", 0.5)));
}

bool hardSwish(Conv &c, Out &out) {
  Value *x = c.input(0);
  return x && done(out, c.op(OpCode::Mul, {x, hardSigmoidOf(c, x, 1.0 / 6, 0.5)}));
}

Value *softplusOf(Conv &c, Value *x) {
  return c.op(OpCode::Log, {c.op(OpCode::Add, {c.op(OpCode::Exp, {x}), like(c, x, 1)})});
}

bool softplus(Conv &c, Out &out) { return c.input(0) && done(out, softplusOf(c, c.input(0))); }

bool mish(Conv &c, Out &out) {
  Value *x = c.input(0);
  return x && done(out, c.op(OpCode::Mul, {x, c.op(OpCode::Tanh, {softplusOf(c, x)})}));
}

bool softsign(Conv &c, Out &out) {
  Value *x = c.input(0);
  return x && done(out, c.op(OpCode::Div, {x, c.op(OpCode::Add, {c.op(OpCode::Abs, {x}), like(c, x, 1)})}));
}

bool thresholdedRelu(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  Value *gt = c.op(OpCode::Greater, {x, like(c, x, c.attrFloat("alpha", 1.0))});
  return done(out, c.op(OpCode::Select, {gt, x, like(c, x, 0)}));
}

bool gelu(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  std::string approx = c.attrStr("approximate", "none");
  if (approx == "none") return done(out, c.op(OpCode::Gelu, {x}));
  if (approx != "tanh") return c.fail("approximate='" + approx + "' is not one of none, tanh");
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  Value *x3 = c.op(OpCode::Mul, {c.op(OpCode::Mul, {x, x}), x});
  Value *inner = c.op(OpCode::Add, {x, c.op(OpCode::Mul, {x3, like(c, x, 0.044715)})});
  Value *t = c.op(OpCode::Tanh, {c.op(OpCode::Mul, {inner, like(c, x, std::sqrt(2.0 / M_PI))})});
  Value *h = c.op(OpCode::Mul, {x, like(c, x, 0.5)});
  return done(out, c.op(OpCode::Mul, {h, c.op(OpCode::Add, {t, like(c, x, 1)})}));
}

//===-- Linear algebra -------------------------------------------------------===//

bool matmul(Conv &c, Out &out) {
  Value *a = c.input(0), *b = c.input(1);
  if (!a || !b) return c.fail("needs two inputs");
  int64_t ra = rankOf(a), rb = rankOf(b);
  if (ra == 0 || rb == 0) return c.fail("an operand is a scalar (MatMul needs rank >= 1)");
  // numpy.matmul: a 1-D lhs is a row, a 1-D rhs a column, removed afterwards.
  if (ra == 1) a = c.op(OpCode::ExpandDims, {a}, {{"axis", Attr::getInt(0)}});
  if (rb == 1) b = c.op(OpCode::ExpandDims, {b}, {{"axis", Attr::getInt(1)}});
  if (!a || !b) return false;
  int64_t r = std::max(rankOf(a), rankOf(b));
  Value *y;
  if (r == 2) {
    y = c.op(OpCode::MatMul, {a, b});
  } else {
    while (a && rankOf(a) < r) a = c.op(OpCode::ExpandDims, {a}, {{"axis", Attr::getInt(0)}});
    while (b && rankOf(b) < r) b = c.op(OpCode::ExpandDims, {b}, {{"axis", Attr::getInt(0)}});
    y = c.op(OpCode::BatchMatMul, {a, b});
  }
  if (y && rb == 1) y = c.op(OpCode::Squeeze, {y}, {{"axes", ints({-1})}});
  if (y && ra == 1) y = c.op(OpCode::Squeeze, {y}, {{"axes", ints({rb == 1 ? -1 : -2})}});
  return done(out, y);
}

bool gemm(Conv &c, Out &out) {
  Value *a = c.input(0), *b = c.input(1);
  if (!a || !b) return c.fail("needs two inputs");
  Value *y = c.op(OpCode::MatMul, {a, b},
                  {{"transpose_a", Attr::getBool(c.attrInt("transA", 0))},
                   {"transpose_b", Attr::getBool(c.attrInt("transB", 0))}});
  double alpha = c.attrFloat("alpha", 1.0), beta = c.attrFloat("beta", 1.0);
  if (y && alpha != 1.0) y = c.op(OpCode::Mul, {y, like(c, y, alpha)});
  if (y && c.input(2) && beta != 0.0) {
    Value *bias = c.input(2);
    if (beta != 1.0) bias = c.op(OpCode::Mul, {bias, like(c, bias, beta)});
    y = c.op(OpCode::Add, {y, bias});
  }
  return done(out, y);
}

//===-- Reductions and normalisations ----------------------------------------===//

/// The axes of a reduction: an input from `inputSince`, an attribute before.
/// Sets `all` when there are none (reduce everything, or nothing with
/// noop_with_empty_axes).
bool reduceAxes(Conv &c, int inputSince, std::vector<int64_t> &axes) {
  if (c.opset >= inputSince) {
    if (!c.input(1)) return true;
    auto k = c.knownInts(1);
    if (!k) return c.fail("the axes input must be known when the model is imported");
    axes = *k;
    return true;
  }
  if (auto a = c.attrInts("axes")) axes = *a;
  return true;
}

enum class Red { Sum, Mean, Max, Min, SumSquare, L1, L2, LogSum, LogSumExp };

template <Red R> bool reduce(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  std::vector<int64_t> axes;
  if (!reduceAxes(c, R == Red::Sum ? 13 : 18, axes)) return false;
  if (axes.empty() && c.attrInt("noop_with_empty_axes", 0)) return done(out, x);
  Attrs a = {{"axes", ints(axes)}, {"keepdims", Attr::getBool(c.attrInt("keepdims", 1))}};
  switch (R) {
  case Red::Sum: return done(out, c.op(OpCode::Sum, {x}, a));
  case Red::Mean: return done(out, c.op(OpCode::Mean, {x}, a));
  case Red::Max: return done(out, c.op(OpCode::Max, {x}, a));
  case Red::Min: return done(out, c.op(OpCode::Min, {x}, a));
  case Red::SumSquare: return done(out, c.op(OpCode::Sum, {c.op(OpCode::Mul, {x, x})}, a));
  case Red::L1: return done(out, c.op(OpCode::Sum, {c.op(OpCode::Abs, {x})}, a));
  case Red::L2: return done(out, c.op(OpCode::Sqrt, {c.op(OpCode::Sum, {c.op(OpCode::Mul, {x, x})}, a)}));
  case Red::LogSum: return done(out, c.op(OpCode::Log, {c.op(OpCode::Sum, {x}, a)}));
  case Red::LogSumExp: {
    // log(sum(exp(x - m))) + m with m the maximum (kept), for range.
    Value *m = c.op(OpCode::Max, {x}, {{"axes", ints(axes)}, {"keepdims", Attr::getBool(true)}});
    Value *s = c.op(OpCode::Sum, {c.op(OpCode::Exp, {c.op(OpCode::Sub, {x, m})})}, a);
    Value *mk = c.attrInt("keepdims", 1) ? m : c.op(OpCode::Squeeze, {m}, {{"axes", ints(axes.empty() ? [&] {
      std::vector<int64_t> all;
      for (int64_t i = 0; i < rankOf(x); ++i) all.push_back(i);
      return all;
    }() : axes)}});
    return done(out, c.op(OpCode::Add, {c.op(OpCode::Log, {s}), mk}));
  }
  }
  return false;
}

bool argReduce(Conv &c, Out &out, bool isMax) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  if (c.attrInt("select_last_index", 0)) return c.fail("select_last_index=1 is not supported");
  if (!isMax) {
    if (!isFloat(dt(x))) return c.fail("ArgMin of integers is not supported (it would negate the minimum)");
    x = c.op(OpCode::Neg, {x});
  }
  return done(out, c.op(OpCode::ArgMax, {x}, {{"axis", Attr::getInt(c.attrInt("axis", 0))},
                                              {"keepdims", Attr::getBool(c.attrInt("keepdims", 1))}}));
}
bool argMax(Conv &c, Out &out) { return argReduce(c, out, true); }
bool argMin(Conv &c, Out &out) { return argReduce(c, out, false); }

/// The axes Softmax and LogSoftmax normalise over: one axis from opset 13;
/// before, the input was read as 2-D, [d0 * ... * d(axis-1), the rest], so
/// the axes from `axis` (default 1) to the last.
std::vector<int64_t> softmaxAxes(Conv &c, Value *x) {
  int64_t r = rankOf(x), axis = c.attrInt("axis", c.opset >= 13 ? -1 : 1);
  if (c.opset >= 13) return {axis};
  if (axis < 0) axis += r;
  std::vector<int64_t> axes;
  for (int64_t i = std::max<int64_t>(axis, 0); i < r; ++i) axes.push_back(i);
  return axes;
}

/// x - max over `axes` (kept), for range.
Value *shiftedByMax(Conv &c, Value *x, const std::vector<int64_t> &axes) {
  return c.op(OpCode::Sub, {x, c.op(OpCode::Max, {x}, {{"axes", ints(axes)}, {"keepdims", Attr::getBool(true)}})});
}

bool softmax(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  std::vector<int64_t> axes = softmaxAxes(c, x);
  if (axes.size() == 1) return done(out, c.op(OpCode::Softmax, {x}, {{"axis", Attr::getInt(axes[0])}}));
  Value *e = c.op(OpCode::Exp, {shiftedByMax(c, x, axes)});
  return done(out, c.op(OpCode::Div, {e, c.op(OpCode::Sum, {e}, {{"axes", ints(axes)}, {"keepdims", Attr::getBool(true)}})}));
}

bool logSoftmax(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  std::vector<int64_t> axes = softmaxAxes(c, x);
  Value *s = shiftedByMax(c, x, axes);
  Attrs keep = {{"axes", ints(axes)}, {"keepdims", Attr::getBool(true)}};
  return done(out, c.op(OpCode::Sub, {s, c.op(OpCode::Log, {c.op(OpCode::Sum, {c.op(OpCode::Exp, {s})}, keep)})}));
}

bool layerNorm(Conv &c, Out &out) {
  Value *x = c.input(0), *scale = c.input(1), *bias = c.input(2);
  if (!x || !scale) return c.fail("needs an input and a scale");
  int64_t axis = c.attrInt("axis", -1);
  if (axis != -1 && axis != rankOf(x) - 1)
    return c.fail("axis=" + std::to_string(axis) + " is not supported (layer_norm normalises the last axis)");
  if (c.wantsOutput(1) || c.wantsOutput(2)) return c.fail("the Mean and InvStdDev outputs are not supported");
  if (rankOf(scale) != 1) return c.fail("the scale is not 1-D");
  if (!bias) bias = c.op(OpCode::Mul, {scale, like(c, scale, 0)});
  return done(out, c.op(OpCode::LayerNorm, {x, scale, bias}, {{"eps", Attr::getFloat(c.attrFloat("epsilon", 1e-5))}}));
}

/// A per-channel parameter [C] as [C, 1, ..., 1] against x of rank r (axis 1).
Value *perChannel(Conv &c, Value *p, int64_t r) {
  Value *v = p;
  for (int64_t i = 2; v && i < r; ++i) v = c.op(OpCode::ExpandDims, {v}, {{"axis", Attr::getInt(-1)}});
  return v;
}

bool batchNorm(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x || c.in.size() < 5) return c.fail("needs X, scale, B, mean and var");
  if (c.attrInt("training_mode", 0) || c.wantsOutput(1) || c.wantsOutput(2))
    return c.fail("training mode (running mean and variance outputs) is not supported");
  int64_t r = rankOf(x);
  if (r < 2) return c.fail("the input has rank < 2");
  Value *scale = perChannel(c, c.input(1), r), *b = perChannel(c, c.input(2), r);
  Value *mean = perChannel(c, c.input(3), r), *var = perChannel(c, c.input(4), r);
  if (!scale || !b || !mean || !var) return false;
  Value *den = c.op(OpCode::Sqrt, {c.op(OpCode::Add, {var, like(c, var, c.attrFloat("epsilon", 1e-5))})});
  Value *y = c.op(OpCode::Div, {c.op(OpCode::Sub, {x, mean}), den});
  return done(out, c.op(OpCode::Add, {c.op(OpCode::Mul, {y, scale}), b}));
}

std::vector<int64_t> spatialAxes(int64_t r) {
  std::vector<int64_t> a;
  for (int64_t i = 2; i < r; ++i) a.push_back(i);
  return a;
}

/// (x - mean) / sqrt(var + eps) over `axes` (biased variance).
Value *normalise(Conv &c, Value *x, const std::vector<int64_t> &axes, double eps) {
  Attrs keep = {{"axes", ints(axes)}, {"keepdims", Attr::getBool(true)}};
  Value *d = c.op(OpCode::Sub, {x, c.op(OpCode::Mean, {x}, keep)});
  Value *var = c.op(OpCode::Mean, {c.op(OpCode::Mul, {d, d})}, keep);
  Value *den = c.op(OpCode::Sqrt, {c.op(OpCode::Add, {var, like(c, x, eps)})});
  return c.op(OpCode::Div, {d, den});
}

bool instanceNorm(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x || !c.input(1) || !c.input(2)) return c.fail("needs input, scale and B");
  int64_t r = rankOf(x);
  if (r < 3) return c.fail("the input has rank < 3");
  Value *y = normalise(c, x, spatialAxes(r), c.attrFloat("epsilon", 1e-5));
  Value *scale = perChannel(c, c.input(1), r), *b = perChannel(c, c.input(2), r);
  return done(out, c.op(OpCode::Add, {c.op(OpCode::Mul, {y, scale}), b}));
}

bool mvn(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  std::vector<int64_t> axes = c.attrInts("axes").value_or(std::vector<int64_t>{0, 2, 3});
  return done(out, normalise(c, x, axes, 1e-9));
}

template <OpCode K> bool globalPool(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x || rankOf(x) < 3) return c.fail("the input has rank < 3");
  return done(out, c.op(K, {x}, {{"axes", ints(spatialAxes(rankOf(x)))}, {"keepdims", Attr::getBool(true)}}));
}

bool lpNorm(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  int64_t p = c.attrInt("p", 2);
  if (p != 1 && p != 2) return c.fail("p=" + std::to_string(p) + " is not 1 or 2");
  Attrs keep = {{"axes", ints({c.attrInt("axis", -1)})}, {"keepdims", Attr::getBool(true)}};
  Value *n = p == 1 ? c.op(OpCode::Sum, {c.op(OpCode::Abs, {x})}, keep)
                    : c.op(OpCode::Sqrt, {c.op(OpCode::Sum, {c.op(OpCode::Mul, {x, x})}, keep)});
  return done(out, c.op(OpCode::Div, {x, n}));
}

//===-- Shapes ---------------------------------------------------------------===//

Conv::DimPart product(Conv &c, const std::vector<Conv::DimPart> &parts) {
  Conv::DimPart r{1, nullptr};
  for (const auto &p : parts) {
    if (p.v) r.v = r.v ? c.op(OpCode::Mul, {r.v, p.v}) : p.v;
    else r.size *= p.size;
  }
  if (r.v && r.size != 1) r.v = c.op(OpCode::Mul, {r.v, c.scalar(DType::I64, static_cast<double>(r.size))});
  return r;
}

/// Reshape to `parts` where one entry (`minusOne`, or -1 for none) is what
/// makes the element counts match.
Value *reshapeTo(Conv &c, Value *x, std::vector<Conv::DimPart> parts, int64_t minusOne) {
  bool dynamic = false;
  for (const auto &p : parts) dynamic |= p.v != nullptr;
  if (!dynamic) {
    std::vector<int64_t> s;
    for (size_t i = 0; i < parts.size(); ++i) s.push_back(static_cast<int64_t>(i) == minusOne ? -1 : parts[i].size);
    return c.op(OpCode::Reshape, {x}, {{"shape", ints(s)}});
  }
  // dyn_reshape's run-time shape function infers a -1 entry as reshape does.
  if (minusOne >= 0) parts[static_cast<size_t>(minusOne)] = {-1, nullptr};
  Value *s = c.shapeVector(parts);
  Value *y = s ? c.op(OpCode::DynReshape, {x, s}) : nullptr;
  if (!y) return nullptr;
  // The entries known here are static in the result type (a written size
  // the relation cannot prove is a run-time check: LangRef, Operations).
  std::vector<int64_t> dims;
  for (const auto &p : parts) dims.push_back(p.v || p.size < 0 ? kDynamic : p.size);
  y->setType(c.ctx().tensor(dt(y), dims));
  return y;
}

bool reshape(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x || !c.input(1)) return c.fail("needs data and shape");
  auto s = c.knownInts(1);
  bool allowZero = c.attrInt("allowzero", 0);
  if (!s) {
    Value *shape = c.input(1);
    if (dt(shape) != DType::I64) shape = c.op(OpCode::Cast, {shape}, {{"dtype", Attr::getDType(DType::I64)}});
    if (!shape || rankOf(shape) != 1 || shape->type().dims()[0] == kDynamic)
      return c.fail("the shape input must have a static length (the result's rank)");
    int64_t n = shape->type().dims()[0], r = rankOf(x);
    if (!allowZero && n > 0) {
      // A 0 entry copies the input's dimension at its index: select the
      // input's shape (cut or padded with 1s to n entries) where it is 0.
      Value *xs = c.op(OpCode::ShapeOf, {x});
      if (xs && r > n) xs = c.op(OpCode::Slice, {xs}, {{"axes", ints({0})}, {"starts", ints({0})}, {"ends", ints({n})}});
      if (xs && r < n) xs = c.op(OpCode::Concat, {xs, c.i64s(std::vector<int64_t>(static_cast<size_t>(n - r), 1))});
      Value *zero = c.op(OpCode::Equal, {shape, c.scalar(DType::I64, 0)});
      shape = c.op(OpCode::Select, {zero, xs, shape});
    }
    return done(out, c.op(OpCode::DynReshape, {x, shape}));
  }
  std::vector<Conv::DimPart> parts;
  int64_t minusOne = -1;
  for (size_t i = 0; i < s->size(); ++i) {
    int64_t v = (*s)[i];
    if (v == 0 && !allowZero) {
      if (static_cast<int64_t>(i) >= rankOf(x)) return c.fail("shape entry " + std::to_string(i) + " copies a dimension the input does not have");
      parts.push_back(c.dimOf(x, static_cast<int64_t>(i)));
    } else if (v == -1) {
      if (minusOne >= 0) return c.fail("the shape has more than one -1");
      minusOne = static_cast<int64_t>(i);
      parts.push_back({1, nullptr});
    } else if (v < 0) {
      return c.fail("shape entry " + std::to_string(v) + " is negative");
    } else {
      parts.push_back({v, nullptr});
    }
  }
  return done(out, reshapeTo(c, x, parts, minusOne));
}

bool flatten(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  int64_t r = rankOf(x), axis = c.attrInt("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) return c.fail("axis is out of range");
  std::vector<Conv::DimPart> lo, hi;
  for (int64_t i = 0; i < r; ++i) (i < axis ? lo : hi).push_back(c.dimOf(x, i));
  Conv::DimPart a = product(c, lo), b = product(c, hi);
  if (!a.v && b.v && a.size > 0) return done(out, reshapeTo(c, x, {a, {1, nullptr}}, 1));
  if (a.v && !b.v && b.size > 0) return done(out, reshapeTo(c, x, {{1, nullptr}, b}, 0));
  return done(out, reshapeTo(c, x, {a, b}, -1));
}

bool shape(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  int64_t r = rankOf(x), start = c.attrInt("start", 0), end = c.attrInt("end", r);
  auto clampAxis = [r](int64_t a) { return std::clamp<int64_t>(a < 0 ? a + r : a, 0, r); };
  start = clampAxis(start);
  end = clampAxis(end);
  std::vector<int64_t> dims;
  bool isStatic = true;
  for (int64_t i = start; i < end; ++i) {
    dims.push_back(x->type().dims()[static_cast<size_t>(i)]);
    isStatic &= dims.back() != kDynamic;
  }
  if (isStatic) return done(out, c.i64s(dims));
  Value *s = c.op(OpCode::ShapeOf, {x});
  if (start == 0 && end == r) return done(out, s);
  return done(out, c.op(OpCode::Slice, {s}, {{"axes", ints({0})}, {"starts", ints({start})}, {"ends", ints({end})}}));
}

bool size(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  std::vector<Conv::DimPart> all;
  for (int64_t i = 0; i < rankOf(x); ++i) all.push_back(c.dimOf(x, i));
  Conv::DimPart n = product(c, all);
  return done(out, n.v ? n.v : c.scalar(DType::I64, static_cast<double>(n.size)));
}

bool transpose(Conv &c, Out &out) {
  return done(out, c.op(OpCode::Transpose, {c.input(0)}, {{"perm", ints(c.attrInts("perm").value_or(std::vector<int64_t>{}))}}));
}

bool concat(Conv &c, Out &out) {
  int64_t axis = c.attrInt("axis", 0);
  std::vector<int64_t> folded;
  bool fold = !c.in.empty() && (axis == 0 || axis == -1);
  for (Value *v : c.in) {
    const DenseValue *k = c.known(v);
    fold = fold && smallInts(k) && k->shape.size() == 1 && k->dtype == c.known(c.in[0])->dtype;
    if (fold) for (int64_t e : intsOf(k)) folded.push_back(e);
  }
  if (fold) return done(out, foldInts(c, c.known(c.in[0])->dtype, {static_cast<int64_t>(folded.size())}, folded));
  return done(out, c.op(OpCode::Concat, c.in, {{"axis", Attr::getInt(axis)}}));
}

bool gather(Conv &c, Out &out) {
  Value *x = c.input(0), *idx = c.input(1);
  if (!x || !idx) return c.fail("needs data and indices");
  int64_t axis = c.attrInt("axis", 0);
  const DenseValue *kx = c.known(x), *ki = c.known(idx);
  if (smallInts(kx) && smallInts(ki) && kx->shape.size() == 1 && axis == 0) {
    std::vector<int64_t> xs = intsOf(kx), r;
    int64_t n = static_cast<int64_t>(xs.size());
    for (int64_t i : intsOf(ki)) {
      if (i < -n || i >= n) return c.fail("index " + std::to_string(i) + " is out of range");
      r.push_back(xs[static_cast<size_t>(i < 0 ? i + n : i)]);
    }
    return done(out, foldInts(c, kx->dtype, ki->shape, r));
  }
  return done(out, c.op(OpCode::Take, {x, idx}, {{"axis", Attr::getInt(axis)}}));
}

bool squeezeAxes(Conv &c, std::vector<int64_t> &axes, bool &given) {
  given = false;
  if (c.opset >= 13) {
    if (!c.input(1)) return true;
    auto k = c.knownInts(1);
    if (!k) return c.fail("the axes input must be known when the model is imported");
    axes = *k;
  } else if (auto a = c.attrInts("axes")) {
    axes = *a;
  } else {
    return true;
  }
  given = true;
  return true;
}

bool unsqueeze(Conv &c, Out &out) {
  Value *x = c.input(0);
  std::vector<int64_t> axes;
  bool given;
  if (!x || !squeezeAxes(c, axes, given)) return x ? false : c.fail("has no input");
  if (!given) return c.fail("needs axes");
  int64_t r = rankOf(x) + static_cast<int64_t>(axes.size());
  for (int64_t &a : axes) a = a < 0 ? a + r : a;
  std::sort(axes.begin(), axes.end());
  if (const DenseValue *k = c.known(x); smallInts(k)) {
    std::vector<int64_t> shape = k->shape;
    for (int64_t a : axes) shape.insert(shape.begin() + std::clamp<int64_t>(a, 0, static_cast<int64_t>(shape.size())), 1);
    return done(out, foldInts(c, k->dtype, shape, intsOf(k)));
  }
  for (int64_t a : axes)
    if (x) x = c.op(OpCode::ExpandDims, {x}, {{"axis", Attr::getInt(a)}});
  return done(out, x);
}

bool squeeze(Conv &c, Out &out) {
  Value *x = c.input(0);
  std::vector<int64_t> axes;
  bool given;
  if (!x || !squeezeAxes(c, axes, given)) return x ? false : c.fail("has no input");
  if (const DenseValue *k = c.known(x); smallInts(k) && (k->shape.size() == 0 || k->shape[0] == 1))
    return done(out, foldInts(c, k->dtype, {}, intsOf(k)));
  return done(out, c.op(OpCode::Squeeze, {x}, {{"axes", ints(axes)}}));
}

bool expand(Conv &c, Out &out) {
  Value *x = c.input(0), *s = c.input(1);
  if (!x || !s) return c.fail("needs input and shape");
  // Bidirectional broadcasting: with a known shape whose broadcast with
  // x's is static, broadcast_to; otherwise x times ones of that shape,
  // which broadcasts both ways at run time.
  if (auto k = c.knownInts(1)) {
    const auto &d = x->type().dims();
    size_t r = std::max(d.size(), k->size());
    std::vector<int64_t> target(r);
    bool ok = true;
    for (size_t i = 0; i < r; ++i) {
      int64_t a = i + d.size() >= r ? d[i + d.size() - r] : 1, b = i + k->size() >= r ? (*k)[i + k->size() - r] : 1;
      if (a == kDynamic) {
        ok = ok && b != 1;
        target[i] = b;
      } else {
        target[i] = a == 1 ? b : a;
      }
    }
    if (ok) return done(out, c.op(OpCode::BroadcastTo, {x}, {{"shape", ints(target)}}));
  }
  if (dt(s) != DType::I64) s = c.op(OpCode::Cast, {s}, {{"dtype", Attr::getDType(DType::I64)}});
  Value *ones = c.op(OpCode::Full, {s, like(c, x, 1)});
  return done(out, c.op(dt(x) == DType::I1 ? OpCode::LogicalAnd : OpCode::Mul, {x, ones}));
}

bool slice(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  auto starts = c.knownInts(1), ends = c.knownInts(2);
  if (!starts || !ends) return c.fail("starts and ends must be known when the model is imported");
  std::vector<int64_t> axes;
  if (c.input(3)) {
    auto a = c.knownInts(3);
    if (!a) return c.fail("axes must be known when the model is imported");
    axes = *a;
  } else {
    for (size_t i = 0; i < starts->size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (c.input(4)) {
    auto st = c.knownInts(4);
    if (!st) return c.fail("steps must be known when the model is imported");
    for (int64_t s : *st)
      if (s != 1) return c.fail("step " + std::to_string(s) + " is not supported (Nimble's slice has step 1)");
  }
  if (axes.size() != starts->size() || ends->size() != starts->size())
    return c.fail("starts, ends and axes differ in length");
  if (const DenseValue *k = c.known(x); smallInts(k) && k->shape.size() == 1 && axes.size() == 1) {
    std::vector<int64_t> v = intsOf(k);
    int64_t n = static_cast<int64_t>(v.size());
    auto cl = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
    int64_t b = cl((*starts)[0]), e = cl((*ends)[0]);
    std::vector<int64_t> r(v.begin() + b, v.begin() + std::max(b, e));
    return done(out, foldInts(c, k->dtype, {static_cast<int64_t>(r.size())}, r));
  }
  return done(out, c.op(OpCode::Slice, {x}, {{"axes", ints(axes)}, {"starts", ints(*starts)}, {"ends", ints(*ends)}}));
}

bool split(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  int64_t axis = c.attrInt("axis", 0), r = rankOf(x);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return c.fail("axis is out of range");
  size_t n = c.numOutputs();
  std::vector<int64_t> sizes;
  if (c.input(1)) {
    auto k = c.knownInts(1);
    if (!k) return c.fail("the split sizes must be known when the model is imported");
    sizes = *k;
  } else if (const auto *a = c.attr("split")) {
    sizes.assign(a->ints().begin(), a->ints().end());
  }
  int64_t d = x->type().dims()[static_cast<size_t>(axis)];
  if (sizes.empty() && d != kDynamic && d % static_cast<int64_t>(n) != 0) {
    int64_t chunk = (d + static_cast<int64_t>(n) - 1) / static_cast<int64_t>(n); // opset 18's uneven split
    for (size_t i = 0; i < n; ++i) sizes.push_back(std::min(chunk, d - chunk * static_cast<int64_t>(i)));
  }
  bool equal = sizes.empty() || std::all_of(sizes.begin(), sizes.end(), [&](int64_t s) { return s == sizes[0]; });
  if (equal) {
    out = c.ops(OpCode::Split, {x}, {{"axis", Attr::getInt(axis)}, {"sections", Attr::getInt(static_cast<int64_t>(n))}},
                static_cast<unsigned>(n));
    return !out.empty();
  }
  if (sizes.size() != n) return c.fail("has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(n) + " outputs");
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(c.op(OpCode::Slice, {x}, {{"axes", ints({axis})}, {"starts", ints({at})}, {"ends", ints({at + s})}}));
    at += s;
    if (!out.back()) return false;
  }
  return true;
}

bool cast(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  int to = static_cast<int>(c.attrInt("to", 0));
  std::optional<DType> t = dtypeOf(to);
  if (!t) return c.fail("casts to " + onnxTypeName(to) + ", which Nimble does not have");
  if (*t == dt(x)) return done(out, x);
  if (const DenseValue *k = c.known(x); smallInts(k) && isInteger(*t))
    return done(out, foldInts(c, *t, k->shape, intsOf(k)));
  return done(out, c.op(OpCode::Cast, {x}, {{"dtype", Attr::getDType(*t)}}));
}

bool castLike(Conv &c, Out &out) {
  Value *x = c.input(0), *y = c.input(1);
  if (!x || !y) return c.fail("needs two inputs");
  return done(out, dt(x) == dt(y) ? x : c.op(OpCode::Cast, {x}, {{"dtype", Attr::getDType(dt(y))}}));
}

bool where(Conv &c, Out &out) { return done(out, c.op(OpCode::Select, {c.input(0), c.input(1), c.input(2)})); }

bool constantOp(Conv &c, Out &out) {
  DenseValue d;
  if (const auto *a = c.attr("value")) {
    if (!c.tensorAttr(a->t(), d)) return false;
  } else if (const auto *f = c.attr("value_float")) {
    d.dtype = DType::F32;
    d.appendDouble(f->f());
  } else if (const auto *fs = c.attr("value_floats")) {
    d.dtype = DType::F32;
    d.shape = {fs->floats_size()};
    for (float v : fs->floats()) d.appendDouble(v);
  } else if (const auto *i = c.attr("value_int")) {
    d.dtype = DType::I64;
    d.appendInt(i->i());
  } else if (const auto *is = c.attr("value_ints")) {
    d.dtype = DType::I64;
    d.shape = {is->ints_size()};
    for (int64_t v : is->ints()) d.appendInt(v);
  } else {
    return c.fail("only value, value_float(s) and value_int(s) are supported (not sparse or string values)");
  }
  return done(out, c.constant(std::move(d)));
}

bool constantOfShape(Conv &c, Out &out) {
  DenseValue v;
  v.dtype = DType::F32;
  if (const auto *a = c.attr("value")) {
    if (!c.tensorAttr(a->t(), v)) return false;
    if (v.numElements() != 1) return c.fail("the value is not one element");
  } else {
    v.appendDouble(0);
  }
  v.shape.clear();
  if (auto s = c.knownInts(0)) {
    DenseValue d = v;
    d.shape = *s;
    for (int64_t e : *s)
      if (e < 0) return c.fail("the shape has a negative entry");
    int64_t n = 1;
    for (int64_t e : *s) n *= e;
    if (n == 0) d.bytes.clear();
    d.splat = n > 0 && !s->empty();
    return done(out, c.constant(std::move(d)));
  }
  Value *s = c.input(0);
  if (!s) return c.fail("has no shape");
  if (dt(s) != DType::I64) s = c.op(OpCode::Cast, {s}, {{"dtype", Attr::getDType(DType::I64)}});
  return done(out, c.op(OpCode::Full, {s, c.constant(std::move(v))}));
}

bool range(Conv &c, Out &out) { return done(out, c.op(OpCode::Arange, {c.input(0), c.input(1), c.input(2)})); }

bool nonZero(Conv &c, Out &out) {
  Value *nz = c.op(OpCode::Nonzero, {c.input(0)});
  return done(out, nz ? c.op(OpCode::Transpose, {nz}) : nullptr);
}

bool ifOp(Conv &c, Out &out);
bool loopOp(Conv &c, Out &out);

} // namespace

const std::vector<OpEntry> &opMap() {
  static const std::vector<OpEntry> map = [] {
    std::vector<OpEntry> m = {
        {"Abs", 7, "abs", "", unary<OpCode::Abs>},
        {"Add", 7, "add", "", binary<OpCode::Add>},
        {"And", 7, "logical_and", "", binary<OpCode::LogicalAnd>},
        {"ArgMax", 7, "argmax", "select_last_index=0 only", argMax},
        {"ArgMin", 7, "neg, argmax", "floats only; select_last_index=0 only", argMin},
        {"BatchNormalization", 9, "sub, div, sqrt, mul, add, expand_dims", "inference mode only", batchNorm},
        {"Cast", 7, "cast", "to Nimble's element types; saturate ignored (float8 only)", cast},
        {"CastLike", 15, "cast", "", castLike},
        {"Celu", 12, "exp, div, sub, mul, minimum, maximum, add", "", celu},
        {"Clip", 7, "maximum, minimum", "", clip},
        {"Concat", 7, "concat", "", concat},
        {"Constant", 7, "constant", "not sparse_value or strings", constantOp},
        {"ConstantOfShape", 9, "constant, full", "", constantOfShape},
        {"Div", 7, "div", "", binary<OpCode::Div>},
        {"Dropout", 7, "(none)", "inference only: the input, and a mask of true", dropout},
        {"Elu", 7, "less, exp, sub, mul, select", "", elu},
        {"Equal", 7, "equal", "", binary<OpCode::Equal>},
        {"Erf", 9, "erf", "", unary<OpCode::Erf>},
        {"Exp", 7, "exp", "", unary<OpCode::Exp>},
        {"Expand", 8, "broadcast_to, or full and mul", "", expand},
        {"Flatten", 9, "reshape, dyn_reshape", "", flatten},
        {"Gather", 7, "take", "", gather},
        {"Gelu", 20, "gelu", "approximate=tanh as tanh, mul, add", gelu},
        {"Gemm", 7, "matmul, mul, add", "", gemm},
        {"GlobalAveragePool", 7, "mean", "", globalPool<OpCode::Mean>},
        {"GlobalMaxPool", 7, "max", "", globalPool<OpCode::Max>},
        {"Greater", 7, "greater", "", binary<OpCode::Greater>},
        {"GreaterOrEqual", 12, "greater_equal", "", binary<OpCode::GreaterEqual>},
        {"HardSigmoid", 7, "mul, add, minimum, maximum", "", hardSigmoid},
        {"HardSwish", 14, "mul, add, minimum, maximum", "", hardSwish},
        {"Identity", 7, "(none)", "tensors only", identity},
        {"If", 7, "cond_br, br, block arguments", "tensor outputs of one element type and rank in both branches", ifOp},
        {"InstanceNormalization", 7, "mean, sub, mul, sqrt, div, add", "", instanceNorm},
        {"IsInf", 10, "equal, logical_or", "", isInf},
        {"IsNaN", 9, "not_equal", "", isNaN},
        {"LayerNormalization", 17, "layer_norm", "last axis only; no Mean/InvStdDev outputs", layerNorm},
        {"LeakyRelu", 7, "less, mul, select", "", leakyRelu},
        {"Less", 7, "less", "", binary<OpCode::Less>},
        {"LessOrEqual", 12, "less_equal", "", binary<OpCode::LessEqual>},
        {"Log", 7, "log", "", unary<OpCode::Log>},
        {"LogSoftmax", 7, "max, sub, exp, sum, log", "", logSoftmax},
        {"Loop", 7, "br, cond_br, block arguments", "no scan outputs; carried values keep dtype and rank", loopOp},
        {"LpNormalization", 7, "abs or mul, sum, sqrt, div", "p = 1 or 2", lpNorm},
        {"MatMul", 7, "matmul, batch_matmul", "", matmul},
        {"Max", 8, "maximum", "", variadic<OpCode::Maximum>},
        {"Mean", 8, "add, div", "", variadic<OpCode::Mean>},
        {"MeanVarianceNormalization", 9, "mean, sub, mul, sqrt, div", "", mvn},
        {"Min", 8, "minimum", "", variadic<OpCode::Minimum>},
        {"Mish", 18, "exp, add, log, tanh, mul", "", mish},
        {"Mul", 7, "mul", "", binary<OpCode::Mul>},
        {"Neg", 7, "neg", "", unary<OpCode::Neg>},
        {"NonZero", 9, "nonzero, transpose", "", nonZero},
        {"Not", 7, "logical_not", "", unary<OpCode::LogicalNot>},
        {"Or", 7, "logical_or", "", binary<OpCode::LogicalOr>},
        {"PRelu", 7, "less, mul, select", "", prelu},
        {"Pow", 7, "pow (cast of the exponent)", "float bases only", pow},
        {"Range", 11, "arange", "", range},
        {"Reciprocal", 7, "div", "", reciprocal},
        {"ReduceL1", 7, "abs, sum", "axes known at import", reduce<Red::L1>},
        {"ReduceL2", 7, "mul, sum, sqrt", "axes known at import", reduce<Red::L2>},
        {"ReduceLogSum", 7, "sum, log", "axes known at import", reduce<Red::LogSum>},
        {"ReduceLogSumExp", 7, "max, sub, exp, sum, log, add", "axes known at import", reduce<Red::LogSumExp>},
        {"ReduceMax", 7, "max", "axes known at import; not over an empty axis", reduce<Red::Max>},
        {"ReduceMean", 7, "mean", "axes known at import", reduce<Red::Mean>},
        {"ReduceMin", 7, "min", "axes known at import; not over an empty axis", reduce<Red::Min>},
        {"ReduceSum", 7, "sum", "axes known at import", reduce<Red::Sum>},
        {"ReduceSumSquare", 7, "mul, sum", "axes known at import", reduce<Red::SumSquare>},
        {"Relu", 7, "relu", "", unary<OpCode::Relu>},
        {"Reshape", 7, "reshape, dyn_reshape", "", reshape},
        {"Selu", 7, "exp, sub, mul, less_equal, select", "", selu},
        {"Shape", 7, "shape_of, slice (or a constant)", "", shape},
        {"Sigmoid", 7, "sigmoid", "", unary<OpCode::Sigmoid>},
        {"Sign", 9, "greater, less, select", "", sign},
        {"Size", 7, "dim, mul (or a constant)", "", size},
        {"Slice", 10, "slice", "starts, ends, axes known at import; steps of 1", slice},
        {"Softmax", 7, "softmax", "", softmax},
        {"Softplus", 7, "exp, add, log", "", softplus},
        {"Softsign", 7, "abs, add, div", "", softsign},
        {"Split", 7, "split, slice", "sizes known at import", split},
        {"Sqrt", 7, "sqrt", "", unary<OpCode::Sqrt>},
        {"Squeeze", 7, "squeeze", "axes known at import", squeeze},
        {"Sub", 7, "sub", "", binary<OpCode::Sub>},
        {"Sum", 8, "add", "", variadic<OpCode::Add>},
        {"Tanh", 7, "tanh", "", unary<OpCode::Tanh>},
        {"ThresholdedRelu", 10, "greater, select", "", thresholdedRelu},
        {"Transpose", 7, "transpose", "", transpose},
        {"Unsqueeze", 7, "expand_dims", "axes known at import", unsqueeze},
        {"Where", 9, "select", "", where},
        {"Xor", 7, "not_equal", "", xorOp},
    };
    // Sorted by type for findOp, whatever the order above.
    std::sort(m.begin(), m.end(), [](const OpEntry &a, const OpEntry &b) { return std::string(a.type) < b.type; });
    return m;
  }();
  return map;
}

const OpEntry *findOp(const std::string &type) {
  const auto &m = opMap();
  auto it = std::lower_bound(m.begin(), m.end(), type, [](const OpEntry &e, const std::string &t) { return e.type < t; });
  return it != m.end() && it->type == type ? &*it : nullptr;
}

namespace {
bool ifOp(Conv &c, Out &out) { return c.graph().convertIf(c, out); }
bool loopOp(Conv &c, Out &out) { return c.graph().convertLoop(c, out); }

/// ONNX op types that need a Nimble op that does not exist yet (a new row of
/// ir/Ops.def with its shape function, kernels and gradient): issue 47.
struct Missing {
  const char *types;
  const char *why;
};
const Missing kMissing[] = {
    {"Conv ConvTranspose ConvInteger QLinearConv DeformConv", "convolution needs a new Nimble op (conv)"},
    {"MaxPool AveragePool LpPool MaxRoiPool MaxUnpool GlobalLpPool", "pooling needs a new Nimble op (pool)"},
    {"Resize Upsample GridSample RoiAlign AffineGrid", "resampling needs a new Nimble op (resize)"},
    {"Pad CenterCropPad", "padding needs a new Nimble op (pad)"},
    {"Tile", "needs a new Nimble op (tile)"},
    {"Floor Ceil Round", "rounding needs new Nimble ops (floor, ceil, round)"},
    {"Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh", "trigonometric functions need new Nimble ops"},
    {"Mod BitShift BitwiseAnd BitwiseOr BitwiseXor BitwiseNot", "needs a new Nimble integer op"},
    {"CumSum", "needs a new Nimble op (cumsum)"},
    {"TopK", "needs a new Nimble op (top_k)"},
    {"Scatter ScatterND ScatterElements", "needs a new Nimble op (scatter)"},
    {"GatherND GatherElements", "needs a new Nimble op (gather_nd / gather_elements)"},
    {"OneHot", "needs a new Nimble op (one_hot)"},
    {"ReduceProd", "needs a new Nimble reduction (prod)"},
    {"Trilu", "needs a new Nimble op (trilu)"},
    {"Einsum", "needs a new Nimble op (einsum)"},
    {"LSTM GRU RNN", "recurrent layers need new Nimble ops or a loop expansion (not yet)"},
    {"Scan", "needs scan outputs, which the importer's loops do not support yet"},
    {"Hardmax", "needs a new Nimble op (one_hot of argmax)"},
    {"DepthToSpace SpaceToDepth", "not yet (a reshape and transpose of static shapes)"},
    {"Det Compress ReverseSequence Unique NonMaxSuppression StringNormalizer TfIdfVectorizer RegexFullMatch "
     "StringConcat StringSplit Col2Im DFT STFT MelWeightMatrix BlackmanWindow HammingWindow HannWindow "
     "EyeLike Shrink GroupNormalization LRN Bernoulli Multinomial RandomNormal RandomNormalLike RandomUniform "
     "RandomUniformLike Optional OptionalGetElement OptionalHasElement SequenceAt SequenceConstruct "
     "SequenceEmpty SequenceErase SequenceInsert SequenceLength SequenceMap SplitToSequence ConcatFromSequence "
     "QuantizeLinear DequantizeLinear DynamicQuantizeLinear MatMulInteger QLinearMatMul ImageDecoder "
     "NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss Gradient",
     "needs an op or a type (sequences, optionals, strings, quantized or random tensors) Nimble does not have"},
};
} // namespace

const char *missingOpReason(const std::string &type) {
  for (const Missing &m : kMissing) {
    std::string_view all = m.types;
    for (size_t at = 0; at < all.size();) {
      size_t sp = all.find(' ', at);
      if (sp == std::string_view::npos) sp = all.size();
      if (all.substr(at, sp - at) == type) return m.why;
      at = sp + 1;
    }
  }
  return nullptr;
}

std::string listOps() {
  std::string s;
  for (const OpEntry &e : opMap())
    s += std::string(e.type) + "\t" + std::to_string(e.since) + "\t" + e.nir + "\t" + e.notes + "\n";
  s += "# not supported\n";
  for (const Missing &m : kMissing) {
    std::string_view all = m.types;
    for (size_t at = 0; at < all.size();) {
      size_t sp = all.find(' ', at);
      if (sp == std::string_view::npos) sp = all.size();
      s += std::string(all.substr(at, sp - at)) + "\t-\t-\t" + m.why + "\n";
      at = sp + 1;
    }
  }
  return s;
}

} // namespace nimble::onnx_import
