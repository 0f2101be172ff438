//===- ConvertComposite.cpp - ONNX ops lowered to existing Nimble ops -------===//
//
// Issue 47's third batch: ONNX ops that need no new Nimble op because a short
// composite of existing ones computes them exactly (same values as ONNX's
// reference, up to the rounding of a different summation order where noted):
//
//   QuantizeLinear    div, round half to even (ConvertMath's floor/select
//                     composite), add, maximum/minimum to the range, cast
//   DequantizeLinear  cast, sub, mul (per-axis scale: reshaped to broadcast)
//   DynamicQuantizeLinear  min, max, div, then QuantizeLinear's ops
//   Hann/Hamming/BlackmanWindow  arange, cos, mul, add (f64, then cast)
//   Compress          nonzero, reshape, take
//   LRN               mul, expand_dims, avg_pool over the channel axis
//                     (count_include_pad), pow, div
//   Einsum            take (diagonals), sum, transpose, batch_matmul
//   Det               slices, mul, sub (static 1x1, 2x2, 3x3: the cofactor
//                     expansion; larger matrices need an LU op)
//   ReverseSequence   arange, select, gather_nd with batch_dims=1
//   MaxUnpool         zeros, scatter_elements on the flattened output, pad to
//                     a given output_shape
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Converters.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace nimble::onnx_import::convert {

namespace {

Value *castTo(Conv &c, Value *v, DType t) {
  if (!v || dt(v) == t) return v;
  return c.op(OpCode::Cast, {v}, {{"dtype", Attr::getDType(t)}});
}

/// The range of an integer element type, for QuantizeLinear's saturation.
bool intRange(DType t, double &lo, double &hi) {
  switch (t) {
  case DType::U8: lo = 0, hi = 255; return true;
  case DType::I8: lo = -128, hi = 127; return true;
  case DType::U16: lo = 0, hi = 65535; return true;
  case DType::I16: lo = -32768, hi = 32767; return true;
  default: return false;
  }
}

/// A per-axis parameter (1-D, one entry per index of `axis` of x) reshaped
/// to broadcast against x: [n, 1, ..., 1]. Scalars and one-element tensors
/// are per-tensor. An axis x does not have (a scalar weight of QLinearConv,
/// found by onnx-fuzzer) is an error.
Value *perAxis(Conv &c, Value *p, Value *x, int64_t axis) {
  if (!p || rankOf(p) == 0) return p;
  if (!x) return nullptr;
  if (axis < 0 || axis >= rankOf(x))
    return c.fail("a per-axis parameter applies along axis " + std::to_string(axis) + " of an operand of rank " +
                  std::to_string(rankOf(x))),
           nullptr;
  std::vector<int64_t> shape(static_cast<size_t>(rankOf(x) - axis), 1);
  shape[0] = -1;
  return c.op(OpCode::Reshape, {p}, {{"shape", ints(shape)}});
}

bool quantAxis(Conv &c, Value *x, Value *scale, int64_t &axis) {
  if (c.attrInt("block_size", 0) != 0) return c.fail("blocked quantization (block_size) is not supported");
  axis = c.attrInt("axis", 1);
  if (scale && rankOf(scale) > 1) return c.fail("the scale has rank > 1");
  if (scale && rankOf(scale) == 1) {
    if (axis < 0) axis += rankOf(x);
    if (axis < 0 || axis >= rankOf(x)) return c.fail("axis is out of range");
  }
  return true;
}

/// saturate(round(x / scale) + zp) as element type `t` (ONNX's QuantizeLinear).
Value *quantize(Conv &c, Value *x, Value *scale, Value *zp, DType t) {
  double lo = 0, hi = 255;
  intRange(t, lo, hi);
  Value *q = roundHalfEven(c, c.op(OpCode::Div, {x, castTo(c, scale, dt(x))}));
  if (zp) q = c.op(OpCode::Add, {q, castTo(c, zp, dt(x))});
  q = c.op(OpCode::Minimum, {c.op(OpCode::Maximum, {q, like(c, x, lo)}), like(c, x, hi)});
  return castTo(c, q, t);
}

} // namespace

bool quantizeLinear(Conv &c, Out &out) {
  Value *x = c.input(0), *scale = c.input(1), *zp = c.input(2);
  if (!x || !scale) return c.fail("needs x and y_scale");
  if (!isFloat(dt(x))) return c.fail("x is not a float tensor");
  DType t = zp ? dt(zp) : DType::U8;
  if (const auto *a = c.attr("output_dtype"); a && a->i() != 0) {
    std::optional<DType> o = dtypeOf(static_cast<int>(a->i()));
    if (!o) return c.fail("output_dtype is a type Nimble does not have");
    t = *o;
  }
  double lo = 0, hi = 0;
  if (!intRange(t, lo, hi)) return c.fail("quantizes to " + std::string(dtypeName(t)) + " (8 and 16-bit integers only: the range must be exact in the float type)");
  int64_t axis;
  if (!quantAxis(c, x, scale, axis)) return false;
  return done(out, quantize(c, x, perAxis(c, scale, x, axis), perAxis(c, zp, x, axis), t));
}

bool dequantizeLinear(Conv &c, Out &out) {
  Value *x = c.input(0), *scale = c.input(1), *zp = c.input(2);
  if (!x || !scale) return c.fail("needs x and x_scale");
  if (!isInteger(dt(x))) return c.fail("x is not an integer tensor");
  if (!isFloat(dt(scale))) return c.fail("x_scale is not a float tensor");
  int64_t axis;
  if (!quantAxis(c, x, scale, axis)) return false;
  // In the scale's type, as ONNX's reference: (x - zp) * scale.
  Value *y = castTo(c, x, dt(scale));
  if (zp) y = c.op(OpCode::Sub, {y, castTo(c, perAxis(c, zp, x, axis), dt(scale))});
  return done(out, c.op(OpCode::Mul, {y, perAxis(c, scale, x, axis)}));
}

/// scale = (max(0, max x) - min(0, min x)) / 255, zp = saturate(round(-min / scale)),
/// y = QuantizeLinear(x, scale, zp) to u8 (ONNX's reference, its order of operations).
bool dynamicQuantizeLinear(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x || dt(x) != DType::F32) return c.fail("x is not an f32 tensor");
  Attrs all = {{"axes", ints({})}, {"keepdims", Attr::getBool(false)}};
  Value *zero = like(c, x, 0);
  Value *mn = c.op(OpCode::Minimum, {c.op(OpCode::Min, {x}, all), zero});
  Value *mx = c.op(OpCode::Maximum, {c.op(OpCode::Max, {x}, all), zero});
  Value *scale = c.op(OpCode::Div, {c.op(OpCode::Sub, {mx, mn}), like(c, x, 255)});
  Value *zpf = roundHalfEven(c, c.op(OpCode::Div, {c.op(OpCode::Sub, {zero, mn}), scale}));
  zpf = c.op(OpCode::Minimum, {c.op(OpCode::Maximum, {zpf, zero}), like(c, x, 255)});
  Value *zp = castTo(c, zpf, DType::U8);
  out = {quantize(c, x, scale, zp, DType::U8), scale, zp};
  return out[0] && scale && zp;
}

