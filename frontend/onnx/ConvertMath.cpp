//===- ConvertMath.cpp - Element-wise, activation, linear algebra, reduction ops -===//
//
// ONNX's arithmetic ops as Nimble ops or short composites of them (the
// activations, Gemm, the reductions beyond sum/mean/max/min, the
// normalisations); see OpMap.cpp for the table.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Converters.h"
#include "frontend/onnx/Graph.h"

#include <algorithm>
#include <cmath>

namespace nimble::onnx_import::convert {

bool identity(Conv &c, Out &out) {
  if (!c.input(0)) return c.fail("has no input");
  out = {c.input(0)};
  return true;
}

/// Dropout: the input (and a mask of true) where it drops nothing: in
/// inference mode, or in training mode with ratio 0. Nimble has no random
/// numbers, so training with another ratio is refused at import when the
/// model fixes both, and otherwise checked at run time (a run-time
/// training_mode or ratio: a branch to `unreachable`, a located error).
bool dropout(Conv &c, Out &out) {
  Value *x = c.input(0), *ratio = c.input(1), *training = c.input(2);
  if (!x) return c.fail("has no input");
  const DenseValue *t = c.known(training), *r = c.known(ratio);
  bool inference = !training || (t && !t->getInt(0));
  if (!inference) {
    bool zero = r && r->getDouble(0) == 0.0;
    if (!zero && t && (!ratio || r))
      return c.fail("training mode with a nonzero ratio needs random numbers, which Nimble does not have");
    if (!zero) {
      // drops = training && ratio != 0 (an omitted ratio is 0.5).
      Value *train = t ? c.scalar(DType::I1, 1)
                       : rankOf(training) == 0 ? training
                                               : c.op(OpCode::Reshape, {training}, {{"shape", ints({})}});
      Value *drops = train;
      if (ratio && !(drops = c.op(OpCode::LogicalAnd, {train, c.op(OpCode::NotEqual, {ratio, like(c, ratio, 0)})})))
        return false;
      if (!drops || !c.graph().guard(c.op(OpCode::LogicalNot, {drops}))) return false;
    }
  }
  out = {x};
  if (c.wantsOutput(1)) {
    Value *s = c.op(OpCode::ShapeOf, {x});
    out.push_back(c.op(OpCode::Full, {s, c.scalar(DType::I1, 1)}));
  }
  return out[0] != nullptr;
}

bool pow(Conv &c, Out &out) {
  Value *b = c.input(0), *e = c.input(1);
  if (!b || !e) return c.fail("needs two inputs");
  if (!isFloat(dt(b))) {
    // Nimble's pow is for floats: integers through f64, exact while the
    // result has 53 bits.
    Value *fb = c.op(OpCode::Cast, {b}, {{"dtype", Attr::getDType(DType::F64)}});
    Value *fe = c.op(OpCode::Cast, {e}, {{"dtype", Attr::getDType(DType::F64)}});
    return done(out, c.op(OpCode::Cast, {c.op(OpCode::Pow, {fb, fe})}, {{"dtype", Attr::getDType(dt(b))}}));
  }
  if (dt(e) != dt(b)) e = c.op(OpCode::Cast, {e}, {{"dtype", Attr::getDType(dt(b))}});
  return done(out, c.op(OpCode::Pow, {b, e}));
}

/// floor(x) (or ceil): x truncated through i64, stepped down (up) where that
/// passed x. Exact: where |x| is at least 2^(mantissa bits) x is already an
/// integer and is kept, as are NaN and the infinities (the comparison with
/// them is false).
Value *floorOrCeil(Conv &c, Value *x, bool ceil) {
  DType t = dt(x);
  double big = t == DType::F64 ? 4503599627370496.0 : t == DType::F16 ? 1024.0 : t == DType::BF16 ? 128.0 : 8388608.0;
  Value *tr = c.op(OpCode::Cast, {c.op(OpCode::Cast, {x}, {{"dtype", Attr::getDType(DType::I64)}})},
                   {{"dtype", Attr::getDType(t)}});
  Value *passed = c.op(ceil ? OpCode::Less : OpCode::Greater, {tr, x});
  Value *step = c.op(OpCode::Cast, {passed}, {{"dtype", Attr::getDType(t)}});
  Value *r = c.op(ceil ? OpCode::Add : OpCode::Sub, {tr, step});
  Value *small = c.op(OpCode::Less, {c.op(OpCode::Abs, {x}), like(c, x, big)});
  return c.op(OpCode::Select, {small, r, x});
}

bool floorOp(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x || !isFloat(dt(x))) return c.fail("needs a float input");
  return done(out, floorOrCeil(c, x, false));
}

