//===- ConvertShape.cpp - Shape, slicing, cast and constant ops ------------===//
//
// ONNX's data-movement ops: the ones whose shape arguments Nimble takes as
// attributes read them at import (folding small integer computations, the
// Shape -> Gather -> Concat chains of torch exports), and Reshape computes a
// run-time target where it must; see OpMap.cpp for the table.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Converters.h"

#include <algorithm>

namespace nimble::onnx_import::convert {

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
  if (minusOne >= 0) {
    // The -1 entry is static when every dynamic entry is a `dim` of x and
    // the dynamic dims of x are exactly those: [N, -1] of ?x3x4 is ?x12.
    std::vector<bool> used(static_cast<size_t>(rankOf(x)), false);
    int64_t num = 1, den = 1;
    bool ok = true;
    for (const auto &p : parts) {
      Operation *d = p.v ? p.v->definingOp() : nullptr;
      if (p.v && !(d && d->is(OpCode::Dim) && d->operand(0) == x)) ok = false;
      if (!ok || !p.v) {
        if (!p.v && p.size >= 0) den *= p.size;
        continue;
      }
      int64_t a = d->intAttr("axis");
      a = a < 0 ? a + rankOf(x) : a;
      ok = !used[static_cast<size_t>(a)];
      used[static_cast<size_t>(a)] = true;
    }
    for (int64_t i = 0; ok && i < rankOf(x); ++i) {
      int64_t dx = x->type().dims()[static_cast<size_t>(i)];
      if (dx == kDynamic) ok = used[static_cast<size_t>(i)];
      else if (!used[static_cast<size_t>(i)]) num *= dx;
    }
    if (ok && den > 0 && num % den == 0) dims[static_cast<size_t>(minusOne)] = num / den;
  }
  y->setType(c.ctx().tensor(dt(y), dims));
  return y;
}

bool reshape(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x || !c.input(1)) return c.fail("needs data and shape");
  auto s = c.parts(c.input(1));
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
    // An entry computed at run time (a size taken from a shape) is a size.
    if ((*s)[i].v) {
      parts.push_back((*s)[i]);
      continue;
    }
    int64_t v = (*s)[i].size;
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
  if (s && !(start == 0 && end == r))
    s = c.op(OpCode::Slice, {s}, {{"axes", ints({0})}, {"starts", ints({start})}, {"ends", ints({end})}});
  // Entry by entry: the static sizes, and `dim` for the others (what later
  // Gather, Concat and Reshape nodes of a torch export read).
  std::vector<Conv::DimPart> p;
  for (int64_t i = start; i < end; ++i) p.push_back(c.dimOf(x, i));
  c.setParts(s, p);
  return done(out, s);
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
  Value *y = c.op(OpCode::Concat, c.in, {{"axis", Attr::getInt(axis)}});
  std::vector<Conv::DimPart> p;
  bool all = y && rankOf(y) == 1;
  for (Value *v : c.in) {
    auto vp = all ? c.parts(v) : std::nullopt;
    all = all && vp;
    if (all) p.insert(p.end(), vp->begin(), vp->end());
  }
  if (all) c.setParts(y, p);
  return done(out, y);
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
  auto xp = c.parts(x);
  if (xp && smallInts(ki) && ki->shape.size() <= 1 && axis == 0 && dt(x) == DType::I64) {
    // An entry of a shape: a static size is a constant, a dynamic one its `dim`.
    std::vector<Conv::DimPart> r;
    int64_t n = static_cast<int64_t>(xp->size());
    for (int64_t i : intsOf(ki)) {
      if (i < -n || i >= n) return c.fail("index " + std::to_string(i) + " is out of range");
      r.push_back((*xp)[static_cast<size_t>(i < 0 ? i + n : i)]);
    }
    if (ki->shape.empty()) return done(out, r[0].v ? r[0].v : c.scalar(DType::I64, static_cast<double>(r[0].size)));
    Value *y = c.shapeVector(r);
    c.setParts(y, r);
    return done(out, y);
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
  if (x && c.opset >= 13 && runtimeList(c, 1)) return unsqueezeRuntime(c, out);
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
  auto sp = c.scalarPart(x);
  for (int64_t a : axes)
    if (x) x = c.op(OpCode::ExpandDims, {x}, {{"axis", Attr::getInt(a)}});
  if (sp && axes.size() == 1) c.setParts(x, {*sp});
  return done(out, x);
}

