//===- Object.cpp - Run-time values: storage, tensors, ADT values --------===//
//
// Objects are destroyed through Object::destroy, which dispatches on the kind
// tag instead of a virtual destructor: the VM's objects stay free of vtables
// (no RTTI needed, one byte of kind), and `Ref<Object>` can still release any
// of them. Storage gives its bytes back to the allocator they came from, so an
// allocator's live-byte statistics are exact.
//
// Storages and tensors are recycled (Object.h): destroy() gives a storage
// its bytes back and drops a tensor's storage, then keeps the object, still
// constructed, on a bounded free list of the thread; make() takes one from
// there. Under AddressSanitizer an object on a list is poisoned, so a use
// after its release is still reported. The lists live in a thread_local
// whose destructor deletes what they hold; an object that dies after that
// (a static's, at exit) is deleted directly.
//
//===----------------------------------------------------------------------===//

#include "vm/Object.h"

#include "ir/Limits.h"
#include "ir/ShapeFns.h"
#include "vm/support/Allocator.h"
#include "vm/support/FailAlloc.h"

#include <cstring>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define NIMBLE_OBJECT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NIMBLE_OBJECT_ASAN 1
#endif
#endif
#ifdef NIMBLE_OBJECT_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace nimble::vm {

namespace {
/// Dead objects of one kind, kept constructed for reuse. 4,096 covers the
/// objects an auto-batched run frees between two launches at batch 64
/// (a level of Tree-LSTM's leaves: 1,344 nodes, 3 storages and 3 tensors
/// each, are the largest burst); a few hundred KB per thread at most.
template <class T> struct FreeList {
  static constexpr size_t kCapacity = 4096;
  std::vector<T *> items; // reserved to kCapacity at the first push
  T *pop() {
    if (items.empty()) return nullptr;
    T *o = items.back();
    items.pop_back();
    UNPOISON(o, sizeof(T));
    return o;
  }
  /// False when full, or when the list cannot get its memory (this runs in
  /// destructors: the object is then deleted instead).
  bool push(T *o) noexcept {
    if (items.capacity() == 0) {
      try {
        items.reserve(kCapacity);
      } catch (const std::bad_alloc &) {
        return false;
      }
    }
    if (items.size() == kCapacity) return false;
    POISON(o, sizeof(T));
    items.push_back(o);
    return true;
  }
  ~FreeList() {
    while (T *o = pop()) delete o;
  }
};
struct FreeLists {
  FreeList<Storage> storages;
  FreeList<Tensor> tensors;
  ~FreeLists();
};
// Trivially destructible: readable after `freeLists` is gone (at thread exit).
thread_local bool freeListsGone = false;
thread_local FreeLists freeLists;
FreeLists::~FreeLists() { freeListsGone = true; }
} // namespace

Storage *Storage::make(Allocator *alloc, void *data, size_t size, Device dev, size_t align) {
  if (!freeListsGone)
    if (Storage *s = freeLists.storages.pop()) {
      // A recycled object counts as an allocation, like the `new` it saves.
      if (injectAllocationFailure()) {
        freeLists.storages.push(s);
        throw std::bad_alloc();
      }
      s->alloc_ = alloc;
      s->data_ = data;
      s->size_ = size;
      s->align_ = align;
      s->device_ = dev;
      s->readOnly_ = false;
      return s;
    }
  return new Storage(alloc, data, size, dev, align);
}

Tensor *Tensor::make(DType dtype, const int64_t *dims, size_t rank, Ref<Storage> storage, size_t offset) {
  if (!freeListsGone)
    if (Tensor *t = freeLists.tensors.pop()) {
      if (injectAllocationFailure()) {
        freeLists.tensors.push(t);
        throw std::bad_alloc();
      }
      try {
        t->shape_.assign(dims, dims + rank); // the buffer of its last shape: no allocation up to its rank
      } catch (const std::bad_alloc &) {
        freeLists.tensors.push(t); // not lost: back to the list
        throw;
      }
      t->dtype_ = dtype;
      t->storage_ = std::move(storage);
      t->offset_ = offset;
      return t;
    }
  return new Tensor(dtype, std::vector<int64_t>(dims, dims + rank), std::move(storage), offset);
}