/// sum_k a_k cos(2 pi k n / N) over n = 0 .. size - 1, N = size (periodic)
/// or size - 1 (symmetric), computed in f64 and cast to output_datatype.
template <int Kind> bool window(Conv &c, Out &out) {
  Value *size = c.input(0);
  if (!size || rankOf(size) != 0 || !isInteger(dt(size))) return c.fail("size is not an integer scalar");
  std::optional<DType> t = dtypeOf(static_cast<int>(c.attrInt("output_datatype", 1)));
  if (!t) return c.fail("output_datatype is a type Nimble does not have");
  std::vector<double> a = Kind == 0 ? std::vector<double>{0.5, -0.5}                       // Hann
                          : Kind == 1 ? std::vector<double>{25.0 / 46.0, -21.0 / 46.0}      // Hamming
                                      : std::vector<double>{0.42, -0.5, 0.08};              // Blackman
  Value *n64 = castTo(c, size, DType::F64);
  Value *n = c.op(OpCode::Arange, {c.scalar(DType::F64, 0), n64, c.scalar(DType::F64, 1)});
  Value *denom = c.attrInt("periodic", 1) ? n64 : c.op(OpCode::Sub, {n64, c.scalar(DType::F64, 1)});
  Value *phase = c.op(OpCode::Div, {c.op(OpCode::Mul, {n, c.scalar(DType::F64, 2 * 3.14159265358979323846)}), denom});
  Value *y = c.scalar(DType::F64, a[0]);
  for (size_t k = 1; k < a.size(); ++k) {
    Value *ck = c.op(OpCode::Cos, {c.op(OpCode::Mul, {phase, c.scalar(DType::F64, static_cast<double>(k))})});
    y = c.op(OpCode::Add, {y, c.op(OpCode::Mul, {ck, c.scalar(DType::F64, a[k])})});
  }
  return done(out, castTo(c, y, *t));
}
template bool window<0>(Conv &c, Out &out);
template bool window<1>(Conv &c, Out &out);
template bool window<2>(Conv &c, Out &out);

