//===- ThreadPool.h - A simple pool for kernels (--threads=N) -----*- C++ -*-===//
#ifndef NIMBLE_VM_THREADPOOL_H
#define NIMBLE_VM_THREADPOOL_H

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace nimble::vm {

/// A fixed set of worker threads. parallelFor splits [0, n) into contiguous
/// chunks, runs them on the workers and the calling thread, and returns when
/// all are done. With one thread everything runs inline.
class ThreadPool {
public:
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }
  /// Calls fn(begin, end) over chunks of [0, n); chunks have at least `grain`
  /// elements so tiny loops stay on one thread.
  void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)> &fn);

private:
  void workerLoop();
  /// Runs one chunk; false if it threw std::bad_alloc.
  static bool runChunk(const std::function<void(int64_t, int64_t)> &fn, int64_t begin,
                       int64_t end);
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_;
  const std::function<void(int64_t, int64_t)> *job_ = nullptr;
  int64_t n_ = 0, chunk_ = 0, next_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool allocFailed_ = false; // a chunk of the current job ran out of memory
  bool stop_ = false;
};

} // namespace nimble::vm

#endif // NIMBLE_VM_THREADPOOL_H
