//===- ConstantFold.cpp - Compile-time evaluation of operations -----------===//
//
// See ConstantFold.h for what folds and the semantics it follows. The result
// shapes always come from the op's own relation (ShapeFns), run over the
// constants' static shapes and values, so the folder can never disagree with
// type inference about a shape; this file only computes elements.
//
// Elements are read through DenseValue::getDouble / getInt, computed in the
// op's precision (T = double for f64, float for the other float types, int64
// with two's-complement wrap-around for integers) and appended with
// appendDouble / appendInt. Ops that only move data (reshape, transpose,
// slice, select, ...) copy raw element bytes, so NaN payloads and -0.0 survive.
//
// When every operand is a splat (or holds one element), an element-wise or
// data-movement result is computed once and stored as a splat.
//
//===----------------------------------------------------------------------===//

#include "passes/transforms/ConstantFold.h"

#include "ir/Inference.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace nimble::passes {

using ir::Operation;

namespace {

using Shape = std::vector<int64_t>;

bool isStatic(const Shape &s) {
  for (int64_t d : s)
    if (d == kDynamic) return false;
  return true;
}

int64_t count(const DenseValue &v) { return elementCount(v.shape); }

/// One element stands for all: a splat, or a single element that broadcasts.
bool isUniform(const DenseValue &v) { return v.splat || count(v) == 1; }

DenseValue newValue(DType t, const Shape &shape, bool splat) {
  DenseValue v;
  v.dtype = t;
  v.shape = shape;
  v.splat = splat && !shape.empty();
  return v;
}

/// Appends the raw bytes of element `i` of `in` (data movement keeps bits).
void copyElement(DenseValue &out, const DenseValue &in, int64_t i) {
  size_t n = dtypeSize(in.dtype);
  size_t at = static_cast<size_t>(in.splat ? 0 : i) * n;
  out.bytes.insert(out.bytes.end(), in.bytes.begin() + static_cast<ptrdiff_t>(at),
                   in.bytes.begin() + static_cast<ptrdiff_t>(at + n));
}

/// Splits a row-major flat index into a multi-index of `shape`.
void unflatten(int64_t flat, const Shape &shape, Shape &idx) {
  idx.resize(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    idx[k] = shape[k] ? flat % shape[k] : 0;
    flat = shape[k] ? flat / shape[k] : 0;
  }
}

int64_t flatten(const Shape &idx, const Shape &shape) {
  int64_t f = 0;
  for (size_t k = 0; k < shape.size(); ++k) f = f * shape[k] + idx[k];
  return f;
}

/// Maps flat indices of a numpy-broadcast result to flat indices of one
/// operand: the operand's dims align to the right, size-1 dims repeat.
class BroadcastMap {
public:
  BroadcastMap(const Shape &in, const Shape &out) : out_(out), stride_(out.size(), 0) {
    size_t off = out.size() - in.size();
    int64_t s = 1;
    for (size_t k = in.size(); k-- > 0;) {
      if (in[k] != 1) stride_[off + k] = s;
      s *= in[k];
    }
  }
  int64_t map(int64_t flat) const {
    int64_t r = 0;
    for (size_t k = out_.size(); k-- > 0;) {
      if (out_[k] == 0) return 0;
      r += (flat % out_[k]) * stride_[k];
      flat /= out_[k];
    }
    return r;
  }

private:
  Shape out_, stride_;
};

/// Runs `fn(out, idx)` once per result element (once in all for uniform
/// operands), `idx[k]` being the element of operand k; `fn` appends the
/// element or returns false to decline the fold.
template <class Fn>
std::optional<DenseValue> mapElements(const std::vector<const DenseValue *> &ins, DType outType,
                                      const Shape &outShape, Fn fn) {
  bool uniform = true;
  for (const DenseValue *v : ins) uniform &= isUniform(*v);
  DenseValue out = newValue(outType, outShape, uniform);
  int64_t n = uniform ? 1 : elementCount(outShape);
  std::vector<BroadcastMap> maps;
  if (!uniform)
    for (const DenseValue *v : ins) maps.emplace_back(v->shape, outShape);
  std::vector<int64_t> idx(ins.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    if (!uniform)
      for (size_t k = 0; k < ins.size(); ++k) idx[k] = maps[k].map(i);
    if (!fn(out, idx.data())) return std::nullopt;
  }
  return out;
}

template <class T> T readAs(const DenseValue &v, int64_t i) {
  if constexpr (std::is_floating_point_v<T>) return static_cast<T>(v.getDouble(i));
  else return v.getInt(i);
}

//===-- Scalar semantics ---------------------------------------------------===//

template <class T> std::optional<T> unaryFloat(OpCode c, T x) {
  switch (c) {
  case OpCode::Neg: return -x;
  case OpCode::Abs: return std::fabs(x);
  case OpCode::Exp: return std::exp(x);
  case OpCode::Log: return std::log(x);
  case OpCode::Sqrt: return std::sqrt(x);
  case OpCode::Rsqrt: return T(1) / std::sqrt(x);
  case OpCode::Tanh: return std::tanh(x);
  case OpCode::Sigmoid: {
    // The kernel's two branches (neither overflows); one formula for all x
    // differs from them in the last bit for x < 0.
    if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
    T e = std::exp(x);
    return e / (T(1) + e);
  }
  case OpCode::Relu: return x < T(0) ? T(0) : x; // -0.0 and NaN stay

  // As the kernel: f32 through f64 (vm/kernels/Elementwise.cpp).
  case OpCode::Erf: return static_cast<T>(std::erf(static_cast<double>(x)));
  // The kernels call the C library's function of T (sinf for f32).
  case OpCode::Sin: return std::sin(x);
  case OpCode::Cos: return std::cos(x);
  case OpCode::Tan: return std::tan(x);
  case OpCode::Asin: return std::asin(x);
  case OpCode::Acos: return std::acos(x);
  case OpCode::Atan: return std::atan(x);
  case OpCode::Sinh: return std::sinh(x);
  case OpCode::Cosh: return std::cosh(x);
  case OpCode::Asinh: return std::asinh(x);
  case OpCode::Acosh: return std::acosh(x);
  case OpCode::Atanh: return std::atanh(x);
  default: return std::nullopt; // gelu: see the header
  }
}

std::optional<int64_t> unaryInt(OpCode c, int64_t x) {
  uint64_t u = static_cast<uint64_t>(x);
  switch (c) {
  case OpCode::Neg: return static_cast<int64_t>(0 - u);
  case OpCode::Abs: return x < 0 ? static_cast<int64_t>(0 - u) : x;
  case OpCode::Relu: return x > 0 ? x : 0;
  case OpCode::LogicalNot: return x == 0;
  default: return std::nullopt;
  }
}

/// The reference kernels' maximum / minimum (vm/kernels/Binary.cpp): a NaN
/// operand wins (the first if both are), and between equal values (0.0 and
/// -0.0) the FIRST operand is returned. Reductions fold with these too, which
/// keeps the first of equal elements and the first NaN, as the kernels do.
template <class T> T maximum(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  return a < b ? b : a;
}
template <class T> T minimum(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  return b < a ? b : a;
}

template <class T> std::optional<T> binaryFloat(OpCode c, T a, T b) {
  switch (c) {
  case OpCode::Add: return a + b;
  case OpCode::Sub: return a - b;
  case OpCode::Mul: return a * b;
  case OpCode::Div: return a / b;
  case OpCode::Pow: return std::pow(a, b);
  case OpCode::Fmod: return std::fmod(a, b);
  case OpCode::Maximum: return maximum(a, b);
  case OpCode::Minimum: return minimum(a, b);
  default: return std::nullopt;
  }
}

int64_t minOf(DType t) {
  switch (t) {
  case DType::I8: return std::numeric_limits<int8_t>::min();
  case DType::I16: return std::numeric_limits<int16_t>::min();
  case DType::I32: return std::numeric_limits<int32_t>::min();
  case DType::U8: case DType::U16: case DType::U32: return 0;
  default: return std::numeric_limits<int64_t>::min();
  }
}
int64_t maxOf(DType t) {
  switch (t) {
  case DType::I8: return std::numeric_limits<int8_t>::max();
  case DType::I16: return std::numeric_limits<int16_t>::max();
  case DType::I32: return std::numeric_limits<int32_t>::max();
  case DType::U8: return std::numeric_limits<uint8_t>::max();
  case DType::U16: return std::numeric_limits<uint16_t>::max();
  case DType::U32: return std::numeric_limits<uint32_t>::max();
  default: return std::numeric_limits<int64_t>::max();
  }
}

/// Integer arithmetic on values held in int64; the caller truncates the
/// result to the element type's width, which makes add/sub/mul and MIN / -1
/// wrap like the kernels.
std::optional<int64_t> binaryInt(OpCode c, int64_t a, int64_t b) {
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (c) {
  case OpCode::Add: return static_cast<int64_t>(ua + ub);
  case OpCode::Sub: return static_cast<int64_t>(ua - ub);
  case OpCode::Mul: return static_cast<int64_t>(ua * ub);
  case OpCode::Div:
    // The kernel's division (docs/LangRef.md, div): truncation toward zero,
    // MIN / -1 wraps to MIN (the caller truncates -MIN to the type's width).
    // Division by zero is left to the runtime, which reports it at the op.
    if (b == 0) return std::nullopt;
    if (b == -1) return static_cast<int64_t>(0 - ua);
    return a / b;
  case OpCode::Fmod: // C's %, as the kernel; by zero left to the runtime
    if (b == 0) return std::nullopt;
    if (b == -1) return 0;
    return a % b;
  case OpCode::Maximum: return maximum(a, b);
  case OpCode::Minimum: return minimum(a, b);
  case OpCode::LogicalAnd: return (a != 0) && (b != 0);
  case OpCode::LogicalOr: return (a != 0) || (b != 0);
  default: return std::nullopt;
  }
}

template <class T> bool compare(OpCode c, T a, T b) {
  switch (c) {
  case OpCode::Equal: return a == b;
  case OpCode::NotEqual: return a != b;
  case OpCode::Less: return a < b;
  case OpCode::LessEqual: return a <= b;
  case OpCode::Greater: return a > b;
  default: return a >= b; // GreaterEqual
  }
}

/// Appends `d` converted to float type `t` as the cast kernel converts it
/// (vm/kernels/Elementwise.cpp): f16 and bf16 through f32, i.e. rounded to
/// f32 first and then to the narrow type (two roundings, like the kernel; a
/// single correct rounding would differ from it in rare ties).
void appendRounded(DenseValue &out, double d) {
  if (out.dtype == DType::F16 || out.dtype == DType::BF16)
    out.appendDouble(static_cast<double>(static_cast<float>(d)));
  else
    out.appendDouble(d);
}

/// cast of one element; false to decline (see the header).
bool castElement(DenseValue &out, const DenseValue &in, int64_t i) {
  DType to = out.dtype;
  if (!isFloat(in.dtype)) {
    int64_t v = in.getInt(i);
    if (!isFloat(to)) out.appendInt(v);
    else if (to == DType::F32) out.appendDouble(static_cast<double>(static_cast<float>(v)));
    else if (to == DType::F64) out.appendDouble(static_cast<double>(v));
    else out.appendDouble(static_cast<double>(static_cast<float>(v))); // f16/bf16: as the kernel
    return true;
  }
  double d = in.getDouble(i);
  if (isFloat(to)) {
    appendRounded(out, d);
    return true;
  }
  if (to == DType::I1) {
    out.appendInt(d != 0); // NaN is true, as in numpy
    return true;
  }
  // The kernel's saturating conversion (docs/LangRef.md, `cast`): NaN is 0,
  // values at or beyond the bounds (compared in the source precision: f32's
  // nearest to INT_MAX is 2^31) saturate, the rest truncate toward zero.
  double lo = static_cast<double>(minOf(to)), hi = static_cast<double>(maxOf(to));
  if (in.dtype != DType::F64) {
    lo = static_cast<double>(static_cast<float>(lo));
    hi = static_cast<double>(static_cast<float>(hi));
  }
  if (std::isnan(d)) out.appendInt(0);
  else if (d <= lo) out.appendInt(minOf(to));
  else if (d >= hi) out.appendInt(maxOf(to));
  else out.appendInt(static_cast<int64_t>(d));
  return true;
}

//===-- Folders by relation ------------------------------------------------===//

using Values = std::vector<const DenseValue *>;
using Result = std::optional<DenseValue>;

Result foldUnary(OpCode c, const DenseValue &x, const Shape &shape) {
  DType t = x.dtype;
  if (t == DType::F64)
    return mapElements({&x}, t, shape, [&](DenseValue &o, const int64_t *i) {
      auto r = unaryFloat<double>(c, x.getDouble(i[0]));
      if (r) o.appendDouble(*r);
      return r.has_value();
    });
  if (isFloat(t))
    return mapElements({&x}, t, shape, [&](DenseValue &o, const int64_t *i) {
      auto r = unaryFloat<float>(c, readAs<float>(x, i[0]));
      if (r) o.appendDouble(static_cast<double>(*r));
      return r.has_value();
    });
  return mapElements({&x}, t, shape, [&](DenseValue &o, const int64_t *i) {
    auto r = unaryInt(c, x.getInt(i[0]));
    if (r) o.appendInt(*r);
    return r.has_value();
  });
}

template <class T>
Result foldBinaryAs(OpCode c, const DenseValue &a, const DenseValue &b, const TensorSig &res) {
  return mapElements({&a, &b}, res.dtype, res.dims, [&](DenseValue &o, const int64_t *i) {
    T x = readAs<T>(a, i[0]), y = readAs<T>(b, i[1]);
    if (opInfo(c).relation == Relation::Compare) {
      o.appendInt(compare(c, x, y));
      return true;
    }
    if constexpr (std::is_floating_point_v<T>) {
      auto r = binaryFloat<T>(c, x, y);
      if (r) o.appendDouble(static_cast<double>(*r));
      return r.has_value();
    } else {
      auto r = binaryInt(c, x, y);
      if (r) o.appendInt(*r);
      return r.has_value();
    }
  });
}

Result foldBinary(OpCode c, const DenseValue &a, const DenseValue &b, const TensorSig &res) {
  if (a.dtype == DType::F64) return foldBinaryAs<double>(c, a, b, res);
  if (isFloat(a.dtype)) return foldBinaryAs<float>(c, a, b, res);
  return foldBinaryAs<int64_t>(c, a, b, res);
}

Result foldSelect(const Values &v, const TensorSig &res) {
  return mapElements(v, res.dtype, res.dims, [&](DenseValue &o, const int64_t *i) {
    if (v[0]->getInt(i[0])) copyElement(o, *v[1], i[1]);
    else copyElement(o, *v[2], i[2]);
    return true;
  });
}

Result foldCast(const DenseValue &x, const TensorSig &res) {
  return mapElements({&x}, res.dtype, res.dims, [&](DenseValue &o, const int64_t *i) {
    return castElement(o, x, i[0]);
  });
}

/// Data movement: result element k is operand element `src(k)`; a uniform
/// operand gives a splat.
template <class Src>
DenseValue gather(const DenseValue &in, const TensorSig &res, Src src) {
  bool uniform = isUniform(in) && count(in) > 0;
  DenseValue out = newValue(res.dtype, res.dims, uniform);
  if (uniform) {
    copyElement(out, in, 0);
    return out;
  }
  int64_t n = elementCount(res.dims);
  for (int64_t k = 0; k < n; ++k) copyElement(out, in, src(k));
  return out;
}

Result foldTranspose(const Operation &op, const DenseValue &in, const TensorSig &res) {
  size_t r = in.shape.size();
  std::vector<int64_t> perm = op.attr("perm").getInts();
  if (perm.empty())
    for (size_t k = r; k-- > 0;) perm.push_back(static_cast<int64_t>(k));
  for (int64_t &p : perm)
    if (p < 0) p += static_cast<int64_t>(r);
  Shape oidx, iidx(r);
  return gather(in, res, [&](int64_t k) {
    unflatten(k, res.dims, oidx);
    for (size_t d = 0; d < r; ++d) iidx[static_cast<size_t>(perm[d])] = oidx[d];
    return flatten(iidx, in.shape);
  });
}

Result foldSlice(const Operation &op, const DenseValue &in, const TensorSig &res) {
  Shape start(in.shape.size(), 0);
  const auto &axes = op.attr("axes").getInts(), &starts = op.attr("starts").getInts();
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t ax = axes[i] < 0 ? axes[i] + static_cast<int64_t>(in.shape.size()) : axes[i];
    int64_t d = in.shape[static_cast<size_t>(ax)], s = starts[i];
    if (s < 0) s += d;
    start[static_cast<size_t>(ax)] = std::min(std::max(s, int64_t(0)), d);
  }
  Shape idx;
  return gather(in, res, [&](int64_t k) {
    unflatten(k, res.dims, idx);
    for (size_t d = 0; d < idx.size(); ++d) idx[d] += start[d];
    return flatten(idx, in.shape);
  });
}

