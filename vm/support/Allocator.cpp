//===- Allocator.cpp - System and pooling allocators -----------------------===//
//
// System: aligned malloc. `posix_memalign` takes any power-of-two alignment
// that is a multiple of sizeof(void *); we round the size up to the alignment
// so that a kernel may read whole vectors at the end of a buffer without
// touching another allocation.
//
// Huge pages: a block of 2 MiB or more (kHugePage) that the pool takes from
// the system is aligned to 2 MiB and the whole 2 MiB pages inside it are
// advised into transparent huge pages (madvise MADV_HUGEPAGE; advice only;
// the tail stays in small pages). A CNN's activations at batch 8 are 2-38
// MB, streamed through once per layer, and with 4 KiB pages every 4 KiB is
// a TLB miss: MobileNetV2 at batch 8, one thread, 70.7 against 81.5 CPU ms
// a run on a loaded machine, but level in another run and in wall time
// (docs/perf.md, "Imported CNNs", h-cnn6: not shown to pay; a quiet A/B
// decides). The pool keeps its blocks, so the faults (a
// huge page zeroed, perhaps compacted for) are paid once; the system
// allocator, which frees every block at once, does not advise (faulting
// huge pages on every allocation was slower than small pages here before,
// docs/perf-history.md).
//
// Pool: size classes over posix_memalign (64-byte aligned blocks; requests
// aligned to more than 64 bytes bypass the pool). A class is the request
// rounded up to a multiple of 64 bytes up to 1 KiB, then to one of four steps
// per power of two (2^k * {1.25, 1.5, 1.75, 2}), so rounding wastes at most
// 25%. Freed blocks wait on their class's free list; a request takes the most
// recently freed block of its class (LIFO: warm in cache). A request of at
// least 64 KiB (kReuseMinBytes) looks wider: it takes the most recently
// freed block of its class and of the classes up to 4x its own
// (kReuseSpan), and that block goes back to its own class's list when freed.
// A CNN's activations change size from layer to layer, so a block of the
// request's class was last written a whole run ago and is cold, while the
// block the previous layer just freed is in cache: writing a conv's output
// into a cold block was a third of MobileNetV2's conv time at batch 1
// (docs/perf.md, "Imported CNNs"). The cache is
// bounded (1 GiB by default): beyond it, freed blocks go back to the system.
// This mirrors TVM's pooled allocator and the caching allocators of PyTorch
// and NNC's runtime; the compile-time half of the planning is plan-memory.
//
// Under AddressSanitizer, cached blocks are poisoned, so a use after `kill`
// is still reported even though the memory is not returned to malloc.
//
// Statistics count requested sizes (what the program asked for, which is what
// memory planning reasons about) and, separately, the bytes held from the
// system. Both allocators take a lock: storages die on the interpreter thread,
// but tools and tests may allocate from several threads, and an uncontended
// mutex is cheap beside malloc.
//
//===----------------------------------------------------------------------===//

#include "vm/support/Allocator.h"

#include "vm/support/FailAlloc.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#define NIMBLE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NIMBLE_ASAN 1
#endif
#endif
#ifdef NIMBLE_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace nimble::vm {

namespace {

constexpr size_t kPoolAlign = 64;
constexpr size_t kMaxPooled = size_t(1) << 30;
constexpr size_t kDefaultCacheLimit = size_t(1) << 30;
// Requests of at least kReuseMinBytes may take a block of a class up to
// kReuseSpan times theirs (the file comment).
constexpr size_t kReuseMinBytes = size_t(64) << 10;
constexpr size_t kReuseSpan = 4;

/// One request above this is out of memory without asking the system: no
/// machine this runs on has 1 TiB to give, and larger requests (a corrupt or
/// hostile size below the tensor limit of 2^48 bytes) would make a sanitizer's
/// allocator print a warning, or an overcommitting kernel hand out memory
/// that faults later.
constexpr size_t kMaxSystemRequest = size_t(1) << 40;

/// Blocks of at least this many bytes are aligned to it and advised into
/// transparent huge pages by the pool (the file comment, "Huge pages").
constexpr size_t kHugePage = size_t(2) << 20;

/// posix_memalign with the size rounded up to the alignment; null on failure,
/// overflow, or past kMaxSystemRequest. From kHugePage bytes up, aligned to
/// kHugePage and its whole huge pages advised as such when `huge`.
void *systemAllocate(size_t size, size_t align, size_t &rounded, bool huge = false) {
  if (size > kMaxSystemRequest) return nullptr;
  align = std::max(align, sizeof(void *));
  // size 0 still gets a unique, freeable block.
  rounded = size == 0 ? align : (size + align - 1) & ~(align - 1);
  if (rounded < size) return nullptr; // overflow
  huge = huge && rounded >= kHugePage;
  void *p = nullptr;
  if (posix_memalign(&p, huge ? std::max(align, kHugePage) : align, rounded) != 0) return nullptr;
#ifdef MADV_HUGEPAGE
  if (huge) madvise(p, rounded / kHugePage * kHugePage, MADV_HUGEPAGE); // advice: a refusal is fine
#endif
  return p;
}

/// Adds the elapsed time to `ns` when timing is on.
class Timer {
public:
  Timer(bool on, uint64_t &ns) : ns_(on ? &ns : nullptr) {
    if (ns_) start_ = std::chrono::steady_clock::now();
  }
  ~Timer() {
    if (ns_)
      *ns_ += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now() - start_)
                                        .count());
  }

