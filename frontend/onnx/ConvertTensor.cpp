//===- ConvertTensor.cpp - CumSum, Tile, Pad, ReduceProd, scatters, ... ---===//
//
// Converters for the ops issue 47 added to Nimble for ONNX models. CumSum's
// axis, Tile's repeats and Pad's pads are ONNX inputs, and Nimble takes them
// as operands too (run-time values: the node tests feed them as graph
// inputs), so a model whose counts are computed still imports; known ones
// are constants, which give the results static dimensions. GatherND,
// ScatterElements (and opset 9-10's Scatter), ScatterND and OneHot map to
// one op each; OneHot's float indices and depth are cast to i64 (ONNX casts
// them, truncating).
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Converters.h"

#include <cmath>

namespace nimble::onnx_import::convert {

namespace {

/// A one-element tensor (rank 0 or 1) as a scalar: ONNX says 0-D for
/// CumSum's axis and Pad's constant_value, and exporters also write [1].
Value *asScalar(Conv &c, Value *v) {
  if (!v || rankOf(v) == 0) return v;
  return c.op(OpCode::Reshape, {v}, {{"shape", ints({})}});
}

Value *asI64(Conv &c, Value *v) {
  if (!v || dt(v) == DType::I64) return v;
  return c.op(OpCode::Cast, {v}, {{"dtype", Attr::getDType(DType::I64)}});
}

} // namespace

bool cumSum(Conv &c, Out &out) {
  Value *x = c.input(0), *axis = asScalar(c, c.input(1));
  if (!x || !axis) return c.fail("needs an input and an axis");
  return done(out, c.op(OpCode::CumSum, {x, axis},
                        {{"exclusive", Attr::getBool(c.attrInt("exclusive", 0) != 0)},
                         {"reverse", Attr::getBool(c.attrInt("reverse", 0) != 0)}}));
}

bool tile(Conv &c, Out &out) {
  Value *x = c.input(0), *reps = c.input(1);
  if (!x || !reps) return c.fail("needs an input and repeats");
  if (auto k = c.knownInts(1)) reps = c.i64s(*k);
  return done(out, c.op(OpCode::Tile, {x, asI64(c, reps)}));
}

bool pad(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  const int64_t r = rankOf(x);
  std::string mode = c.attrStr("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return c.fail("mode '" + mode + "' is not one of constant, reflect, edge, wrap");
  Value *pads = nullptr, *value = nullptr;
  if (c.opset < 11) { // attributes: pads and value
    auto p = c.attrInts("pads");
    if (!p) return c.fail("needs the pads attribute");
    pads = c.i64s(*p);
    double v = c.attrFloat("value", 0.0);
    if (v != 0.0 && mode == "constant") value = like(c, x, v);
  } else {
    if (!c.input(1)) return c.fail("needs the pads input");
    auto known = c.knownInts(1);
    value = mode == "constant" ? asScalar(c, c.input(2)) : nullptr;
    if (value && dt(value) != dt(x)) return c.fail("constant_value must have the input's element type");
    // Opset 18's axes: pads lists begins then ends of those axes only. Entry
    // k of the full [begin.., end..] vector is pads[pick[k]], or 0 where
    // pick[k] is past the end.
    std::vector<int64_t> pick;
    int64_t n = r;
    if (c.input(3)) {
      auto axes = c.knownInts(3);
      if (!axes) return c.fail("the axes input must be known when the model is imported");
      n = static_cast<int64_t>(axes->size());
      pick.assign(static_cast<size_t>(2 * r), 2 * n);
      for (int64_t i = 0; i < n; ++i) {
        int64_t a = (*axes)[static_cast<size_t>(i)];
        if (a < -r || a >= r) return c.fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
        if (a < 0) a += r;
        pick[static_cast<size_t>(a)] = i;
        pick[static_cast<size_t>(a + r)] = n + i;
      }
    }
    if (known && static_cast<int64_t>(known->size()) != 2 * n)
      return c.fail("pads has " + std::to_string(known->size()) + " entries, expected " + std::to_string(2 * n));
    if (known) {
      std::vector<int64_t> full = *known;
      if (!pick.empty()) {
        full.clear();
        for (int64_t k : pick) full.push_back(k < 2 * n ? (*known)[static_cast<size_t>(k)] : 0);
      }
      pads = c.i64s(full);
    } else {
      pads = asI64(c, c.input(1));
      if (!pick.empty()) {
        Value *withZero = c.op(OpCode::Concat, {pads, c.i64s({0})}, {{"axis", Attr::getInt(0)}});
        pads = c.op(OpCode::Take, {withZero, c.i64s(pick)}, {{"axis", Attr::getInt(0)}});
      }
    }
  }
  std::vector<Value *> operands = {x, pads};
  if (value) operands.push_back(value);
  return done(out, c.op(OpCode::Pad, operands, {{"mode", Attr::getStr(mode)}}));
}

bool reduceProd(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  std::vector<int64_t> axes;
  if (!reduceAxes(c, 18, axes)) return false;
  if (axes.empty() && c.attrInt("noop_with_empty_axes", 0)) return done(out, x);
  return done(out, c.op(OpCode::Prod, {x}, {{"axes", ints(axes)}, {"keepdims", Attr::getBool(c.attrInt("keepdims", 1))}}));
}

bool gatherND(Conv &c, Out &out) {
  Value *x = c.input(0), *idx = c.input(1);
  if (!x || !idx) return c.fail("needs data and indices");
  return done(out, c.op(OpCode::GatherND, {x, idx}, {{"batch_dims", Attr::getInt(c.attrInt("batch_dims", 0))}}));
}

bool scatterElements(Conv &c, Out &out) {
  Value *x = c.input(0), *idx = c.input(1), *upd = c.input(2);
  if (!x || !idx || !upd) return c.fail("needs data, indices and updates");
  return done(out, c.op(OpCode::ScatterElements, {x, idx, upd},
                        {{"axis", Attr::getInt(c.attrInt("axis", 0))},
                         {"reduction", Attr::getStr(c.attrStr("reduction", "none"))}}));
}

bool scatterND(Conv &c, Out &out) {
  Value *x = c.input(0), *idx = c.input(1), *upd = c.input(2);
  if (!x || !idx || !upd) return c.fail("needs data, indices and updates");
  return done(out, c.op(OpCode::ScatterND, {x, idx, upd}, {{"reduction", Attr::getStr(c.attrStr("reduction", "none"))}}));
}

bool oneHot(Conv &c, Out &out) {
  Value *idx = c.input(0), *depth = asScalar(c, c.input(1)), *values = c.input(2);
  if (!idx || !depth || !values) return c.fail("needs indices, depth and values");
  if (auto k = c.knownInts(1)) depth = c.scalar(DType::I64, static_cast<double>((*k)[0]));
  else if (const DenseValue *d = c.known(c.input(1)); d && isFloat(d->dtype) && d->numElements() == 1)
    depth = c.scalar(DType::I64, std::trunc(d->getDouble(0)));
  return done(out, c.op(OpCode::OneHot, {asI64(c, idx), asI64(c, depth), values},
                        {{"axis", Attr::getInt(c.attrInt("axis", -1))}}));
}

/// BitShift: shift_left or shift_right by `direction`.
bool bitShift(Conv &c, Out &out) {
  Value *x = c.input(0), *s = c.input(1);
  if (!x || !s) return c.fail("needs X and Y");
  std::string dir = c.attrStr("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") return c.fail("direction must be LEFT or RIGHT");
  return done(out, c.op(dir == "LEFT" ? OpCode::ShiftLeft : OpCode::ShiftRight, {x, s}));
}

/// TopK: k from the attribute (opsets 1-9) or the input (a [1] tensor, from
/// 10); sorted=0 allows any order, and the sorted one is such an order.
bool topK(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  Value *k;
  if (c.opset < 10) {
    k = c.scalar(DType::I64, static_cast<double>(c.attrInt("k", 0)));
  } else if (auto kk = c.knownInts(1); kk && kk->size() == 1) {
    k = c.scalar(DType::I64, static_cast<double>((*kk)[0]));
  } else {
    k = asI64(c, asScalar(c, c.input(1)));
    if (!k) return c.fail("needs K");
  }
  std::vector<Value *> r = c.ops(OpCode::TopK, {x, k},
                                 {{"axis", Attr::getInt(c.attrInt("axis", -1))},
                                  {"largest", Attr::getBool(c.attrInt("largest", 1) != 0)}},
                                 2);
  if (r.size() != 2 || !r[0]) return false;
  out = r;
  return true;
}

/// NonMaxSuppression: the optional [1] inputs as scalars, with ONNX's
/// defaults (no box per class; IoU threshold 0; no score threshold: -inf).
bool nonMaxSuppression(Conv &c, Out &out) {
  Value *boxes = c.input(0), *scores = c.input(1);
  if (!boxes || !scores) return c.fail("needs boxes and scores");
  DType t = dt(boxes);
  Value *maxPer = c.input(2) ? asI64(c, asScalar(c, c.input(2))) : c.scalar(DType::I64, 0);
  auto thr = [&](size_t i, double dflt) {
    Value *v = c.input(i);
    if (!v) return c.scalar(t, dflt);
    v = asScalar(c, v);
    return v && dt(v) != t ? c.op(OpCode::Cast, {v}, {{"dtype", Attr::getDType(t)}}) : v;
  };
  Value *iou = thr(3, 0.0), *score = thr(4, -INFINITY);
  return done(out, c.op(OpCode::NonMaxSuppression, {boxes, scores, maxPer, iou, score},
                        {{"center_point_box", Attr::getBool(c.attrInt("center_point_box", 0) != 0)}}));
}

} // namespace nimble::onnx_import::convert
