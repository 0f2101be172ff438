//===- Elementwise.cpp - Unary element-wise kernels and cast -------------===//
//
// One template per op (the op is a template parameter, so each inner loop is
// a straight loop over one formula), instantiated for the element types the
// op's DTypeRule admits; f16/bf16 go through withF32 (computed in f32,
// rounded to nearest even).
//
// Formulas, where a choice exists:
//   gelu     the exact erf form 0.5 * x * (1 + erf(x / sqrt(2))), not the tanh
//            approximation.
//   sigmoid  1 / (1 + exp(-x)) for x >= 0 and exp(x) / (1 + exp(x)) below, so
//            neither branch overflows.
//   rsqrt    1 / sqrt(x).
//   relu     x < 0 ? 0 : x (NaN stays NaN).
//   sin .. atanh  the C library's function of the element type (sinf for f32,
//            sin for f64; the native kernels call the same functions, so the
//            two agree bit for bit); outside the domain (asin(2), acosh(0.5),
//            atanh(2)) NaN, atanh(+-1) = +-inf, as C and numpy say.
//   neg/abs  wrap around on integers like numpy (abs(INT_MIN) == INT_MIN;
//            neg of an unsigned x is 2^bits - x, abs and relu its identity).
//   cast     float -> int truncates toward zero; NaN becomes 0 and values out
//            of range saturate, to 0 below an unsigned type (numpy and ONNX
//            leave both undefined); int -> int wraps (modulo 2^bits);
//            anything -> i1 is `!= 0`; f64 -> f16/bf16 rounds through f32.
//
//===----------------------------------------------------------------------===//

#include "vm/kernels/KernelUtil.h"
#include "vm/kernels/Kernels.h"

#include <cmath>
#include <limits>

namespace nimble::vm::kernels {

namespace {

template <OpCode Op, class T> constexpr bool unarySupports() {
  switch (Op) {
  case OpCode::Neg:
  case OpCode::Abs:
  case OpCode::Relu: return kIsFloat<T> || kIsInt<T>;
  case OpCode::LogicalNot: return kIsBool<T>;
  default: return kIsFloat<T>;
  }
}

template <OpCode Op, class T> T applyUnary(T x) {
  if constexpr (Op == OpCode::Neg) {
    if constexpr (kIsFloat<T>) return -x;
    else return wrapSub<T>(0, x);
  } else if constexpr (Op == OpCode::Abs) {
    if constexpr (kIsFloat<T>) return std::fabs(x);
    else if constexpr (kIsUnsigned<T>) return x;
    else return x < 0 ? wrapSub<T>(0, x) : x;
  } else if constexpr (Op == OpCode::Relu) {
    if constexpr (kIsUnsigned<T>) return x;
    else return x < 0 ? T(0) : x;
  } else if constexpr (Op == OpCode::LogicalNot) {
    return x == 0 ? T(1) : T(0);
  } else if constexpr (Op == OpCode::Exp) {
    return std::exp(x);
  } else if constexpr (Op == OpCode::Log) {
    return std::log(x);
  } else if constexpr (Op == OpCode::Sqrt) {
    return std::sqrt(x);
  } else if constexpr (Op == OpCode::Rsqrt) {
    return T(1) / std::sqrt(x);
  } else if constexpr (Op == OpCode::Tanh) {
    return std::tanh(x);
  } else if constexpr (Op == OpCode::Sigmoid) {
    if (x >= 0) return T(1) / (T(1) + std::exp(-x));
    T e = std::exp(x);
    return e / (T(1) + e);
  } else if constexpr (Op == OpCode::Gelu) {
    // x Phi(x) = 0.5 x erfc(-x / sqrt(2)): erfc keeps the relative accuracy
    // for x << 0, where 1 + erf(x / sqrt(2)) cancels (at x = -5 the f32 form
    // was 10% off); f32 is evaluated in f64 and rounded once. gelu(-inf) is
    // -inf * 0 = NaN, as in PyTorch.
    const double xd = static_cast<double>(x);
    return static_cast<T>(0.5 * xd * std::erfc(-xd * 0.70710678118654752440));
  } else if constexpr (Op == OpCode::Sin) {
    return std::sin(x);
  } else if constexpr (Op == OpCode::Cos) {
    return std::cos(x);
  } else if constexpr (Op == OpCode::Tan) {
    return std::tan(x);
  } else if constexpr (Op == OpCode::Asin) {
    return std::asin(x);
  } else if constexpr (Op == OpCode::Acos) {
    return std::acos(x);
  } else if constexpr (Op == OpCode::Atan) {
    return std::atan(x);
  } else if constexpr (Op == OpCode::Sinh) {
    return std::sinh(x);
  } else if constexpr (Op == OpCode::Cosh) {
    return std::cosh(x);
  } else if constexpr (Op == OpCode::Asinh) {
    return std::asinh(x);
  } else if constexpr (Op == OpCode::Acosh) {
    return std::acosh(x);
  } else if constexpr (Op == OpCode::Atanh) {
    return std::atanh(x);
  } else {
    static_assert(Op == OpCode::Erf, "unhandled unary op");
    // f32 through f64 and one rounding (glibc's erff is up to 1 ulp off;
    // this is the correctly rounded value but at ties, as the native kernels
    // compute it: docs/codegen.md#math).
    return static_cast<T>(std::erf(static_cast<double>(x)));
  }
}

/// Rough cost per element relative to an add, for the parallel threshold.
constexpr int64_t unaryCost(OpCode op) {
  switch (op) {
  case OpCode::Neg: case OpCode::Abs: case OpCode::Relu: case OpCode::LogicalNot: return 1;
  default: return 16;
  }
}

template <OpCode Op> Status unaryImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0];
  Tensor &y = *args.outputs[0];
  return visitType(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!unarySupports<Op, T>()) {
      return Status::error(std::string(opInfo(Op).mnemonic) + " has no kernel for " + sig(x));
    } else {
      const T *in = x.data<T>();
      T *out = y.data<T>();
      parallelRange(args, x.numElements(), unaryCost(Op), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) out[i] = applyUnary<Op, T>(in[i]);
      });
      return Status::success();
    }
  });
}

