//===- Object.h - Run-time values: storage, tensors, ADT values ----*- C++ -*-===//
//
// The VM's registers hold reference-counted objects (paper §4: "objects are
// reference counted ... and passed by reference, ensuring register operations
// are cheap"):
//
//   Storage  a block of bytes on a device, from an Allocator (AllocStorage)
//   Tensor   dtype + shape + (storage, byte offset): dense, row-major,
//            contiguous. Views share storage (reshape, a prefix for
//            upper-bound results, leading-axis slices, constants pointing into
//            the executable's buffer).
//   Adt      a constructor tag and fields (tuples are tag-0 ADT values)
//
// Reference counts are not atomic: objects belong to the interpreter thread;
// kernels running on the thread pool see raw pointers only for the duration
// of a call.
//
// Recycling: the interpreter makes a storage and a few tensors per call of a
// function (its planned arenas and the views into them; on auto-batched
// Tree-LSTM 3 storages and 5 tensors per tree node), and frees them as soon
// as the call returns. A dead Storage or Tensor goes to a free list of its
// thread (Object.cpp) instead of back to the heap, still constructed: a
// tensor keeps its shape's buffer, so Storage::make and Tensor::make reuse
// both and allocate nothing in the steady state. The lists are bounded; what
// does not fit is deleted. An object may die on another thread than the one
// that made it (it joins that thread's list). Seed 000 §4 keeps the
// interpreter's per-instruction overhead small next to the kernels'; these
// objects were 18% of an auto-batched Tree-LSTM run in malloc and free.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_OBJECT_H
#define NIMBLE_VM_OBJECT_H

