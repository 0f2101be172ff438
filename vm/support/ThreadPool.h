//===- ThreadPool.h - The kernels' threads (--threads=N) ----------*- C++ -*-===//
#ifndef NIMBLE_VM_THREADPOOL_H
#define NIMBLE_VM_THREADPOOL_H

#include <cstdint>
#include <functional>

namespace nimble::vm {

/// The threads of --threads=N: parallelFor splits [0, n) into contiguous
/// chunks and runs them on N threads, the caller among them, returning when
/// all are done. With one thread everything runs inline.
///
/// The threads are OpenMP's (libgomp), the same team oneDNN runs its
/// primitives on (vm/dispatch/LibraryKernels.cpp sets its size to N): one set of N
/// threads for every kernel, generated, reference or library, so a generated
/// kernel never competes for the cores with oneDNN's workers still spinning
/// after a primitive (issue 12: never more runnable threads than N).
class ThreadPool {
public:
  explicit ThreadPool(unsigned threads);
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return threads_; }
  /// Calls fn(begin, end) over chunks of [0, n); chunks have at least `grain`
  /// elements so tiny loops stay on one thread. A chunk that throws
  /// std::bad_alloc fails the call: parallelFor rethrows it on the caller's
  /// thread once every chunk is done.
  void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)> &fn);
  /// Calls fn(i) for each i in [0, n), n at most size(): each on its own
  /// thread, i on the team's thread i, all at once (work split evenly in
  /// advance, such as a matmul's column blocks: a dynamic schedule would let
  /// the first thread take two blocks while the second is still waking).
  /// std::bad_alloc as in parallelFor.
  void runEach(int64_t n, const std::function<void(int64_t)> &fn);

private:
  unsigned threads_;
};

} // namespace nimble::vm

#endif // NIMBLE_VM_THREADPOOL_H