void Object::destroy() {
  switch (kind_) {
  case Kind::Storage: {
    auto *s = static_cast<Storage *>(this);
    s->free();
    if (freeListsGone || !freeLists.storages.push(s)) delete s;
    return;
  }
  case Kind::Tensor: {
    auto *t = static_cast<Tensor *>(this);
    // Its storage dies here when this was the last view of it.
    t->storage_.reset();
    if (freeListsGone || !freeLists.tensors.push(t)) delete t;
    else
      // LeakSanitizer finds no pointers in poisoned memory: the shape's
      // buffer, kept for the next use, stays visibly owned (the fuzzers'
      // leak checks saw it as leaked).
      UNPOISON(&t->shape_, sizeof(t->shape_));
    return;
  }
  case Kind::Adt: break;
  }
  // ADT values nest as deep as the data (a list of a million elements):
  // recursion through ~Adt would overflow the C++ stack. A worklist takes
  // over each field whose last reference this is, and deletes it in turn.
  // This runs in destructors, where an exception ends the process: if the
  // worklist cannot grow (out of memory), that one field is destroyed
  // recursively instead (its own worklist, usually small; deep recursion only
  // when memory has run out on a deep value).
  std::vector<Object *> work;
  for (Object *o = this;;) {
    if (o->kind_ != Kind::Adt) {
      o->destroy();
    } else {
      auto *a = static_cast<Adt *>(o);
      for (Ref<Object> &f : a->fields_)
        if (f && f->refs_ == 1) {
          Object *p = f.detach();
          p->refs_ = 0;
          try {
            work.push_back(p);
          } catch (const std::bad_alloc &) {
            p->destroy();
          }
        }
      delete a; // the remaining fields are shared: releasing them frees nothing
    }
    if (work.empty()) break;
    o = work.back();
    work.pop_back();
  }
}

Storage::~Storage() { free(); }

void Storage::free() {
  // Borrowed memory (constants) has no allocator; dropping `keepAlive_` is all
  // there is to release.
  if (alloc_ && data_) alloc_->deallocate(data_, size_, align_);
  alloc_ = nullptr;
  data_ = nullptr;
  size_ = 0;
  keepAlive_.reset();
}

int64_t Tensor::scalarInt() const {
  assert(numElements() >= 1 && "scalarInt of an empty tensor");
  return intAt(0);
}

int64_t Tensor::intAt(int64_t i) const {
  const uint8_t *p = rawData() + static_cast<size_t>(i) * dtypeSize(dtype_);
  switch (dtype_) {
  case DType::I1: return *p != 0;
  case DType::I8: return static_cast<int8_t>(*p);
  case DType::I32: {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  case DType::I64:
  case DType::U64: { // above INT64_MAX: the bits
    int64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  case DType::I16: {
    int16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  case DType::U8: return *p;
  case DType::U16: {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  case DType::U32: {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  default: break;
  }
  assert(false && "scalarInt of a floating-point tensor");
  return 0;
}

std::string Tensor::typeString() const { return formatSig({dtype_, shape_}); }

TensorRef makeTensor(DType dtype, std::vector<int64_t> shape) {
#ifndef NDEBUG
  for (int64_t d : shape) assert(d >= 0 && "makeTensor with a negative dimension");
#endif
  // Past the size limit (ir/Limits.h) no allocator could serve the request:
  // the same answer as out of memory, without a wrapped size.
  int64_t checkedBytes = 0;
  if (!limits::checkedByteSize(shape, static_cast<int64_t>(dtypeSize(dtype)), checkedBytes))
    return TensorRef();
  size_t bytes = static_cast<size_t>(checkedBytes);
  Allocator &alloc = defaultAllocator(Device::CPU);
  // 64 bytes: a cache line and the widest vector register (AVX-512), the same
  // alignment the executable gives its constants.
  void *p = alloc.allocate(bytes, 64);
  if (!p) return TensorRef();
  Ref<Storage> storage(Storage::make(&alloc, p, bytes, Device::CPU));
  return TensorRef(Tensor::make(dtype, shape, std::move(storage), 0));
}

TensorRef makeScalarI64(int64_t v) {
  TensorRef t = makeTensor(DType::I64, {});
  if (t) std::memcpy(t->rawData(), &v, sizeof v);
  return t;
}

} // namespace nimble::vm