#include "ir/Limits.h"
#include "ir/OpTable.h"
#include "vm/format/Executable.h"

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace nimble::vm {

class Object {
public:
  enum class Kind : uint8_t { Storage, Tensor, Adt };
  Kind kind() const { return kind_; }
  void retain() { ++refs_; }
  void release() {
    if (--refs_ == 0) destroy();
  }
  uint32_t refCount() const { return refs_; }

protected:
  explicit Object(Kind k) : kind_(k) {}
  ~Object() = default;

private:
  void destroy();
  Kind kind_;
  uint32_t refs_ = 0;
};

/// An intrusive reference to an Object (or subclass).
template <class T> class Ref {
public:
  Ref() = default;
  Ref(T *p) : p_(p) { if (p_) p_->retain(); }
  Ref(const Ref &o) : p_(o.p_) { if (p_) p_->retain(); }
  Ref(Ref &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  template <class U> Ref(const Ref<U> &o) : p_(o.get()) { if (p_) p_->retain(); }
  ~Ref() { if (p_) p_->release(); }
  Ref &operator=(Ref o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  T *get() const { return p_; }
  T *operator->() const { return p_; }
  T &operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  void reset() { Ref().swap(*this); }
  /// Gives up the reference without releasing it (the caller takes it over).
  T *detach() { return std::exchange(p_, nullptr); }
  void swap(Ref &o) noexcept { std::swap(p_, o.p_); }

private:
  T *p_ = nullptr;
};

class Allocator;

class Storage : public Object {
public:
  /// Owned memory from `alloc` (returned to it when the storage dies);
  /// `align` is the alignment it was requested with.
  Storage(Allocator *alloc, void *data, size_t size, Device dev, size_t align = 64)
      : Object(Kind::Storage), alloc_(alloc), data_(data), size_(size), align_(align), device_(dev) {}
  /// Borrowed memory kept alive by `keepAlive` (constants in the executable).
  Storage(const void *data, size_t size, std::shared_ptr<const void> keepAlive)
      : Object(Kind::Storage), data_(const_cast<void *>(data)), size_(size),
        device_(Device::CPU), keepAlive_(std::move(keepAlive)), readOnly_(true) {}
  ~Storage();
  /// As `new Storage(alloc, data, size, dev, align)`, from the thread's free
  /// list when it has one (the same injected allocation failure as `new`).
  static Storage *make(Allocator *alloc, void *data, size_t size, Device dev, size_t align = 64);

  uint8_t *data() const { return static_cast<uint8_t *>(data_); }
  size_t size() const { return size_; }
  Device device() const { return device_; }
  bool readOnly() const { return readOnly_; }
  /// Constants the VM makes itself (a splat's dense form) are read-only
  /// like the executable's own.
  void markReadOnly() { readOnly_ = true; }
  /// Returns the memory to its allocator early (FreeStorage); the object stays
  /// valid with size 0.
  void free();

private:
  friend class Object; // recycling
  Allocator *alloc_ = nullptr;
  void *data_;
  size_t size_;
  size_t align_ = 64;
  Device device_;
  std::shared_ptr<const void> keepAlive_;
  bool readOnly_ = false;
};

class Tensor : public Object {
public:
  Tensor(DType dtype, std::vector<int64_t> shape, Ref<Storage> storage, size_t offset)
      : Object(Kind::Tensor), dtype_(dtype), shape_(std::move(shape)),
        storage_(std::move(storage)), offset_(offset) {}
  /// As `new Tensor(dtype, {dims, dims + rank}, storage, offset)`, from the
  /// thread's free list when it has one: the object and its shape's buffer
  /// are reused (the same injected allocation failure as `new`).
  static Tensor *make(DType dtype, const int64_t *dims, size_t rank, Ref<Storage> storage, size_t offset);
  static Tensor *make(DType dtype, const std::vector<int64_t> &shape, Ref<Storage> storage, size_t offset) {
    return make(dtype, shape.data(), shape.size(), std::move(storage), offset);
  }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(size_t i) const { return shape_[i]; }
  int64_t numElements() const {
    // Every tensor is made within the limits (makeTensor, AllocTensor, the
    // readers), so the product fits; checked all the same.
    int64_t n = 0;
    bool ok = limits::checkedNumElements(shape_.data(), shape_.size(), n);
    assert(ok && "a tensor past the element limit");
    (void)ok;
    return n;
  }
  size_t numBytes() const { return static_cast<size_t>(numElements()) * dtypeSize(dtype_); }
  const Ref<Storage> &storage() const { return storage_; }
  size_t offset() const { return offset_; }
  Device device() const { return storage_->device(); }

  uint8_t *rawData() const { return storage_->data() + offset_; }
  template <class T> T *data() const { return reinterpret_cast<T *>(rawData()); }

  /// Scalar reads for control flow and shapes (any integer or bool dtype;
  /// a u64 above INT64_MAX reads as its bits, negative).
  int64_t scalarInt() const;
  /// Element `i` the same way (shape tensors).
  int64_t intAt(int64_t i) const;
  /// "tensor<2x3xf32>".
  std::string typeString() const;

private:
  friend class Object; // recycling
  DType dtype_;
  std::vector<int64_t> shape_;
  Ref<Storage> storage_;
  size_t offset_;
};

class Adt : public Object {
public:
  Adt(uint32_t tag, std::vector<Ref<Object>> fields)
      : Object(Kind::Adt), tag_(tag), fields_(std::move(fields)) {}
  uint32_t tag() const { return tag_; }
  const std::vector<Ref<Object>> &fields() const { return fields_; }
  /// For replacing a field in place (device results copied to the host).
  std::vector<Ref<Object>> &mutableFields() { return fields_; }

private:
  friend class Object; // destroy() takes the fields apart without recursion
  uint32_t tag_;
  std::vector<Ref<Object>> fields_;
};

using ObjectRef = Ref<Object>;
using TensorRef = Ref<Tensor>;

inline Tensor *asTensor(Object *o) {
  return o && o->kind() == Object::Kind::Tensor ? static_cast<Tensor *>(o) : nullptr;
}
inline Adt *asAdt(Object *o) {
  return o && o->kind() == Object::Kind::Adt ? static_cast<Adt *>(o) : nullptr;
}
inline Storage *asStorage(Object *o) {
  return o && o->kind() == Object::Kind::Storage ? static_cast<Storage *>(o) : nullptr;
}

/// A fresh CPU tensor with its own storage from the default allocator.
TensorRef makeTensor(DType dtype, std::vector<int64_t> shape);
/// A scalar i64 tensor.
TensorRef makeScalarI64(int64_t v);

} // namespace nimble::vm

#endif // NIMBLE_VM_OBJECT_H
