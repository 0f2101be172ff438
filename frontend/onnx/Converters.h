//===- Converters.h - The op map's converters (internal) -----------*- C++ -*-===//
//
// The converters of the op map (OpMap.cpp), split by kind: element-wise
// ops, activations, linear algebra, reductions and normalisations in
// ConvertMath.cpp; shapes, slicing, casts and constants in ConvertShape.cpp.
// The helpers they share and the converters that are templates over the
// Nimble op they emit are here.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_FRONTEND_ONNX_CONVERTERS_H
#define NIMBLE_FRONTEND_ONNX_CONVERTERS_H

#include "frontend/onnx/Convert.h"

#include <string>
#include <utility>
#include <vector>

namespace nimble::onnx_import::convert {

using namespace ir;

using Out = std::vector<Value *>;
using Attrs = std::vector<std::pair<std::string, Attr>>;

inline DType dt(Value *v) { return v->type().dtype(); }
inline int64_t rankOf(Value *v) { return v->type().rank(); }
inline Value *like(Conv &c, Value *x, double v) { return c.scalar(dt(x), v); }
inline Attr ints(const std::vector<int64_t> &v) { return Attr::getInts(v); }

inline bool done(Out &out, Value *v) {
  out = {v};
  return v != nullptr;
}

/// A small integer constant's elements (for folding shape computations).
inline bool smallInts(const DenseValue *d) { return d && isInteger(d->dtype) && d->shape.size() <= 1 && d->numElements() <= 64; }

inline Value *foldInts(Conv &c, DType t, std::vector<int64_t> shape, const std::vector<int64_t> &vals) {
  DenseValue d;
  d.dtype = t;
  d.shape = std::move(shape);
  for (int64_t v : vals) d.appendInt(v);
  return c.constant(std::move(d));
}

inline std::vector<int64_t> intsOf(const DenseValue *d) {
  std::vector<int64_t> r;
  for (int64_t k = 0, n = d->numElements(); k < n; ++k) r.push_back(d->getInt(k));
  return r;
}

template <OpCode K> bool unary(Conv &c, Out &out) {
  // Neg / Abs of known small integers fold like binary's shape arithmetic
  // (ONNX's expanded LayerNormalization negates its axis to size a shape).
  if constexpr (K == OpCode::Neg || K == OpCode::Abs) {
    const DenseValue *k = c.known(c.input(0));
    if (smallInts(k) && isSignedInt(k->dtype)) {
      std::vector<int64_t> r = intsOf(k);
      for (int64_t &v : r) v = K == OpCode::Neg || v < 0 ? static_cast<int64_t>(0 - static_cast<uint64_t>(v)) : v;
      return done(out, foldInts(c, k->dtype, k->shape, r));
    }
  }
  return done(out, c.op(K, {c.input(0)}));
}

template <OpCode K> bool binary(Conv &c, Out &out) {
  Value *a = c.input(0), *b = c.input(1);
  const DenseValue *ka = c.known(a), *kb = c.known(b);
  // Shape arithmetic on known integers (torch exports compute Reshape's
  // target from Shape with Add/Mul/Div): folded, so the target stays known.
  // (Not a u64 division: above INT64_MAX the int64 values below are negative.)
  if ((K == OpCode::Add || K == OpCode::Sub || K == OpCode::Mul || (K == OpCode::Div && dt(a) != DType::U64)) &&
      smallInts(ka) &&
      smallInts(kb) && ka->dtype == kb->dtype && (ka->shape == kb->shape || kb->shape.empty() || ka->shape.empty())) {
    std::vector<int64_t> x = intsOf(ka), y = intsOf(kb), r;
    size_t n = std::max(x.size(), y.size());
    for (size_t i = 0; i < n; ++i) {
      int64_t p = x[x.size() == 1 ? 0 : i], q = y[y.size() == 1 ? 0 : i];
      if (K == OpCode::Div && q == 0) goto emit;
      // Wrapping, as the kernels (and without signed overflow here: MIN / -1
      // is 0 - MIN).
      uint64_t up = static_cast<uint64_t>(p), uq = static_cast<uint64_t>(q);
      r.push_back(K == OpCode::Add   ? static_cast<int64_t>(up + uq)
                  : K == OpCode::Sub ? static_cast<int64_t>(up - uq)
                  : K == OpCode::Mul ? static_cast<int64_t>(up * uq)
                  : q == -1          ? static_cast<int64_t>(0 - up)
                                     : p / q);
    }
    return done(out, foldInts(c, ka->dtype, ka->shape.empty() ? kb->shape : ka->shape, r));
  }
emit:
  return done(out, c.op(K, {a, b}));
}

/// Sum, Max, Min, Mean of any number of inputs, broadcasting.
template <OpCode K> bool variadic(Conv &c, Out &out) {
  if (c.in.empty() || !c.input(0)) return c.fail("has no input");
  Value *acc = c.input(0);
  for (size_t i = 1; i < c.in.size() && acc; ++i) acc = c.op(K == OpCode::Mean ? OpCode::Add : K, {acc, c.input(i)});
  if (acc && K == OpCode::Mean && c.in.size() > 1)
    acc = c.op(OpCode::Div, {acc, like(c, acc, static_cast<double>(c.in.size()))});
  return done(out, acc);
}

/// x - its maximum over `axes` (kept), for range (softmax and its kin).
Value *shiftedByMax(Conv &c, Value *x, const std::vector<int64_t> &axes);
/// Reshape to `parts`, entry `minusOne` (or none: -1) inferred.
Value *reshapeTo(Conv &c, Value *x, std::vector<Conv::DimPart> parts, int64_t minusOne);

/// The axes from 2 to rank - 1 (the spatial axes of an [N, C, ...] input).
std::vector<int64_t> spatialAxes(int64_t r);

/// The axes of a reduction: an input from `inputSince`, an attribute before.
bool reduceAxes(Conv &c, int inputSince, std::vector<int64_t> &axes);

enum class Red { Sum, Mean, Max, Min, SumSquare, L1, L2, LogSum, LogSumExp };

/// Shape operands given at run time (ConvertRuntime.cpp).
bool sliceRuntime(Conv &c, Out &out);
bool splitRuntime(Conv &c, Out &out, int64_t axis);
bool unsqueezeRuntime(Conv &c, Out &out);
bool squeezeRuntime(Conv &c, Out &out);
bool reduceRuntime(Conv &c, Red red, Out &out);
/// Input i is given but its value is not known at import, and it is not
/// a statically empty list.
inline bool runtimeList(Conv &c, size_t i) {
  Value *v = c.input(i);
  return v && !c.knownInts(i) && !(rankOf(v) == 1 && v->type().dims()[0] == 0);
}

template <Red R> bool reduce(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x) return c.fail("has no input");
  if (c.opset >= (R == Red::Sum ? 13 : 18) && runtimeList(c, 1)) return reduceRuntime(c, R, out);
  std::vector<int64_t> axes;
  if (!reduceAxes(c, R == Red::Sum ? 13 : 18, axes)) return false;
  if (axes.empty() && c.attrInt("noop_with_empty_axes", 0)) return done(out, x);
  Attrs a = {{"axes", ints(axes)}, {"keepdims", Attr::getBool(c.attrInt("keepdims", 1))}};
  switch (R) {
  case Red::Sum: return done(out, c.op(OpCode::Sum, {x}, a));
  case Red::Mean: return done(out, c.op(OpCode::Mean, {x}, a));
  case Red::Max: return done(out, c.op(OpCode::Max, {x}, a));
  case Red::Min: return done(out, c.op(OpCode::Min, {x}, a));
  case Red::SumSquare: return done(out, c.op(OpCode::Sum, {c.op(OpCode::Mul, {x, x})}, a));
  case Red::L1: return done(out, c.op(OpCode::Sum, {c.op(OpCode::Abs, {x})}, a));
  case Red::L2: return done(out, c.op(OpCode::Sqrt, {c.op(OpCode::Sum, {c.op(OpCode::Mul, {x, x})}, a)}));
  case Red::LogSum: return done(out, c.op(OpCode::Log, {c.op(OpCode::Sum, {x}, a)}));
  case Red::LogSumExp: {
    // log(sum(exp(x - m))) + m with m the maximum (kept), for range.
    Value *m = c.op(OpCode::Max, {x}, {{"axes", ints(axes)}, {"keepdims", Attr::getBool(true)}});
    Value *s = c.op(OpCode::Sum, {c.op(OpCode::Exp, {c.op(OpCode::Sub, {x, m})})}, a);
    Value *mk = c.attrInt("keepdims", 1) ? m : c.op(OpCode::Squeeze, {m}, {{"axes", ints(axes.empty() ? [&] {
      std::vector<int64_t> all;
      for (int64_t i = 0; i < rankOf(x); ++i) all.push_back(i);
      return all;
    }() : axes)}});
    return done(out, c.op(OpCode::Add, {c.op(OpCode::Log, {s}), mk}));
  }
  }
  return false;
}

