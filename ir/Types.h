//===- Types.h - The types of the Nimble IR ----------------------*- C++ -*-===//
//
// type ::= tensor-type | tuple-type | adt-type | func-type | `storage`
//
//   tensor<2x?xf32>        dims static or `?` (unknown until run time); rank 0
//                          (`tensor<f32>`) is a scalar
//   tuple<T1, T2>          an immutable product value
//   @Tree                  a named algebraic data type declared in the module
//   (T1, T2) -> (R1, R2)   a function type (signatures of functions)
//   storage                a raw memory block from alloc_storage (paper §3.3)
//
// Types are uniqued in a Context and passed by value as a pointer-sized handle,
// so equality is pointer equality. Sub-shaping (paper §3.1): a tensor type is a
// subtype of the same type with `?` in place of some static dims (isSubtypeOf).
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_IR_TYPES_H
#define NIMBLE_IR_TYPES_H

#include "ir/OpTable.h"
#include "ir/ShapeFns.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace nimble::ir {

class Context;

enum class TypeKind : uint8_t { Tensor, Tuple, Adt, Func, Storage };

namespace detail {
struct TypeStorage {
  TypeKind kind = TypeKind::Tensor;
  DType dtype = DType::F32;        // Tensor
  std::vector<int64_t> dims;       // Tensor
  std::string name;                // Adt (without `@`)
  std::vector<const TypeStorage *> elems;   // Tuple elements, Func inputs
  std::vector<const TypeStorage *> results; // Func results
  /// Nesting depth: 1 for tensor, ADT and storage types, 1 + the deepest
  /// element for tuples and function types (cached so that limits are
  /// checked in O(1), before any recursion).
  int depth = 1;
};
} // namespace detail

/// A uniqued type handle; null when default-constructed.
class Type {
public:
  Type() = default;
  explicit Type(const detail::TypeStorage *s) : s_(s) {}

  explicit operator bool() const { return s_ != nullptr; }
  bool operator==(Type o) const { return s_ == o.s_; }
  bool operator!=(Type o) const { return s_ != o.s_; }
  TypeKind kind() const { return s_->kind; }
  bool isTensor() const { return s_ && s_->kind == TypeKind::Tensor; }
  bool isTuple() const { return s_ && s_->kind == TypeKind::Tuple; }
  bool isAdt() const { return s_ && s_->kind == TypeKind::Adt; }
  bool isFunc() const { return s_ && s_->kind == TypeKind::Func; }
  bool isStorage() const { return s_ && s_->kind == TypeKind::Storage; }

  // Tensor accessors.
  DType dtype() const { return s_->dtype; }
  const std::vector<int64_t> &dims() const { return s_->dims; }
  int64_t rank() const { return static_cast<int64_t>(s_->dims.size()); }
  bool hasStaticShape() const;
  TensorSig sig() const { return {s_->dtype, s_->dims}; }

  // Adt accessor.
  const std::string &adtName() const { return s_->name; }

  // Tuple elements / function inputs, and function results.
  std::vector<Type> elems() const;
  std::vector<Type> results() const;

  /// Sub-shaping: true when a value of this type may be used where `super` is
  /// expected (identical, or a tensor whose dims refine super's `?` dims,
  /// element-wise for tuples).
  bool isSubtypeOf(Type super) const;
  /// True when some run-time value could have both types (`?` matches anything).
  bool isCompatibleWith(Type other) const;

  std::string str() const;
  const detail::TypeStorage *impl() const { return s_; }
  /// Nesting depth (see TypeStorage::depth).
  int depth() const { return s_->depth; }

private:
  const detail::TypeStorage *s_ = nullptr;
};

/// Checks `t` against the limits of ir/Limits.h (nesting depth, rank, bytes
/// of a static shape, also inside tuples and function types): empty when it
/// is within them, else why not, as "tensor<...> has rank 65, more than the
/// limit of 64". The parser, type inference and the verifier call it, so
/// that no type past a limit reaches a pass or the bytecode emitter.
std::string checkTypeLimits(Type t);

/// Owns uniqued types and interned strings (file names in locations).
class Context {
public:
  Context();
  ~Context();
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  Type tensor(DType dtype, std::vector<int64_t> dims);
  Type tensor(const TensorSig &sig) { return tensor(sig.dtype, sig.dims); }
  Type tuple(const std::vector<Type> &elems);
  Type adt(const std::string &name);
  Type func(const std::vector<Type> &inputs, const std::vector<Type> &results);
  Type storage();

  /// Returns a pointer to a stable copy of `s`.
  const char *intern(std::string_view s);

  /// A cache another part of ir/ keeps for this Context (Inference.cpp's
  /// relation cache), made on first use and freed with the Context, so that
  /// no entry outlives the types it points to and a process that compiles
  /// many modules holds no memory for the ones it has finished. A Context is
  /// used by one thread at a time, so the cache needs no lock.
  struct Cache {
    virtual ~Cache() = default;
  };
  std::unique_ptr<Cache> &inferenceCache() { return inferenceCache_; }

private:
  std::unique_ptr<Cache> inferenceCache_;
  Type unique(detail::TypeStorage s);
  /// Uniqued by structure (kind, dtype and dims, name, element and result
  /// types, which are uniqued already: compared by pointer), not by the
  /// printed form (issue 23: printing a type to look it up was a third of
  /// type inference).
  struct StructuralHash {
    size_t operator()(const detail::TypeStorage *s) const;
  };
  struct StructuralEq {
    bool operator()(const detail::TypeStorage *a, const detail::TypeStorage *b) const;
  };
  std::unordered_set<const detail::TypeStorage *, StructuralHash, StructuralEq> types_;
  std::vector<std::unique_ptr<detail::TypeStorage>> owned_;
  std::unordered_map<std::string, std::unique_ptr<std::string>> strings_;
};

} // namespace nimble::ir

#endif // NIMBLE_IR_TYPES_H