std::optional<std::vector<DenseValue>> foldSplit(const Operation &op, const DenseValue &in,
                                                 const std::vector<TensorSig> &res) {
  int64_t r = static_cast<int64_t>(in.shape.size());
  int64_t ax = op.intAttr("axis") < 0 ? op.intAttr("axis") + r : op.intAttr("axis");
  std::vector<DenseValue> outs;
  Shape idx;
  for (size_t part = 0; part < res.size(); ++part) {
    int64_t offset = static_cast<int64_t>(part) * res[part].dims[static_cast<size_t>(ax)];
    outs.push_back(gather(in, res[part], [&](int64_t k) {
      unflatten(k, res[part].dims, idx);
      idx[static_cast<size_t>(ax)] += offset;
      return flatten(idx, in.shape);
    }));
  }
  return outs;
}

Result foldConcat(const Operation &op, const Values &ins, const TensorSig &res) {
  int64_t r = static_cast<int64_t>(res.dims.size());
  int64_t ax = op.intAttr("axis") < 0 ? op.intAttr("axis") + r : op.intAttr("axis");
  // `&&`, not `&=`: once an operand is found empty, the next ones must not
  // compare their first element with its (absent) one.
  bool uniform = true;
  for (const DenseValue *v : ins)
    uniform = uniform && isUniform(*v) && count(*v) > 0 && v->dtype == ins[0]->dtype &&
              std::memcmp(v->bytes.data(), ins[0]->bytes.data(), dtypeSize(v->dtype)) == 0;
  DenseValue out = newValue(res.dtype, res.dims, uniform);
  if (uniform) {
    copyElement(out, *ins[0], 0);
    return out;
  }
  // Row-major: for each index before the axis, each operand contributes one
  // contiguous run of dims[ax] * (product of the dims after the axis).
  Shape outer(res.dims.begin(), res.dims.begin() + ax);
  Shape inner(res.dims.begin() + ax + 1, res.dims.end());
  int64_t nOuter = elementCount(outer), nInner = elementCount(inner);
  for (int64_t o = 0; o < nOuter; ++o)
    for (const DenseValue *v : ins) {
      int64_t run = v->shape[static_cast<size_t>(ax)] * nInner;
      for (int64_t k = 0; k < run; ++k) copyElement(out, *v, o * run + k);
    }
  return out;
}