/// Compress: take(x, the indices where condition is true, axis); no axis:
/// of the flattened x.
bool compress(Conv &c, Out &out) {
  Value *x = c.input(0), *cond = c.input(1);
  if (!x || !cond || rankOf(cond) != 1) return c.fail("needs an input and a 1-D condition");
  int64_t axis = 0;
  if (c.attr("axis")) {
    axis = c.attrInt("axis", 0);
    if (axis < 0) axis += rankOf(x);
    if (axis < 0 || axis >= rankOf(x)) return c.fail("axis is out of range");
  } else {
    x = c.op(OpCode::Reshape, {x}, {{"shape", ints({-1})}});
  }
  Value *idx = c.op(OpCode::Reshape, {c.op(OpCode::Nonzero, {castTo(c, cond, DType::I1)})}, {{"shape", ints({-1})}});
  return done(out, c.op(OpCode::Take, {x, idx}, {{"axis", Attr::getInt(axis)}}));
}

/// LRN: x / (bias + alpha / size * sum of squares over the channel window)^beta.
/// The window sum is an average pool of x^2 over channels (a new axis 1
/// makes the channels spatial) counting the zero padding, times size.
bool lrn(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x || rankOf(x) < 2 || !isFloat(dt(x))) return c.fail("needs a float input of rank >= 2");
  int64_t size = c.attrInt("size", 0);
  if (size < 1) return c.fail("size must be positive");
  double alpha = c.attrFloat("alpha", 1e-4), beta = c.attrFloat("beta", 0.75), bias = c.attrFloat("bias", 1.0);
  int64_t r = rankOf(x);
  std::vector<int64_t> kernel(static_cast<size_t>(r - 1), 1), pads(static_cast<size_t>(2 * (r - 1)), 0);
  kernel[0] = size;
  pads[0] = (size - 1) / 2;
  pads[static_cast<size_t>(r - 1)] = size - 1 - (size - 1) / 2;
  Value *sq = c.op(OpCode::ExpandDims, {c.op(OpCode::Mul, {x, x})}, {{"axis", Attr::getInt(1)}});
  Value *avg = c.op(OpCode::AvgPool, {sq},
                    {{"kernel", ints(kernel)}, {"pads", ints(pads)}, {"count_include_pad", Attr::getBool(true)}});
  avg = c.op(OpCode::Squeeze, {avg}, {{"axes", ints({1})}});
  Value *d = c.op(OpCode::Add, {like(c, x, bias), c.op(OpCode::Mul, {avg, like(c, x, alpha)})});
  return done(out, c.op(OpCode::Div, {x, c.op(OpCode::Pow, {d, like(c, x, beta)})}));
}

namespace {

/// One Einsum operand during the lowering: its value and one letter per axis.
struct Term {
  Value *v;
  std::string letters;
};

int64_t staticDim(Value *v, size_t i) { return v->type().dims()[i]; }

/// The diagonal of axes i and j (equal static sizes n): j moved next to i by
/// a transpose, the pair flattened, and every (n + 1)-th entry taken.
bool takeDiagonal(Conv &c, Term &t, size_t i, size_t j) {
  int64_t r = rankOf(t.v);
  int64_t n = staticDim(t.v, i);
  if (n == kDynamic || staticDim(t.v, j) != n) return c.fail("a repeated subscript needs equal static sizes");
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < r; ++k)
    if (k != static_cast<int64_t>(j)) perm.push_back(k);
  perm.push_back(static_cast<int64_t>(j));
  // Move i last but one: [..others.., i, j].
  perm.erase(std::find(perm.begin(), perm.end(), static_cast<int64_t>(i)));
  perm.insert(perm.end() - 1, static_cast<int64_t>(i));
  bool identity = true;
  for (size_t k = 0; k < perm.size(); ++k) identity = identity && perm[k] == static_cast<int64_t>(k);
  Value *v = identity ? t.v : c.op(OpCode::Transpose, {t.v}, {{"perm", ints(perm)}});
  std::vector<int64_t> shape;
  std::string letters;
  for (size_t k = 0; k + 2 < perm.size(); ++k) {
    int64_t d = staticDim(t.v, static_cast<size_t>(perm[k]));
    if (d == kDynamic) return c.fail("a repeated subscript needs the operand's other sizes static");
    shape.push_back(d);
    letters += t.letters[static_cast<size_t>(perm[k])];
  }
  shape.push_back(n * n);
  std::vector<int64_t> idx;
  for (int64_t k = 0; k < n; ++k) idx.push_back(k * (n + 1));
  v = c.op(OpCode::Take, {c.op(OpCode::Reshape, {v}, {{"shape", ints(shape)}}), c.i64s(idx)},
           {{"axis", Attr::getInt(static_cast<int64_t>(shape.size()) - 1)}});
  t = {v, letters + t.letters[i]};
  return v != nullptr;
}

/// Sums out the letters of t that appear in no other term and not in the
/// output.
void sumUnshared(Conv &c, Term &t, const std::string &keep) {
  std::vector<int64_t> axes;
  std::string left;
  for (size_t k = 0; k < t.letters.size(); ++k) {
    if (keep.find(t.letters[k]) == std::string::npos) axes.push_back(static_cast<int64_t>(k));
    else left += t.letters[k];
  }
  if (axes.empty()) return;
  t = {c.op(OpCode::Sum, {t.v}, {{"axes", ints(axes)}, {"keepdims", Attr::getBool(false)}}), left};
}

