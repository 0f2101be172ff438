//===- ShapeFnsLayout.cpp - Type relations of layout and indexing ops -----===//
//
// The relations of reshape, transpose, concat, split, slices, take,
// squeeze/expand_dims, broadcast_to, the creation ops (zeros, full, arange),
// unique, nonzero, cumsum, tile, pad, gather_nd, scatter_elements,
// scatter_nd and one_hot. The contract is ShapeFns.h's; ShapeFns.cpp
// dispatches here through ShapeFnsImpl.h.
//
//===----------------------------------------------------------------------===//

#include "ir/ShapeFnsImpl.h"

#include <algorithm>
#include <cmath>

namespace nimble::shapefns {

bool relReshape(Ctx &c) {
  const auto &target = c.intsAttr("shape");
  int infer = -1;
  int64_t knownProduct = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (infer >= 0) return c.failAttr("shape", "shape may contain at most one -1");
      infer = static_cast<int>(i);
    } else if (target[i] < 0) {
      return c.failAttr("shape", "shape entry " + std::to_string(target[i]) + " is negative");
    } else if (mulOverflows(knownProduct, target[i])) {
      return c.failAttr("shape", "shape " + formatDims(target) +
                                     " has more elements than fit in 64 bits");
    }
  }
  bool inDynamic = false;
  int64_t inProduct = 1;
  for (int64_t d : c.ops[0].dims) {
    if (d == kDynamic) inDynamic = true;
    else if (mulOverflows(inProduct, d))
      return c.fail("input " + formatDims(c.ops[0].dims) +
                        " has more elements than fit in 64 bits",
                    0);
  }
  std::vector<int64_t> out = target;
  if (infer >= 0) {
    if (inDynamic) {
      out[static_cast<size_t>(infer)] = kDynamic;
      c.defer("element count of the input must be a multiple of " +
              std::to_string(knownProduct));
    } else {
      if (knownProduct == 0 || inProduct % knownProduct != 0)
        return c.failAttr("shape", "cannot reshape " + formatDims(c.ops[0].dims) + " (" +
                      std::to_string(inProduct) + " elements) to " + formatDims(target));
      out[static_cast<size_t>(infer)] = inProduct / knownProduct;
    }
  } else if (inDynamic) {
    c.defer("element count of the input must be " + std::to_string(knownProduct));
  } else if (inProduct != knownProduct) {
    return c.failAttr("shape", "cannot reshape " + formatDims(c.ops[0].dims) + " (" +
                  std::to_string(inProduct) + " elements) to " + formatDims(target) + " (" +
                  std::to_string(knownProduct) + " elements)");
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

/// Shared by dyn_reshape / zeros / full: a run-time shape operand `i`.
static bool shapeOperand(Ctx &c, size_t i, std::vector<int64_t> &out) {
  const TensorSig &s = c.ops[i];
  if (s.dims.size() != 1 || !isInteger(s.dtype))
    return c.fail("shape (operand " + std::to_string(i) +
                      ") must be a 1-D integer tensor, got " + formatSig(s),
                  static_cast<int>(i));
  if (s.dims[0] > kMaxShapeLength)
    return c.fail("shape (operand " + std::to_string(i) + ") has " + std::to_string(s.dims[0]) +
                      " entries; at most " + std::to_string(kMaxShapeLength) +
                      " (the rank limit) are supported",
                  static_cast<int>(i));
  if (c.shapeValue(i, out)) {
    for (int64_t d : out)
      if (d < 0 && c.info.code != OpCode::DynReshape)
        return c.fail("shape entry " + std::to_string(d) + " is negative",
                      static_cast<int>(i));
    return true;
  }
  if (s.dims[0] == kDynamic)
    return c.fail("shape (operand " + std::to_string(i) +
                      ") must have a static length to fix the result rank",
                  static_cast<int>(i));
  out.assign(static_cast<size_t>(s.dims[0]), kDynamic);
  return true;
}

bool relDynReshape(Ctx &c) {
  std::vector<int64_t> target;
  if (!shapeOperand(c, 1, target)) return false;
  if (c.value(1)) {
    // Known target: the static reshape relation decides.
    std::vector<Attr> attrs = {Attr::getInts(target)};
    ShapeFnResult sub = inferShapes(OpCode::Reshape, {c.ops[0]}, attrs);
    // The target came from operand 1's value: blame it (its definition holds
    // the numbers).
    if (!sub.ok()) return c.fail(sub.error, 1);
    c.r.deferred = sub.deferred;
    c.r.results = sub.results;
    return true;
  }
  c.defer("element count of the input must match the run-time shape");
  c.result(c.ops[0].dtype, target);
  return true;
}

bool relTranspose(Ctx &c) {
  int64_t r = c.rank(0);
  std::vector<int64_t> perm = c.intsAttr("perm");
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != r)
    return c.failAttr("perm", "perm " + formatInts(perm) + " has " + std::to_string(perm.size()) +
                                  " entries but the input has rank " + std::to_string(r));
  std::vector<bool> seen(static_cast<size_t>(r), false);
  std::vector<int64_t> out;
  for (int64_t p : perm) {
    int64_t ax;
    if (!c.axis(p, r, ax, "perm", "perm entry")) return false;
    if (seen[static_cast<size_t>(ax)])
      return c.failAttr("perm", "perm " + formatInts(perm) + " is not a permutation: axis " +
                                    std::to_string(ax) + " appears twice");
    seen[static_cast<size_t>(ax)] = true;
    out.push_back(c.ops[0].dims[static_cast<size_t>(ax)]);
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relConcat(Ctx &c) {
  int64_t r = c.rank(0);
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), r, ax, "axis")) return false;
  std::vector<int64_t> out = c.ops[0].dims;
  for (size_t i = 1; i < c.ops.size(); ++i) {
    if (!c.sameDType(0, i)) return false;
    if (c.rank(i) != r)
      return c.fail("operand " + std::to_string(i) + " has rank " + std::to_string(c.rank(i)) +
                        " but operand 0 has rank " + std::to_string(r),
                    static_cast<int>(i));
    for (int64_t k = 0; k < r; ++k) {
      int64_t d = c.ops[i].dims[static_cast<size_t>(k)];
      int64_t &o = out[static_cast<size_t>(k)];
      if (k == ax) {
        if (o == kDynamic || d == kDynamic) o = kDynamic;
        else if (addOverflows(o, d))
          return c.fail("the concatenated dimension " + std::to_string(k) +
                            " does not fit in 64 bits",
                        static_cast<int>(i));
      } else if (!c.unify(d, o, o, "dimension " + std::to_string(k) + " of operand " +
                                       std::to_string(i) + " and operand 0")) {
        c.r.errorOperand = static_cast<int>(i);
        return false;
      }
    }
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relSplit(Ctx &c) {
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), c.rank(0), ax, "axis")) return false;
  int64_t n = c.intAttr("sections");
  if (n <= 0) return c.failAttr("sections", "sections must be positive, got " + std::to_string(n));
  // Each section is a result: refuse before making a billion of them.
  if (n > int64_t(limits::kMaxResults))
    return c.failAttr("sections", std::to_string(n) + " sections are more than the limit of " +
                                      std::to_string(limits::kMaxResults) + " results");
  std::vector<int64_t> part = c.ops[0].dims;
  int64_t d = part[static_cast<size_t>(ax)];
  if (d != kDynamic) {
    if (d % n != 0)
      return c.failAttr("sections", "dimension " + std::to_string(ax) + " (" + std::to_string(d) +
                    ") is not divisible into " + std::to_string(n) + " sections");
    part[static_cast<size_t>(ax)] = d / n;
  } else {
    c.defer("dimension " + std::to_string(ax) + " (?) must be divisible by " +
            std::to_string(n));
  }
  for (int64_t i = 0; i < n; ++i) c.result(c.ops[0].dtype, part);
  return true;
}

