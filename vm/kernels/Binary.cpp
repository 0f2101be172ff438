//===- Binary.cpp - Binary element-wise kernels, comparisons, select -----===//
//
// numpy broadcasting over any rank (KernelUtil.h: elementwise()). Choices:
//
//   div      floats: IEEE division. Integers: truncation toward zero (C, TVM
//            and ONNX semantics, not numpy's floor_divide); a zero divisor is
//            an error ("integer division by zero"); INT_MIN / -1 wraps to
//            INT_MIN like every other integer overflow here. Unsigned
//            integers divide as unsigned (numpy's floor_divide there).
//   fmod     floats: std::fmod (exact; the sign of a; fmod(x, 0) and
//            fmod(inf, y) are NaN). Integers: C's %, the remainder of the
//            truncating division (sign of a); a zero divisor is an error
//            like div's; INT_MIN % -1 is 0; unsigned as unsigned.
//   pow      std::pow. Its DTypeRule is Float, so integer pow (and the
//            question of negative integer exponents) cannot reach a kernel;
//            the kernel reports integer operands as unsupported.
//   shift_left / shift_right  integers only; a count >= the width or
//            negative shifts every bit out (0; shift_right of a negative
//            signed value: -1), shift_right is arithmetic for signed types.
//   maximum / minimum propagate NaN (numpy.maximum / numpy.minimum).
//   equal / not_equal on i1 compare truth values.
//
// Errors found inside a parallel loop are collected in an atomic flag and
// reported once the loop is over.
//
//===----------------------------------------------------------------------===//

#include "vm/kernels/KernelUtil.h"
#include "vm/kernels/Kernels.h"

#include <atomic>
#include <cmath>
#include <limits>

namespace nimble::vm::kernels {

namespace {

enum class Fault : int { None = 0, DivByZero };

template <OpCode Op, class T> constexpr bool binarySupports() {
  switch (Op) {
  case OpCode::LogicalAnd:
  case OpCode::LogicalOr: return kIsBool<T>;
  case OpCode::Equal:
  case OpCode::NotEqual: return kIsFloat<T> || kIsInt<T> || kIsBool<T>;
  case OpCode::Pow: return kIsFloat<T>;
  case OpCode::ShiftLeft:
  case OpCode::ShiftRight: return kIsInt<T>;
  default: return kIsFloat<T> || kIsInt<T>;
  }
}

template <OpCode Op> constexpr bool isCompare() {
  return Op == OpCode::Equal || Op == OpCode::NotEqual || Op == OpCode::Less ||
         Op == OpCode::LessEqual || Op == OpCode::Greater || Op == OpCode::GreaterEqual;
}

/// a's bits shifted by s: a count past the width (or negative) shifts every
/// bit out (0, or -1 for a negative signed a shifted right), where C++
/// would be undefined.
template <bool Left, class T> T shiftBits(T a, T s) {
  using U = std::make_unsigned_t<T>;
  constexpr uint64_t kWidth = sizeof(T) * 8;
  bool out = static_cast<uint64_t>(static_cast<U>(s)) >= kWidth;
  if constexpr (!kIsUnsigned<T>) out = out || s < 0;
  if (out) {
    if constexpr (!Left && !kIsUnsigned<T>) return a < 0 ? T(-1) : T(0);
    return T(0);
  }
  const int n = static_cast<int>(s);
  if constexpr (Left) return static_cast<T>(static_cast<U>(static_cast<U>(a) << n));
  else if constexpr (kIsUnsigned<T>) return static_cast<T>(static_cast<U>(a) >> n);
  else return static_cast<T>(a >> n); // arithmetic: C++20 defines it
}

/// Computes `a op b`; sets `fault` instead of invoking undefined behaviour.
template <OpCode Op, class T> T applyBinary(T a, T b, Fault &fault) {
  if constexpr (Op == OpCode::Add) {
    if constexpr (kIsFloat<T>) return a + b;
    else return wrapAdd(a, b);
  } else if constexpr (Op == OpCode::Sub) {
    if constexpr (kIsFloat<T>) return a - b;
    else return wrapSub(a, b);
  } else if constexpr (Op == OpCode::Mul) {
    if constexpr (kIsFloat<T>) return a * b;
    else return wrapMul(a, b);
  } else if constexpr (Op == OpCode::Div) {
    if constexpr (kIsFloat<T>) {
      return a / b;
    } else {
      if (b == 0) {
        fault = Fault::DivByZero;
        return 0;
      }
      if constexpr (!kIsUnsigned<T>)
        if (b == -1) return wrapSub<T>(0, a); // INT_MIN / -1 overflows in C++
      return static_cast<T>(a / b);
    }
  } else if constexpr (Op == OpCode::Fmod) {
    if constexpr (kIsFloat<T>) {
      return std::fmod(a, b);
    } else {
      if (b == 0) {
        fault = Fault::DivByZero;
        return 0;
      }
      if constexpr (!kIsUnsigned<T>)
        if (b == -1) return 0; // INT_MIN % -1 overflows in C++
      return static_cast<T>(a % b);
    }
  } else if constexpr (Op == OpCode::Pow) {
    return std::pow(a, b);
  } else if constexpr (Op == OpCode::ShiftLeft || Op == OpCode::ShiftRight) {
    return shiftBits<Op == OpCode::ShiftLeft, T>(a, b);
  } else if constexpr (Op == OpCode::Maximum) {
    if constexpr (kIsFloat<T>)
      if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
    return a < b ? b : a;
  } else if constexpr (Op == OpCode::Minimum) {
    if constexpr (kIsFloat<T>)
      if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
    return b < a ? b : a;
  } else if constexpr (Op == OpCode::LogicalAnd) {
    return (a != 0 && b != 0) ? 1 : 0;
  } else {
    static_assert(Op == OpCode::LogicalOr, "unhandled binary op");
    return (a != 0 || b != 0) ? 1 : 0;
  }
}

template <OpCode Op, class T> uint8_t applyCompare(T a, T b) {
  if constexpr (kIsBool<T>) {
    a = a != 0;
    b = b != 0;
  }
  if constexpr (Op == OpCode::Equal) return a == b;
  else if constexpr (Op == OpCode::NotEqual) return a != b;
  else if constexpr (Op == OpCode::Less) return a < b;
  else if constexpr (Op == OpCode::LessEqual) return a <= b;
  else if constexpr (Op == OpCode::Greater) return a > b;
  else return a >= b;
}

template <OpCode Op> Status binaryImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0], &y = *args.inputs[1];
  Tensor &z = *args.outputs[0];
  return visitType(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!binarySupports<Op, T>()) {
      return Status::error(std::string(opInfo(Op).mnemonic) + " has no kernel for " + sig(x));
    } else {
      const T *a = x.data<T>(), *b = y.data<T>();
      std::atomic<int> fault{0};
      int64_t cost = Op == OpCode::Pow ? 16 : 1;
      if constexpr (isCompare<Op>()) {
        uint8_t *out = z.data<uint8_t>();
        elementwise<2>(args, {&x, &y}, z, cost, [&](int64_t i, const std::array<int64_t, 2> &o) {
          out[i] = applyCompare<Op, T>(a[o[0]], b[o[1]]);
        });
      } else {
        T *out = z.data<T>();
        elementwise<2>(args, {&x, &y}, z, cost, [&](int64_t i, const std::array<int64_t, 2> &o) {
          Fault f = Fault::None;
          out[i] = applyBinary<Op, T>(a[o[0]], b[o[1]], f);
          if (f != Fault::None) fault.store(static_cast<int>(f), std::memory_order_relaxed);
        });
      }
      switch (static_cast<Fault>(fault.load())) {
      case Fault::None: return Status::success();
      case Fault::DivByZero: return Status::error("integer division by zero");
      }
      return Status::success();
    }
  });
}

