//===- Object.cpp - Run-time values: storage, tensors, ADT values --------===//
//
// Objects are destroyed through Object::destroy, which dispatches on the kind
// tag instead of a virtual destructor: the VM's objects stay free of vtables
// (no RTTI needed, one byte of kind), and `Ref<Object>` can still release any
// of them. Storage gives its bytes back to the allocator they came from, so an
// allocator's live-byte statistics are exact.
//
//===----------------------------------------------------------------------===//

#include "vm/Object.h"

#include "ir/Limits.h"
#include "ir/ShapeFns.h"
#include "vm/support/Allocator.h"

#include <cstring>
#include <new>

namespace nimble::vm {

void Object::destroy() {
  switch (kind_) {
  case Kind::Storage: delete static_cast<Storage *>(this); return;
  case Kind::Tensor: delete static_cast<Tensor *>(this); return;
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

int64_t Tensor::numElements() const {
  // Every tensor is made within the limits (makeTensor, AllocTensor, the
  // readers), so the product fits; checked all the same.
  int64_t n = 0;
  bool ok = limits::checkedNumElements(shape_, n);
  assert(ok && "a tensor past the element limit");
  (void)ok;
  return n;
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
  Ref<Storage> storage(new Storage(&alloc, p, bytes, Device::CPU));
  return TensorRef(new Tensor(dtype, std::move(shape), std::move(storage), 0));
}

TensorRef makeScalarI64(int64_t v) {
  TensorRef t = makeTensor(DType::I64, {});
  if (t) std::memcpy(t->rawData(), &v, sizeof v);
  return t;
}

} // namespace nimble::vm