//===-- cast -------------------------------------------------------------===//

template <class To, class From> To convert(From v) {
  if constexpr (kIsBool<To>) {
    return v != From(0) ? To(1) : To(0);
  } else if constexpr (kIsBool<From>) {
    return v != 0 ? To(1) : To(0);
  } else if constexpr (kIsFloat<From> && kIsInt<To>) {
    if (std::isnan(v)) return To(0);
    // The bounds as From: max() may round up (2^63 in double), so compare
    // with >= against the rounded bound.
    constexpr From lo = static_cast<From>(std::numeric_limits<To>::min());
    constexpr From hi = static_cast<From>(std::numeric_limits<To>::max());
    if (v <= lo) return std::numeric_limits<To>::min();
    if (v >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

Status castImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0];
  Tensor &y = *args.outputs[0];
  return visitType(x.dtype(), [&](auto fromTag) -> Status {
    using From = typename decltype(fromTag)::type;
    return visitType(y.dtype(), [&](auto toTag) -> Status {
      using To = typename decltype(toTag)::type;
      if constexpr (kIsHalfBits<From> || kIsHalfBits<To>) {
        return Status::error("cast has no kernel from " + sig(x) + " to " + sig(y));
      } else {
        const From *in = x.data<From>();
        To *out = y.data<To>();
        parallelRange(args, x.numElements(), 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) out[i] = convert<To, From>(in[i]);
        });
        return Status::success();
      }
    });
  });
}

} // namespace

#define NIMBLE_UNARY_KERNEL(Id)                                                              \
  Status ref##Id(const KernelArgs &args) {                                                   \
    checkOutputShapes(OpCode::Id, args);                                                     \
    return withF32(args, &unaryImpl<OpCode::Id>);                                            \
  }
NIMBLE_UNARY_KERNEL(Neg)
NIMBLE_UNARY_KERNEL(Abs)
NIMBLE_UNARY_KERNEL(Exp)
NIMBLE_UNARY_KERNEL(Log)
NIMBLE_UNARY_KERNEL(Sqrt)
NIMBLE_UNARY_KERNEL(Rsqrt)
NIMBLE_UNARY_KERNEL(Tanh)
NIMBLE_UNARY_KERNEL(Sigmoid)
NIMBLE_UNARY_KERNEL(Relu)
NIMBLE_UNARY_KERNEL(Gelu)
NIMBLE_UNARY_KERNEL(Erf)
NIMBLE_UNARY_KERNEL(LogicalNot)
NIMBLE_UNARY_KERNEL(Sin)
NIMBLE_UNARY_KERNEL(Cos)
NIMBLE_UNARY_KERNEL(Tan)
NIMBLE_UNARY_KERNEL(Asin)
NIMBLE_UNARY_KERNEL(Acos)
NIMBLE_UNARY_KERNEL(Atan)
NIMBLE_UNARY_KERNEL(Sinh)
NIMBLE_UNARY_KERNEL(Cosh)
NIMBLE_UNARY_KERNEL(Asinh)
NIMBLE_UNARY_KERNEL(Acosh)
NIMBLE_UNARY_KERNEL(Atanh)
#undef NIMBLE_UNARY_KERNEL

Status refCast(const KernelArgs &args) {
  checkOutputShapes(OpCode::Cast, args);
  return withF32(args, &castImpl);
}

} // namespace nimble::vm::kernels