bool relSlice(Ctx &c) {
  const auto &axes = c.intsAttr("axes"), &starts = c.intsAttr("starts"),
             &ends = c.intsAttr("ends");
  if (axes.size() != starts.size() || axes.size() != ends.size())
    return c.failAttr(axes.size() != starts.size() ? "starts" : "ends",
                      "axes, starts and ends must have the same length");
  std::vector<int64_t> out = c.ops[0].dims;
  std::vector<bool> seen(out.size(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t ax;
    if (!c.axis(axes[i], c.rank(0), ax, "axes")) return false;
    if (seen[static_cast<size_t>(ax)])
      return c.failAttr("axes", "axis " + std::to_string(axes[i]) + " is listed twice");
    seen[static_cast<size_t>(ax)] = true;
    int64_t d = out[static_cast<size_t>(ax)];
    int64_t s = starts[i], e = ends[i];
    if (d == kDynamic) {
      // The extent depends on clamping against the run-time size.
      out[static_cast<size_t>(ax)] = kDynamic;
      continue;
    }
    auto clamp = [d](int64_t v) {
      if (v < 0) v += d;
      return std::min(std::max(v, int64_t(0)), d);
    };
    int64_t cs = clamp(s), ce = clamp(e);
    out[static_cast<size_t>(ax)] = std::max(ce - cs, int64_t(0));
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relDynamicSlice(Ctx &c) {
  if (!c.requireScalar(1, "start") ) return false;
  if (!isInteger(c.ops[1].dtype))
    return c.fail("start (operand 1) must be an integer, got " + formatSig(c.ops[1]), 1);
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), c.rank(0), ax, "axis")) return false;
  int64_t size = c.intAttr("size");
  int64_t d = c.ops[0].dims[static_cast<size_t>(ax)];
  if (size < 0) return c.failAttr("size", "size must be non-negative, got " + std::to_string(size));
  if (d != kDynamic && size > d)
    return c.failAttr("size", "size " + std::to_string(size) + " exceeds dimension " +
                  std::to_string(ax) + " (" + std::to_string(d) + ")");
  c.defer("start + size must lie within dimension " + std::to_string(ax));
  std::vector<int64_t> out = c.ops[0].dims;
  out[static_cast<size_t>(ax)] = size;
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relDynamicUpdateSlice(Ctx &c) {
  if (!c.sameDType(0, 1)) return false;
  if (!c.requireScalar(2, "start")) return false;
  if (!isInteger(c.ops[2].dtype))
    return c.fail("start (operand 2) must be an integer, got " + formatSig(c.ops[2]), 2);
  int64_t r = c.rank(0);
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), r, ax, "axis")) return false;
  if (c.rank(1) != r)
    return c.fail("update (operand 1) has rank " + std::to_string(c.rank(1)) +
                      " but operand 0 has rank " + std::to_string(r),
                  1);
  std::vector<int64_t> out = c.ops[0].dims;
  for (int64_t k = 0; k < r; ++k) {
    int64_t u = c.ops[1].dims[static_cast<size_t>(k)];
    int64_t &o = out[static_cast<size_t>(k)];
    if (k == ax) {
      if (o != kDynamic && u != kDynamic && u > o)
        return c.fail("update (operand 1) has " + std::to_string(u) + " entries along axis " +
                          std::to_string(ax) + ", more than operand 0's " + std::to_string(o),
                      1);
    } else if (!c.unify(u, o, o, "dimension " + std::to_string(k) +
                                     " of the update (operand 1) and operand 0")) {
      c.r.errorOperand = 1;
      return false;
    }
  }
  c.defer("start + the update's size must lie within dimension " + std::to_string(ax));
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relTake(Ctx &c) {
  if (!isInteger(c.ops[1].dtype))
    return c.fail("indices (operand 1) must have an integer element type, got " +
                      formatSig(c.ops[1]),
                  1);
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), c.rank(0), ax, "axis")) return false;
  const auto &d = c.ops[0].dims;
  std::vector<int64_t> out(d.begin(), d.begin() + ax);
  out.insert(out.end(), c.ops[1].dims.begin(), c.ops[1].dims.end());
  out.insert(out.end(), d.begin() + ax + 1, d.end());
  c.defer("indices must lie within dimension " + std::to_string(ax));
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relExpandDims(Ctx &c) {
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), c.rank(0) + 1, ax, "axis")) return false;
  std::vector<int64_t> out = c.ops[0].dims;
  out.insert(out.begin() + ax, 1);
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relSqueeze(Ctx &c) {
  const auto &d = c.ops[0].dims;
  std::vector<bool> drop(d.size(), false);
  const auto &axes = c.intsAttr("axes");
  if (axes.empty()) {
    for (size_t i = 0; i < d.size(); ++i) {
      if (d[i] == kDynamic)
        return c.fail("squeeze without axes needs a static shape, got " + formatSig(c.ops[0]) +
                      "; list the axes to drop");
      drop[i] = d[i] == 1;
    }
  }
  for (int64_t a : axes) {
    int64_t ax;
    if (!c.axis(a, c.rank(0), ax, "axes")) return false;
    if (drop[static_cast<size_t>(ax)])
      return c.fail("axis " + std::to_string(a) + " is listed twice");
    int64_t v = d[static_cast<size_t>(ax)];
    if (v != 1 && v != kDynamic)
      return c.failAttr("axes", "cannot squeeze dimension " + std::to_string(ax) + " of size " +
                    std::to_string(v));
    if (v == kDynamic) c.defer("dimension " + std::to_string(ax) + " (?) must be 1");
    drop[static_cast<size_t>(ax)] = true;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < d.size(); ++i)
    if (!drop[i]) out.push_back(d[i]);
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relBroadcastTo(Ctx &c) {
  const auto &target = c.intsAttr("shape");
  const auto &d = c.ops[0].dims;
  for (int64_t t : target)
    if (t < 0) return c.failAttr("shape", "shape entry " + std::to_string(t) + " is negative");
  if (d.size() > target.size())
    return c.failAttr("shape", "cannot broadcast " + formatDims(d) + " to the lower rank " +
                  formatDims(target));
  size_t off = target.size() - d.size();
  for (size_t k = 0; k < d.size(); ++k) {
    int64_t t = target[off + k];
    if (d[k] == kDynamic) {
      c.defer("dimension " + std::to_string(k) + " (?) must be 1 or " + std::to_string(t));
    } else if (d[k] != 1 && d[k] != t) {
      return c.failAttr("shape", "cannot broadcast " + formatDims(d) + " to " + formatDims(target) +
                    ": dimension " + std::to_string(k) + " is " + std::to_string(d[k]));
    }
  }
  c.result(c.ops[0].dtype, target);
  return true;
}

bool relArange(Ctx &c) {
  for (size_t i = 0; i < 3; ++i) {
    if (!c.requireScalar(i, i == 0 ? "start" : i == 1 ? "stop" : "step")) return false;
    if (i && !c.sameDType(0, i)) return false;
  }
  const DenseValue *s = c.value(0), *e = c.value(1), *st = c.value(2);
  int64_t n = kDynamic;
  if (s && e && st) {
    double step = st->getDouble(0);
    if (step == 0) return c.fail("step must not be zero", 2);
    double len = std::ceil((e->getDouble(0) - s->getDouble(0)) / step);
    if (len >= 0x1p62)
      return c.fail("arange would produce " + std::to_string(len) + " elements");
    n = len > 0 ? static_cast<int64_t>(len) : 0;
  }
  c.result(c.ops[0].dtype, {n});
  return true;
}

bool relUnique(Ctx &c) {
  if (!c.requireRank(0, 1, "input")) return false;
  c.r.upperBound = true;
  c.result(c.ops[0].dtype, {c.ops[0].dims[0]});
  return true;
}

bool relNonzero(Ctx &c) {
  int64_t bound = 1;
  for (int64_t d : c.ops[0].dims) {
    if (bound == kDynamic || d == kDynamic) bound = kDynamic;
    else if (mulOverflows(bound, d))
      return c.fail("input " + formatDims(c.ops[0].dims) +
                        " has more elements than fit in 64 bits",
                    0);
  }
  c.r.upperBound = true;
  c.result(DType::I64, {bound, c.rank(0)});
  return true;
}

bool relZerosFull(Ctx &c, bool full) {
  std::vector<int64_t> shape;
  if (!shapeOperand(c, 0, shape)) return false;
  DType t = c.attrs.empty() ? DType::F32 : c.attr("dtype").getDType();
  if (full) {
    if (!c.requireScalar(1, "fill value")) return false;
    t = c.ops[1].dtype;
  }
  c.result(t, shape);
  return true;
}

/// cumsum %x, %axis: the axis is a scalar integer value (known at compile
/// time when it is a constant; checked by the kernel otherwise).
bool relCumSum(Ctx &c) {
  if (!dtypeAllowed(c.info.dtypes, c.ops[0].dtype))
    return c.fail("operand 0 must have " + std::string(dtypeRuleDescription(c.info.dtypes)) + ", got " +
                      formatSig(c.ops[0]),
                  0);
  if (!c.requireScalar(1, "axis")) return false;
  if (!isInteger(c.ops[1].dtype))
    return c.fail("axis (operand 1) must be an integer, got " + formatSig(c.ops[1]), 1);
  int64_t r = c.rank(0);
  if (const DenseValue *v = c.value(1)) {
    int64_t a = v->getInt(0);
    if (a < -r || a >= r)
      return c.fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r), 1);
  } else {
    if (r == 0) return c.fail("input must have rank >= 1, got " + formatSig(c.ops[0]), 0);
    c.defer("axis must lie in [-" + std::to_string(r) + ", " + std::to_string(r) + ")");
  }
  c.result(c.ops[0].dtype, c.ops[0].dims);
  return true;
}