Value *permuteTo(Conv &c, const Term &t, const std::string &order) {
  std::vector<int64_t> perm;
  bool same = true;
  for (size_t k = 0; k < order.size(); ++k) {
    perm.push_back(static_cast<int64_t>(t.letters.find(order[k])));
    same = same && perm.back() == static_cast<int64_t>(k);
  }
  return same ? t.v : c.op(OpCode::Transpose, {t.v}, {{"perm", ints(perm)}});
}

/// a times b contracted over the letters they share that `keep` lacks: both
/// transposed to [batch, free, contracted] order, reshaped to rank 3 and
/// multiplied by batch_matmul (static sizes), the result reshaped back.
bool contract(Conv &c, Term &a, const Term &b, const std::string &keep) {
  std::string batch, con, fa, fb;
  for (char l : a.letters) {
    bool inB = b.letters.find(l) != std::string::npos, kept = keep.find(l) != std::string::npos;
    (inB ? (kept ? batch : con) : fa) += l;
  }
  for (char l : b.letters)
    if (a.letters.find(l) == std::string::npos) fb += l;
  auto size = [&](const Term &t, char l) { return staticDim(t.v, t.letters.find(l)); };
  int64_t nb = 1, m = 1, k = 1, n = 1;
  std::vector<int64_t> shape;
  for (char l : batch) {
    if (size(a, l) == kDynamic || size(a, l) != size(b, l)) return c.fail("Einsum needs equal static sizes of shared subscripts");
    nb *= size(a, l);
    shape.push_back(size(a, l));
  }
  for (char l : fa) {
    if (size(a, l) == kDynamic) return c.fail("Einsum of two operands needs static sizes");
    m *= size(a, l);
    shape.push_back(size(a, l));
  }
  for (char l : con) {
    if (size(a, l) == kDynamic || size(a, l) != size(b, l)) return c.fail("Einsum needs equal static sizes of shared subscripts");
    k *= size(a, l);
  }
  for (char l : fb) {
    if (size(b, l) == kDynamic) return c.fail("Einsum of two operands needs static sizes");
    n *= size(b, l);
    shape.push_back(size(b, l));
  }
  auto reshape = [&](Value *v, const std::vector<int64_t> &to) {
    return v && v->type().dims() == to ? v : c.op(OpCode::Reshape, {v}, {{"shape", ints(to)}});
  };
  Value *va = reshape(permuteTo(c, a, batch + fa + con), {nb, m, k});
  Value *vb = reshape(permuteTo(c, b, batch + con + fb), {nb, k, n});
  a = {reshape(c.op(OpCode::BatchMatMul, {va, vb}), shape), batch + fa + fb};
  return a.v != nullptr;
}

} // namespace

