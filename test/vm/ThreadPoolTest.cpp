//===- ThreadPoolTest.cpp - parallelFor coverage, reuse and real threads -===//

#include "vm/support/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <new>
#include <set>
#include <thread>
#include <vector>

using namespace nimble::vm;

namespace {

/// Every index of [0, n) visited exactly once, in chunks of at least `grain`
/// (except the last).
void checkCover(ThreadPool &pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int64_t> smallChunks{0};
  pool.parallelFor(n, grain, [&](int64_t b, int64_t e) {
    ASSERT_LE(0, b);
    ASSERT_LT(b, e);
    ASSERT_LE(e, n);
    if (e - b < grain && e != n) ++smallChunks;
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
  });
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i << " of " << n;
  EXPECT_EQ(smallChunks.load(), 0);
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 7, 100, 1000, 100003})
      for (int64_t grain : {1, 3, 64, 5000}) checkCover(pool, n, grain);
  }
}

TEST(ThreadPool, ReusableAcrossManyCalls) {
  // Back-to-back jobs are where lost wake-ups and stale state would show.
  ThreadPool pool(4);
  std::atomic<int64_t> total{0};
  for (int round = 0; round < 2000; ++round)
    pool.parallelFor(64, 1, [&](int64_t b, int64_t e) { total += e - b; });
  EXPECT_EQ(total.load(), 2000 * 64);
}

TEST(ThreadPool, SmallJobsRunInlineOnTheCaller) {
  ThreadPool pool(4);
  std::set<std::thread::id> ids;
  pool.parallelFor(10, 16, [&](int64_t, int64_t) { ids.insert(std::this_thread::get_id()); });
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(*ids.begin(), std::this_thread::get_id());
}

TEST(ThreadPool, WorkersReallyRunChunks) {
  // Each chunk waits (up to 20 s) until a second thread is inside a chunk:
  // with a working pool that happens at once; if only the caller ran chunks,
  // the wait times out and the test fails.
  ThreadPool pool(3);
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<bool> sawTwo{false};
  pool.parallelFor(4, 1, [&](int64_t, int64_t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
      if (ids.size() >= 2) sawTwo = true;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!sawTwo && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  EXPECT_TRUE(sawTwo.load());
  EXPECT_GE(ids.size(), 2u);
}

TEST(ThreadPool, RunEachCallsEveryIndexOnceOnItsOwnThread) {
  // runEach(n) with n <= size(): every index once, each on a different
  // thread, all at once (each call waits, up to 20 s, until all n are
  // inside: a schedule that ran two indices on one thread would time out).
  for (unsigned threads : {1u, 2u, 3u}) {
    ThreadPool pool(threads);
    for (int64_t n = 0; n <= threads; ++n) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::mutex mu;
      std::set<std::thread::id> ids;
      std::atomic<int64_t> inside{0};
      std::atomic<bool> allInside{n == 0};
      pool.runEach(n, [&](int64_t i) {
        ASSERT_LE(0, i);
        ASSERT_LT(i, n);
        hits[static_cast<size_t>(i)]++;
        {
          std::lock_guard<std::mutex> lock(mu);
          ids.insert(std::this_thread::get_id());
        }
        if (++inside == n) allInside = true;
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!allInside && std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
      });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1);
      EXPECT_TRUE(allInside.load()) << threads << " threads, n = " << n;
      EXPECT_EQ(ids.size(), static_cast<size_t>(n));
    }
  }
}

TEST(ThreadPool, RunEachRethrowsOutOfMemoryOnTheCaller) {
  ThreadPool pool(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.runEach(2,
                            [&](int64_t i) {
                              ++ran;
                              if (i == 1) throw std::bad_alloc();
                            }),
               std::bad_alloc);
  EXPECT_EQ(ran.load(), 2); // the other index still ran
}

TEST(ThreadPool, DestroysIdleAndUnusedPools) {
  for (int i = 0; i < 20; ++i) {
    ThreadPool unused(4);
    ThreadPool used(2);
    used.parallelFor(100, 1, [](int64_t, int64_t) {});
  }
  SUCCEED();
}

} // namespace