template <class T>
Result reduceAs(OpCode c, const Operation &op, const DenseValue &in, const TensorSig &res) {
  size_t r = in.shape.size();
  std::vector<bool> reduced(r, op.attr("axes").getInts().empty());
  for (int64_t a : op.attr("axes").getInts())
    reduced[static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(r) : a)] = true;
  // Output stride of each input dimension (0 where reduced).
  Shape outStride(r, 0);
  int64_t s = 1, reducedCount = 1;
  for (size_t k = r; k-- > 0;) {
    if (reduced[k]) {
      reducedCount *= in.shape[k];
    } else {
      outStride[k] = s;
      s *= in.shape[k];
    }
  }
  // max/min of nothing give their identities at run time and mean of nothing
  // NaN: left to the kernels.
  // prod of nothing is 1 (the starting value below).
  if (reducedCount == 0 && c != OpCode::Sum && c != OpCode::Prod) return std::nullopt;
  int64_t nOut = elementCount(res.dims);
  // Sums accumulate floats in double and round once at the end, as the
  // kernel does (vm/kernels/Reduce.cpp); max/min hold T values exactly.
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  std::vector<Acc> acc(static_cast<size_t>(nOut), Acc(c == OpCode::Prod ? 1 : 0));
  std::vector<bool> seen(static_cast<size_t>(nOut), false);
  Shape idx;
  for (int64_t i = 0, n = count(in); i < n; ++i) {
    unflatten(i, in.shape, idx);
    int64_t o = 0;
    for (size_t k = 0; k < r; ++k) o += idx[k] * outStride[k];
    Acc x = static_cast<Acc>(readAs<T>(in, i));
    Acc &a = acc[static_cast<size_t>(o)];
    if (c == OpCode::Sum || c == OpCode::Mean) {
      if constexpr (std::is_floating_point_v<T>) a = a + x;
      else a = static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(x));
    } else if (c == OpCode::Prod) {
      if constexpr (std::is_floating_point_v<T>) a = a * x;
      else a = static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(x));
    } else if (!seen[static_cast<size_t>(o)]) {
      a = x;
    } else {
      a = c == OpCode::Max ? maximum(a, x) : minimum(a, x);
    }
    seen[static_cast<size_t>(o)] = true;
  }
  DenseValue out = newValue(res.dtype, res.dims, false);
  for (Acc a : acc) {
    if constexpr (std::is_floating_point_v<T>) {
      if (c == OpCode::Mean) a = a / static_cast<double>(reducedCount);
      out.appendDouble(static_cast<double>(static_cast<T>(a)));
    } else {
      out.appendInt(a);
    }
  }
  return out;
}

