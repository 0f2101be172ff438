//===- KernelUtil.h - Shared machinery of the reference kernels -*- C++ -*-===//
//
// What every kernel family needs, in one place so that each kernel reads as
// its definition:
//
//  * element-type dispatch: visitType() calls a generic lambda with the C++
//    type of a dtype. i1 is `uint8_t` holding 0 or 1 (never `bool`: a byte
//    from a file that is neither 0 nor 1 must not be undefined behaviour);
//    kernels that care read it as `v != 0`.
//  * f16 / bf16: withF32() runs a kernel on f32 copies of the half-precision
//    operands and rounds the results back with the OpTable.h conversions
//    (round to nearest even), so each kernel is written for f32/f64/ints only.
//  * strided iteration: forEachStrided() walks an output shape in row-major
//    order and keeps, for each input, an element offset computed from per-
//    input strides. Broadcasting (stride 0 on broadcast dims), transposition
//    (permuted strides) and slicing (a base offset) are all this one loop.
//  * parallelism: parallelRange() splits big loops over ctx->pool.
//  * shape checks: checkOutputShapes() re-runs the op's shape function on the
//    inputs and asserts the outputs match (the VM guarantees it; asserts
//    catch a broken caller in tests).
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_KERNELS_KERNELUTIL_H
#define NIMBLE_VM_KERNELS_KERNELUTIL_H

#include "vm/Kernel.h"
#include "vm/support/ThreadPool.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace nimble::vm::kernels {

//===-- Element types --------------------------------------------------------===//

template <class T> struct TypeTag { using type = T; };

/// Calls f(TypeTag<T>{}) with T the storage type of `t`: float, double,
/// int8_t, int16_t, int32_t, int64_t, uint8_t (i1), uint16_t (f16 / bf16
/// bits), and for u8..u64 char8_t, char16_t, uint32_t, uint64_t. u8 and u16
/// are char8_t and char16_t (distinct C++ types of the same width and
/// signedness as uint8_t and uint16_t) because those two already stand for
/// i1 and the half-precision bits: a kernel tells all of them apart by type.
template <class F> decltype(auto) visitType(DType t, F &&f) {
  switch (t) {
  case DType::F32: return f(TypeTag<float>{});
  case DType::F64: return f(TypeTag<double>{});
  case DType::I8: return f(TypeTag<int8_t>{});
  case DType::I16: return f(TypeTag<int16_t>{});
  case DType::I32: return f(TypeTag<int32_t>{});
  case DType::I64: return f(TypeTag<int64_t>{});
  case DType::U8: return f(TypeTag<char8_t>{});
  case DType::U16: return f(TypeTag<char16_t>{});
  case DType::U32: return f(TypeTag<uint32_t>{});
  case DType::U64: return f(TypeTag<uint64_t>{});
  case DType::I1: return f(TypeTag<uint8_t>{});
  case DType::F16:
  case DType::BF16: break;
  }
  return f(TypeTag<uint16_t>{});
}

/// Calls f(TypeTag<U>{}) with U an unsigned integer of `bytes` bytes, for
/// kernels that only move elements.
template <class F> decltype(auto) visitSize(size_t bytes, F &&f) {
  switch (bytes) {
  case 1: return f(TypeTag<uint8_t>{});
  case 2: return f(TypeTag<uint16_t>{});
  case 4: return f(TypeTag<uint32_t>{});
  default: break;
  }
  return f(TypeTag<uint64_t>{});
}

template <class T> inline constexpr bool kIsFloat = std::is_floating_point_v<T>;
/// The storage type of i1.
template <class T> inline constexpr bool kIsBool = std::is_same_v<T, uint8_t>;
/// The storage type of f16 / bf16.
template <class T> inline constexpr bool kIsHalfBits = std::is_same_v<T, uint16_t>;
/// The integer dtypes, signed (i8..i64) and unsigned (u8..u64).
template <class T>
inline constexpr bool kIsInt = std::is_integral_v<T> && !kIsBool<T> && !kIsHalfBits<T>;
template <class T> inline constexpr bool kIsUnsigned = kIsInt<T> && std::is_unsigned_v<T>;

/// Wrapping integer arithmetic (numpy's behaviour; signed overflow would be
/// undefined behaviour in C++).
template <class T> T wrapAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <class T> T wrapSub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <class T> T wrapMul(T a, T b) {
  // Promote below-int types to unsigned int, or uint8 * uint8 becomes a
  // signed int multiplication again.
  using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned,
                               std::make_unsigned_t<T>>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}

//===-- Tensors ----------------------------------------------------------------===//

/// Row-major strides in elements.
std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape);
/// Strides of an input of shape `in`, broadcast (numpy rules, right-aligned)
/// to `out`: 0 on dimensions of size 1 that are stretched and on the missing
/// leading dimensions.
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &in,
                                      const std::vector<int64_t> &out);
int64_t product(const std::vector<int64_t> &dims, size_t begin = 0,
                size_t end = static_cast<size_t>(-1));
/// Normalises a possibly negative axis (the shape function already checked it).
inline int64_t normAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

