//===- ConvertWindow.cpp - Conv, MaxPool and AveragePool ------------------===//
//
// ONNX's window ops as Nimble's `conv`, `max_pool` and `avg_pool`, whose
// attributes are ONNX's own (strides, pads as [begin.., end..], dilations,
// group; kernel_shape, ceil_mode, count_include_pad), so a node maps to one
// op. What the importer decides:
//
//  * auto_pad. NOTSET reads `pads`; VALID is no padding; SAME_UPPER and
//    SAME_LOWER give an output of ceil(size / stride) and the padding that
//    takes, its odd unit at the end (UPPER) or the beginning (LOWER). That
//    padding depends on the input size unless the stride is 1 (then it is
//    the dilated window less one), so a `?` spatial axis with a stride above
//    1 and SAME is refused: Nimble's ops take their pads as attributes.
//    ceil_mode does not apply with SAME or VALID (ONNX gives their output
//    sizes by formula).
//  * kernel_shape of Conv, optional in ONNX, must agree with the weights'
//    static spatial sizes.
//  * MaxPool's second output (the flat indices of the maxima, laid out by
//    storage_order) has no Nimble op: a model that uses it is refused;
//    storage_order alone changes nothing.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Converters.h"

#include <cmath>
#include <cstdint>

namespace nimble::onnx_import::convert {

namespace {

/// The spatial attributes shared by the three ops, over `k` spatial axes,
/// with the padding that auto_pad asks for. `sizes` are the input's spatial
/// sizes (kDynamic where unknown), `kernel` the window's.
bool windowAttrs(Conv &c, Value *x, const std::vector<int64_t> &kernel, Attrs &a, bool &ceilApplies) {
  const size_t k = kernel.size();
  auto list = [&](const char *name, int64_t dflt, size_t n, std::vector<int64_t> &out) {
    out = c.attrInts(name).value_or(std::vector<int64_t>());
    if (out.empty()) out.assign(n, dflt);
    if (out.size() != n)
      return c.fail(std::string(name) + " has " + std::to_string(out.size()) + " entries, expected " +
                    std::to_string(n));
    return true;
  };
  std::vector<int64_t> strides, dilations, pads;
  if (!list("strides", 1, k, strides) || !list("dilations", 1, k, dilations)) return false;
  // Checked before any arithmetic on them (a hostile model's stride 0 or
  // 2^62); the op's relation checks the same bounds and words the rest.
  constexpr int64_t kMax = int64_t(1) << 32;
  for (size_t i = 0; i < k; ++i) {
    if (strides[i] < 1 || strides[i] > kMax || dilations[i] < 1 || dilations[i] > kMax)
      return c.fail("strides and dilations must be between 1 and 2^32");
    if (kernel[i] != kDynamic && (kernel[i] < 1 || kernel[i] > kMax))
      return c.fail("the kernel's sizes must be between 1 and 2^32");
  }
  std::string autoPad = c.attrStr("auto_pad", "NOTSET");
  ceilApplies = autoPad == "NOTSET";
  if (autoPad == "NOTSET") {
    if (!list("pads", 0, 2 * k, pads)) return false;
  } else if (autoPad == "VALID") {
    pads.assign(2 * k, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    pads.assign(2 * k, 0);
    for (size_t i = 0; i < k; ++i) {
      if (kernel[i] == kDynamic)
        return c.fail("auto_pad " + autoPad + " needs the kernel's size along spatial axis " + std::to_string(i));
      int64_t d = x->type().dims()[i + 2], span, total;
      if (__builtin_mul_overflow(dilations[i], kernel[i] - 1, &span) || span > (int64_t(1) << 62))
        return c.fail("the dilated kernel along spatial axis " + std::to_string(i) + " is too large");
      ++span;
      if (strides[i] == 1) {
        total = span - 1;
      } else if (d == kDynamic) {
        return c.fail("auto_pad " + autoPad + " with stride " + std::to_string(strides[i]) +
                      " needs a static size along spatial axis " + std::to_string(i) +
                      " (the padding depends on it; Nimble's pads are attributes)");
      } else {
        int64_t out = (d + strides[i] - 1) / strides[i];
        total = std::max<int64_t>(0, (out - 1) * strides[i] + span - d);
      }
      int64_t small = total / 2, big = total - small;
      pads[i] = autoPad == "SAME_UPPER" ? small : big;
      pads[i + k] = autoPad == "SAME_UPPER" ? big : small;
    }
  } else {
    return c.fail("auto_pad is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER"); // not echoed: any bytes
  }
  // Defaults are left out, so the printed op reads as written by hand.
  auto nonDefault = [](const std::vector<int64_t> &v, int64_t d) {
    for (int64_t e : v)
      if (e != d) return true;
    return false;
  };
  if (nonDefault(strides, 1)) a.push_back({"strides", ints(strides)});
  if (nonDefault(pads, 0)) a.push_back({"pads", ints(pads)});
  if (nonDefault(dilations, 1)) a.push_back({"dilations", ints(dilations)});
  return true;
}

} // namespace

bool conv(Conv &c, Out &out) {
  Value *x = c.input(0), *w = c.input(1), *b = c.input(2);
  if (!x || !w) return c.fail("needs X and W");
  if (rankOf(x) < 3) return c.fail("the input has rank < 3 (batch, channels, spatial axes)");
  if (rankOf(w) != rankOf(x)) return c.fail("W's rank differs from X's");
  std::vector<int64_t> kernel(w->type().dims().begin() + 2, w->type().dims().end());
  if (auto ks = c.attrInts("kernel_shape")) {
    if (ks->size() != kernel.size()) return c.fail("kernel_shape has the wrong number of entries");
    for (size_t i = 0; i < kernel.size(); ++i) {
      if (kernel[i] != kDynamic && kernel[i] != (*ks)[i])
        return c.fail("kernel_shape " + std::to_string((*ks)[i]) + " differs from W's size " +
                      std::to_string(kernel[i]) + " along spatial axis " + std::to_string(i));
      kernel[i] = (*ks)[i];
    }
  }
  Attrs a;
  bool ceilApplies;
  if (!windowAttrs(c, x, kernel, a, ceilApplies)) return false;
  if (int64_t g = c.attrInt("group", 1); g != 1) a.push_back({"groups", Attr::getInt(g)});
  std::vector<Value *> operands = {x, w};
  if (b) operands.push_back(b);
  return done(out, c.op(OpCode::Conv, operands, a));
}

/// ConvTranspose: pads from `pads`, or from output_shape or auto_pad SAME
/// (output = input * stride) by ONNX's formula: the total padding
/// s (D - 1) + output_padding + d (K - 1) + 1 - output, its odd unit at the
/// end for SAME_UPPER (and NOTSET), at the beginning for SAME_LOWER. A
/// negative total (an output_shape past the natural size) extends the end
/// as output padding.
bool convTranspose(Conv &c, Out &out) {
  Value *x = c.input(0), *w = c.input(1), *b = c.input(2);
  if (!x || !w) return c.fail("needs X and W");
  if (rankOf(x) < 3) return c.fail("the input has rank < 3 (batch, channels, spatial axes)");
  if (rankOf(w) != rankOf(x)) return c.fail("W's rank differs from X's");
  const size_t k = static_cast<size_t>(rankOf(x) - 2);
  std::vector<int64_t> kernel(w->type().dims().begin() + 2, w->type().dims().end());
  if (auto ks = c.attrInts("kernel_shape")) {
    if (ks->size() != k) return c.fail("kernel_shape has the wrong number of entries");
    for (size_t i = 0; i < k; ++i)
      if (kernel[i] != kDynamic && kernel[i] != (*ks)[i])
        return c.fail("kernel_shape differs from W's spatial sizes");
  }
  auto list = [&](const char *name, int64_t dflt, size_t n) {
    std::vector<int64_t> v = c.attrInts(name).value_or(std::vector<int64_t>());
    if (v.empty()) v.assign(n, dflt);
    return v;
  };
  std::vector<int64_t> st = list("strides", 1, k), dil = list("dilations", 1, k), op = list("output_padding", 0, k),
                       pads = list("pads", 0, 2 * k);
  if (st.size() != k || dil.size() != k || op.size() != k || pads.size() != 2 * k)
    return c.fail("strides, dilations, output_padding or pads have the wrong number of entries");
  constexpr int64_t kMax = int64_t(1) << 32;
  for (size_t i = 0; i < k; ++i)
    if (st[i] < 1 || st[i] > kMax || dil[i] < 1 || dil[i] > kMax || op[i] < 0 || op[i] > kMax)
      return c.fail("strides and dilations must be between 1 and 2^32, output_padding between 0 and 2^32");
  std::string autoPad = c.attrStr("auto_pad", "NOTSET");
  std::optional<std::vector<int64_t>> shape = c.attrInts("output_shape");
  if (shape && shape->size() == k + 2) shape = std::vector<int64_t>(shape->begin() + 2, shape->end());
  if (shape && shape->size() != k) return c.fail("output_shape has the wrong number of entries");
  if (!shape && (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")) {
    shape = std::vector<int64_t>();
    for (size_t i = 0; i < k; ++i) {
      int64_t d = x->type().dims()[i + 2];
      if (d == kDynamic) return c.fail("auto_pad " + autoPad + " needs static spatial sizes");
      shape->push_back(d * st[i]);
    }
  } else if (!shape && autoPad != "NOTSET" && autoPad != "VALID") {
    return c.fail("auto_pad is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  }
  if (!shape && autoPad == "VALID") pads.assign(2 * k, 0);
  if (shape) {
    for (size_t i = 0; i < k; ++i) {
      int64_t d = x->type().dims()[i + 2];
      if (d == kDynamic || kernel[i] == kDynamic) return c.fail("output_shape needs static spatial sizes");
      if (d > kMax || kernel[i] > kMax || (*shape)[i] < 0 || (*shape)[i] > (int64_t(1) << 48))
        return c.fail("the spatial sizes are too large");
      int64_t total = st[i] * (d - 1) + op[i] + dil[i] * (kernel[i] - 1) + 1 - (*shape)[i];
      if (total < 0) {
        op[i] -= total;
        total = 0;
      }
      int64_t half = total / 2;
      pads[i] = autoPad == "SAME_LOWER" ? total - half : half;
      pads[i + k] = total - pads[i];
    }
  }
  Attrs a;
  auto nonDefault = [](const std::vector<int64_t> &v, int64_t d) {
    for (int64_t e : v)
      if (e != d) return true;
    return false;
  };
  if (nonDefault(st, 1)) a.push_back({"strides", ints(st)});
  if (nonDefault(pads, 0)) a.push_back({"pads", ints(pads)});
  if (nonDefault(dil, 1)) a.push_back({"dilations", ints(dil)});
  if (nonDefault(op, 0)) a.push_back({"output_padding", ints(op)});
  if (int64_t g = c.attrInt("group", 1); g != 1) a.push_back({"groups", Attr::getInt(g)});
  std::vector<Value *> operands = {x, w};
  if (b) operands.push_back(b);
  return done(out, c.op(OpCode::ConvTranspose, operands, a));
}

/// MaxPool's Indices: the flat position in x of each window's maximum (row
/// major, or column major over the spatial axes for storage_order 1). The
/// K = prod(kernel) values of each window are taken from x padded with the
/// lowest value (a take per spatial axis with constant indices) and stacked,
/// argmax picks the first maximum's offset k (ONNX's reference keeps the
/// first), and a constant table [K, out...] turns (k, output position) into
/// the spatial position, selected by k == arange(K); plus the (n, c) base.
/// Static shapes only; memory K times the output.
Value *maxPoolIndices(Conv &c, Value *x, Value *y, const std::vector<int64_t> &kernel, const Attrs &a) {
  Type xt = x->type(), yt = y->type();
  if (!xt.hasStaticShape() || !yt.hasStaticShape())
    return c.fail("the Indices output needs static input and output shapes"), nullptr;
  const size_t k = kernel.size();
  std::vector<int64_t> strides(k, 1), dil(k, 1), pads(2 * k, 0);
  for (auto &[name, v] : a) {
    if (name == "strides") strides = v.getInts();
    if (name == "dilations") dil = v.getInts();
    if (name == "pads") pads = v.getInts();
  }
  const std::vector<int64_t> &xd = xt.dims(), &yd = yt.dims();
  bool colMajor = c.attrInt("storage_order", 0) != 0;
  std::vector<int64_t> padAll(2 * (k + 2), 0);
  for (size_t d = 0; d < k; ++d) padAll[2 + d] = pads[d], padAll[k + 4 + d] = pads[k + d];
  DenseValue low;
  low.dtype = xt.dtype();
  if (isFloat(low.dtype)) low.appendDouble(-INFINITY);
  else low.appendInt(isSignedInt(low.dtype) ? INT64_MIN >> (64 - 8 * static_cast<int>(dtypeSize(low.dtype))) : 0);
  Value *xp = c.op(OpCode::Pad, {x, c.i64s(padAll), c.constant(std::move(low))});
  int64_t K = 1, outN = 1, spatial = 1;
  for (int64_t kd : kernel) K = kd > 4096 ? 4097 : K * kd;
  for (size_t d = 0; d < k; ++d) outN *= yd[2 + d], spatial *= xd[2 + d];
  // One take per axis and window offset, and a table of K x the output: bounded.
  if (K > 4096 || K * outN > (int64_t(1) << 24))
    return c.fail("the Indices output needs a kernel of at most 4096 elements and at most 2^24 window positions"),
           nullptr;
  std::vector<Value *> windows;
  std::vector<int64_t> table;
  for (int64_t o = 0; o < K; ++o) {
    std::vector<int64_t> off(k);
    for (size_t d = k, rest = static_cast<size_t>(o); d-- > 0;) {
      off[d] = static_cast<int64_t>(rest) % kernel[d];
      rest /= static_cast<size_t>(kernel[d]);
    }
    Value *v = xp;
    for (size_t d = 0; d < k; ++d) {
      std::vector<int64_t> idx;
      for (int64_t p = 0; p < yd[2 + d]; ++p) idx.push_back(p * strides[d] + off[d] * dil[d]);
      v = c.op(OpCode::Take, {v, c.i64s(idx)}, {{"axis", Attr::getInt(static_cast<int64_t>(d) + 2)}});
    }
    windows.push_back(c.op(OpCode::ExpandDims, {v}, {{"axis", Attr::getInt(0)}}));
    for (int64_t q = 0; q < outN; ++q) { // the spatial position of offset o at output position q
      std::vector<int64_t> pos(k);
      for (size_t d = k, rest = static_cast<size_t>(q); d-- > 0;) {
        pos[d] = static_cast<int64_t>(rest) % yd[2 + d] * strides[d] + off[d] * dil[d] - pads[d];
        rest /= static_cast<size_t>(yd[2 + d]);
      }
      int64_t flat = 0;
      if (colMajor)
        for (size_t d = k; d-- > 0;) flat = flat * xd[2 + d] + pos[d];
      else
        for (size_t d = 0; d < k; ++d) flat = flat * xd[2 + d] + pos[d];
      table.push_back(flat);
    }
  }
  Value *stack = windows.size() == 1 ? windows[0] : c.op(OpCode::Concat, windows, {{"axis", Attr::getInt(0)}});
  Value *which = c.op(OpCode::ArgMax, {stack}, {{"axis", Attr::getInt(0)}}); // [N, C, out...]
  std::vector<int64_t> kShape(k + 3, 1), tShape = {K, 1, 1}, bShape = {xd[0], xd[1]};
  kShape[0] = K;
  std::vector<int64_t> ks, base;
  for (int64_t o = 0; o < K; ++o) ks.push_back(o);
  for (size_t d = 0; d < k; ++d) tShape.push_back(yd[2 + d]), bShape.push_back(1);
  for (int64_t nc = 0; nc < xd[0] * xd[1]; ++nc) base.push_back(nc * spatial);
  Value *hit = c.op(OpCode::Equal, {c.op(OpCode::ExpandDims, {which}, {{"axis", Attr::getInt(0)}}),
                                    foldInts(c, DType::I64, kShape, ks)});
  Value *pick = c.op(OpCode::Mul, {c.op(OpCode::Cast, {hit}, {{"dtype", Attr::getDType(DType::I64)}}),
                                   foldInts(c, DType::I64, tShape, table)});
  Value *at = c.op(OpCode::Sum, {pick}, {{"axes", ints({0})}});
  return c.op(OpCode::Add, {at, foldInts(c, DType::I64, bShape, base)});
}

template <bool IsMax> bool pool(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  if (rankOf(x) < 3) return c.fail("the input has rank < 3 (batch, channels, spatial axes)");
  auto kernel = c.attrInts("kernel_shape");
  if (!kernel || kernel->size() != static_cast<size_t>(rankOf(x) - 2))
    return c.fail("kernel_shape must have one entry per spatial axis");
  Attrs a = {{"kernel", ints(*kernel)}};
  bool ceilApplies;
  if (!windowAttrs(c, x, *kernel, a, ceilApplies)) return false;
  if (ceilApplies && c.attrInt("ceil_mode", 0)) a.push_back({"ceil_mode", Attr::getBool(true)});
  if (!IsMax && c.attrInt("count_include_pad", 0)) a.push_back({"count_include_pad", Attr::getBool(true)});
  Value *y = c.op(IsMax ? OpCode::MaxPool : OpCode::AvgPool, {x}, a);
  if (IsMax && y && c.wantsOutput(1)) {
    Value *idx = maxPoolIndices(c, x, y, *kernel, a);
    out = {y, idx};
    return idx != nullptr;
  }
  return done(out, y);
}

template bool pool<true>(Conv &c, Out &out);
template bool pool<false>(Conv &c, Out &out);

} // namespace nimble::onnx_import::convert