/// select moves elements: dispatch on the element size, no widening needed.
Status selectImpl(const KernelArgs &args) {
  const Tensor &c = *args.inputs[0], &x = *args.inputs[1], &y = *args.inputs[2];
  Tensor &z = *args.outputs[0];
  return visitSize(dtypeSize(x.dtype()), [&](auto tag) -> Status {
    using U = typename decltype(tag)::type;
    const uint8_t *cond = c.data<uint8_t>();
    const U *a = x.data<U>(), *b = y.data<U>();
    U *out = z.data<U>();
    elementwise<3>(args, {&c, &x, &y}, z, 1, [&](int64_t i, const std::array<int64_t, 3> &o) {
      out[i] = cond[o[0]] ? a[o[1]] : b[o[2]];
    });
    return Status::success();
  });
}

} // namespace

#define NIMBLE_BINARY_KERNEL(Id)                                                             \
  Status ref##Id(const KernelArgs &args) {                                                   \
    checkOutputShapes(OpCode::Id, args);                                                     \
    return withF32(args, &binaryImpl<OpCode::Id>);                                           \
  }
NIMBLE_BINARY_KERNEL(Add)
NIMBLE_BINARY_KERNEL(Sub)
NIMBLE_BINARY_KERNEL(Mul)
NIMBLE_BINARY_KERNEL(Div)
NIMBLE_BINARY_KERNEL(Pow)
NIMBLE_BINARY_KERNEL(Maximum)
NIMBLE_BINARY_KERNEL(Minimum)
NIMBLE_BINARY_KERNEL(Equal)
NIMBLE_BINARY_KERNEL(NotEqual)
NIMBLE_BINARY_KERNEL(Less)
NIMBLE_BINARY_KERNEL(LessEqual)
NIMBLE_BINARY_KERNEL(Greater)
NIMBLE_BINARY_KERNEL(GreaterEqual)
NIMBLE_BINARY_KERNEL(LogicalAnd)
NIMBLE_BINARY_KERNEL(LogicalOr)
NIMBLE_BINARY_KERNEL(Fmod)
NIMBLE_BINARY_KERNEL(ShiftLeft)
NIMBLE_BINARY_KERNEL(ShiftRight)
#undef NIMBLE_BINARY_KERNEL

Status refSelect(const KernelArgs &args) {
  checkOutputShapes(OpCode::Select, args);
  return selectImpl(args);
}

} // namespace nimble::vm::kernels
