//===- ThreadPool.cpp - A simple pool for kernels (--threads=N) -----------===//
//
// One job at a time, shared through the members under `mu_`:
//
//   job_      the function of the running parallelFor (null when idle)
//   next_     the start of the next unclaimed chunk of [0, n_)
//   pending_  chunks claimed or unclaimed that have not finished yet
//
// Workers sleep on `cv_` until there is an unclaimed chunk (job_ && next_ <
// n_) or the pool stops. Because the wait predicate reads that state under the
// mutex, a notification can never be lost: a worker that was not yet waiting
// when parallelFor published the job sees the job when it checks the
// predicate. The caller claims chunks too, then sleeps on `done_` until
// pending_ reaches zero; only then does it clear job_, so no worker can still
// be inside fn, and the next parallelFor (from the same caller, or any single
// caller) starts from a clean state. `generation_` counts jobs; it makes the
// pool's state easy to inspect in a debugger and catches overlapping calls.
//
// A chunk that throws std::bad_alloc (a kernel's scratch vector when memory
// runs out) is caught where it runs, and parallelFor rethrows it on the
// caller's thread once the job is over: an exception escaping a worker would
// end the process.
//
// parallelFor is not reentrant: fn must not call parallelFor on the same pool,
// and at most one thread may call it at a time (the interpreter thread).
//
//===----------------------------------------------------------------------===//

#include "vm/ThreadPool.h"

#include <algorithm>
#include <cassert>
#include <new>
#include <utility>

namespace nimble::vm {

ThreadPool::ThreadPool(unsigned threads) {
  // The calling thread works too: N threads means N - 1 workers.
  for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread &t : workers_) t.join();
}

void ThreadPool::parallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)> &fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (workers_.empty() || n <= grain) {
    fn(0, n);
    return;
  }
  // A few chunks per thread evens out uneven chunk costs; never below grain.
  int64_t threads = static_cast<int64_t>(size());
  int64_t chunk = std::max(grain, (n + 4 * threads - 1) / (4 * threads));
  int64_t chunks = (n + chunk - 1) / chunk;
  {
    std::lock_guard<std::mutex> lock(mu_);
    assert(job_ == nullptr && "parallelFor: overlapping or nested call");
    job_ = &fn;
    n_ = n;
    chunk_ = chunk;
    next_ = 0;
    pending_ = chunks;
    ++generation_;
  }
  cv_.notify_all();

  std::unique_lock<std::mutex> lock(mu_);
  while (next_ < n_) {
    int64_t begin = next_, end = std::min(n_, begin + chunk_);
    next_ = end;
    lock.unlock();
    bool failed = !runChunk(fn, begin, end);
    lock.lock();
    allocFailed_ |= failed;
    --pending_;
  }
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
  // A chunk that ran out of memory (on any thread) fails the whole call, on
  // the caller's thread, once every chunk is done: the interpreter turns it
  // into its located out-of-memory error.
  if (std::exchange(allocFailed_, false)) throw std::bad_alloc();
}

bool ThreadPool::runChunk(const std::function<void(int64_t, int64_t)> &fn, int64_t begin,
                          int64_t end) {
  try {
    fn(begin, end);
    return true;
  } catch (const std::bad_alloc &) {
    return false;
  }
}

void ThreadPool::workerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || (job_ && next_ < n_); });
    if (stop_) return;
    const std::function<void(int64_t, int64_t)> *fn = job_;
    int64_t begin = next_, end = std::min(n_, begin + chunk_);
    next_ = end;
    lock.unlock();
    bool failed = !runChunk(*fn, begin, end);
    lock.lock();
    allocFailed_ |= failed;
    if (--pending_ == 0) done_.notify_one();
  }
}

} // namespace nimble::vm