bool ceilOp(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x || !isFloat(dt(x))) return c.fail("needs a float input");
  return done(out, floorOrCeil(c, x, true));
}

/// Round half to even: floor(x), plus 1 above the half, and at the half
/// when floor(x) is odd.
Value *roundHalfEven(Conv &c, Value *x) {
  if (!x) return nullptr;
  Value *f = floorOrCeil(c, x, false);
  Value *d = c.op(OpCode::Sub, {x, f});
  Value *half = c.op(OpCode::Mul, {f, like(c, x, 0.5)});
  Value *odd = c.op(OpCode::NotEqual, {floorOrCeil(c, half, false), half});
  Value *up = c.op(OpCode::LogicalOr, {c.op(OpCode::Greater, {d, like(c, x, 0.5)}),
                                       c.op(OpCode::LogicalAnd, {c.op(OpCode::Equal, {d, like(c, x, 0.5)}), odd})});
  return c.op(OpCode::Add, {f, c.op(OpCode::Cast, {up}, {{"dtype", Attr::getDType(dt(x))}})});
}

bool roundOp(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x || !isFloat(dt(x))) return c.fail("needs a float input");
  return done(out, roundHalfEven(c, x));
}

/// Float Mod (ONNX requires fmod=1 for floats): the fmod op. Integer Mod:
/// C's remainder a - (a / b) * b (div truncates: LangRef), and for fmod=0
/// moved to the divisor's sign.
bool mod(Conv &c, Out &out) {
  Value *a = c.input(0), *b = c.input(1);
  if (!a || !b) return c.fail("needs two inputs");
  if (!isInteger(dt(a))) {
    if (!c.attrInt("fmod", 0)) return c.fail("Mod of floats needs fmod=1 (ONNX's rule for floating-point inputs)");
    return done(out, c.op(OpCode::Fmod, {a, b}));
  }
  Value *r = c.op(OpCode::Sub, {a, c.op(OpCode::Mul, {c.op(OpCode::Div, {a, b}), b})});
  if (!r || c.attrInt("fmod", 0)) return done(out, r);
  Value *zero = like(c, a, 0);
  Value *flip = c.op(OpCode::LogicalAnd, {c.op(OpCode::NotEqual, {r, zero}),
                                          c.op(OpCode::NotEqual, {c.op(OpCode::Less, {r, zero}),
                                                                  c.op(OpCode::Less, {b, zero})})});
  return done(out, c.op(OpCode::Select, {flip, c.op(OpCode::Add, {r, b}), r}));
}

bool shrink(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  double lambd = c.attrFloat("lambd", 0.5), bias = c.attrFloat("bias", 0.0);
  Value *lo = c.op(OpCode::Less, {x, like(c, x, -lambd)}), *hi = c.op(OpCode::Greater, {x, like(c, x, lambd)});
  Value *inner = c.op(OpCode::Select, {hi, c.op(OpCode::Sub, {x, like(c, x, bias)}), like(c, x, 0)});
  return done(out, c.op(OpCode::Select, {lo, c.op(OpCode::Add, {x, like(c, x, bias)}), inner}));
}