/// Einsum: each operand's repeated subscripts become diagonals, subscripts
/// used nowhere else are summed, operands are contracted pairwise left to
/// right (batch_matmul), and the result is transposed to the output's order.
bool einsum(Conv &c, Out &out) {
  std::string eq;
  for (char ch : c.attrStr("equation", ""))
    if (ch != ' ') eq += ch;
  if (eq.empty() || c.in.empty()) return c.fail("needs an equation and inputs");
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow), rhs;
  std::vector<std::string> specs;
  for (size_t at = 0;;) {
    size_t comma = lhs.find(',', at);
    specs.push_back(lhs.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (specs.size() != c.in.size()) return c.fail("the equation names " + std::to_string(specs.size()) + " operands, the node has " + std::to_string(c.in.size()));
  // "..." becomes upper-case letters (the equation's letters are lower or
  // upper case: '0'.. are free), one per broadcast axis, right-aligned.
  int64_t ell = 0;
  std::vector<Term> terms;
  for (size_t i = 0; i < specs.size(); ++i) {
    Value *v = c.input(i);
    if (!v) return c.fail("an input is missing");
    std::string s = specs[i];
    size_t dots = s.find("...");
    int64_t named = static_cast<int64_t>(s.size()) - (dots == std::string::npos ? 0 : 3);
    if (dots != std::string::npos) ell = std::max(ell, rankOf(v) - named);
    if ((dots == std::string::npos && named != rankOf(v)) || named > rankOf(v))
      return c.fail("operand " + std::to_string(i) + "'s subscripts do not match its rank");
    terms.push_back({v, s});
  }
  if (ell > 10) return c.fail("too many broadcast axes");
  auto expandDots = [&](std::string s, int64_t count) {
    size_t dots = s.find("...");
    if (dots == std::string::npos) return s;
    std::string e;
    for (int64_t k = ell - count; k < ell; ++k) e += static_cast<char>('0' + k);
    return s.substr(0, dots) + e + s.substr(dots + 3);
  };
  for (Term &t : terms) {
    size_t dots = t.letters.find("...");
    int64_t count = dots == std::string::npos ? 0 : rankOf(t.v) - (static_cast<int64_t>(t.letters.size()) - 3);
    t.letters = expandDots(t.letters, count);
    for (char l : t.letters)
      if (!std::isalpha(static_cast<unsigned char>(l)) && !std::isdigit(static_cast<unsigned char>(l)))
        return c.fail("the equation has a character that is not a subscript");
  }
  if (arrow != std::string::npos) {
    rhs = expandDots(eq.substr(arrow + 2), ell);
  } else {
    // Implicit output: the broadcast axes, then the letters used once, sorted.
    std::map<char, int> count;
    for (const Term &t : terms)
      for (char l : t.letters) count[l]++;
    for (int64_t k = 0; k < ell; ++k) rhs += static_cast<char>('0' + k);
    for (auto [l, n] : count)
      if (n == 1 && !std::isdigit(static_cast<unsigned char>(l))) rhs += l;
  }
  // Diagonals of repeated subscripts within an operand.
  for (Term &t : terms) {
    for (bool again = true; again;) {
      again = false;
      for (size_t i = 0; i < t.letters.size() && !again; ++i)
        for (size_t j = i + 1; j < t.letters.size() && !again; ++j)
          if (t.letters[i] == t.letters[j]) {
            if (!takeDiagonal(c, t, i, j)) return false;
            again = true;
          }
    }
  }
  // Letters still needed after term i: the output's and those of the other terms.
  auto neededBeyond = [&](size_t i, const std::string &extra) {
    std::string keep = rhs + extra;
    for (size_t j = 0; j < terms.size(); ++j)
      if (j != i) keep += terms[j].letters;
    return keep;
  };
  for (size_t i = 0; i < terms.size(); ++i) sumUnshared(c, terms[i], neededBeyond(i, ""));
  Term acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    std::string later = rhs;
    for (size_t j = i + 1; j < terms.size(); ++j) later += terms[j].letters;
    if (!contract(c, acc, terms[i], later)) return false;
    sumUnshared(c, acc, later);
  }
  sumUnshared(c, acc, rhs);
  if (!acc.v) return false;
  for (char l : rhs)
    if (acc.letters.find(l) == std::string::npos) return c.fail("the output names a subscript no input has");
  return done(out, permuteTo(c, acc, rhs));
}

/// Det of static 1x1, 2x2 and 3x3 matrices (the last two axes), by the
/// cofactor expansion.
bool det(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x || rankOf(x) < 2 || !isFloat(dt(x))) return c.fail("needs a float input of rank >= 2");
  int64_t r = rankOf(x), n = staticDim(x, static_cast<size_t>(r - 1));
  if (n != staticDim(x, static_cast<size_t>(r - 2)) || n < 1 || n > 3)
    return c.fail("only static 1x1, 2x2 and 3x3 matrices are supported (larger ones need an LU op)");
  auto at = [&](int64_t i, int64_t j) {
    Value *s = c.op(OpCode::Slice, {x}, {{"axes", ints({r - 2, r - 1})}, {"starts", ints({i, j})}, {"ends", ints({i + 1, j + 1})}});
    return c.op(OpCode::Squeeze, {s}, {{"axes", ints({r - 2, r - 1})}});
  };
  auto mul = [&](Value *a, Value *b) { return c.op(OpCode::Mul, {a, b}); };
  auto det2 = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    return c.op(OpCode::Sub, {mul(at(r0, c0), at(r1, c1)), mul(at(r0, c1), at(r1, c0))});
  };
  if (n == 1) return done(out, at(0, 0));
  if (n == 2) return done(out, det2(0, 1, 0, 1));
  Value *d = c.op(OpCode::Sub, {mul(at(0, 0), det2(1, 2, 1, 2)), mul(at(0, 1), det2(1, 2, 0, 2))});
  return done(out, c.op(OpCode::Add, {d, mul(at(0, 2), det2(1, 2, 0, 1))}));
}