Result foldReduce(const Operation &op, const DenseValue &in, const TensorSig &res,
                  int64_t maxElements) {
  if (count(in) > maxElements) return std::nullopt; // compile time
  if (in.dtype == DType::F64) return reduceAs<double>(op.code(), op, in, res);
  if (isFloat(in.dtype)) return reduceAs<float>(op.code(), op, in, res);
  return reduceAs<int64_t>(op.code(), op, in, res);
}

Result foldArange(const Values &v, const TensorSig &res) {
  DenseValue out = newValue(res.dtype, res.dims, false);
  int64_t n = elementCount(res.dims);
  for (int64_t i = 0; i < n; ++i) {
    if (res.dtype == DType::F64) {
      out.appendDouble(v[0]->getDouble(0) + static_cast<double>(i) * v[2]->getDouble(0));
    } else if (isFloat(res.dtype)) { // in double, rounded once to f32 (the kernel's)
      double x = static_cast<double>(readAs<float>(*v[0], 0)) +
                 static_cast<double>(i) * static_cast<double>(readAs<float>(*v[2], 0));
      out.appendDouble(static_cast<double>(static_cast<float>(x)));
    } else {
      uint64_t x = static_cast<uint64_t>(v[0]->getInt(0)) +
                   static_cast<uint64_t>(i) * static_cast<uint64_t>(v[2]->getInt(0));
      out.appendInt(static_cast<int64_t>(x));
    }
  }
  return out;
}

