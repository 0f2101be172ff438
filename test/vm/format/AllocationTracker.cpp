//===- AllocationTracker.cpp - Largest single allocation, for Harness.h ---===//
//
// Replaces the global operator new / delete (plain build only: ASan brings
// its own) to record the largest single request. Linked into a test as a
// source file, never through a library, so that the replacement is certain
// to be the one the executable uses.
//
//===----------------------------------------------------------------------===//
#include "test/vm/format/Harness.h"

#include <atomic>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)

namespace nimble::vm::test {
bool allocationsTracked() { return false; }
void resetLargestAllocation() {}
size_t largestAllocation() { return 0; }
} // namespace nimble::vm::test

#else

namespace {
std::atomic<size_t> gLargest{0};
void note(size_t n) {
  size_t cur = gLargest.load(std::memory_order_relaxed);
  while (n > cur && !gLargest.compare_exchange_weak(cur, n)) {
  }
}
} // namespace

namespace nimble::vm::test {
bool allocationsTracked() { return true; }
void resetLargestAllocation() { gLargest = 0; }
size_t largestAllocation() { return gLargest.load(); }
} // namespace nimble::vm::test

void *operator new(size_t n) {
  note(n);
  if (void *p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void *operator new[](size_t n) { return operator new(n); }
void *operator new(size_t n, std::align_val_t a) {
  note(n);
  size_t al = static_cast<size_t>(a);
  size_t rounded = n == 0 ? al : (n + al - 1) / al * al; // aligned_alloc wants a multiple
  if (void *p = std::aligned_alloc(al, rounded)) return p;
  throw std::bad_alloc();
}
void *operator new[](size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, size_t) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete[](void *p, size_t) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, size_t, std::align_val_t) noexcept { std::free(p); }

#endif