/// ReverseSequence: the first lens[b] entries of each batch entry reversed
/// along the time axis. With batch and time moved to the front, the source
/// time of (b, t) is lens[b] - 1 - t where t < lens[b], else t, gathered by
/// gather_nd with one batch axis.
bool reverseSequence(Conv &c, Out &out) {
  Value *x = c.input(0), *lens = c.input(1);
  if (!x || !lens || rankOf(x) < 2 || rankOf(lens) != 1) return c.fail("needs an input of rank >= 2 and 1-D sequence_lens");
  int64_t r = rankOf(x), ba = c.attrInt("batch_axis", 1), ta = c.attrInt("time_axis", 0);
  if (ba < 0) ba += r;
  if (ta < 0) ta += r;
  if (ba == ta || (ba != 0 && ba != 1) || (ta != 0 && ta != 1)) return c.fail("batch_axis and time_axis must be 0 and 1");
  if (ba == 1) {
    std::vector<int64_t> perm = {1, 0};
    for (int64_t k = 2; k < r; ++k) perm.push_back(k);
    x = c.op(OpCode::Transpose, {x}, {{"perm", ints(perm)}});
  }
  // x is [B, T, ...]; src[b, t] as a [B, T, 1] index tensor.
  Value *t = c.op(OpCode::ExpandDims, {iota1(c, x, 1)}, {{"axis", Attr::getInt(0)}});
  Value *l = c.op(OpCode::ExpandDims, {castTo(c, lens, DType::I64)}, {{"axis", Attr::getInt(1)}});
  Value *rev = c.op(OpCode::Sub, {c.op(OpCode::Sub, {l, c.scalar(DType::I64, 1)}), t});
  Value *src = c.op(OpCode::Select, {c.op(OpCode::Less, {t, l}), rev, t});
  Value *y = c.op(OpCode::GatherND, {x, c.op(OpCode::ExpandDims, {src}, {{"axis", Attr::getInt(2)}})},
                  {{"batch_dims", Attr::getInt(1)}});
  if (ba == 1) {
    std::vector<int64_t> perm = {1, 0};
    for (int64_t k = 2; k < r; ++k) perm.push_back(k);
    y = c.op(OpCode::Transpose, {y}, {{"perm", ints(perm)}});
  }
  return done(out, y);
}

/// MaxUnpool: X's values written at I's positions (indices into the
/// flattened default output, (in - 1) * stride - pads + kernel per spatial
/// axis, as MaxPool's Indices give them) of a zero tensor; a given
/// output_shape pads that result with zeros at the end (ONNX's reference
/// places the values by the default shape).
bool maxUnpool(Conv &c, Out &out) {
  Value *x = c.input(0), *idx = c.input(1), *shape = c.input(2);
  if (!x || !idx || rankOf(x) < 3) return c.fail("needs X of rank >= 3 and I");
  int64_t r = rankOf(x);
  auto kernel = c.attrInts("kernel_shape");
  if (!kernel || kernel->size() != static_cast<size_t>(r - 2)) return c.fail("kernel_shape must have one entry per spatial axis");
  std::vector<int64_t> strides = c.attrInts("strides").value_or(std::vector<int64_t>(kernel->size(), 1));
  std::vector<int64_t> pads = c.attrInts("pads").value_or(std::vector<int64_t>(2 * kernel->size(), 0));
  if (strides.size() != kernel->size() || pads.size() != 2 * kernel->size()) return c.fail("strides or pads have the wrong number of entries");
  constexpr int64_t kMax = int64_t(1) << 32;
  std::vector<int64_t> dims;
  int64_t total = 1;
  for (int64_t k = 0; k < r; ++k) {
    int64_t d = staticDim(x, static_cast<size_t>(k));
    if (d == kDynamic) return c.fail("needs a static input shape (it fixes the output's)");
    if (k >= 2) {
      size_t s = static_cast<size_t>(k - 2);
      if (d > kMax || strides[s] < 1 || strides[s] > kMax || (*kernel)[s] < 1 || (*kernel)[s] > kMax ||
          pads[s] < 0 || pads[s] > kMax || pads[s + kernel->size()] < 0 || pads[s + kernel->size()] > kMax)
        return c.fail("kernel_shape, strides and pads must be between 1 (0 for pads) and 2^32");
      d = (d - 1) * strides[s] - pads[s] - pads[s + kernel->size()] + (*kernel)[s];
      if (d < 0) return c.fail("the pads exceed the output");
    }
    dims.push_back(d);
    if (__builtin_mul_overflow(total, d, &total)) return c.fail("the output is too large");
  }
  Value *flat = c.op(OpCode::Reshape, {x}, {{"shape", ints({-1})}});
  Value *fidx = c.op(OpCode::Reshape, {castTo(c, idx, DType::I64)}, {{"shape", ints({-1})}});
  Value *z = c.op(OpCode::Zeros, {c.i64s({total})}, {{"dtype", Attr::getDType(dt(x))}});
  Value *y = c.op(OpCode::Reshape, {c.op(OpCode::ScatterElements, {z, fidx, flat})}, {{"shape", ints(dims)}});
  if (!shape || !y) return done(out, y);
  if (rankOf(shape) != 1) return c.fail("output_shape is not 1-D");
  std::vector<int64_t> zeros(static_cast<size_t>(r), 0);
  Value *padTo;
  if (auto k = c.knownInts(2)) {
    if (k->size() != static_cast<size_t>(r)) return c.fail("output_shape has the wrong number of entries");
    std::vector<int64_t> p = zeros;
    for (size_t i = 0; i < k->size(); ++i) {
      if ((*k)[i] < dims[i]) return c.fail("output_shape is smaller than the unpooled shape");
      p.push_back((*k)[i] - dims[i]);
    }
    padTo = c.i64s(p);
  } else {
    padTo = c.op(OpCode::Concat, {c.i64s(zeros), c.op(OpCode::Sub, {castTo(c, shape, DType::I64), c.i64s(dims)})});
  }
  return done(out, c.op(OpCode::Pad, {y, padTo}));
}

