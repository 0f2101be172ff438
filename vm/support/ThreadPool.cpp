//===- ThreadPool.cpp - The kernels' threads (--threads=N) ----------------===//
//
// parallelFor is one OpenMP parallel region of N threads over a few chunks
// per thread, taken dynamically (chunk costs differ: row tiles at the edges,
// rows of different lengths). OpenMP keeps one team per calling thread, and
// oneDNN uses the interpreter thread's: its workers and ours are the same
// threads, spinning briefly between regions (libgomp's default wait policy)
// and then sleeping, so a region that follows a oneDNN primitive starts on
// threads that are already running instead of waking a second set that the
// first still holds the cores from. (The pool this replaced, N - 1 threads of
// its own on a condition variable, measured 0.11 ms per layer_norm call of
// BERT-base at 2 threads, 6x its one-thread time, for that reason.)
//
// A chunk that throws std::bad_alloc (a kernel's scratch vector when memory
// runs out) is caught where it runs, since no exception may leave a parallel
// region; parallelFor rethrows it on the caller's thread after the region.
//
// parallelFor is not reentrant: fn must not call parallelFor (OpenMP would
// run a nested region on one thread, which is correct but serial).
//
//===----------------------------------------------------------------------===//

#include "vm/support/ThreadPool.h"

// No <omp.h>: the region is a pragma, and a build without -fopenmp (the
// libFuzzer targets, build_defs/fuzz.bzl) ignores it and runs the chunks on
// the calling thread, which is correct, only serial.
#include <algorithm>
#include <atomic>
#include <new>

namespace nimble::vm {

ThreadPool::ThreadPool(unsigned threads) : threads_(std::max(threads, 1u)) {}

void ThreadPool::parallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)> &fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (threads_ == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  // A few chunks per thread evens out uneven chunk costs; never below grain.
  const int64_t threads = threads_;
  const int64_t chunk = std::max(grain, (n + 4 * threads - 1) / (4 * threads));
  const int64_t chunks = (n + chunk - 1) / chunk;
  [[maybe_unused]] const int team = static_cast<int>(std::min<int64_t>(threads, chunks));
  std::atomic<bool> allocFailed{false};
#pragma omp parallel for schedule(dynamic, 1) num_threads(team)
  for (int64_t c = 0; c < chunks; ++c) {
    try {
      fn(c * chunk, std::min(n, (c + 1) * chunk));
    } catch (const std::bad_alloc &) {
      allocFailed.store(true, std::memory_order_relaxed);
    }
  }
  // A chunk that ran out of memory (on any thread) fails the whole call, on
  // the caller's thread: the interpreter turns it into its located
  // out-of-memory error.
  if (allocFailed.load()) throw std::bad_alloc();
}

void ThreadPool::runEach(int64_t n, const std::function<void(int64_t)> &fn) {
  if (n <= 0) return;
  if (threads_ == 1 || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  [[maybe_unused]] const int team = static_cast<int>(std::min<int64_t>(threads_, n));
  std::atomic<bool> allocFailed{false};
#pragma omp parallel for schedule(static, 1) num_threads(team)
  for (int64_t i = 0; i < n; ++i) {
    try {
      fn(i);
    } catch (const std::bad_alloc &) {
      allocFailed.store(true, std::memory_order_relaxed);
    }
  }
  if (allocFailed.load()) throw std::bad_alloc();
}

} // namespace nimble::vm
