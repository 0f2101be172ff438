//===- HostileTest.cpp - Truncated, corrupted and oversized .nbc files ----===//
//
// Every malformed input must be refused with a message, never crash, hang or
// allocate absurd memory (Harness.h watches each load). Three kinds of
// attack here (the crafted ones are in CraftedTest.cpp):
//   (a) truncation: at every byte length; with the header's size and
//       checksum fixed up; and every section shrunk to every smaller size;
//   (b) corruption with the checksum recomputed, so the structural checks
//       (not the checksum) have to catch it: every byte XORed with three
//       masks, then random multi-byte mutations;
//   (c) every count and size field set to huge values.
//
// Where a mutation happens to leave a valid file (a flipped weight byte, a
// renamed function), the result must still be safe to run: tryLoad()
// re-checks it with checkRunnable().
//
//===----------------------------------------------------------------------===//

#include "test/vm/format/Harness.h"
#include "test/vm/format/TestExecutables.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

namespace nimble::vm {
namespace {

using namespace test;

std::vector<uint8_t> fullBytes() { return serialize(makeFullExecutable()); }

TEST(Hostile, AllocationTrackerSeesAllocations) {
  if (!allocationsTracked()) GTEST_SKIP() << "ASan build: ASan's allocator checks sizes";
  resetLargestAllocation();
  auto *p = new std::vector<uint8_t>(5u << 20);
  EXPECT_GE(largestAllocation(), size_t(5u << 20));
  delete p;
}

// Reports, after every test of this binary, the worst allocation-to-file-size
// ratio seen by any load.
class ReportRatio : public ::testing::Environment {
  void TearDown() override {
    if (allocationsTracked())
      std::printf("largest single allocation while loading: %.1f x the file size\n",
                  largestAllocationRatio());
  }
};
const auto *const kReport = ::testing::AddGlobalTestEnvironment(new ReportRatio);

//===-- (a) Truncation -----------------------------------------------------===//

TEST(Hostile, TruncatedAtEveryLength) {
  std::vector<uint8_t> bytes = fullBytes();
  for (size_t n = 0; n < bytes.size(); ++n) {
    Outcome o = tryLoad(std::vector<uint8_t>(bytes.begin(), bytes.begin() + n));
    ASSERT_FALSE(o.ok) << "length " << n;
  }
}

TEST(Hostile, TruncatedWithHeaderFixedUp) {
  std::vector<uint8_t> bytes = fullBytes();
  for (size_t n = nbc::kHeaderSize; n < bytes.size(); ++n) {
    std::vector<uint8_t> b(bytes.begin(), bytes.begin() + n);
    put<uint64_t>(b, nbc::kOffFileSize, n);
    Outcome o = tryLoad(resealed(b));
    ASSERT_FALSE(o.ok) << "length " << n;
    ASSERT_EQ(o.error.find("checksum"), std::string::npos) << o.error;
  }
}

TEST(Hostile, EverySectionShrunkToEverySmallerSize) {
  std::vector<uint8_t> bytes = fullBytes();
  Layout l;
  std::string err;
  ASSERT_TRUE(walkLayout(bytes, l, err)) << err;
  size_t cases = 0;
  for (const SectionInfo &s : l.sections)
    for (uint64_t size = 0; size < s.size; ++size) {
      std::vector<uint8_t> b = bytes;
      put<uint64_t>(b, s.entryOffset + 16, size);
      Outcome o = tryLoad(resealed(b));
      ASSERT_FALSE(o.ok) << "section " << s.kind << " shrunk to " << size;
      ++cases;
    }
  EXPECT_GT(cases, 1000u);
}

//===-- (b) Corruption behind a valid checksum -----------------------------===//

TEST(Hostile, EveryByteFlippedWithChecksumRecomputed) {
  std::vector<uint8_t> bytes = fullBytes();
  size_t accepted = 0, refused = 0;
  for (uint8_t mask : {0x01, 0x80, 0xff})
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (i >= nbc::kOffChecksum && i < nbc::kOffChecksum + 8) continue; // resealed anyway
      std::vector<uint8_t> b = bytes;
      b[i] ^= mask;
      Outcome o = tryLoad(resealed(b));
      (o.ok ? accepted : refused)++;
      if (::testing::Test::HasFatalFailure()) {
        ADD_FAILURE() << "byte " << i << " mask " << int(mask);
        return;
      }
    }
  // Most flips must be caught structurally; the survivors are bytes of
  // constant data, string and name characters, dims of types, padding.
  EXPECT_GT(refused, accepted);
  std::printf("byte flips: %zu refused, %zu accepted (and checked runnable)\n", refused, accepted);
}

TEST(Hostile, RandomMutationsWithChecksumRecomputed) {
  std::vector<uint8_t> bytes = fullBytes();
  std::mt19937 rng(1234);
  size_t accepted = 0;
  const int kIterations = 20000;
  for (int it = 0; it < kIterations; ++it) {
    std::vector<uint8_t> b = bytes;
    int edits = 1 + rng() % 4;
    for (int k = 0; k < edits; ++k) {
      size_t at = nbc::kHeaderSize + rng() % (b.size() - nbc::kHeaderSize);
      switch (rng() % 4) {
      case 0: b[at] = static_cast<uint8_t>(rng()); break;
      case 1: // an interesting 32-bit value at a 4-byte boundary
        at &= ~size_t(3);
        if (at + 4 <= b.size()) {
          const uint32_t vals[] = {0, 1, 0x7fffffff, 0x80000000, 0xffffffff, 64, 65};
          put<uint32_t>(b, at, vals[rng() % 7]);
        }
        break;
      case 2: b[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
      case 3: b[at] = 0; break;
      }
    }
    Outcome o = tryLoad(resealed(b));
    accepted += o.ok;
    if (::testing::Test::HasFatalFailure()) {
      ADD_FAILURE() << "iteration " << it;
      return;
    }
  }
  std::printf("random mutations: %d tried, %zu accepted (and checked runnable)\n", kIterations,
              accepted);
}

//===-- (c) Huge counts and sizes ------------------------------------------===//

TEST(Hostile, HugeValueInEveryCountAndSizeField) {
  std::vector<uint8_t> bytes = fullBytes();
  Layout l;
  std::string err;
  ASSERT_TRUE(walkLayout(bytes, l, err)) << err;
  ASSERT_GT(l.fields.size(), 100u);
  for (const Field &f : l.fields) {
    std::vector<uint64_t> values;
    if (f.width == 4) {
      values = {0xffffffffu, 0x7fffffffu, 0x10000000u, 0x80000000u};
      if (f.recordCount) values.push_back(uint64_t(get<uint32_t>(bytes, f.offset)) + 1);
    } else {
      values = {~uint64_t(0), uint64_t(1) << 63, ~uint64_t(0) - 63, uint64_t(1) << 40};
      if (f.recordCount) values.push_back(get<uint64_t>(bytes, f.offset) + 64);
    }
    for (uint64_t v : values) {
      std::vector<uint8_t> b = bytes;
      if (f.width == 4) {
        put<uint32_t>(b, f.offset, static_cast<uint32_t>(v));
      } else {
        put<uint64_t>(b, f.offset, v);
      }
      Outcome o = tryLoad(resealed(b));
      EXPECT_FALSE(o.ok) << f.what << " at " << f.offset << " = " << v;
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

} // namespace
} // namespace nimble::vm