bool squeeze(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (x && c.opset >= 13 && runtimeList(c, 1)) return squeezeRuntime(c, out);
  std::vector<int64_t> axes;
  bool given;
  if (!x || !squeezeAxes(c, axes, given)) return x ? false : c.fail("has no input");
  if (const DenseValue *k = c.known(x); smallInts(k) && (k->shape.size() == 0 || k->shape[0] == 1))
    return done(out, foldInts(c, k->dtype, {}, intsOf(k)));
  if (auto p = c.parts(x); p && p->size() == 1 && (*p)[0].v) return done(out, (*p)[0].v);
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
  // Operands given at run time, or steps other than 1: take over arange
  // (ConvertRuntime.cpp); Nimble's slice has static bounds and step 1.
  if (!starts || !ends || (c.input(3) && !c.knownInts(3))) return sliceRuntime(c, out);
  std::vector<int64_t> axes;
  if (c.input(3)) {
    axes = *c.knownInts(3);
  } else {
    for (size_t i = 0; i < starts->size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (c.input(4)) {
    auto st = c.knownInts(4);
    if (!st) return sliceRuntime(c, out);
    for (int64_t s : *st)
      if (s != 1) return sliceRuntime(c, out);
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
  auto xp = c.parts(x);
  if (xp && axes.size() == 1 && (axes[0] == 0 || axes[0] == -1)) {
    int64_t n = static_cast<int64_t>(xp->size());
    auto cl = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
    int64_t b = cl((*starts)[0]), e = std::max(b, cl((*ends)[0]));
    std::vector<Conv::DimPart> r(xp->begin() + b, xp->begin() + e);
    Value *y = c.op(OpCode::Slice, {x}, {{"axes", ints({0})}, {"starts", ints({b})}, {"ends", ints({e})}});
    c.setParts(y, r);
    return done(out, y);
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
    if (!k) return splitRuntime(c, out, axis);
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
  Value *y = c.op(OpCode::Cast, {x}, {{"dtype", Attr::getDType(*t)}});
  if (auto p = c.parts(x); p && *t == DType::I64) c.setParts(y, *p);
  return done(out, y);
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
  auto parts = c.parts(s);
  if (dt(s) != DType::I64) s = c.op(OpCode::Cast, {s}, {{"dtype", Attr::getDType(DType::I64)}});
  Value *y = c.op(OpCode::Full, {s, c.constant(std::move(v))});
  // The sizes known here stay static (full's relation sees only a run-time
  // shape): torch writes zeros_like(ids) as ConstantOfShape(Shape(ids)), and
  // a `?` batch there would make every later op of a batch-1 model `?`.
  if (y && parts && static_cast<int64_t>(parts->size()) == rankOf(y)) {
    std::vector<int64_t> dims;
    for (const auto &p : *parts) dims.push_back(p.v || p.size < 0 ? kDynamic : p.size);
    y->setType(c.ctx().tensor(dt(y), dims));
  }
  return done(out, y);
}

bool range(Conv &c, Out &out) { return done(out, c.op(OpCode::Arange, {c.input(0), c.input(1), c.input(2)})); }

bool nonZero(Conv &c, Out &out) {
  Value *nz = c.op(OpCode::Nonzero, {c.input(0)});
  return done(out, nz ? c.op(OpCode::Transpose, {nz}) : nullptr);
}

Conv::DimPart scaled(Conv &c, Conv::DimPart p, int64_t k, bool divide) {
  if (!p.v) return {divide ? p.size / k : p.size * k, nullptr};
  return {0, c.op(divide ? OpCode::Div : OpCode::Mul, {p.v, c.scalar(DType::I64, static_cast<double>(k))})};
}

/// DepthToSpace and SpaceToDepth: reshape to rank 6, transpose, reshape.
bool depthSpace(Conv &c, Out &out, bool toSpace) {
  Value *x = c.input(0);
  if (!x || rankOf(x) != 4) return c.fail("needs a 4-D input");
  int64_t b = c.attrInt("blocksize", 0);
  if (b <= 0) return c.fail("blocksize must be positive");
  Conv::DimPart n = c.dimOf(x, 0), ch = c.dimOf(x, 1), h = c.dimOf(x, 2), w = c.dimOf(x, 3);
  Conv::DimPart bp{b, nullptr};
  std::vector<Conv::DimPart> six, four;
  std::vector<int64_t> perm;
  if (toSpace) {
    if (ch.v || ch.size % (b * b)) return c.fail("the channels must be static and a multiple of blocksize^2");
    Conv::DimPart cc = scaled(c, ch, b * b, true);
    bool crd = c.attrStr("mode", "DCR") == "CRD";
    six = crd ? std::vector<Conv::DimPart>{n, cc, bp, bp, h, w} : std::vector<Conv::DimPart>{n, bp, bp, cc, h, w};
    perm = crd ? std::vector<int64_t>{0, 1, 4, 2, 5, 3} : std::vector<int64_t>{0, 3, 4, 1, 5, 2};
    four = {n, cc, scaled(c, h, b, false), scaled(c, w, b, false)};
  } else {
    Conv::DimPart hb = scaled(c, h, b, true), wb = scaled(c, w, b, true);
    six = {n, ch, hb, bp, wb, bp};
    perm = {0, 3, 5, 1, 2, 4};
    four = {n, scaled(c, ch, b * b, false), hb, wb};
  }
  Value *y = reshapeTo(c, x, six, -1);
  if (y) y = c.op(OpCode::Transpose, {y}, {{"perm", ints(perm)}});
  return done(out, y ? reshapeTo(c, y, four, -1) : nullptr);
}

bool depthToSpace(Conv &c, Out &out) { return depthSpace(c, out, true); }
bool spaceToDepth(Conv &c, Out &out) { return depthSpace(c, out, false); }

bool eyeLike(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x || rankOf(x) != 2) return c.fail("needs a 2-D input");
  DType t = dt(x);
  if (const auto *a = c.attr("dtype")) {
    std::optional<DType> d = dtypeOf(static_cast<int>(a->i()));
    if (!d) return c.fail("dtype " + onnxTypeName(static_cast<int>(a->i())) + " is not one Nimble has");
    t = *d;
  }
  int64_t k = c.attrInt("k", 0);
  Conv::DimPart rows = c.dimOf(x, 0), cols = c.dimOf(x, 1);
  if (!rows.v && !cols.v) {
    DenseValue d;
    d.dtype = t;
    d.shape = {rows.size, cols.size};
    for (int64_t i = 0; i < rows.size; ++i)
      for (int64_t j = 0; j < cols.size; ++j) d.appendDouble(j - i == k ? 1.0 : 0.0);
    return done(out, c.constant(std::move(d)));
  }
  auto iota = [&](Conv::DimPart p) {
    return c.op(OpCode::Arange, {c.scalar(DType::I64, 0), p.v ? p.v : c.scalar(DType::I64, static_cast<double>(p.size)),
                                 c.scalar(DType::I64, 1)});
  };
  Value *r = c.op(OpCode::ExpandDims, {c.op(OpCode::Add, {iota(rows), c.scalar(DType::I64, static_cast<double>(k))})},
                  {{"axis", Attr::getInt(1)}});
  Value *hit = c.op(OpCode::Equal, {r, iota(cols)});
  return done(out, c.op(OpCode::Cast, {hit}, {{"dtype", Attr::getDType(t)}}));
}

/// 0, 1, ..., n - 1 for dimension `axis` of x, as a 1-D i64 tensor.
Value *iota1(Conv &c, Value *x, int64_t axis) {
  Conv::DimPart n = c.dimOf(x, axis);
  if (!n.v) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n.size; ++i) v.push_back(i);
    return c.i64s(v);
  }
  return c.op(OpCode::Arange, {c.scalar(DType::I64, 0), n.v, c.scalar(DType::I64, 1)});
}

/// Trilu: x where column - row >= k (upper) or <= k (lower), else 0.
bool trilu(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x || rankOf(x) < 2) return c.fail("needs an input of rank >= 2");
  int64_t r = rankOf(x);
  Value *k = c.input(1) ? c.input(1) : c.scalar(DType::I64, 0);
  if (rankOf(k) != 0 || dt(k) != DType::I64) return c.fail("k is not an int64 scalar");
  Value *rows = c.op(OpCode::ExpandDims, {iota1(c, x, r - 2)}, {{"axis", Attr::getInt(1)}});
  Value *diff = c.op(OpCode::Sub, {iota1(c, x, r - 1), rows});
  Value *keep = c.op(c.attrInt("upper", 1) ? OpCode::GreaterEqual : OpCode::LessEqual, {diff, k});
  Value *zero = dt(x) == DType::I1 ? c.scalar(DType::I1, 0) : like(c, x, 0);
  return done(out, c.op(OpCode::Select, {keep, x, zero}));
}