/// A 1-D integer operand `i` of `n` entries (per axis counts: tile's
/// repeats, pad's pads); `?` entries defer the length check.
static bool perAxisOperand(Ctx &c, size_t i, int64_t n, std::string_view what) {
  const TensorSig &s = c.ops[i];
  if (s.dims.size() != 1 || !isInteger(s.dtype))
    return c.fail(std::string(what) + " (operand " + std::to_string(i) + ") must be a 1-D integer tensor, got " +
                      formatSig(s),
                  static_cast<int>(i));
  if (s.dims[0] == kDynamic) {
    c.defer(std::string(what) + " must have " + std::to_string(n) + " entries");
  } else if (s.dims[0] != n) {
    return c.fail(std::string(what) + " (operand " + std::to_string(i) + ") must have " + std::to_string(n) +
                      " entries for an input of rank " + std::to_string(c.rank(0)) + ", got " + formatSig(s),
                  static_cast<int>(i));
  }
  return true;
}

bool relTile(Ctx &c) {
  int64_t r = c.rank(0);
  if (!perAxisOperand(c, 1, r, "repeats")) return false;
  std::vector<int64_t> out(static_cast<size_t>(r), kDynamic), reps;
  if (c.shapeValue(1, reps)) {
    for (int64_t k = 0; k < r; ++k) {
      int64_t d = c.ops[0].dims[static_cast<size_t>(k)], n = reps[static_cast<size_t>(k)];
      if (n < 0) return c.fail("repeats entry " + std::to_string(n) + " is negative", 1);
      int64_t o = n;
      if (n == 0) o = 0;
      else if (d == kDynamic) o = kDynamic;
      else if (mulOverflows(o, d)) return c.fail("tile would have more elements than fit in 64 bits", 1);
      out[static_cast<size_t>(k)] = o;
    }
  } else {
    c.defer("repeats must be non-negative");
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relPad(Ctx &c) {
  int64_t r = c.rank(0);
  const std::string &mode = c.attr("mode").getStr();
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return c.failAttr("mode", "mode must be constant, reflect, edge or wrap, got '" + mode + "'");
  if (!perAxisOperand(c, 1, 2 * r, "pads")) return false;
  if (c.ops.size() == 3) {
    if (mode != "constant")
      return c.fail("a padding value (operand 2) needs mode constant, not " + mode, 2);
    if (!c.requireScalar(2, "padding value") || !c.sameDType(0, 2)) return false;
  }
  std::vector<int64_t> out(static_cast<size_t>(r), kDynamic), pads;
  if (c.shapeValue(1, pads)) {
    for (int64_t k = 0; k < r; ++k) {
      int64_t d = c.ops[0].dims[static_cast<size_t>(k)];
      int64_t b = pads[static_cast<size_t>(k)], e = pads[static_cast<size_t>(k + r)];
      // |pads| up to 2^62: the sums below cannot overflow.
      if (b < -(int64_t(1) << 62) || b > (int64_t(1) << 62) || e < -(int64_t(1) << 62) || e > (int64_t(1) << 62))
        return c.fail("pads entries must lie within +-2^62", 1);
      if (d == kDynamic) {
        c.defer("dimension " + std::to_string(k) + " plus its pads must not be negative");
        if (mode != "constant" && (b > 0 || e > 0))
          c.defer("dimension " + std::to_string(k) + " must not be empty to pad it in mode " + mode);
        continue;
      }
      int64_t o = d + b + e;
      if (o < 0)
        return c.fail("pads " + std::to_string(b) + " and " + std::to_string(e) + " remove more than dimension " +
                          std::to_string(k) + " (" + std::to_string(d) + ")",
                      1);
      if (mode != "constant" && d == 0 && (b > 0 || e > 0))
        return c.fail("cannot pad the empty dimension " + std::to_string(k) + " in mode " + mode, 1);
      out[static_cast<size_t>(k)] = o;
    }
  } else {
    c.defer("every dimension plus its pads must not be negative");
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

/// The index tuples of gather_nd / scatter_nd: operand `i` integer, rank >= 1,
/// a static last dimension m (it fixes the result's rank), m <= limit.
static bool indexTuples(Ctx &c, size_t i, int64_t limit, int64_t &m) {
  if (!isInteger(c.ops[i].dtype) || c.rank(i) < 1)
    return c.fail("indices (operand " + std::to_string(i) + ") must be an integer tensor of rank >= 1, got " +
                      formatSig(c.ops[i]),
                  static_cast<int>(i));
  m = c.ops[i].dims.back();
  if (m == kDynamic)
    return c.fail("the last dimension of indices (operand " + std::to_string(i) +
                      ") must be static: it is the length of each index tuple",
                  static_cast<int>(i));
  if (m < 1 || m > limit)
    return c.fail("index tuples of " + std::to_string(m) + " entries do not fit " + std::to_string(limit) +
                      " indexable axes of " + formatSig(c.ops[0]),
                  static_cast<int>(i));
  c.defer("indices must lie within the dimensions they index");
  return true;
}

/// `reduction` of the scatters: none for any element type, the others
/// numeric only.
static bool scatterReduction(Ctx &c) {
  const std::string &red = c.attr("reduction").getStr();
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    return c.failAttr("reduction", "reduction must be none, add, mul, max or min, got '" + red + "'");
  if (red != "none" && !dtypeAllowed(DTypeRule::Numeric, c.ops[0].dtype))
    return c.failAttr("reduction", "reduction " + red + " needs a numeric element type, got " + formatSig(c.ops[0]));
  return c.sameDType(0, 2);
}

bool relGatherND(Ctx &c) {
  int64_t r = c.rank(0), q = c.rank(1), b = c.intAttr("batch_dims");
  if (r < 1) return c.fail("data must have rank >= 1, got " + formatSig(c.ops[0]), 0);
  if (b < 0 || b >= std::min(r, std::max<int64_t>(q, 1)))
    return c.failAttr("batch_dims", "batch_dims " + std::to_string(b) + " must lie in [0, " +
                                        std::to_string(std::min(r, q)) + ") for data of rank " + std::to_string(r) +
                                        " and indices of rank " + std::to_string(q));
  int64_t m;
  if (!indexTuples(c, 1, r - b, m)) return false;
  std::vector<int64_t> out;
  for (int64_t k = 0; k < q - 1; ++k) {
    int64_t d = c.ops[1].dims[static_cast<size_t>(k)];
    if (k < b && !c.unify(c.ops[0].dims[static_cast<size_t>(k)], d, d,
                          "batch dimension " + std::to_string(k) + " of data and indices")) {
      c.r.errorOperand = 1;
      return false;
    }
    out.push_back(d);
  }
  for (int64_t k = b + m; k < r; ++k) out.push_back(c.ops[0].dims[static_cast<size_t>(k)]);
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relScatterElements(Ctx &c) {
  int64_t r = c.rank(0);
  if (!isInteger(c.ops[1].dtype))
    return c.fail("indices (operand 1) must have an integer element type, got " + formatSig(c.ops[1]), 1);
  if (!scatterReduction(c)) return false;
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), r, ax, "axis")) return false;
  for (size_t i = 1; i < 3; ++i)
    if (c.rank(i) != r)
      return c.fail(std::string(i == 1 ? "indices" : "updates") + " (operand " + std::to_string(i) +
                        ") must have the rank of data (" + std::to_string(r) + "), got " + formatSig(c.ops[i]),
                    static_cast<int>(i));
  for (int64_t k = 0; k < r; ++k) {
    int64_t d;
    if (!c.unify(c.ops[1].dims[static_cast<size_t>(k)], c.ops[2].dims[static_cast<size_t>(k)], d,
                 "dimension " + std::to_string(k) + " of indices and updates")) {
      c.r.errorOperand = 2;
      return false;
    }
    int64_t n = c.ops[0].dims[static_cast<size_t>(k)];
    if (k == ax) continue;
    if (d != kDynamic && n != kDynamic && d > n)
      return c.fail("indices (operand 1) have " + std::to_string(d) + " entries along axis " + std::to_string(k) +
                        ", more than data's " + std::to_string(n),
                    1);
    if (d == kDynamic || n == kDynamic) c.defer("indices must not be longer than data along axis " + std::to_string(k));
  }
  c.defer("indices must lie within dimension " + std::to_string(ax) + " of data");
  c.result(c.ops[0].dtype, c.ops[0].dims);
  return true;
}

bool relScatterND(Ctx &c) {
  int64_t r = c.rank(0);
  if (r < 1) return c.fail("data must have rank >= 1, got " + formatSig(c.ops[0]), 0);
  if (!scatterReduction(c)) return false;
  int64_t m;
  if (!indexTuples(c, 1, r, m)) return false;
  // updates: indices' shape without its last axis, then data's after m.
  std::vector<int64_t> want(c.ops[1].dims.begin(), c.ops[1].dims.end() - 1);
  for (int64_t k = m; k < r; ++k) want.push_back(c.ops[0].dims[static_cast<size_t>(k)]);
  if (c.rank(2) != static_cast<int64_t>(want.size()))
    return c.fail("updates (operand 2) must have shape " + formatDims(want) + " (indices' without the last axis, "
                      "then data's past the indexed axes), got " + formatSig(c.ops[2]),
                  2);
  for (size_t k = 0; k < want.size(); ++k) {
    int64_t d;
    if (!c.unify(c.ops[2].dims[k], want[k], d, "dimension " + std::to_string(k) + " of updates")) {
      c.r.errorOperand = 2;
      return false;
    }
  }
  c.result(c.ops[0].dtype, c.ops[0].dims);
  return true;
}

bool relOneHot(Ctx &c) {
  int64_t q = c.rank(0);
  if (!isInteger(c.ops[0].dtype))
    return c.fail("indices (operand 0) must have an integer element type, got " + formatSig(c.ops[0]), 0);
  if (!c.requireScalar(1, "depth")) return false;
  if (!isInteger(c.ops[1].dtype)) return c.fail("depth (operand 1) must be an integer, got " + formatSig(c.ops[1]), 1);
  if (!c.requireRank(2, 1, "values")) return false;
  int64_t two;
  if (!c.unify(c.ops[2].dims[0], 2, two, "the number of values (off, on) and 2")) {
    c.r.errorOperand = 2;
    return false;
  }
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), q + 1, ax, "axis")) return false;
  int64_t depth = kDynamic;
  if (const DenseValue *v = c.value(1)) {
    depth = v->getInt(0);
    if (depth < 0) return c.fail("depth " + std::to_string(depth) + " is negative", 1);
  } else {
    c.defer("depth must not be negative");
  }
  std::vector<int64_t> out = c.ops[0].dims;
  out.insert(out.begin() + ax, depth);
  c.result(c.ops[2].dtype, out);
  return true;
}

} // namespace nimble::shapefns