template <OpCode K> bool globalPool(Conv &c, Out &out) {
  Value *x = c.input(0);
  if (!x || rankOf(x) < 3) return c.fail("the input has rank < 3");
  return done(out, c.op(K, {x}, {{"axes", ints(spatialAxes(rankOf(x)))}, {"keepdims", Attr::getBool(true)}}));
}

bool identity(Conv &c, Out &out);
bool dropout(Conv &c, Out &out);
bool pow(Conv &c, Out &out);
bool reciprocal(Conv &c, Out &out);
bool xorOp(Conv &c, Out &out);
bool isNaN(Conv &c, Out &out);
bool isInf(Conv &c, Out &out);
bool sign(Conv &c, Out &out);
bool clip(Conv &c, Out &out);
bool leakyRelu(Conv &c, Out &out);
bool prelu(Conv &c, Out &out);
bool elu(Conv &c, Out &out);
bool selu(Conv &c, Out &out);
bool celu(Conv &c, Out &out);
bool hardSigmoid(Conv &c, Out &out);
bool hardSwish(Conv &c, Out &out);
bool softplus(Conv &c, Out &out);
bool mish(Conv &c, Out &out);
bool softsign(Conv &c, Out &out);
bool thresholdedRelu(Conv &c, Out &out);
bool gelu(Conv &c, Out &out);
bool matmul(Conv &c, Out &out);
bool gemm(Conv &c, Out &out);
bool argMax(Conv &c, Out &out);
bool argMin(Conv &c, Out &out);
bool softmax(Conv &c, Out &out);
bool logSoftmax(Conv &c, Out &out);
bool layerNorm(Conv &c, Out &out);
bool batchNorm(Conv &c, Out &out);
bool instanceNorm(Conv &c, Out &out);
bool mvn(Conv &c, Out &out);
bool lpNorm(Conv &c, Out &out);
bool reshape(Conv &c, Out &out);
bool flatten(Conv &c, Out &out);
bool shape(Conv &c, Out &out);
bool size(Conv &c, Out &out);
bool transpose(Conv &c, Out &out);
bool concat(Conv &c, Out &out);
bool gather(Conv &c, Out &out);
bool unsqueeze(Conv &c, Out &out);
bool squeeze(Conv &c, Out &out);
bool expand(Conv &c, Out &out);
bool slice(Conv &c, Out &out);
bool split(Conv &c, Out &out);
bool cast(Conv &c, Out &out);
bool castLike(Conv &c, Out &out);
bool where(Conv &c, Out &out);
bool constantOp(Conv &c, Out &out);
bool constantOfShape(Conv &c, Out &out);
bool range(Conv &c, Out &out);
bool nonZero(Conv &c, Out &out);
bool hardmax(Conv &c, Out &out);
bool floorOp(Conv &c, Out &out);
bool ceilOp(Conv &c, Out &out);
bool roundOp(Conv &c, Out &out);
bool shrink(Conv &c, Out &out);
bool nllLoss(Conv &c, Out &out);
bool softmaxCrossEntropy(Conv &c, Out &out);
bool depthToSpace(Conv &c, Out &out);
bool spaceToDepth(Conv &c, Out &out);
bool eyeLike(Conv &c, Out &out);
bool trilu(Conv &c, Out &out);
bool mod(Conv &c, Out &out);
bool gatherElements(Conv &c, Out &out);
bool conv(Conv &c, Out &out);
// ConvertTensor.cpp
bool cumSum(Conv &c, Out &out);
bool tile(Conv &c, Out &out);
bool pad(Conv &c, Out &out);
bool reduceProd(Conv &c, Out &out);
bool gatherND(Conv &c, Out &out);
bool scatterElements(Conv &c, Out &out);
bool scatterND(Conv &c, Out &out);
bool oneHot(Conv &c, Out &out);
bool bitShift(Conv &c, Out &out);
bool topK(Conv &c, Out &out);
bool nonMaxSuppression(Conv &c, Out &out);
bool convTranspose(Conv &c, Out &out);
/// Round half to even of a float tensor (ConvertMath.cpp: floor, compare, select).
Value *roundHalfEven(Conv &c, Value *x);
/// 0, 1, ..., n - 1 for dimension `axis` of x, as a 1-D i64 tensor (ConvertShape.cpp).
Value *iota1(Conv &c, Value *x, int64_t axis);
// ConvertComposite.cpp (lowered to existing ops; window<0, 1, 2>: Hann, Hamming, Blackman)
bool quantizeLinear(Conv &c, Out &out);
bool dequantizeLinear(Conv &c, Out &out);
bool dynamicQuantizeLinear(Conv &c, Out &out);
template <int Kind> bool window(Conv &c, Out &out);
bool compress(Conv &c, Out &out);
bool unique(Conv &c, Out &out);
bool matMulInteger(Conv &c, Out &out);
bool convInteger(Conv &c, Out &out);
bool qlinearMatMul(Conv &c, Out &out);
bool qlinearConv(Conv &c, Out &out);
bool lrn(Conv &c, Out &out);
bool einsum(Conv &c, Out &out);
bool det(Conv &c, Out &out);
bool reverseSequence(Conv &c, Out &out);
bool maxUnpool(Conv &c, Out &out);
/// MaxPool (IsMax) and AveragePool (ConvertWindow.cpp).
template <bool IsMax> bool pool(Conv &c, Out &out);

/// Sampling (ConvertSampling.cpp).
bool resize(Conv &c, Out &out);
bool upsample(Conv &c, Out &out);
bool gridSample(Conv &c, Out &out);

} // namespace nimble::onnx_import::convert

#endif // NIMBLE_FRONTEND_ONNX_CONVERTERS_H
