//===- ShapeFnsSampling.cpp - Relations of the sampling ops ---------------===//
//
// resize and grid_sample (issue 47: ONNX's Resize, Upsample and GridSample).
//
// resize is data-dependent (Nimble paper §3.1-3.2): its result dims come from
// the values of %sizes or %scales, run-time tensors in general. With a
// constant operand the compile-time relation sees the value and gives static
// dims where the input's are static; without one, every resized axis is `?`
// and the run-time shape function (this same code, over the values) sizes
// the output. Which of the two operands counts is decided by their lengths
// (empty means absent, as ONNX's empty inputs), so it is known whenever the
// lengths are static even if the values are not.
//
// grid_sample is data-independent: N x C from %x, the sampled positions from
// %grid's middle axes.
//
//===----------------------------------------------------------------------===//

#include "ir/ShapeFnsImpl.h"

#include <cmath>
#include <set>

namespace nimble::shapefns {

namespace {

bool oneOf(const std::string &v, std::initializer_list<const char *> allowed) {
  for (const char *a : allowed)
    if (v == a) return true;
  return false;
}

std::string joined(std::initializer_list<const char *> allowed) {
  std::string s;
  size_t i = 0;
  for (const char *a : allowed) {
    s += i == 0 ? "" : (i + 1 == allowed.size() ? " or " : ", ");
    s += a;
    ++i;
  }
  return s;
}

bool strAttrIn(Ctx &c, const char *name, std::initializer_list<const char *> allowed) {
  const std::string &v = c.attr(name).getStr();
  if (oneOf(v, allowed)) return true;
  return c.failAttr(name, std::string(name) + " must be " + joined(allowed) + ", got '" + v + "'");
}

/// Operand `i` is a 1-D tensor of `kind` (float or integer) with 0 or `n`
/// entries; `len` gets its static length (kDynamic when unknown).
bool optionalVector(Ctx &c, size_t i, int64_t n, bool isFloatKind, const char *what, int64_t &len) {
  const TensorSig &s = c.ops[i];
  bool kindOk = isFloatKind ? isFloat(s.dtype) : isInteger(s.dtype);
  if (s.dims.size() != 1 || !kindOk)
    return c.fail(std::string(what) + " (operand " + std::to_string(i) + ") must be a 1-D " +
                      (isFloatKind ? "float" : "integer") + " tensor, got " + formatSig(s),
                  static_cast<int>(i));
  len = s.dims[0];
  if (len == kDynamic) {
    c.defer(std::string(what) + " must have 0 or " + std::to_string(n) + " entries");
  } else if (len != 0 && len != n) {
    return c.fail(std::string(what) + " (operand " + std::to_string(i) + ") must have 0 or " + std::to_string(n) +
                      " entries (one per resized axis), got " + formatSig(s),
                  static_cast<int>(i));
  }
  return true;
}

} // namespace

bool relResize(Ctx &c) {
  const int64_t r = c.rank(0);
  if (!dtypeAllowed(c.info.dtypes, c.ops[0].dtype))
    return c.fail("operand 0 must have " + std::string(dtypeRuleDescription(c.info.dtypes)) + ", got " +
                      formatSig(c.ops[0]),
                  0);
  if (!strAttrIn(c, "mode", {"nearest", "linear", "cubic"}) ||
      !strAttrIn(c, "coordinate_transformation_mode",
                 {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                  "tf_half_pixel_for_nn", "tf_crop_and_resize"}) ||
      !strAttrIn(c, "nearest_mode", {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) ||
      !strAttrIn(c, "keep_aspect_ratio_policy", {"stretch", "not_larger", "not_smaller"}))
    return false;
  // The resized axes, in the order %scales / %sizes / %roi list them.
  std::vector<int64_t> axes;
  const std::vector<int64_t> &given = c.intsAttr("axes");
  std::set<int64_t> seen;
  for (int64_t a : given) {
    int64_t n;
    if (!c.axis(a, r, n, "axes")) return false;
    if (!seen.insert(n).second) return c.failAttr("axes", "axis " + std::to_string(a) + " is repeated in axes");
    axes.push_back(n);
  }
  if (given.empty())
    for (int64_t k = 0; k < r; ++k) axes.push_back(k);
  const int64_t k = static_cast<int64_t>(axes.size());
  int64_t nScales, nSizes, nRoi;
  if (!optionalVector(c, 1, k, true, "scales", nScales) || !optionalVector(c, 2, k, false, "sizes", nSizes))
    return false;
  if (c.ops.size() == 4 && !optionalVector(c, 3, 2 * k, true, "roi", nRoi)) return false;
  if (nScales == 0 && nSizes == 0 && k > 0)
    return c.fail("one of scales (operand 1) and sizes (operand 2) must be non-empty");
  if (nScales == kDynamic || nSizes == kDynamic) c.defer("one of scales and sizes must be non-empty");

  std::vector<int64_t> out = c.ops[0].dims;
  for (int64_t a : axes) out[static_cast<size_t>(a)] = kDynamic;
  std::vector<int64_t> sizes;
  const DenseValue *scales = c.value(1);
  // Scales map coordinates even when sizes fix the result: always checked.
  if (scales)
    for (int64_t i = 0; i < scales->numElements(); ++i) {
      double s = scales->getDouble(i);
      if (!(s > 0) || !std::isfinite(s))
        return c.fail("scales entry " + std::to_string(s) + " is not a positive finite number", 1);
    }
  if (nSizes != 0 && nSizes != kDynamic && c.shapeValue(2, sizes)) {
    for (int64_t s : sizes)
      if (s < 0) return c.fail("sizes entry " + std::to_string(s) + " is negative", 2);
    const std::string &policy = c.attr("keep_aspect_ratio_policy").getStr();
    if (policy == "stretch") {
      for (int64_t i = 0; i < k; ++i) out[static_cast<size_t>(axes[static_cast<size_t>(i)])] = sizes[static_cast<size_t>(i)];
    } else {
      // One scale for every resized axis: the smallest (not_larger) or the
      // largest (not_smaller) of sizes / dim; each size is then
      // round(scale * dim), halves away from zero. Needs every dim.
      double scale = policy == "not_larger" ? INFINITY : 0.0;
      bool known = true;
      for (int64_t i = 0; i < k; ++i) {
        int64_t d = c.ops[0].dims[static_cast<size_t>(axes[static_cast<size_t>(i)])];
        if (d == kDynamic) { known = false; break; }
        if (d == 0) return c.fail("keep_aspect_ratio_policy " + policy + " cannot fit an empty dimension");
        double s = static_cast<double>(sizes[static_cast<size_t>(i)]) / static_cast<double>(d);
        scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
      }
      for (int64_t i = 0; known && i < k; ++i) {
        int64_t d = c.ops[0].dims[static_cast<size_t>(axes[static_cast<size_t>(i)])];
        double o = std::round(scale * static_cast<double>(d));
        if (!(o < 0x1p62)) return c.fail("resize would have a dimension of more than 2^62 entries", 2);
        out[static_cast<size_t>(axes[static_cast<size_t>(i)])] = static_cast<int64_t>(o);
      }
    }
  } else if (nSizes == 0 && nScales != kDynamic && scales) {
    for (int64_t i = 0; i < k; ++i) {
      double s = scales->getDouble(i);
      int64_t d = c.ops[0].dims[static_cast<size_t>(axes[static_cast<size_t>(i)])];
      if (d == kDynamic) continue;
      double o = std::floor(static_cast<double>(d) * s);
      if (!(o < 0x1p62)) return c.fail("resize would have a dimension of more than 2^62 entries", 1);
      out[static_cast<size_t>(axes[static_cast<size_t>(i)])] = static_cast<int64_t>(o);
    }
  } else {
    c.defer("sizes must not be negative and scales must be positive");
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relGridSample(Ctx &c) {
  if (!strAttrIn(c, "mode", {"linear", "nearest", "cubic"}) ||
      !strAttrIn(c, "padding_mode", {"zeros", "border", "reflection"}))
    return false;
  const TensorSig &x = c.ops[0], &g = c.ops[1];
  for (size_t i = 0; i < 2; ++i)
    if (!isFloat(c.ops[i].dtype))
      return c.fail("operand " + std::to_string(i) + " must have a float element type, got " + formatSig(c.ops[i]),
                    static_cast<int>(i));
  const int64_t r = c.rank(0) - 2;
  if (r < 1)
    return c.fail("input (operand 0) must have rank 3 or more (N x C x spatial axes), got " + formatSig(x), 0);
  if (c.rank(1) != r + 2)
    return c.fail("grid (operand 1) must have rank " + std::to_string(r + 2) + " (N x " + std::to_string(r) +
                      " output axes x " + std::to_string(r) + ") for " + formatSig(x) + ", got " + formatSig(g),
                  1);
  int64_t last = g.dims.back();
  if (last == kDynamic) c.defer("the last dimension of grid must be " + std::to_string(r));
  else if (last != r)
    return c.fail("the last dimension of grid (operand 1) must be " + std::to_string(r) + " (one coordinate per " +
                      "spatial axis of " + formatSig(x) + "), got " + formatSig(g),
                  1);
  int64_t n;
  if (!c.unify(x.dims[0], g.dims[0], n, "the batch dimensions of input and grid")) return false;
  std::vector<int64_t> out = {n, x.dims[1]};
  for (int64_t k = 0; k < r; ++k) out.push_back(g.dims[static_cast<size_t>(1 + k)]);
  c.result(x.dtype, out);
  return true;
}

} // namespace nimble::shapefns