private:
  uint64_t *ns_;
  std::chrono::steady_clock::time_point start_;
};

class AllocatorBase : public Allocator {
public:
  explicit AllocatorBase(Device dev) : dev_(dev) {}
  Device device() const override { return dev_; }
  AllocStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void resetStats() override {
    std::lock_guard<std::mutex> lock(mu_);
    AllocStats fresh;
    fresh.bytesLive = fresh.peakBytes = stats_.bytesLive;
    fresh.bytesReserved = fresh.peakReserved = stats_.bytesReserved;
    stats_ = fresh;
  }

protected:
  // Under mu_.
  void noteAllocate(size_t size) {
    stats_.allocations += 1;
    stats_.bytesAllocated += size;
    stats_.bytesLive += size;
    stats_.peakBytes = std::max(stats_.peakBytes, stats_.bytesLive);
  }
  void noteDeallocate(size_t size) {
    // After resetStats() blocks allocated before the reset may come back:
    // never let a count wrap around.
    stats_.bytesLive -= std::min<uint64_t>(stats_.bytesLive, size);
  }
  void noteReserve(size_t bytes) {
    stats_.systemAllocations += 1;
    stats_.bytesReserved += bytes;
    stats_.peakReserved = std::max(stats_.peakReserved, stats_.bytesReserved);
  }
  void noteRelease(size_t bytes) { stats_.bytesReserved -= std::min<uint64_t>(stats_.bytesReserved, bytes); }

  /// One request served by the system allocator, with its statistics.
  void *allocateFromSystem(size_t size, size_t align) {
    size_t rounded;
    void *p = systemAllocate(size, align, rounded);
    if (!p) return nullptr;
    noteAllocate(size);
    noteReserve(rounded);
    return p;
  }
  /// Frees a block from allocateFromSystem(size, align), with its statistics.
  void freeToSystem(void *p, size_t size, size_t align) {
    std::free(p);
    noteDeallocate(size);
    align = std::max(align, sizeof(void *));
    noteRelease(size == 0 ? align : (size + align - 1) & ~(align - 1));
  }

  mutable std::mutex mu_;
  AllocStats stats_;
  Device dev_;
};

class SystemAllocator final : public AllocatorBase {
public:
  using AllocatorBase::AllocatorBase;
  const char *kindName() const override { return "system"; }

  void *allocate(size_t size, size_t align) override {
    assert(align != 0 && (align & (align - 1)) == 0 && "alignment must be a power of two");
    if (injectAllocationFailure()) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    Timer t(timing_, stats_.nanoseconds);
    return allocateFromSystem(size, align);
  }

  void deallocate(void *p, size_t size, size_t align) override {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mu_);
    Timer t(timing_, stats_.nanoseconds);
    freeToSystem(p, size, align);
  }
};

class PoolAllocator final : public AllocatorBase {
public:
  using AllocatorBase::AllocatorBase;
  const char *kindName() const override { return "pool"; }

  void *allocate(size_t size, size_t align) override {
    assert(align != 0 && (align & (align - 1)) == 0 && "alignment must be a power of two");
    if (injectAllocationFailure()) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    Timer t(timing_, stats_.nanoseconds);
    if (align > kPoolAlign || size > kMaxPooled) return allocateFromSystem(size, align);
    size_t cls = poolSizeClass(size);
    assert(classIndex(cls) < kNumClasses && classSize(classIndex(cls)) == cls &&
           "a size class without a list");
    const size_t own = classIndex(cls);
    size_t pick = own;
    if (cls >= kReuseMinBytes) {
      // The most recently freed block among the classes [cls, 4 cls].
      for (size_t i = own; i < kNumClasses && classSize(i) <= kReuseSpan * cls; ++i)
        if (!free_[i].empty() && (free_[pick].empty() || freedAt_[i].back() > freedAt_[pick].back())) pick = i;
    }
    if (pick != own) {
      // Remember the block's class for deallocate (which is given the
      // request's size); without room for that, take the request's class.
      try {
        larger_.emplace(free_[pick].back(), classSize(pick));
      } catch (const std::bad_alloc &) {
        pick = own;
      }
    }
    std::vector<void *> &list = free_[pick];
    if (!list.empty()) {
      void *p = list.back();
      list.pop_back();
      freedAt_[pick].pop_back();
      const size_t held = classSize(pick);
      cached_ -= held;
      UNPOISON(p, held);
      noteAllocate(size);
      stats_.poolHits += 1;
      return p;
    }
    size_t rounded;
    void *p = systemAllocate(cls, kPoolAlign, rounded, true);
    if (!p) {
      // Out of memory: give the cache back and try once more.
      releaseLocked();
      p = systemAllocate(cls, kPoolAlign, rounded, true);
      if (!p) return nullptr;
    }
    noteAllocate(size);
    noteReserve(cls);
    return p;
  }