bool reciprocal(Conv &c, Out &out) {
  Value *x = c.input(0);
  return x && done(out, c.op(OpCode::Div, {like(c, x, 1), x}));
}

bool xorOp(Conv &c, Out &out) { return done(out, c.op(OpCode::NotEqual, {c.input(0), c.input(1)})); }

bool isNaN(Conv &c, Out &out) { return done(out, c.op(OpCode::NotEqual, {c.input(0), c.input(0)})); }

bool isInf(Conv &c, Out &out) {
  Value *x = c.input(0);
  // ONNX types IsInf's input as float only; an integer tensor has no infinity
  // (and comparing it with one is no test at all).
  if (!x || !isFloat(dt(x))) return c.fail("needs a float input");
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
  if (ra >= 3 && rb == 2) {
    // A stack of rows times one matrix (a linear layer on [.., tokens, K]):
    // one GEMM over the rows flattened, not a batch_matmul against the
    // matrix broadcast, which is a GEMM per leading index each reading the
    // whole matrix: torch's nn.MultiheadAttention projects [tokens, batch, E]
    // that way, 197 GEMMs of one row per ViT-B/16 layer.
    std::vector<Conv::DimPart> lead;
    for (int64_t i = 0; i + 1 < ra; ++i) lead.push_back(c.dimOf(a, i));
    Value *flat = reshapeTo(c, a, {{-1, nullptr}, c.dimOf(a, ra - 1)}, 0);
    Value *m = flat ? c.op(OpCode::MatMul, {flat, b}) : nullptr;
    if (!m) return false;
    lead.push_back(c.dimOf(b, 1));
    // One run-time size among them is the -1 of a static reshape.
    int64_t dyn = -1, count = 0;
    for (size_t i = 0; i < lead.size(); ++i)
      if (lead[i].v) dyn = static_cast<int64_t>(i), ++count;
    if (count == 1) lead[static_cast<size_t>(dyn)] = {-1, nullptr};
    return done(out, reshapeTo(c, m, lead, count == 1 ? dyn : -1));
  }
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
    if (!k && runtimeList(c, 1)) return c.fail("the axes input must be known when the model is imported");
    if (k) axes = *k; // else a statically empty list
    return true;
  }
  if (auto a = c.attrInts("axes")) axes = *a;
  return true;
}


/// 0, 1, ..., n - 1 along `axis` of x: shape [n, 1, ..., 1], broadcasting
/// against x (the index of each element along that axis).
Value *iotaAlong(Conv &c, Value *x, int64_t axis) {
  int64_t r = rankOf(x);
  Conv::DimPart n = c.dimOf(x, axis);
  Value *iota;
  if (!n.v) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n.size; ++i) v.push_back(i);
    iota = c.i64s(v);
  } else {
    iota = c.op(OpCode::Arange, {c.scalar(DType::I64, 0), n.v, c.scalar(DType::I64, 1)});
  }
  for (int64_t i = axis + 1; iota && i < r; ++i) iota = c.op(OpCode::ExpandDims, {iota}, {{"axis", Attr::getInt(-1)}});
  return iota;
}

bool argReduce(Conv &c, Out &out, bool isMax) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  int64_t r = rankOf(x), axis = c.attrInt("axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return c.fail("axis is out of range");
  bool keep = c.attrInt("keepdims", 1), last = c.attrInt("select_last_index", 0);
  Attrs a = {{"axis", Attr::getInt(axis)}, {"keepdims", Attr::getBool(keep)}};
  if (!last && isMax) return done(out, c.op(OpCode::ArgMax, {x}, a));
  if (!last && isFloat(dt(x))) return done(out, c.op(OpCode::ArgMax, {c.op(OpCode::Neg, {x})}, a));
  // The first or last index where x equals its extreme along the axis:
  // indices where it does, the others -1 (max) or past the end (min).
  Attrs axisKeep = {{"axes", ints({axis})}, {"keepdims", Attr::getBool(true)}};
  Value *m = c.op(isMax ? OpCode::Max : OpCode::Min, {x}, axisKeep);
  Value *hit = c.op(OpCode::Equal, {x, m});
  Value *none = c.scalar(DType::I64, last ? -1.0 : 9.2e18);
  Value *idx = c.op(OpCode::Select, {hit, iotaAlong(c, x, axis), none});
  return done(out, c.op(last ? OpCode::Max : OpCode::Min, {idx}, {{"axes", ints({axis})}, {"keepdims", Attr::getBool(keep)}}));
}

