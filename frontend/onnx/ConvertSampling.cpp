//===- ConvertSampling.cpp - Resize, Upsample, GridSample -----------------===//
//
// Resize (opsets 10 to 19) and Upsample (7 to 9) become one `resize`, whose
// operands are ONNX's: scales and sizes stay run-time tensors (a computed
// sizes input makes the result's resized dims `?`; a constant one gives
// static dims through the relation), an absent one is an empty constant.
// Upsample and opset 10's Resize are Resize with
// coordinate_transformation_mode asymmetric and nearest_mode floor (their
// spec: x_original = x_resized / scale, the nearest pixel floored). roi is
// passed only for tf_crop_and_resize, the one mode that reads it.
// GridSample's opset 16 mode names (bilinear, bicubic) are opset 20's
// linear and cubic.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Converters.h"

namespace nimble::onnx_import::convert {

namespace {

Value *emptyOf(Conv &c, DType t) {
  DenseValue d;
  d.dtype = t;
  d.shape = {0};
  return c.constant(std::move(d));
}

/// An optional list input: absent (or an empty name) gives an empty tensor.
Value *listOrEmpty(Conv &c, size_t i, DType emptyType) {
  Value *v = c.input(i);
  return v ? v : emptyOf(c, emptyType);
}

bool emitResize(Conv &c, Out &out, Value *x, Value *scales, Value *sizes, Value *roi, Attrs attrs) {
  if (!isFloat(dt(scales))) return c.fail("scales must be a float tensor");
  if (!isInteger(dt(sizes))) return c.fail("sizes must be an integer tensor");
  if (dt(sizes) != DType::I64) sizes = c.op(OpCode::Cast, {sizes}, {{"dtype", Attr::getDType(DType::I64)}});
  std::vector<Value *> operands = {x, scales, sizes};
  if (roi) {
    if (!isFloat(dt(roi))) return c.fail("roi must be a float tensor");
    operands.push_back(roi);
  }
  return done(out, c.op(OpCode::Resize, operands, attrs));
}

std::string upsampleMode(Conv &c) {
  std::string mode = c.attrStr("mode", "nearest");
  // Opset 7's Upsample documents nearest and linear; bilinear is an older
  // spelling exporters still write.
  return mode == "bilinear" ? "linear" : mode;
}

} // namespace

bool resize(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  if (c.opset < 11) {
    // Opset 10: Resize(X, scales), Upsample's semantics.
    if (!c.input(1)) return c.fail("needs the scales input");
    return emitResize(c, out, x, c.input(1), emptyOf(c, DType::I64), nullptr,
                      {{"mode", Attr::getStr(upsampleMode(c))},
                       {"coordinate_transformation_mode", Attr::getStr("asymmetric")},
                       {"nearest_mode", Attr::getStr("floor")}});
  }
  const std::string ctm = c.attrStr("coordinate_transformation_mode", "half_pixel");
  Attrs a = {{"mode", Attr::getStr(c.attrStr("mode", "nearest"))},
             {"coordinate_transformation_mode", Attr::getStr(ctm)},
             {"nearest_mode", Attr::getStr(c.attrStr("nearest_mode", "round_prefer_floor"))},
             {"cubic_coeff_a", Attr::getFloat(c.attrFloat("cubic_coeff_a", -0.75))},
             {"exclude_outside", Attr::getBool(c.attrInt("exclude_outside", 0) != 0)},
             {"extrapolation_value", Attr::getFloat(c.attrFloat("extrapolation_value", 0.0))},
             {"antialias", Attr::getBool(c.attrInt("antialias", 0) != 0)},
             {"keep_aspect_ratio_policy", Attr::getStr(c.attrStr("keep_aspect_ratio_policy", "stretch"))}};
  if (auto axes = c.attrInts("axes")) a.push_back({"axes", ints(*axes)});
  Value *roi = ctm == "tf_crop_and_resize" ? c.input(1) : nullptr;
  Value *scales = listOrEmpty(c, 2, DType::F32), *sizes = listOrEmpty(c, 3, DType::I64);
  return emitResize(c, out, x, scales, sizes, roi, a);
}

bool upsample(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  Value *scales = c.input(1);
  if (c.opset < 9) {
    // Opset 7: the scales attribute.
    auto s = c.attr("scales");
    if (!s || s->floats_size() == 0) return c.fail("needs the scales attribute");
    DenseValue d;
    d.dtype = DType::F32;
    d.shape = {s->floats_size()};
    for (float f : s->floats()) d.appendDouble(f);
    scales = c.constant(std::move(d));
  }
  if (!scales) return c.fail("needs the scales input");
  return emitResize(c, out, x, scales, emptyOf(c, DType::I64), nullptr,
                    {{"mode", Attr::getStr(upsampleMode(c))},
                     {"coordinate_transformation_mode", Attr::getStr("asymmetric")},
                     {"nearest_mode", Attr::getStr("floor")}});
}

bool gridSample(Conv &c, Out &out) {
  Value *x = c.input(0), *grid = c.input(1);
  if (!x || !grid) return c.fail("needs X and grid");
  std::string mode = c.attrStr("mode", c.opset >= 20 ? "linear" : "bilinear");
  if (mode == "bilinear") mode = "linear";
  else if (mode == "bicubic") mode = "cubic";
  return done(out, c.op(OpCode::GridSample, {x, grid},
                        {{"mode", Attr::getStr(mode)},
                         {"padding_mode", Attr::getStr(c.attrStr("padding_mode", "zeros"))},
                         {"align_corners", Attr::getBool(c.attrInt("align_corners", 0) != 0)}}));
}

} // namespace nimble::onnx_import::convert
