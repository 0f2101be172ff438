//===- FailAlloc.cpp - Injected allocation failures for tests -------------===//

#include "vm/support/FailAlloc.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace nimble::vm {

namespace {

// States of the hook: not yet read from the environment, off, on.
enum : int { kUnread, kOff, kOn };

std::atomic<int> state{kUnread};
std::atomic<uint64_t> counter{0};
std::atomic<int> suspended{0};
uint64_t failAt = 0; // 0: count only

void printCount() {
  std::fprintf(stderr, "NIMBLE_FAIL_ALLOC: %llu allocations\n",
               static_cast<unsigned long long>(counter.load()));
}

int readState() {
  // No allocation here: this runs inside operator new.
  const char *v = std::getenv("NIMBLE_FAIL_ALLOC");
  if (!v || !*v) return kOff;
  char *end = nullptr;
  unsigned long long k = std::strtoull(v, &end, 10);
  if (*end != '\0') return kOff;
  failAt = k;
  if (k == 0) std::atexit(printCount);
  return kOn;
}

} // namespace

void armAllocationFailures() {
  int expected = kUnread;
  int want = readState();
  state.compare_exchange_strong(expected, want, std::memory_order_acq_rel);
}

bool injectAllocationFailure() {
  if (state.load(std::memory_order_acquire) != kOn) return false; // not armed, or off
  if (suspended.load(std::memory_order_acquire) > 0) return false;
  uint64_t n = counter.fetch_add(1, std::memory_order_relaxed) + 1;
  return failAt != 0 && n == failAt;
}

AllocationFailuresSuspended::AllocationFailuresSuspended() {
  suspended.fetch_add(1, std::memory_order_acq_rel);
}
AllocationFailuresSuspended::~AllocationFailuresSuspended() {
  suspended.fetch_sub(1, std::memory_order_acq_rel);
}

} // namespace nimble::vm