  void deallocate(void *p, size_t size, size_t align) override {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mu_);
    Timer t(timing_, stats_.nanoseconds);
    if (align > kPoolAlign || size > kMaxPooled) return freeToSystem(p, size, align);
    noteDeallocate(size);
    size_t cls = poolSizeClass(size);
    if (!larger_.empty()) { // a block of a larger class (allocate)
      auto it = larger_.find(p);
      if (it != larger_.end()) {
        cls = it->second;
        larger_.erase(it);
      }
    }
    if (cached_ + cls > cacheLimit_) {
      std::free(p);
      noteRelease(cls);
      return;
    }
    // Caching needs a free-list slot, which may itself fail to allocate:
    // then the block goes back to the system (deallocate runs in
    // destructors, where an exception would end the process).
    try {
      // The stamp first: if the block's slot then fails, the stamp is taken
      // back and the two lists stay in step. (Reserving size() + 1 before
      // each push, as this once did, grows a vector by one element a time:
      // a run that frees 100,000 blocks of a class copied the list 100,000
      // times, quadratic; geometric growth is push_back's.)
      const size_t i = classIndex(cls);
      freedAt_[i].push_back(frees_ + 1);
      try {
        free_[i].push_back(p);
      } catch (const std::bad_alloc &) {
        freedAt_[i].pop_back();
        throw;
      }
      ++frees_;
    } catch (const std::bad_alloc &) {
      std::free(p);
      noteRelease(cls);
      return;
    }
    POISON(p, cls);
    cached_ += cls;
  }

  void releaseCached() override {
    std::lock_guard<std::mutex> lock(mu_);
    releaseLocked();
  }

private:
  void releaseLocked() {
    for (size_t i = 0; i < free_.size(); ++i) {
      std::vector<void *> &blocks = free_[i];
      const size_t cls = classSize(i);
      for (void *p : blocks) {
        UNPOISON(p, cls);
        std::free(p);
        noteRelease(cls);
      }
      blocks.clear();
      freedAt_[i].clear();
    }
    cached_ = 0;
  }

  // Free lists by size class (poolSizeClass): 64-byte steps to 1 KiB
  // (16 classes), then four per power of two up to kMaxPooled (2^30: 80
  // more). An array, not a map: the list of a class is found by arithmetic
  // (a hash lookup per allocation was 0.5% of Tree-LSTM's time).
  static constexpr size_t kNumClasses = 16 + 4 * 20;
  static size_t classIndex(size_t cls) {
    if (cls <= 1024) return cls / 64 - 1;
    size_t k = 63 - static_cast<size_t>(__builtin_clzll(static_cast<unsigned long long>(cls - 1)));
    return 16 + (k - 10) * 4 + (cls >> (k - 2)) - 5;
  }
  static size_t classSize(size_t index) {
    if (index < 16) return (index + 1) * 64;
    size_t j = index - 16, k = 10 + j / 4;
    return (j % 4 + 5) << (k - 2);
  }
  std::array<std::vector<void *>, kNumClasses> free_;
  // Per free block, in step with free_: when it was freed (a count of
  // deallocations), to find the most recently freed of several classes.
  std::array<std::vector<uint64_t>, kNumClasses> freedAt_;
  uint64_t frees_ = 0;
  // Live blocks handed out for a smaller class's request, by address: their
  // own class (a few at a time; deallocate looks here only when non-empty).
  std::unordered_map<void *, size_t> larger_;
  size_t cached_ = 0;
  size_t cacheLimit_ = kDefaultCacheLimit;
};

std::atomic<AllocatorKind> gKind{AllocatorKind::Pool};

} // namespace

size_t poolSizeClass(size_t size) {
  if (size > kMaxPooled) return size;
  if (size <= 1024) return std::max<size_t>(64, (size + 63) & ~size_t(63));
  // 2^k < size <= 2^(k+1): steps of 2^(k-2).
  size_t k = 63 - static_cast<size_t>(__builtin_clzll(static_cast<unsigned long long>(size - 1)));
  size_t step = size_t(1) << (k - 2);
  return (size + step - 1) & ~(step - 1);
}

void setDefaultAllocatorKind(AllocatorKind k) { gKind.store(k); }
AllocatorKind defaultAllocatorKind() { return gKind.load(); }

Allocator &allocatorOf(AllocatorKind k, Device dev) {
  // Only the CPU has allocators in this runtime; the interpreter refuses
  // other devices before it asks. Leaked on purpose: storages released during
  // static destruction must still find their allocator.
  static SystemAllocator *system = new SystemAllocator(Device::CPU);
  static PoolAllocator *pool = new PoolAllocator(Device::CPU);
  assert(dev == Device::CPU && "no allocator for this device");
  (void)dev;
  return k == AllocatorKind::Pool ? static_cast<Allocator &>(*pool) : *system;
}

Allocator &defaultAllocator(Device dev) { return allocatorOf(gKind.load(), dev); }

} // namespace nimble::vm