/// The integer ops (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv)
/// as float arithmetic that is exact: the 8-bit operands minus their zero
/// points in f64, multiplied and summed in f64 (every partial sum is an
/// integer below 2^53 for fewer than 2^37 terms), then cast to i32, or
/// requantized as ONNX's reference does: times (scale_a * scale_b / scale_y)
/// computed in the scales' type, rounded half to even, plus the zero point,
/// saturated.
namespace {

bool int8ish(Value *v) { return v && (dt(v) == DType::U8 || dt(v) == DType::I8); }

/// v - zp in f64; a 1-D zp applies along `axis` of v (-1: the last axis,
/// where it broadcasts as it is).
Value *shifted(Conv &c, Value *v, Value *zp, int64_t axis) {
  Value *f = castTo(c, v, DType::F64);
  if (!zp || !f) return f;
  Value *z = castTo(c, zp, DType::F64);
  if (rankOf(zp) == 1 && axis >= 0) z = perAxis(c, z, v, axis);
  return c.op(OpCode::Sub, {f, z});
}

/// The MatMul or Conv converter on other operands (the node's attributes).
Value *withInputs(Conv &c, bool (*convert)(Conv &, Out &), std::vector<Value *> in) {
  std::swap(c.in, in);
  Out o;
  bool ok = convert(c, o);
  std::swap(c.in, in);
  return ok && !o.empty() ? o[0] : nullptr;
}

/// QLinear*'s output: saturate(round(acc * (sa * sb / sy)) + zy).
Value *requantize(Conv &c, Value *acc, Value *sa, Value *sb, Value *sy, Value *zy, DType t) {
  if (!sa || !sb || !sy || !isFloat(dt(sa)) || !isFloat(dt(sb)) || !isFloat(dt(sy)))
    return c.fail("needs float scales"), nullptr;
  if (zy && !int8ish(zy)) return c.fail("needs an 8-bit integer y_zero_point"), nullptr;
  Value *m = c.op(OpCode::Div, {c.op(OpCode::Mul, {sa, sb}), sy});
  if (m && rankOf(m) == 1) m = perAxis(c, m, acc, 1); // per output channel
  Value *real = m ? c.op(OpCode::Mul, {acc, castTo(c, m, DType::F64)}) : nullptr;
  return real ? quantize(c, real, c.scalar(DType::F64, 1), zy, t) : nullptr;
}

} // namespace

bool matMulInteger(Conv &c, Out &out) {
  Value *a = c.input(0), *b = c.input(1);
  if (!int8ish(a) || !int8ish(b)) return c.fail("needs 8-bit integer A and B");
  if (rankOf(a) < 2 && c.input(2) && rankOf(c.input(2)) == 1) return c.fail("a per-row a_zero_point needs a matrix A");
  Value *acc = withInputs(c, matmul, {shifted(c, a, c.input(2), rankOf(a) - 2), shifted(c, b, c.input(3), -1)});
  return done(out, castTo(c, acc, DType::I32));
}

bool convInteger(Conv &c, Out &out) {
  Value *x = c.input(0), *w = c.input(1);
  if (!int8ish(x) || !int8ish(w)) return c.fail("needs 8-bit integer X and W");
  Value *acc = withInputs(c, conv, {shifted(c, x, c.input(2), -1), shifted(c, w, c.input(3), 0)});
  return done(out, castTo(c, acc, DType::I32));
}

bool qlinearMatMul(Conv &c, Out &out) {
  Value *a = c.input(0), *b = c.input(3), *zy = c.input(7);
  if (!int8ish(a) || !int8ish(b)) return c.fail("needs 8-bit integer a and b");
  Value *acc = withInputs(c, matmul, {shifted(c, a, c.input(2), rankOf(a) - 2), shifted(c, b, c.input(5), -1)});
  if (!acc) return false;
  return done(out, requantize(c, acc, c.input(1), c.input(4), c.input(6), zy, zy ? dt(zy) : dt(a)));
}

bool qlinearConv(Conv &c, Out &out) {
  Value *x = c.input(0), *w = c.input(3), *zy = c.input(7), *bias = c.input(8);
  if (!int8ish(x) || !int8ish(w)) return c.fail("needs 8-bit integer x and w");
  Value *acc = withInputs(c, conv, {shifted(c, x, c.input(2), -1), shifted(c, w, c.input(5), 0)});
  if (!acc) return false;
  if (bias) acc = c.op(OpCode::Add, {acc, perAxis(c, castTo(c, bias, DType::F64), acc, 1)});
  if (!acc) return false;
  return done(out, requantize(c, acc, c.input(1), c.input(4), c.input(6), zy, zy ? dt(zy) : dt(x)));
}

