//===- ConvertRuntime.cpp - Shape operands known only at run time ----------===//
//
// ONNX moved several attributes to inputs (Slice's starts/ends/axes/steps
// from opset 10, Split's sizes and the axes of ReduceSum, Squeeze and
// Unsqueeze from 13). Nimble's slice, split, squeeze, expand_dims and
// reductions take them as attributes, so ConvertShape.cpp reads them when
// the model fixes them (initializers, Constant nodes, folded shapes). When
// they are graph inputs or computed, the node is expressed here with ops
// that take run-time tensors, as long as the result's RANK is fixed by the
// input's static length (the number of axes or sizes); its dims are then `?`
// (LangRef: `?` dims of known rank). Where the rank would depend on values
// (an axes input of `?` length) the node stays a precise error.
//
//   Slice      per sliced axis d: ONNX's clamping of start and end for the
//              step's sign (computed on i64 scalars), then take(x, arange(
//              start, end, step), axis=d). With run-time axes every axis d
//              takes its start/end/step from the entry whose axis is d (a
//              select over the entries; untouched axes keep the full range).
//              Known operands with a step other than 1 on a static dim become
//              take with constant indices (static result).
//   Split      output i: take(x, arange(offset_i, offset_i + size_i, 1)).
//   Unsqueeze  dyn_reshape(x, target): target[j] is 1 where j is one of the
//              (normalised) axes, else x's dim j - #(axes < j): compare the
//              axes against an iota, reduce over the axes, take from shape_of.
//   Squeeze    dyn_reshape(x, shape_of(x) at the dims not named): nonzero of
//              the kept mask, reshaped to its known count (rank - #axes).
//   Reduce*    per dim d, reduced or not at run time: reshape x's d-th dim n
//              into (g, inner) = (1, n) when reduced and (n, 1) when not, and
//              reduce `inner` with the static axis d + 1 (a reduction over one
//              element is that element), keepdims; keepdims=0 then drops the
//              reduced dims as Squeeze does. LogSumExp composes these.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Converters.h"

#include <algorithm>
#include <limits>