/// GatherElements: out[..., i, ...] = x[..., idx[..., i, ...], ...] along
/// `axis`, through a one-hot mask over that axis (a new axis after it) and a
/// sum: memory of indices' size times the axis length.
bool gatherElements(Conv &c, Out &out) {
  Value *x = c.input(0), *idx = c.input(1);
  if (!x || !idx || rankOf(x) != rankOf(idx) || rankOf(x) < 1) return c.fail("needs data and indices of one rank");
  int64_t r = rankOf(x), axis = c.attrInt("axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return c.fail("axis is out of range");
  Value *i = dt(idx) == DType::I64 ? idx : c.op(OpCode::Cast, {idx}, {{"dtype", Attr::getDType(DType::I64)}});
  // Negative indices count from the end.
  Conv::DimPart n = c.dimOf(x, axis);
  Value *nv = n.v ? n.v : c.scalar(DType::I64, static_cast<double>(n.size));
  Value *neg = c.op(OpCode::Less, {i, c.scalar(DType::I64, 0)});
  i = c.op(OpCode::Select, {neg, c.op(OpCode::Add, {i, nv}), i});
  Value *iota = iota1(c, x, axis);
  for (int64_t k = axis + 1; iota && k < r; ++k) iota = c.op(OpCode::ExpandDims, {iota}, {{"axis", Attr::getInt(-1)}});
  Value *hot = c.op(OpCode::Equal, {c.op(OpCode::ExpandDims, {i}, {{"axis", Attr::getInt(axis + 1)}}), iota});
  Value *xe = c.op(OpCode::ExpandDims, {x}, {{"axis", Attr::getInt(axis)}});
  bool isBool = dt(x) == DType::I1;
  if (isBool) xe = c.op(OpCode::Cast, {xe}, {{"dtype", Attr::getDType(DType::I8)}});
  Value *picked = c.op(OpCode::Select, {hot, xe, c.scalar(isBool ? DType::I8 : dt(x), 0)});
  Value *y = c.op(OpCode::Sum, {picked}, {{"axes", ints({axis + 1})}});
  if (y && isBool) y = c.op(OpCode::Cast, {y}, {{"dtype", Attr::getDType(DType::I1)}});
  return done(out, y);
}

} // namespace nimble::onnx_import::convert