/// Unique: the distinct slices along `axis` (elements, without one), in
/// sorted (lexicographic) or first-occurrence order, with the index of each
/// one's first occurrence, each slice's position among them, and the counts.
/// Nimble's `unique` is 1-D values only, so the whole node is a pairwise
/// comparison of the n slices (rows of R elements): eq[i,k] (all R equal),
/// less[i,k] (lexicographic: the first differing element is smaller, found
/// by an exclusive cumsum of the differences), the first occurrence of each
/// row (argmax of eq), and a row's position: the unique rows less than it
/// (sorted) or the first occurrences before its own (not sorted); the
/// outputs are then reductions over position == p for p < count. Memory: n^2 R.
bool unique(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  bool sorted = c.attrInt("sorted", 1) != 0, hasAxis = c.attr("axis") != nullptr;
  int64_t axis = 0, r = rankOf(x);
  Value *rows;
  if (!hasAxis) {
    x = c.op(OpCode::Reshape, {x}, {{"shape", ints({-1})}});
    rows = c.op(OpCode::ExpandDims, {x}, {{"axis", Attr::getInt(1)}});
  } else {
    axis = c.attrInt("axis", 0);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return c.fail("axis is out of range");
    std::vector<int64_t> perm = {axis}, dims = x->type().dims();
    int64_t rest = 1;
    for (int64_t k = 0; k < r; ++k)
      if (k != axis) {
        perm.push_back(k);
        if (dims[static_cast<size_t>(k)] == kDynamic) return c.fail("with an axis, the other dimensions must be static");
        rest *= dims[static_cast<size_t>(k)];
      }
    Value *front = axis == 0 ? x : c.op(OpCode::Transpose, {x}, {{"perm", ints(perm)}});
    rows = c.op(OpCode::Reshape, {front}, {{"shape", ints({-1, rest})}});
  }
  auto i64 = [&](Value *v) { return castTo(c, v, DType::I64); };
  auto expand = [&](Value *v, int64_t a) { return c.op(OpCode::ExpandDims, {v}, {{"axis", Attr::getInt(a)}}); };
  Value *zero = c.scalar(DType::I64, 0), *one = c.scalar(DType::I64, 1), *two = c.scalar(DType::I64, 2);
  Value *a = expand(rows, 1), *b = expand(rows, 0); // [n,1,R], [1,n,R]
  Value *neq = i64(c.op(OpCode::NotEqual, {a, b}));
  Value *eq = c.op(OpCode::Equal, {c.op(OpCode::Sum, {neq}, {{"axes", ints({2})}}), zero}); // [n,n]
  Value *first = c.op(OpCode::ArgMax, {i64(eq)}, {{"axis", Attr::getInt(1)}});           // [n]
  Value *n = c.op(OpCode::Dim, {rows}, {{"axis", Attr::getInt(0)}});
  Value *isFirst = c.op(OpCode::Equal, {first, c.op(OpCode::Arange, {zero, n, one})});
  Value *firstI = i64(isFirst), *pos;
  if (sorted) {
    Value *before = c.op(OpCode::CumSum, {neq, two}, {{"exclusive", Attr::getBool(true)}});
    Value *lt = c.op(OpCode::LogicalAnd, {c.op(OpCode::Less, {a, b}), c.op(OpCode::Equal, {before, zero})});
    Value *less = c.op(OpCode::Max, {i64(lt)}, {{"axes", ints({2})}}); // [n,n]: row i < row k
    pos = c.op(OpCode::Sum, {c.op(OpCode::Mul, {expand(firstI, 1), less})}, {{"axes", ints({0})}});
  } else {
    pos = c.op(OpCode::Take, {c.op(OpCode::CumSum, {firstI, zero}, {{"exclusive", Attr::getBool(true)}}), first});
  }
  Value *m = c.op(OpCode::Sum, {firstI});
  Value *at = c.op(OpCode::Equal, {expand(c.op(OpCode::Arange, {zero, m, one}), 1), expand(pos, 0)}); // [m,n]
  Value *idx = c.op(OpCode::ArgMax, {i64(c.op(OpCode::LogicalAnd, {at, expand(isFirst, 0)}))}, {{"axis", Attr::getInt(1)}});
  Value *y = c.op(OpCode::Take, {x, idx}, {{"axis", Attr::getInt(axis)}});
  out = {y, idx, pos, c.wantsOutput(3) ? c.op(OpCode::Sum, {i64(at)}, {{"axes", ints({1})}}) : nullptr};
  for (size_t k = 0; k < 4; ++k)
    if (c.wantsOutput(k) && !out[k]) return false;
  return true;
}

} // namespace nimble::onnx_import::convert