namespace nimble::onnx_import::convert {

namespace {

Value *i64(Conv &c, int64_t v) {
  DenseValue d;
  d.dtype = DType::I64;
  d.appendInt(v);
  return c.constant(std::move(d));
}

Value *asI64(Conv &c, Value *v) {
  if (!v || dt(v) == DType::I64) return v;
  return c.op(OpCode::Cast, {v}, {{"dtype", Attr::getDType(DType::I64)}});
}

/// Entry k of a 1-D tensor, as a rank-0 tensor.
Value *entry(Conv &c, Value *vec, int64_t k) { return c.op(OpCode::Take, {vec, i64(c, k)}, {{"axis", Attr::getInt(0)}}); }

Value *clampTo(Conv &c, Value *v, Value *lo, Value *hi) {
  return c.op(OpCode::Minimum, {c.op(OpCode::Maximum, {v, lo}), hi});
}

/// v < 0 ? v + n : v (an index counted from the end), on i64 values.
Value *fromEnd(Conv &c, Value *v, Value *n) {
  return c.op(OpCode::Select, {c.op(OpCode::Less, {v, i64(c, 0)}), c.op(OpCode::Add, {v, n}), v});
}

/// The static length of a 1-D operand, or -1 (with c.fail's message) when
/// its length is `?`: the count of axes or sizes that fixes the rank.
int64_t staticLength(Conv &c, Value *v, const char *what, const char *why) {
  if (!v || rankOf(v) != 1) {
    c.fail(std::string(what) + " must be a 1-D tensor");
    return -1;
  }
  int64_t n = v->type().dims()[0];
  if (n == kDynamic) c.fail(std::string(what) + " has a run-time length (`?`): " + why);
  return n;
}
const char *kRankWhy = "the result's rank would depend on values, and Nimble's types fix the rank";
const char *kCountWhy = "the importer needs the number of entries at import";

/// A constant 0, 1, ..., n - 1 (i64).
Value *iota(Conv &c, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return c.i64s(v);
}

/// For each j of 0..n-1, whether j is one of `axes` (normalised against
/// `rank`), as an i64 0/1 vector [n]; also the count of axes below j in
/// `below` when asked.
Value *axisHits(Conv &c, Value *axes, int64_t rank, int64_t n, Value **below = nullptr) {
  Value *ax = fromEnd(c, asI64(c, axes), i64(c, rank));
  Value *col = c.op(OpCode::ExpandDims, {ax}, {{"axis", Attr::getInt(1)}}); // [K, 1]
  Value *j = iota(c, n);
  Attrs over = {{"axes", ints({0})}, {"keepdims", Attr::getBool(false)}};
  Value *eq = c.op(OpCode::Cast, {c.op(OpCode::Equal, {col, j})}, {{"dtype", Attr::getDType(DType::I64)}});
  if (below) {
    Value *lt = c.op(OpCode::Cast, {c.op(OpCode::Less, {col, j})}, {{"dtype", Attr::getDType(DType::I64)}});
    *below = c.op(OpCode::Sum, {lt}, over);
  }
  return c.op(OpCode::Sum, {eq}, over); // duplicates count twice: still nonzero
}

/// x without the dims named by the run-time `axes` (K of them).
Value *squeezeRuntime(Conv &c, Value *x, Value *axes, int64_t k) {
  int64_t r = rankOf(x);
  if (k > r) {
    c.fail("names " + std::to_string(k) + " axes of a rank-" + std::to_string(r) + " input");
    return nullptr;
  }
  Value *keep = c.op(OpCode::Equal, {axisHits(c, axes, r, r), i64(c, 0)});
  Value *at = c.op(OpCode::Nonzero, {keep}); // [?, 1]: the kept dims
  // Exactly rank - K dims are kept when the axes are distinct and in range
  // (ONNX's requirement); the reshape checks the count at run time.
  at = c.op(OpCode::Reshape, {at}, {{"shape", ints({r - k})}});
  Value *target = c.op(OpCode::Take, {c.op(OpCode::ShapeOf, {x}), at}, {{"axis", Attr::getInt(0)}});
  return c.op(OpCode::DynReshape, {x, target});
}

} // namespace

bool unsqueezeRuntime(Conv &c, Out &out) {
  Value *x = c.input(0), *axes = c.input(1);
  int64_t k = staticLength(c, axes, "the axes input", kRankWhy);
  if (k < 0) return false;
  int64_t r = rankOf(x), n = r + k;
  if (r == 0) return done(out, c.op(OpCode::Reshape, {x}, {{"shape", ints(std::vector<int64_t>(static_cast<size_t>(n), 1))}}));
  Value *below = nullptr;
  Value *hit = c.op(OpCode::Greater, {axisHits(c, axes, n, n, &below), i64(c, 0)});
  Value *src = clampTo(c, c.op(OpCode::Sub, {iota(c, n), below}), i64(c, 0), i64(c, r - 1));
  Value *dims = c.op(OpCode::Take, {c.op(OpCode::ShapeOf, {x}), src}, {{"axis", Attr::getInt(0)}});
  Value *target = c.op(OpCode::Select, {hit, i64(c, 1), dims});
  return done(out, c.op(OpCode::DynReshape, {x, target}));
}

bool squeezeRuntime(Conv &c, Out &out) {
  Value *x = c.input(0), *axes = c.input(1);
  int64_t k = staticLength(c, axes, "the axes input", kRankWhy);
  if (k < 0) return false;
  return done(out, squeezeRuntime(c, x, axes, k));
}

namespace {

/// reduce `base` over the dims named by run-time `axes` (K >= 1 of them),
/// keeping them as size 1.
Value *reduceKeep(Conv &c, OpCode base, Value *x, Value *axes) {
  int64_t r = rankOf(x);
  Value *hits = axisHits(c, axes, r, r);
  Value *y = x;
  for (int64_t d = 0; d < r && y; ++d) {
    Value *flag = c.op(OpCode::Greater, {entry(c, hits, d), i64(c, 0)});
    Value *n = c.op(OpCode::Dim, {y}, {{"axis", Attr::getInt(d)}});
    Value *g = c.op(OpCode::Select, {flag, i64(c, 1), n});
    Value *inner = c.op(OpCode::Select, {flag, n, i64(c, 1)});
    Value *shape = c.op(OpCode::ShapeOf, {y});
    std::vector<Value *> parts;
    if (d > 0) parts.push_back(c.op(OpCode::Slice, {shape}, {{"axes", ints({0})}, {"starts", ints({0})}, {"ends", ints({d})}}));
    parts.push_back(c.op(OpCode::ExpandDims, {g}, {{"axis", Attr::getInt(0)}}));
    parts.push_back(c.op(OpCode::ExpandDims, {inner}, {{"axis", Attr::getInt(0)}}));
    if (d + 1 < r)
      parts.push_back(c.op(OpCode::Slice, {shape}, {{"axes", ints({0})}, {"starts", ints({d + 1})}, {"ends", ints({r})}}));
    Value *split = c.op(OpCode::DynReshape, {y, c.op(OpCode::Concat, parts, {{"axis", Attr::getInt(0)}})});
    y = c.op(base, {split}, {{"axes", ints({d + 1})}, {"keepdims", Attr::getBool(false)}});
  }
  return y;
}

} // namespace

bool reduceRuntime(Conv &c, Red red, Out &out) {
  Value *x = c.input(0), *axes = c.input(1);
  int64_t k = staticLength(c, axes, "the axes input", kRankWhy);
  if (k < 0) return false;
  bool keep = c.attrInt("keepdims", 1) != 0;
  auto finish = [&](Value *kept) { return keep ? kept : squeezeRuntime(c, kept, axes, k); };
  auto over = [&](OpCode base, Value *v) { return finish(reduceKeep(c, base, v, axes)); };
  switch (red) {
  case Red::Sum: return done(out, over(OpCode::Sum, x));
  case Red::Mean: return done(out, over(OpCode::Mean, x));
  case Red::Max: return done(out, over(OpCode::Max, x));
  case Red::Min: return done(out, over(OpCode::Min, x));
  case Red::SumSquare: return done(out, over(OpCode::Sum, c.op(OpCode::Mul, {x, x})));
  case Red::L1: return done(out, over(OpCode::Sum, c.op(OpCode::Abs, {x})));
  case Red::L2: return done(out, c.op(OpCode::Sqrt, {over(OpCode::Sum, c.op(OpCode::Mul, {x, x}))}));
  case Red::LogSum: return done(out, c.op(OpCode::Log, {over(OpCode::Sum, x)}));
  case Red::LogSumExp: {
    Value *m = reduceKeep(c, OpCode::Max, x, axes);
    Value *s = reduceKeep(c, OpCode::Sum, c.op(OpCode::Exp, {c.op(OpCode::Sub, {x, m})}), axes);
    return done(out, finish(c.op(OpCode::Add, {c.op(OpCode::Log, {s}), m})));
  }
  }
  return false;
}

namespace {

/// take(x, arange(start, end, step), axis=d) after ONNX's clamping of start
/// and end against dim d for the step's sign (all i64 scalars).
Value *sliceAxis(Conv &c, Value *x, int64_t d, Value *start, Value *end, Value *step) {
  Value *n = c.op(OpCode::Dim, {x}, {{"axis", Attr::getInt(d)}});
  Value *neg = c.op(OpCode::Less, {step, i64(c, 0)});
  Value *nm1 = c.op(OpCode::Sub, {n, i64(c, 1)});
  Value *hi = c.op(OpCode::Select, {neg, nm1, n});
  Value *s = clampTo(c, fromEnd(c, start, n), i64(c, 0), hi);
  Value *e = clampTo(c, fromEnd(c, end, n), c.op(OpCode::Select, {neg, i64(c, -1), i64(c, 0)}), hi);
  // A zero step is arange's error at run time ("step must not be zero").
  Value *idx = c.op(OpCode::Arange, {s, e, step});
  return c.op(OpCode::Take, {x, idx}, {{"axis", Attr::getInt(d)}});
}

} // namespace

bool sliceRuntime(Conv &c, Out &out) {
  Value *x = c.input(0);
  int64_t r = rankOf(x);
  int64_t k = staticLength(c, c.input(1), "starts", kCountWhy);
  if (k < 0) return false;
  if (staticLength(c, c.input(2), "ends", kCountWhy) != k) return c.error().empty() ? c.fail("starts and ends differ in length") : false;
  Value *starts = asI64(c, c.input(1)), *ends = asI64(c, c.input(2));
  Value *steps = c.input(4) ? asI64(c, c.input(4)) : nullptr;
  if (steps && staticLength(c, steps, "steps", kCountWhy) != k) return c.error().empty() ? c.fail("steps and starts differ in length") : false;
  auto knownAxes = c.input(3) ? c.knownInts(3) : std::optional<std::vector<int64_t>>(std::vector<int64_t>());
  if (!c.input(3))
    for (int64_t i = 0; i < k; ++i) knownAxes->push_back(i);
  auto knownStarts = c.knownInts(1), knownEnds = c.knownInts(2);
  auto knownSteps = c.input(4) ? c.knownInts(4) : std::optional<std::vector<int64_t>>(std::vector<int64_t>(static_cast<size_t>(k), 1));
  auto stepOf = [&](int64_t i) { return steps ? entry(c, steps, i) : i64(c, 1); };

  if (knownAxes) {
    if (static_cast<int64_t>(knownAxes->size()) != k) return c.fail("starts, ends and axes differ in length");
    Value *y = x;
    for (int64_t i = 0; i < k && y; ++i) {
      int64_t a = (*knownAxes)[static_cast<size_t>(i)];
      if (a < -r || a >= r) return c.fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
      a = a < 0 ? a + r : a;
      int64_t n = y->type().dims()[static_cast<size_t>(a)];
      if (knownStarts && knownEnds && knownSteps && n != kDynamic) {
        // All known on a static dim: the indices are a constant (static result).
        int64_t st = (*knownSteps)[static_cast<size_t>(i)];
        if (st == 0) return c.fail("step 0 is not allowed");
        auto norm = [n](int64_t v) { return v < 0 ? (v < -n ? -1 : v + n) : v; };
        int64_t s = norm((*knownStarts)[static_cast<size_t>(i)]), e = norm((*knownEnds)[static_cast<size_t>(i)]);
        s = st > 0 ? std::clamp<int64_t>(s, 0, n) : std::clamp<int64_t>(s, 0, std::max<int64_t>(n - 1, 0));
        e = st > 0 ? std::clamp<int64_t>(e, 0, n) : std::clamp<int64_t>(e, -1, n - 1);
        std::vector<int64_t> idx;
        if (n > 0)
          for (int64_t v = s; st > 0 ? v < e : v > e; v += st) idx.push_back(v);
        y = c.op(OpCode::Take, {y, c.i64s(idx)}, {{"axis", Attr::getInt(a)}});
        continue;
      }
      y = sliceAxis(c, y, a, entry(c, starts, i), entry(c, ends, i), stepOf(i));
    }
    return done(out, y);
  }

  // Run-time axes: every axis takes the start, end and step of the entry
  // naming it (the last one if several do), or the full range.
  Value *axes = fromEnd(c, asI64(c, c.input(3)), i64(c, r));
  if (staticLength(c, axes, "axes", kCountWhy) != k) return c.error().empty() ? c.fail("axes and starts differ in length") : false;
  Value *y = x;
  for (int64_t d = 0; d < r && y; ++d) {
    Value *s = i64(c, 0), *e = i64(c, std::numeric_limits<int64_t>::max()), *st = i64(c, 1);
    for (int64_t i = 0; i < k; ++i) {
      Value *here = c.op(OpCode::Equal, {entry(c, axes, i), i64(c, d)});
      s = c.op(OpCode::Select, {here, entry(c, starts, i), s});
      e = c.op(OpCode::Select, {here, entry(c, ends, i), e});
      st = c.op(OpCode::Select, {here, stepOf(i), st});
    }
    y = sliceAxis(c, y, d, s, e, st);
  }
  return done(out, y);
}

bool splitRuntime(Conv &c, Out &out, int64_t axis) {
  Value *x = c.input(0);
  size_t n = c.numOutputs();
  int64_t k = staticLength(c, c.input(1), "the split input", kCountWhy);
  if (k < 0) return false;
  if (k != static_cast<int64_t>(n)) return c.fail("has " + std::to_string(k) + " sizes for " + std::to_string(n) + " outputs");
  Value *sizes = asI64(c, c.input(1));
  Value *at = i64(c, 0);
  for (size_t i = 0; i < n; ++i) {
    Value *end = c.op(OpCode::Add, {at, entry(c, sizes, static_cast<int64_t>(i))});
    // ONNX requires the sizes to add up to the dim: a part running past it
    // is take's run-time index error; a sum short of it leaves the tail out.
    out.push_back(c.op(OpCode::Take, {x, c.op(OpCode::Arange, {at, end, i64(c, 1)})}, {{"axis", Attr::getInt(axis)}}));
    if (!out.back()) return false;
    at = end;
  }
  return true;
}

} // namespace nimble::onnx_import::convert