/// shape_of / dim: answered by the operand's type alone.
std::optional<std::vector<DenseValue>> foldShapeQuery(const Operation &op) {
  ir::Type t = op.operand(0)->type();
  if (!t || !t.isTensor()) return std::nullopt;
  DenseValue out;
  out.dtype = DType::I64;
  if (op.is(OpCode::ShapeOf)) {
    if (!t.hasStaticShape()) return std::nullopt;
    out.shape = {t.rank()};
    for (int64_t d : t.dims()) out.appendInt(d);
  } else {
    int64_t ax = op.intAttr("axis");
    if (ax < 0) ax += t.rank();
    if (ax < 0 || ax >= t.rank() || t.dims()[static_cast<size_t>(ax)] == kDynamic)
      return std::nullopt;
    out.appendInt(t.dims()[static_cast<size_t>(ax)]);
  }
  return std::vector<DenseValue>{std::move(out)};
}

} // namespace

DenseValue makeSplat(DType dtype, const std::vector<int64_t> &shape, double v) {
  DenseValue out = newValue(dtype, shape, true);
  if (isFloat(dtype)) out.appendDouble(v);
  else out.appendInt(static_cast<int64_t>(v));
  return out;
}

int64_t elementCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d == 0) return 0;
  for (int64_t d : shape) {
    if (d < 0 || n > std::numeric_limits<int64_t>::max() / d)
      return std::numeric_limits<int64_t>::max();
    n *= d;
  }
  return n;
}

