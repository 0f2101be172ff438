//===- Allocator.cpp - The default CPU allocator --------------------------===//
//
// Aligned malloc with statistics. `posix_memalign` takes any power-of-two
// alignment that is a multiple of sizeof(void *), and unlike `aligned_alloc`
// it does not require the size to be a multiple of the alignment; we round the
// size up anyway so that a kernel may read whole vectors at the end of a
// buffer without touching another allocation.
//
// Statistics count requested sizes (what the program asked for, which is what
// memory planning reasons about), not the rounded ones. The allocator takes a
// lock: storages die on the interpreter thread, but tools and tests may
// allocate from several threads, and an uncontended mutex is cheap beside
// malloc.
//
//===----------------------------------------------------------------------===//

#include "vm/Allocator.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <mutex>

namespace nimble::vm {

namespace {

class CpuAllocator final : public Allocator {
public:
  void *allocate(size_t size, size_t align) override {
    assert(align != 0 && (align & (align - 1)) == 0 && "alignment must be a power of two");
    align = std::max(align, sizeof(void *));
    // size 0 still gets a unique, freeable block.
    size_t rounded = size == 0 ? align : (size + align - 1) & ~(align - 1);
    if (rounded < size) return nullptr; // overflow
    void *p = nullptr;
    if (posix_memalign(&p, align, rounded) != 0) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    stats_.allocations += 1;
    stats_.bytesAllocated += size;
    stats_.bytesLive += size;
    stats_.peakBytes = std::max(stats_.peakBytes, stats_.bytesLive);
    return p;
  }

  void deallocate(void *p, size_t size) override {
    if (!p) return;
    std::free(p);
    std::lock_guard<std::mutex> lock(mu_);
    // After resetStats() blocks allocated before the reset may come back:
    // never let the live count wrap around.
    stats_.bytesLive -= std::min<uint64_t>(stats_.bytesLive, size);
  }

  Device device() const override { return Device::CPU; }

private:
  std::mutex mu_;
};

} // namespace

Allocator &defaultAllocator(Device dev) {
  // Only the CPU exists in this runtime so far; a CUDA allocator registers
  // here when the CUDA runtime lands (the interpreter checks that a device is
  // available before it asks for its allocator). Leaked on purpose: storages
  // released during static destruction must still find it.
  static CpuAllocator *cpu = new CpuAllocator();
  assert(dev == Device::CPU && "no allocator for this device yet");
  (void)dev;
  return *cpu;
}

} // namespace nimble::vm
