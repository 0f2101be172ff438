//===- ShapeFns.cpp - Type relations and shape functions of every op -----===//
//
// See ShapeFns.h for the contract. Each relation below reads its operands'
// signatures, checks what can be checked, defers what depends on `?`, and
// produces the result signatures. Messages name operands by position and show
// shapes as `2x?x3`, so the same text serves compile-time diagnostics (with an
// op location added by the caller) and run-time errors (with the op's source
// location from the bytecode).
//
// This file holds the elementwise, linear-algebra, reduction, normalisation,
// convolution, pooling and attention relations and the dispatch over all of
// them; the layout and indexing relations are in ShapeFnsLayout.cpp, and the
// context both build their answers in is ShapeFnsImpl.h.
//
//===----------------------------------------------------------------------===//

#include "ir/ShapeFns.h"

#include "ir/Limits.h"
#include "ir/ShapeFnsImpl.h"

#include <algorithm>
#include <cassert>

namespace nimble {

std::string formatDims(const std::vector<int64_t> &dims) {
  if (dims.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += 'x';
    s += dims[i] == kDynamic ? "?" : std::to_string(dims[i]);
  }
  return s;
}

std::string formatSig(const TensorSig &sig) {
  std::string s = "tensor<";
  for (int64_t d : sig.dims) s += (d == kDynamic ? "?" : std::to_string(d)) + "x";
  s += dtypeName(sig.dtype);
  return s + ">";
}

namespace shapefns {

bool relUnary(Ctx &c) {
  c.result(c.ops[0].dtype, c.ops[0].dims);
  if (c.info.code == OpCode::Softmax) {
    int64_t ax;
    if (!c.axis(c.intAttr("axis"), c.rank(0), ax, "axis")) return false;
  }
  return true;
}

bool relBroadcast(Ctx &c, bool compare) {
  if (!c.sameDType(0, 1)) return false;
  std::vector<int64_t> dims;
  if (!c.broadcast({0, 1}, dims)) return false;
  c.result(compare ? DType::I1 : c.ops[0].dtype, dims);
  return true;
}

bool relSelect(Ctx &c) {
  if (c.ops[0].dtype != DType::I1)
    return c.fail("condition (operand 0) must have element type i1, got " +
                      formatSig(c.ops[0]),
                  0);
  if (!c.sameDType(1, 2)) return false;
  std::vector<int64_t> dims;
  if (!c.broadcast({0, 1, 2}, dims)) return false;
  c.result(c.ops[1].dtype, dims);
  return true;
}

bool relMatMul(Ctx &c, bool batched) {
  if (!c.sameDType(0, 1)) return false;
  const auto &a = c.ops[0].dims, &b = c.ops[1].dims;
  bool ta = c.boolAttr("transpose_a"), tb = c.boolAttr("transpose_b");
  if (!batched) {
    if (a.size() != 2) return c.fail("lhs must have rank 2, got " + formatSig(c.ops[0]), 0);
    if (b.size() != 2) return c.fail("rhs must have rank 2, got " + formatSig(c.ops[1]), 1);
  } else {
    if (a.size() < 3)
      return c.fail("lhs must have rank >= 3, got " + formatSig(c.ops[0]), 0);
    if (b.size() != a.size())
      return c.fail("rhs must have the rank of lhs (" + std::to_string(a.size()) +
                        "), got " + formatSig(c.ops[1]),
                    1);
  }
  size_t n = a.size();
  int64_t m = ta ? a[n - 1] : a[n - 2], ka = ta ? a[n - 2] : a[n - 1];
  int64_t kb = tb ? b[n - 1] : b[n - 2], nn = tb ? b[n - 2] : b[n - 1];
  if (ka != kDynamic && kb != kDynamic && ka != kb)
    return c.fail("the contracted dimensions of lhs and rhs must be equal, got " +
                      std::to_string(ka) + " (lhs " + formatDims(a) + ") and " +
                      std::to_string(kb) + " (rhs " + formatDims(b) + ")",
                  1);
  int64_t k;
  if (!c.unify(ka, kb, k, "the contracted dimensions of lhs and rhs")) return false;
  std::vector<int64_t> out;
  if (batched) {
    // Batch dimensions broadcast like element-wise operands.
    TensorSig la{c.ops[0].dtype, {a.begin(), a.end() - 2}};
    TensorSig lb{c.ops[1].dtype, {b.begin(), b.end() - 2}};
    std::vector<TensorSig> batchOps = {la, lb};
    // Named, not `{}` temporaries: Ctx keeps references to them.
    std::vector<Attr> noAttrs;
    std::vector<const DenseValue *> noValues;
    Ctx bc(OpCode::Add, batchOps, noAttrs, noValues);
    if (!bc.broadcast({0, 1}, out)) return c.fail("batch dimensions: " + bc.r.error);
    for (auto &d : bc.r.deferred) c.defer("batch " + d);
  }
  out.push_back(m);
  out.push_back(nn);
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relReduce(Ctx &c, bool arg) {
  int64_t r = c.rank(0);
  std::vector<bool> reduced(static_cast<size_t>(r), false);
  if (arg) {
    int64_t ax;
    if (!c.axis(c.intAttr("axis"), r, ax, "axis")) return false;
    if (r > 0) reduced[static_cast<size_t>(ax)] = true;
  } else {
    const auto &axes = c.intsAttr("axes");
    if (axes.empty()) reduced.assign(static_cast<size_t>(r), true);
    for (int64_t a : axes) {
      int64_t ax;
      if (!c.axis(a, r, ax, "axes")) return false;
      if (reduced[static_cast<size_t>(ax)])
        return c.failAttr("axes", "axis " + std::to_string(a) + " is listed twice");
      reduced[static_cast<size_t>(ax)] = true;
    }
  }
  bool keep = c.boolAttr("keepdims");
  std::vector<int64_t> out;
  for (int64_t i = 0; i < r; ++i) {
    if (!reduced[static_cast<size_t>(i)]) out.push_back(c.ops[0].dims[static_cast<size_t>(i)]);
    else if (keep) out.push_back(1);
  }
  c.result(arg ? DType::I64 : c.ops[0].dtype, out);
  return true;
}

bool relLayerNorm(Ctx &c) {
  if (c.rank(0) < 1) return c.fail("input must have rank >= 1, got " + formatSig(c.ops[0]), 0);
  int64_t d = c.ops[0].dims.back();
  for (size_t i = 1; i < 3; ++i) {
    if (!c.sameDType(0, i) || !c.requireRank(i, 1, i == 1 ? "gamma" : "beta")) return false;
    int64_t k;
    if (!c.unify(c.ops[i].dims[0], d, k,
                 std::string(i == 1 ? "gamma" : "beta") + " size and the last dimension")) {
      c.r.errorOperand = static_cast<int>(i);
      return false;
    }
  }
  c.result(c.ops[0].dtype, c.ops[0].dims);
  return true;
}

/// The spatial attributes of conv and the pools over `k` spatial axes:
/// strides and dilations (>= 1; empty means 1s), pads (>= 0, begin then end
/// per axis; empty means 0s). Filled to full length.
bool windowAttrs(Ctx &c, size_t k, std::vector<int64_t> &st, std::vector<int64_t> &pad,
                 std::vector<int64_t> &dil) {
  auto read = [&](std::string_view name, size_t n, int64_t dflt, int64_t min, std::vector<int64_t> &out) {
    out = c.intsAttr(name);
    if (out.empty()) out.assign(n, dflt);
    if (out.size() != n)
      return c.failAttr(name, std::string(name) + " must have " + std::to_string(n) + " entries (" +
                                  std::to_string(k) + " spatial axes), got " + formatInts(out));
    for (int64_t v : out)
      if (v < min || v > (int64_t(1) << 32))
        return c.failAttr(name, std::string(name) + " entries must be " + (min ? "positive" : "non-negative") +
                                    " and at most 2^32, got " + formatInts(out));
    return true;
  };
  return read("strides", k, 1, 1, st) && read("pads", 2 * k, 0, 0, pad) && read("dilations", k, 1, 1, dil);
}

/// One output size along a spatial axis: floor (or ceil) of (padded input -
/// dilated window) / stride, plus one. With ceil, a last window that would
/// start in the end padding is dropped (PyTorch's and ONNX's rule), so every
/// window starts inside the input or its begin padding.
bool windowOut(Ctx &c, size_t axis, int64_t d, int64_t kk, int64_t st, int64_t pb, int64_t pe, int64_t dil,
               bool ceil, int64_t &out) {
  if (d == kDynamic || kk == kDynamic) {
    c.defer("the dilated window fits the padded input along spatial axis " + std::to_string(axis));
    out = kDynamic;
    return true;
  }
  int64_t span = kk - 1, padded = d + pb + pe; // d < 2^48, pads <= 2^32: no overflow
  if (kk < 1 || mulOverflows(span, dil) || ++span > padded)
    return c.fail("the window along spatial axis " + std::to_string(axis) + " (" + std::to_string(kk) +
                      (dil > 1 ? " dilated by " + std::to_string(dil) : "") + ") is larger than the padded input (" +
                      std::to_string(d) + " + " + std::to_string(pb + pe) + ")",
                  0);
  int64_t room = padded - span;
  out = (ceil ? (room + st - 1) / st : room / st) + 1;
  if (ceil && (out - 1) * st >= d + pb) --out;
  return true;
}

/// channels_last (conv, max_pool, avg_pool): the relations work on
/// N x C x D.. and the result goes back to N x D.. x C.
static std::vector<int64_t> channelsFirst(const std::vector<int64_t> &x, bool last) {
  std::vector<int64_t> r = x;
  if (last && x.size() >= 3) {
    r[1] = x.back();
    std::copy(x.begin() + 1, x.end() - 1, r.begin() + 2);
  }
  return r;
}

static std::vector<int64_t> channelsBack(std::vector<int64_t> y, bool last) {
  if (last && y.size() >= 3) std::rotate(y.begin() + 1, y.begin() + 2, y.end());
  return y;
}

/// conv and conv_transpose's operands: the input of rank >= 3 (batch,
/// channels, spatial axes), the weights of its rank, and one element type
/// for them and the bias.
bool convOperands(Ctx &c) {
  const auto &x = c.ops[0].dims, &w = c.ops[1].dims;
  if (x.size() < 3)
    return c.fail("input must have rank >= 3 (batch, channels, spatial axes), got " + formatSig(c.ops[0]), 0);
  if (w.size() != x.size())
    return c.fail("weights must have the rank of the input (" + std::to_string(x.size()) + "), got " +
                      formatSig(c.ops[1]),
                  1);
  return c.sameDType(0, 1) && (c.ops.size() != 3 || c.sameDType(0, 2));
}

/// The optional bias (operand 2) of conv and conv_transpose: one entry per
/// output channel; `m`, the output channels, takes what the bias knows.
bool convBias(Ctx &c, int64_t &m) {
  if (c.ops.size() != 3) return true;
  if (!c.requireRank(2, 1, "bias")) return false;
  int64_t b;
  if (!c.unify(c.ops[2].dims[0], m, b, "the bias size and the output channels")) {
    c.r.errorOperand = 2;
    return false;
  }
  m = b;
  return true;
}

bool relConv(Ctx &c) {
  if (!convOperands(c)) return false;
  const bool last = c.boolAttr("channels_last");
  const std::vector<int64_t> x = channelsFirst(c.ops[0].dims, last);
  const auto &w = c.ops[1].dims;
  size_t k = x.size() - 2;
  std::vector<int64_t> st, pad, dil;
  if (!windowAttrs(c, k, st, pad, dil)) return false;
  int64_t groups = c.intAttr("groups");
  if (groups < 1) return c.failAttr("groups", "groups must be positive, got " + std::to_string(groups));
  int64_t m = w[0];
  if (m != kDynamic && m % groups)
    return c.fail("the output channels (weights dim 0, " + std::to_string(m) + ") must be a multiple of groups (" +
                      std::to_string(groups) + ")",
                  1);
  int64_t cin = w[1] == kDynamic ? kDynamic : w[1] * groups, ch;
  if (!c.unify(x[1], cin, ch, "the input channels and weights dim 1 times groups")) {
    c.r.errorOperand = 1;
    return false;
  }
  if (!convBias(c, m)) return false;
  std::vector<int64_t> out = {x[0], m};
  for (size_t i = 0; i < k; ++i) {
    int64_t o;
    if (!windowOut(c, i, x[i + 2], w[i + 2], st[i], pad[i], pad[i + k], dil[i], false, o)) return false;
    out.push_back(o);
  }
  c.result(c.ops[0].dtype, channelsBack(out, last));
  return true;
}

/// conv_transpose: x N x C x D.., w C x M/groups x K.. (ONNX's layout: input
/// channels first), out N x M x (s (D - 1) + output_padding + d (K - 1) + 1
/// - pad_begin - pad_end)..; output_padding adds positions at the end (ONNX
/// keeps it below the stride; the importer also folds an output_shape past
/// the natural size into it, so any non-negative amount is taken).
bool relConvTranspose(Ctx &c) {
  if (!convOperands(c)) return false;
  const auto &x = c.ops[0].dims, &w = c.ops[1].dims;
  size_t k = x.size() - 2;
  std::vector<int64_t> st, pad, dil, op = c.intsAttr("output_padding");
  if (!windowAttrs(c, k, st, pad, dil)) return false;
  if (op.empty()) op.assign(k, 0);
  if (op.size() != k)
    return c.failAttr("output_padding", "output_padding must have " + std::to_string(k) + " entries (" +
                                            std::to_string(k) + " spatial axes), got " + formatInts(op));
  for (int64_t v : op)
    if (v < 0 || v > (int64_t(1) << 32))
      return c.failAttr("output_padding", "output_padding entries must be non-negative and at most 2^32, got " +
                                              formatInts(op));
  int64_t groups = c.intAttr("groups");
  if (groups < 1) return c.failAttr("groups", "groups must be positive, got " + std::to_string(groups));
  int64_t ch;
  if (!c.unify(x[1], w[0], ch, "the input channels and weights dim 0")) {
    c.r.errorOperand = 1;
    return false;
  }
  if (ch != kDynamic && ch % groups)
    return c.fail("the input channels (" + std::to_string(ch) + ") must be a multiple of groups (" +
                      std::to_string(groups) + ")",
                  0);
  int64_t m = w[1];
  if (m != kDynamic && mulOverflows(m, groups)) return c.fail("too many output channels", 1);
  if (!convBias(c, m)) return false;
  std::vector<int64_t> out = {x[0], m};
  for (size_t i = 0; i < k; ++i) {
    int64_t d = x[i + 2], kk = w[i + 2];
    if (d == kDynamic || kk == kDynamic) {
      c.defer("the output along spatial axis " + std::to_string(i) + " is not negative");
      out.push_back(kDynamic);
      continue;
    }
    // d < 2^48, K < 2^48, strides and dilations <= 2^32: the products can overflow.
    int64_t o = d ? d - 1 : 0, span = kk ? kk - 1 : 0;
    if (mulOverflows(o, st[i]) || mulOverflows(span, dil[i]) || addOverflows(o, span) ||
        addOverflows(o, op[i] + 1 - pad[i] - pad[i + k]))
      return c.fail("the output along spatial axis " + std::to_string(i) + " is too large", 0);
    if (d == 0 || kk == 0 || o < 1)
      return c.fail("the output along spatial axis " + std::to_string(i) + " would be " +
                        (d == 0 || kk == 0 ? std::string("empty (an empty input or window)") : std::to_string(o)) +
                        " (the pads exceed it)",
                    0);
    out.push_back(o);
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relPool(Ctx &c) {
  const bool last = c.boolAttr("channels_last");
  const std::vector<int64_t> x = channelsFirst(c.ops[0].dims, last);
  if (x.size() < 3)
    return c.fail("input must have rank >= 3 (batch, channels, spatial axes), got " + formatSig(c.ops[0]), 0);
  size_t k = x.size() - 2;
  const auto &kernel = c.intsAttr("kernel");
  if (kernel.size() != k)
    return c.failAttr("kernel", "kernel must have " + std::to_string(k) + " entries (spatial axes), got " +
                                    formatInts(kernel));
  for (int64_t v : kernel)
    if (v < 1 || v > (int64_t(1) << 32))
      return c.failAttr("kernel", "kernel entries must be positive and at most 2^32, got " + formatInts(kernel));
  std::vector<int64_t> st, pad, dil;
  if (!windowAttrs(c, k, st, pad, dil)) return false;
  std::vector<int64_t> out = {x[0], x[1]};
  for (size_t i = 0; i < k; ++i) {
    int64_t o;
    if (!windowOut(c, i, x[i + 2], kernel[i], st[i], pad[i], pad[i + k], dil[i], c.boolAttr("ceil_mode"), o))
      return false;
    out.push_back(o);
  }
  c.result(c.ops[0].dtype, channelsBack(out, last));
  return true;
}

bool relAttention(Ctx &c) {
  static const char *names[] = {"q", "k", "v", "mask"};
  for (size_t i = 0; i < 3; ++i) {
    if (!c.requireRank(i, 3, names[i])) return false;
    if (i && !c.sameDType(0, i)) return false;
  }
  const auto &q = c.ops[0].dims, &k = c.ops[1].dims, &v = c.ops[2].dims;
  int64_t h, h2, d, n;
  auto at = [&](int op, bool ok) {
    if (!ok) c.r.errorOperand = op;
    return ok;
  };
  if (!at(1, c.unify(q[1], k[1], h, "the heads of q and k (dim 1)")) ||
      !at(2, c.unify(h, v[1], h2, "the heads of q and v (dim 1)")) ||
      !at(1, c.unify(q[2], k[2], d, "the head size of q and k (dim 2)")) ||
      !at(2, c.unify(k[0], v[0], n, "the keys of k and v (dim 0)")))
    return false;
  if (c.ops.size() == 4) {
    // The additive mask broadcasts to the scores, H x m x n; it never enlarges them.
    if (!c.sameDType(0, 3)) return false;
    const auto &mk = c.ops[3].dims;
    std::vector<int64_t> scores = {h2, q[0], n};
    if (mk.size() > 3)
      return c.fail("mask must have rank <= 3 (it broadcasts to heads x queries x keys), got " +
                        formatSig(c.ops[3]),
                    3);
    for (size_t i = 0; i < mk.size(); ++i) {
      int64_t a = mk[i], t = scores[3 - mk.size() + i];
      if (a == kDynamic || (t == kDynamic && a != 1))
        c.defer("mask dimension " + std::to_string(i) + " must be 1 or " + dimStr(t));
      else if (a != 1 && a != t)
        return c.fail("mask " + formatSig(c.ops[3]) + " does not broadcast to the scores " +
                          formatDims(scores) + ": dimension " + std::to_string(i) + " is " +
                          std::to_string(a),
                      3);
    }
  }
  c.result(c.ops[0].dtype, {q[0], h2, v[2]});
  return true;
}

bool apply(Ctx &c) {
  const OpInfo &info = c.info;
  int n = static_cast<int>(c.ops.size());
  if (n < info.minOperands || (info.maxOperands >= 0 && n > info.maxOperands))
    return c.fail("expects " +
                  (info.minOperands == info.maxOperands
                       ? std::to_string(info.minOperands)
                       : info.maxOperands < 0 ? "at least " + std::to_string(info.minOperands)
                                              : std::to_string(info.minOperands) + " to " +
                                                    std::to_string(info.maxOperands)) +
                  " operands, got " + std::to_string(n));
  // Element type rule on the data operands.
  switch (info.relation) {
  case Relation::Unary: case Relation::Broadcast: case Relation::Compare:
  case Relation::MatMul: case Relation::BatchMatMul: case Relation::Reduce:
  case Relation::ArgReduce: case Relation::LayerNorm: case Relation::Arange:
  case Relation::Conv: case Relation::Pool: case Relation::Attention: case Relation::ConvTranspose:
    for (size_t i = 0; i < (info.relation == Relation::Unary ? 1 : c.ops.size()); ++i)
      if (!dtypeAllowed(info.dtypes, c.ops[i].dtype))
        return c.fail("operand " + std::to_string(i) + " must have " +
                          std::string(dtypeRuleDescription(info.dtypes)) + ", got " +
                          formatSig(c.ops[i]),
                      static_cast<int>(i));
    break;
  default: break;
  }
  switch (info.relation) {
  case Relation::Unary: return relUnary(c);
  case Relation::Broadcast: return relBroadcast(c, false);
  case Relation::Compare: return relBroadcast(c, true);
  case Relation::Select: return relSelect(c);
  case Relation::Cast: c.result(c.attr("dtype").getDType(), c.ops[0].dims); return true;
  case Relation::MatMul: return relMatMul(c, false);
  case Relation::BatchMatMul: return relMatMul(c, true);
  case Relation::Reduce: return relReduce(c, false);
  case Relation::ArgReduce: return relReduce(c, true);
  case Relation::LayerNorm: return relLayerNorm(c);
  case Relation::Conv: return relConv(c);
  case Relation::Pool: return relPool(c);
  case Relation::CumSum: return relCumSum(c);
  case Relation::Tile: return relTile(c);
  case Relation::Pad: return relPad(c);
  case Relation::GatherND: return relGatherND(c);
  case Relation::ScatterElements: return relScatterElements(c);
  case Relation::ScatterND: return relScatterND(c);
  case Relation::OneHot: return relOneHot(c);
  case Relation::Resize: return relResize(c);
  case Relation::GridSample: return relGridSample(c);
  case Relation::Attention: return relAttention(c);
  case Relation::ConvTranspose: return relConvTranspose(c);
  case Relation::TopK: return relTopK(c);
  case Relation::NonMaxSuppression: return relNonMaxSuppression(c);
  case Relation::Reshape: return relReshape(c);
  case Relation::DynReshape: return relDynReshape(c);
  case Relation::Transpose: return relTranspose(c);
  case Relation::Concat: return relConcat(c);
  case Relation::Split: return relSplit(c);
  case Relation::Slice: return relSlice(c);
  case Relation::DynamicSlice: return relDynamicSlice(c);
  case Relation::DynamicUpdateSlice: return relDynamicUpdateSlice(c);
  case Relation::Take: return relTake(c);
  case Relation::ExpandDims: return relExpandDims(c);
  case Relation::Squeeze: return relSqueeze(c);
  case Relation::BroadcastTo: return relBroadcastTo(c);
  case Relation::Constant: {
    const DenseValue &v = c.attr("value").getDense();
    c.result(v.dtype, v.shape);
    return true;
  }
  case Relation::Zeros: return relZerosFull(c, false);
  case Relation::Full: return relZerosFull(c, true);
  case Relation::Arange: return relArange(c);
  case Relation::Unique: return relUnique(c);
  case Relation::Nonzero: return relNonzero(c);
  case Relation::ShapeOf: c.result(DType::I64, {c.rank(0)}); return true;
  case Relation::Dim: {
    int64_t ax;
    if (!c.axis(c.intAttr("axis"), c.rank(0), ax, "axis")) return false;
    c.result(DType::I64, {});
    return true;
  }
  case Relation::StorageSize: {
    if (c.rank(0) != 1 || !isInteger(c.ops[0].dtype))
      return c.fail("shape must be a 1-D integer tensor, got " + formatSig(c.ops[0]), 0);
    int64_t align = c.intAttr("alignment");
    if (align <= 0 || (align & (align - 1)))
      return c.fail("alignment must be a positive power of two, got " + std::to_string(align));
    c.result(DType::I64, {});
    return true;
  }
  case Relation::Structural: break;
  }
  assert(false && "structural ops are typed by the verifier");
  return c.fail("op has no shape function");
}

} // namespace shapefns


ShapeFnResult inferShapes(OpCode code, const std::vector<TensorSig> &operands,
                          std::span<const Attr> attrs,
                          const std::vector<const DenseValue *> &values) {
  shapefns::Ctx c(code, operands, attrs, values);
  if (!shapefns::apply(c)) {
    c.r.results.clear();
    return std::move(c.r);
  }
  // Whatever the relation, a result past the rank or size limits is refused
  // here, once, at compile time and at run time alike (ir/Limits.h).
  for (const TensorSig &res : c.r.results) {
    if (res.dims.size() > limits::kMaxRank) {
      c.fail("result has rank " + std::to_string(res.dims.size()) + ", more than the limit of " +
             std::to_string(limits::kMaxRank));
      break;
    }
    int64_t n = 0, bytes = 0;
    if (!limits::checkedStaticElements(res.dims, n) ||
        !limits::checkedMul(n, static_cast<int64_t>(dtypeSize(res.dtype)), bytes) ||
        bytes > limits::kMaxTensorBytes) {
      c.fail("result " + formatSig(res) + " holds more than " +
             std::to_string(limits::kMaxTensorBytes) + " bytes (2^48, the limit)");
      break;
    }
  }
  if (!c.r.error.empty()) c.r.results.clear();
  return std::move(c.r);
}

int shapeIdentityOperand(OpCode code, const std::vector<TensorSig> &operands,
                         std::span<const Attr> attrs) {
  const OpInfo &info = opInfo(code);
  if (info.shapeMode != ShapeMode::DataIndependent || info.numResults != 1) return -1;
  switch (info.relation) {
  case Relation::Unary: case Relation::Cast: case Relation::LayerNorm: case Relation::Broadcast:
  case Relation::Compare: case Relation::Select: case Relation::MatMul: break;
  default: return -1;
  }
  // The relation itself decides that nothing is left for run time: a
  // deferred check (`?` against `?`, `?` against a size other than 1) is
  // the shape function's to make, and it must stay.
  ShapeFnResult r = inferShapes(code, operands, attrs);
  if (!r.ok() || !r.deferred.empty() || r.results.size() != 1) return -1;
  const std::vector<int64_t> &out = r.results[0].dims;
  auto candidate = [&](size_t j) -> bool {
    const auto &dj = operands[j].dims;
    if (dj != out) return false;
    for (size_t i = 0; i < operands.size(); ++i) {
      if (i == j) continue;
      const auto &di = operands[i].dims;
      if (di.size() > dj.size()) return false;
      size_t off = dj.size() - di.size();
      for (size_t k = 0; k < di.size(); ++k)
        if (di[k] != 1 && (di[k] == kDynamic || di[k] != dj[off + k])) return false;
    }
    return true;
  };
  switch (info.relation) {
  case Relation::Unary: case Relation::Cast:
    return operands.size() == 1 && operands[0].dims == out ? 0 : -1;
  case Relation::LayerNorm: // gamma and beta match the last dim statically
    return operands[0].dims == out ? 0 : -1;
  case Relation::Broadcast: case Relation::Compare: case Relation::Select:
    for (size_t j = 0; j < operands.size(); ++j)
      if (candidate(j)) return static_cast<int>(j);
    return -1;
  case Relation::MatMul: {
    // out = [m, n]: m is lhs dim 0 unless transposed; n must equal the lhs
    // width, both static (then out is the lhs's shape whatever m is).
    if (operands.size() != 2) return -1;
    const auto &a = operands[0].dims;
    int ta = info.attrIndex("transpose_a");
    if (a.size() != 2 || ta < 0 || static_cast<size_t>(ta) >= attrs.size() ||
        attrs[static_cast<size_t>(ta)].getBool())
      return -1;
    return a[1] != kDynamic && out[1] == a[1] && out[0] == a[0] ? 0 : -1;
  }
  default: return -1;
  }
}

} // namespace nimble