bool hardmax(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  int64_t r = rankOf(x), axis = c.attrInt("axis", -1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return c.fail("axis is out of range");
  Value *first = c.op(OpCode::ArgMax, {x}, {{"axis", Attr::getInt(axis)}, {"keepdims", Attr::getBool(true)}});
  Value *hit = c.op(OpCode::Equal, {iotaAlong(c, x, axis), first});
  return done(out, c.op(OpCode::Cast, {hit}, {{"dtype", Attr::getDType(dt(x))}}));
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
  int64_t r = rankOf(x), axis = c.attrInt("axis", -1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return c.fail("axis is out of range");
  double eps = c.attrFloat("epsilon", 1e-5);
  bool extra = c.wantsOutput(1) || c.wantsOutput(2);
  if (axis == r - 1 && !extra && rankOf(scale) == 1 && (!bias || rankOf(bias) == 1)) {
    if (!bias) bias = c.op(OpCode::Mul, {scale, like(c, scale, 0)});
    return done(out, c.op(OpCode::LayerNorm, {x, scale, bias}, {{"eps", Attr::getFloat(eps)}}));
  }
  // Over several axes, or with the statistics as outputs: a composite.
  std::vector<int64_t> axes;
  for (int64_t i = axis; i < r; ++i) axes.push_back(i);
  Attrs keep = {{"axes", ints(axes)}, {"keepdims", Attr::getBool(true)}};
  Value *mean = c.op(OpCode::Mean, {x}, keep);
  Value *d = c.op(OpCode::Sub, {x, mean});
  Value *var = c.op(OpCode::Mean, {c.op(OpCode::Mul, {d, d})}, keep);
  Value *inv = c.op(OpCode::Rsqrt, {c.op(OpCode::Add, {var, like(c, x, eps)})});
  Value *y = c.op(OpCode::Mul, {c.op(OpCode::Mul, {d, inv}), scale});
  if (y && bias) y = c.op(OpCode::Add, {y, bias});
  out = {y, mean, inv};
  return y && mean && inv;
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
  bool training = c.attrInt("training_mode", 0) != 0;
  if (!training && (c.wantsOutput(1) || c.wantsOutput(2)))
    return c.fail("the outputs of opsets before 14's training mode (saved mean and variance) are not supported");
  int64_t r = rankOf(x);
  if (r < 2) return c.fail("the input has rank < 2");
  Value *scale = perChannel(c, c.input(1), r), *b = perChannel(c, c.input(2), r);
  Value *mean = perChannel(c, c.input(3), r), *var = perChannel(c, c.input(4), r);
  if (!scale || !b || !mean || !var) return false;
  if (training) {
    // Opset 14 on: normalised by the batch's statistics over every axis but
    // the channels (biased variance); the running ones updated by momentum.
    std::vector<int64_t> axes = {0};
    for (int64_t i = 2; i < r; ++i) axes.push_back(i);
    Attrs keep = {{"axes", ints(axes)}, {"keepdims", Attr::getBool(true)}};
    double eps = c.attrFloat("epsilon", 1e-5), mom = c.attrFloat("momentum", 0.9);
    Value *bm = c.op(OpCode::Mean, {x}, keep), *d = c.op(OpCode::Sub, {x, bm});
    Value *bv = c.op(OpCode::Mean, {c.op(OpCode::Mul, {d, d})}, keep);
    Value *y = c.op(OpCode::Div, {d, c.op(OpCode::Sqrt, {c.op(OpCode::Add, {bv, like(c, x, eps)})})});
    out = {c.op(OpCode::Add, {c.op(OpCode::Mul, {y, scale}), b})};
    for (auto [batch, running] : {std::pair{bm, c.input(3)}, std::pair{bv, c.input(4)}}) {
      Value *flat = c.op(OpCode::Reshape, {batch}, {{"shape", ints({-1})}});
      out.push_back(c.op(OpCode::Add, {c.op(OpCode::Mul, {running, like(c, running, mom)}),
                                       c.op(OpCode::Mul, {flat, like(c, flat, 1 - mom)})}));
    }
    return out[0] && out[1] && out[2];
  }
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

//===-- Losses -----------------------------------------------------------------===//

/// NegativeLogLikelihoodLoss over log-probabilities `in` [N, C, d...] and
/// targets [N, d...]: the class of each target picked through a one-hot
/// mask (equal to an iota along C), which also drops targets outside
/// [0, C) and, explicitly, ignore_index.
bool nllOf(Conv &c, Value *in, Value *target, Value *weight, Out &out) {
  if (!in || !target) return c.fail("needs input and target");
  if (rankOf(in) < 2 || rankOf(target) != rankOf(in) - 1) return c.fail("needs input [N, C, ...] and target [N, ...]");
  std::string reduction = c.attrStr("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return c.fail("reduction '" + reduction + "' is not none, sum or mean");
  Value *t = dt(target) == DType::I64 ? target : c.op(OpCode::Cast, {target}, {{"dtype", Attr::getDType(DType::I64)}});
  Value *t1 = c.op(OpCode::ExpandDims, {t}, {{"axis", Attr::getInt(1)}});
  Value *hot = c.op(OpCode::Equal, {t1, iotaAlong(c, in, 1)});
  if (const auto *ig = c.attr("ignore_index"))
    hot = c.op(OpCode::LogicalAnd, {hot, c.op(OpCode::NotEqual, {t1, c.scalar(DType::I64, static_cast<double>(ig->i()))})});
  Value *zero = like(c, in, 0);
  Value *w = weight;
  for (int64_t i = 2; w && i < rankOf(in); ++i) w = c.op(OpCode::ExpandDims, {w}, {{"axis", Attr::getInt(-1)}});
  Value *wt = w ? c.op(OpCode::Select, {hot, w, zero}) : c.op(OpCode::Cast, {hot}, {{"dtype", Attr::getDType(dt(in))}});
  Attrs overC = {{"axes", ints({1})}};
  Value *picked = c.op(OpCode::Sum, {c.op(OpCode::Mul, {c.op(OpCode::Select, {hot, in, zero}), wt})}, overC);
  Value *loss = c.op(OpCode::Neg, {picked});
  if (!loss) return false;
  if (reduction == "sum") loss = c.op(OpCode::Sum, {loss});
  if (reduction == "mean") loss = c.op(OpCode::Div, {c.op(OpCode::Sum, {loss}), c.op(OpCode::Sum, {wt})});
  out.insert(out.begin(), loss);
  return loss != nullptr;
}

bool nllLoss(Conv &c, Out &out) {
  out.clear();
  return nllOf(c, c.input(0), c.input(1), c.input(2), out);
}

bool softmaxCrossEntropy(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x || rankOf(x) < 2) return c.fail("needs scores [N, C, ...]");
  Value *s = shiftedByMax(c, x, {1});
  Attrs keep = {{"axes", ints({1})}, {"keepdims", Attr::getBool(true)}};
  Value *logp = c.op(OpCode::Sub, {s, c.op(OpCode::Log, {c.op(OpCode::Sum, {c.op(OpCode::Exp, {s})}, keep)})});
  out = {logp};
  return logp && nllOf(c, logp, c.input(1), c.input(2), out);
}

} // namespace nimble::onnx_import::convert
