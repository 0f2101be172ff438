//===- Allocator.h - Device memory for storages -------------------*- C++ -*-===//
//
// Every Storage comes from an Allocator. Two exist per device:
//
//   system  aligned malloc (posix_memalign / free), one system call per
//           request;
//   pool    the default: size classes over the system allocator. A freed
//           block goes to its class's free list and the next request of that
//           class takes it back without a system call (a "pool hit"); from
//           64 KiB up a request may take the most recently freed block of a
//           class up to 4x its own instead (Allocator.cpp). This is
//           the run-time half of the Nimble paper's dynamic memory planning
//           (§3.3): the compiler (plan-memory) coalesces and reuses what it
//           can prove, the pool recycles the rest — e.g. LSTM's loop-carried
//           state, whose two buffers alternate through one free list.
//
// Statistics (what `nimble-run --profile` prints): requests and requested
// bytes (what the program asked for: what memory planning reasons about),
// requested bytes live and their peak, pool hits, system allocations, bytes
// held from the system (including cached free blocks) and their peak, and —
// when timing is switched on — the time spent inside allocate/deallocate.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_ALLOCATOR_H
#define NIMBLE_VM_ALLOCATOR_H

#include "vm/format/Executable.h"

#include <cstddef>
#include <cstdint>

namespace nimble::vm {

struct AllocStats {
  uint64_t allocations = 0;       // allocate() calls (requests)
  uint64_t bytesAllocated = 0;    // requested bytes, summed over requests
  uint64_t bytesLive = 0;         // requested bytes not yet deallocated
  uint64_t peakBytes = 0;         // peak of bytesLive
  uint64_t poolHits = 0;          // requests served from a free list
  uint64_t systemAllocations = 0; // requests that reached the system allocator
  uint64_t bytesReserved = 0;     // bytes held from the system (live + cached)
  uint64_t peakReserved = 0;      // peak of bytesReserved
  uint64_t nanoseconds = 0;       // time inside allocate/deallocate (timing on)
};

class Allocator {
public:
  virtual ~Allocator() = default;
  /// Returns memory of at least `size` bytes aligned to `align` (a power of
  /// two), or null when out of memory. size 0 returns a valid unique pointer.
  virtual void *allocate(size_t size, size_t align) = 0;
  /// Gives back a block from allocate(); `size` and `align` are the request's.
  virtual void deallocate(void *p, size_t size, size_t align) = 0;
  virtual Device device() const = 0;
  /// Returns cached free blocks to the system (pool); no-op otherwise.
  virtual void releaseCached() {}
  virtual const char *kindName() const = 0;

  /// A snapshot of the statistics (taken under the allocator's lock).
  virtual AllocStats stats() const = 0;
  /// Zeroes the counters, keeping the live and reserved byte counts (blocks
  /// allocated before the reset are still out).
  virtual void resetStats() = 0;
  /// Measures the time spent in allocate/deallocate (two clock reads a call).
  void setTiming(bool on) { timing_ = on; }

protected:
  bool timing_ = false;
};

enum class AllocatorKind : uint8_t { Pool, System };

/// Selects what defaultAllocator() returns (process-wide; set it before the
/// first allocation: blocks must go back to the allocator they came from, and
/// every Storage remembers its allocator, so switching later is safe but only
/// affects new storages).
void setDefaultAllocatorKind(AllocatorKind k);
AllocatorKind defaultAllocatorKind();

/// The process-wide allocator of `dev` of the selected kind (pool by default).
Allocator &defaultAllocator(Device dev = Device::CPU);
/// The process-wide allocator of `dev` of a given kind.
Allocator &allocatorOf(AllocatorKind k, Device dev = Device::CPU);

/// The size class of a request (pool): the smallest class >= size. Classes
/// are 64-byte multiples up to 1 KiB, then four per power of two (at most 25%
/// rounding); requests above 1 GiB are not pooled (their size is returned).
size_t poolSizeClass(size_t size);

} // namespace nimble::vm

#endif // NIMBLE_VM_ALLOCATOR_H