/// Calls body(i, offs) for output elements i in [begin, end) of `shape`
/// (row-major), where offs[k] = sum_d index[d] * strides[k][d].
template <size_t N, class Body>
void forEachStrided(const std::vector<int64_t> &shape,
                    const std::array<const int64_t *, N> &strides, int64_t begin, int64_t end,
                    Body &&body) {
  if (begin >= end) return;
  size_t rank = shape.size();
  std::array<int64_t, N> offs{};
  if (rank == 0) {
    body(int64_t(0), offs);
    return;
  }
  // Multi-index of `begin`.
  std::vector<int64_t> idx(rank, 0);
  int64_t rem = begin;
  for (size_t d = rank; d-- > 0;) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
    for (size_t k = 0; k < N; ++k) offs[k] += idx[d] * strides[k][d];
  }
  const size_t last = rank - 1;
  int64_t i = begin;
  while (i < end) {
    // The innermost dimension is a plain loop.
    int64_t run = std::min(shape[last] - idx[last], end - i);
    for (int64_t j = 0; j < run; ++j, ++i) {
      body(i, offs);
      for (size_t k = 0; k < N; ++k) offs[k] += strides[k][last];
    }
    if (i >= end) break;
    // Carry: rewind the innermost dimension, step the next ones.
    for (size_t k = 0; k < N; ++k) offs[k] -= shape[last] * strides[k][last];
    idx[last] = 0;
    for (size_t d = last; d-- > 0;) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k) offs[k] += strides[k][d];
      if (idx[d] < shape[d]) break;
      for (size_t k = 0; k < N; ++k) offs[k] -= shape[d] * strides[k][d];
      idx[d] = 0;
    }
  }
}

/// Runs fn(begin, end) over [0, n): on the pool when there is one and the
/// work (n * costPerItem, roughly in element operations) is big enough to pay
/// for waking threads, inline otherwise.
void parallelRange(const KernelArgs &args, int64_t n, int64_t costPerItem,
                   const std::function<void(int64_t, int64_t)> &fn);

/// The widest x86 vector instruction set the hand-vectorized reference
/// kernels may use (they carry target attributes; the runtime itself is built
/// for baseline x86-64): what the CPU reports, capped by the environment
/// variable NIMBLE_KERNEL_ISA (`sse2`, `avx2` or `avx512`, read once) so that
/// tests can run every variant on one machine (docs/nimble-run.md,
/// "Environment"). kAvx2 needs AVX2 and FMA, kAvx512 AVX-512F.
enum class KernelIsa { kBaseline, kAvx2, kAvx512 };
KernelIsa kernelIsa();

/// Runs `impl` with every f16 / bf16 input and output replaced by an f32 copy,
/// then rounds the f32 outputs back into the real ones. Without half-precision
/// operands it calls `impl` directly.
Status withF32(const KernelArgs &args, Status (*impl)(const KernelArgs &));

/// Asserts that the outputs have the shapes and dtypes the op's shape function
/// gives for the inputs (compiled out under NDEBUG). Upper-bound ops: the
/// bound, plus the extra 1-D i64 shape output.
void checkOutputShapes(OpCode op, const KernelArgs &args);

/// Attribute accessors by name (the schema order is fixed by Ops.def).
int64_t intAttr(const KernelArgs &args, OpCode op, std::string_view name);
bool boolAttr(const KernelArgs &args, OpCode op, std::string_view name);
double floatAttr(const KernelArgs &args, OpCode op, std::string_view name);
const std::vector<int64_t> &intsAttr(const KernelArgs &args, OpCode op, std::string_view name);

/// Reads element i of an integer (or bool) tensor as int64.
int64_t loadInt(const Tensor &t, int64_t i);

/// "tensor<2x3xf32>" for messages.
std::string sig(const Tensor &t);

} // namespace nimble::vm::kernels



namespace nimble::vm::kernels {

/// The element-wise loop with numpy broadcasting: calls body(i, offs) for every
/// output element i, offs[k] being the element offset into input k. Inputs
/// with the output's shape take the contiguous fast path. Parallel over the
/// output when big enough; `cost` is a rough per-element cost (1 for an add, a
/// few for exp).
template <size_t N, class Body>
void elementwise(const KernelArgs &args, const std::array<const Tensor *, N> &ins,
                 const Tensor &out, int64_t cost, Body &&body) {
  const std::vector<int64_t> &shape = out.shape();
  int64_t n = out.numElements();
  bool same = true;
  for (const Tensor *t : ins) same &= t->shape() == shape;
  if (same) {
    parallelRange(args, n, cost, [&](int64_t b, int64_t e) {
      std::array<int64_t, N> offs;
      for (int64_t i = b; i < e; ++i) {
        offs.fill(i);
        body(i, offs);
      }
    });
    return;
  }
  std::array<std::vector<int64_t>, N> strides;
  std::array<const int64_t *, N> ptrs;
  for (size_t k = 0; k < N; ++k) {
    strides[k] = broadcastStrides(ins[k]->shape(), shape);
    ptrs[k] = strides[k].data();
  }
  parallelRange(args, n, cost, [&](int64_t b, int64_t e) {
    forEachStrided<N>(shape, ptrs, b, e, body);
  });
}

} // namespace nimble::vm::kernels
#endif // NIMBLE_VM_KERNELS_KERNELUTIL_H
