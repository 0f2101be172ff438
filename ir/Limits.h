//===- Limits.h - The limits every tool enforces, and checked sizes -*- C++ -*-===//
//
// One list of the limits that the IR (parser, verifier), the passes, the
// bytecode format and the VM share, so that what `nimble-opt` accepts
// `nimblec` compiles and `nimble-run` loads. docs/LangRef.md ("Limits") lists
// each with the error a program past it gets.
//
// Why limits at all: each bounds either a recursion over something a user
// writes (so that no input can overflow the C++ stack: a tuple type nested
// 300,000 deep, a literal of rank 20,000), or a count that sizes memory
// before the work is done (split sections, results, registers), or a size
// that must be representable (a tensor's byte count in a signed 64-bit
// integer, with room for offsets and alignment).
//
// The second half is the one helper through which products and sums of
// dims, strides, element sizes, offsets and byte counts are computed: every
// function reports overflow instead of wrapping (signed overflow is undefined
// behaviour in C++).
//
// Header only and dependency free: the runtime (vm/, nimble-run) links no
// compiler code, and both sides include this file (//ir:limits).
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_IR_LIMITS_H
#define NIMBLE_IR_LIMITS_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace nimble::limits {

//===-- Nesting (bounds every recursion over user input) --------------------===//

/// Nesting of types: `tuple<tuple<tensor<f32>>>` is 3 levels (a tensor, an
/// ADT name and `storage` are 1). Function types count like tuples.
inline constexpr int kMaxTypeDepth = 32;
/// Nesting of `[` in an `--input` tensor literal equals its rank: bounded by
/// kMaxRank. Nesting of ADT values read by nimble-run (`Cons(1, Cons(...))`).
inline constexpr int kMaxValueDepth = 10000;
/// Default bound on nested calls at run time (nimble-run --max-call-depth).
inline constexpr uint32_t kDefaultMaxCallDepth = 10000;

//===-- Tensors -------------------------------------------------------------===//

/// Dimensions of one tensor (types, literals, run-time shapes, --input).
inline constexpr uint32_t kMaxRank = 64;
/// Bytes of one tensor (static types at compile time, every tensor at run
/// time): 2^48, the virtual address space of x86-64 and AArch64. Anything
/// larger can never be allocated, and sums of a few such sizes still fit in
/// an int64.
inline constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;
/// Elements of one tensor: at most kMaxTensorBytes (each element takes at
/// least one byte).
inline constexpr int64_t kMaxTensorElements = kMaxTensorBytes;

//===-- Counts ---------------------------------------------------------------===//

/// Results of one operation (`split` sections, a call's results) and values
/// of one fused kernel.
inline constexpr uint32_t kMaxResults = 1u << 16;
/// Registers of one VM function (values live at once in a function).
inline constexpr uint32_t kMaxRegisters = 1u << 20;
/// Members (operations) of one fused kernel.
inline constexpr uint32_t kMaxKernelMembers = 4096;
/// Values of one fused kernel (inputs plus member results).
inline constexpr uint32_t kMaxKernelValues = kMaxResults;

//===-- Checked arithmetic ---------------------------------------------------===//

/// a * b into `out`; false (out unspecified) on overflow.
[[nodiscard]] inline bool checkedMul(int64_t a, int64_t b, int64_t &out) {
  return !__builtin_mul_overflow(a, b, &out);
}
/// a + b into `out`; false on overflow.
[[nodiscard]] inline bool checkedAdd(int64_t a, int64_t b, int64_t &out) {
  return !__builtin_add_overflow(a, b, &out);
}
[[nodiscard]] inline bool checkedMul(uint64_t a, uint64_t b, uint64_t &out) {
  return !__builtin_mul_overflow(a, b, &out);
}
[[nodiscard]] inline bool checkedAdd(uint64_t a, uint64_t b, uint64_t &out) {
  return !__builtin_add_overflow(a, b, &out);
}

/// The element count of concrete dims `dims[0..rank)`: false on a negative
/// dim, on overflow, or past kMaxTensorElements.
[[nodiscard]] inline bool checkedNumElements(const int64_t *dims, size_t rank, int64_t &n) {
  n = 1;
  bool empty = false;
  for (size_t i = 0; i < rank; ++i) {
    if (dims[i] < 0) return false;
    empty |= dims[i] == 0;
  }
  // An empty tensor has 0 elements whatever its other dims (the product in
  // any order: 2^40 x 2^40 x 0 must not count as an overflow).
  if (empty) return n = 0, true;
  for (size_t i = 0; i < rank; ++i)
    if (!checkedMul(n, dims[i], n)) return false;
  return n <= kMaxTensorElements;
}
[[nodiscard]] inline bool checkedNumElements(const std::vector<int64_t> &dims, int64_t &n) {
  return checkedNumElements(dims.data(), dims.size(), n);
}

/// Bytes of a dense tensor of `dims` with elements of `elemSize` bytes: false
/// on a negative dim, on overflow, or past kMaxTensorBytes.
[[nodiscard]] inline bool checkedByteSize(const std::vector<int64_t> &dims, int64_t elemSize,
                                          int64_t &bytes) {
  int64_t n = 0;
  return checkedNumElements(dims, n) && checkedMul(n, elemSize, bytes) &&
         bytes <= kMaxTensorBytes;
}

/// The static element count of `dims` where a dim may be unknown (negative,
/// e.g. `?`): unknown dims count as 1. False on overflow or past the limit.
/// (A static bound: the tensor has at least this many elements unless some
/// unknown dim is 0.)
[[nodiscard]] inline bool checkedStaticElements(const std::vector<int64_t> &dims, int64_t &n) {
  n = 1;
  for (int64_t d : dims)
    if (d == 0) return n = 0, true;
  for (int64_t d : dims)
    if (d > 0 && !checkedMul(n, d, n)) return false;
  return n <= kMaxTensorElements;
}

} // namespace nimble::limits

#endif // NIMBLE_IR_LIMITS_H
