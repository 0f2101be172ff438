//===- Allocator.h - Device memory for storages -------------------*- C++ -*-===//
//
// Every Storage comes from an Allocator. The default CPU allocator is aligned
// malloc with statistics (allocations, bytes, peak bytes) that
// `nimble-run --profile` reports; the pooling allocator (size classes, reuse
// of freed blocks; NNC's and the paper's "dynamic memory planning" at run
// time) registers beside it later.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_ALLOCATOR_H
#define NIMBLE_VM_ALLOCATOR_H

#include "vm/Executable.h"

#include <cstddef>
#include <cstdint>

namespace nimble::vm {

struct AllocStats {
  uint64_t allocations = 0;  // calls to allocate
  uint64_t bytesAllocated = 0;
  uint64_t bytesLive = 0;
  uint64_t peakBytes = 0;
  uint64_t poolHits = 0;     // allocations served from a pool
};

class Allocator {
public:
  virtual ~Allocator() = default;
  /// Returns memory of at least `size` bytes aligned to `align` (a power of
  /// two), or null when out of memory. size 0 returns a valid unique pointer.
  virtual void *allocate(size_t size, size_t align) = 0;
  virtual void deallocate(void *p, size_t size) = 0;
  virtual Device device() const = 0;
  const AllocStats &stats() const { return stats_; }
  void resetStats() { stats_ = AllocStats{}; stats_.bytesLive = 0; }

protected:
  AllocStats stats_;
};

/// The process-wide default allocator of `dev` (CPU: aligned malloc).
Allocator &defaultAllocator(Device dev = Device::CPU);

} // namespace nimble::vm

#endif // NIMBLE_VM_ALLOCATOR_H