bool allElementsEqual(const DenseValue &v, double x) {
  int64_t n = count(v);
  if (n == 0 || (!v.splat && n > 65536)) return false;
  for (int64_t i = 0, e = v.splat ? 1 : n; i < e; ++i)
    if (v.getDouble(i) != x) return false;
  return true;
}

std::optional<std::vector<DenseValue>> foldOperation(const Operation &op, int64_t maxElements) {
  const OpInfo &info = op.info();
  if (info.relation == Relation::Structural || op.is(OpCode::Constant) || op.numResults() == 0)
    return std::nullopt;
  if (op.is(OpCode::ShapeOf) || op.is(OpCode::Dim)) return foldShapeQuery(op);

  Values vals;
  std::vector<TensorSig> sigs;
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    const DenseValue *v = ir::constantValue(op.operand(i));
    if (!v) return std::nullopt;
    vals.push_back(v);
    sigs.push_back({v->dtype, v->shape});
  }
  ShapeFnResult sr = inferShapes(op.code(), sigs, op.attrs(), vals);
  // A check left for run time (none arise from static operands today) would
  // be one the fold cannot know to pass.
  if (!sr.ok() || sr.upperBound || !sr.deferred.empty() || sr.results.size() != op.numResults())
    return std::nullopt;
  for (const TensorSig &r : sr.results)
    if (!isStatic(r.dims) || elementCount(r.dims) > maxElements) return std::nullopt;
  const TensorSig &res = sr.results[0];

  // Integers compute in int64 below, where u8..u32 are exact (zero-extended,
  // so comparisons and division agree with the kernels) but a u64 above
  // INT64_MAX reads as negative: u64 element computations are left to the
  // kernels; u64 data movement still folds (it copies bytes).
  bool u64 = res.dtype == DType::U64;
  for (const DenseValue *v : vals) u64 |= v->dtype == DType::U64;
  if (u64 && (info.relation == Relation::Unary || info.relation == Relation::Broadcast ||
              info.relation == Relation::Compare || info.relation == Relation::Cast ||
              info.relation == Relation::Reduce || info.relation == Relation::Arange))
    return std::nullopt;

  Result r;
  switch (info.relation) {
  case Relation::Unary:
    if (op.is(OpCode::Softmax) || op.is(OpCode::DeviceCopy)) return std::nullopt;
    r = foldUnary(op.code(), *vals[0], res.dims);
    break;
  case Relation::Broadcast:
  case Relation::Compare: r = foldBinary(op.code(), *vals[0], *vals[1], res); break;
  case Relation::Select: r = foldSelect(vals, res); break;
  case Relation::Cast: r = foldCast(*vals[0], res); break;
  case Relation::Reduce: r = foldReduce(op, *vals[0], res, maxElements); break;
  case Relation::Reshape:
  case Relation::DynReshape:
  case Relation::ExpandDims:
  case Relation::Squeeze:
    // Same elements in the same order; only the shape changes.
    r = gather(*vals[0], res, [](int64_t k) { return k; });
    break;
  case Relation::BroadcastTo: {
    BroadcastMap m(vals[0]->shape, res.dims);
    r = gather(*vals[0], res, [&](int64_t k) { return m.map(k); });
    break;
  }
  case Relation::Transpose: r = foldTranspose(op, *vals[0], res); break;
  case Relation::Slice: r = foldSlice(op, *vals[0], res); break;
  case Relation::Split: return foldSplit(op, *vals[0], sr.results);
  case Relation::Concat: r = foldConcat(op, vals, res); break;
  case Relation::Arange: r = foldArange(vals, res); break;
  case Relation::Zeros: r = makeSplat(res.dtype, res.dims, 0.0); break;
  case Relation::Full: {
    DenseValue out = newValue(res.dtype, res.dims, true);
    copyElement(out, *vals[1], 0);
    r = std::move(out);
    break;
  }
  default: return std::nullopt; // matmul, layer_norm, take, unique, ...
  }
  if (!r) return std::nullopt;
  return std::vector<DenseValue>{std::move(*r)};
}

} // namespace nimble::passes
