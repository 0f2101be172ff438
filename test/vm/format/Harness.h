//===- Harness.h - Loading hostile bytes under watch -------------*- C++ -*-===//
//
// What the hostile-input tests share: tryLoad() deserializes from an aligned
// copy and, on success, re-checks with checkRunnable() (independently of
// verify()) what the interpreter relies on, then disassembles the result; on
// failure it expects a message. In the plain build every load is also
// checked for the largest single allocation it makes (AllocationTracker.cpp
// replaces operator new); under ASan, ASan's allocator does that job.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_TEST_VM_FORMAT_HARNESS_H
#define NIMBLE_TEST_VM_FORMAT_HARNESS_H

#include "vm/format/Format.h"

#include <cstddef>
#include <string>
#include <vector>

namespace nimble::vm::test {

/// Allocation tracking (AllocationTracker.cpp; a test links it as a source
/// so that its operator new replaces the library's).
bool allocationsTracked();
void resetLargestAllocation();
size_t largestAllocation();

/// Fails the current test if a successfully loaded executable breaks an
/// invariant the interpreter relies on.
void checkRunnable(const Executable &e, const AlignedBuffer &buf);

struct Outcome {
  bool ok;
  std::string error;
};

/// Loads `bytes` from a fresh aligned copy (see the header comment).
Outcome tryLoad(const std::vector<uint8_t> &bytes);

/// The largest allocation / file size ratio over tryLoad() calls on files of
/// at least 1 KiB (small files are dominated by fixed costs such as messages).
double largestAllocationRatio();

/// `b` with its header checksum recomputed.
std::vector<uint8_t> resealed(std::vector<uint8_t> b);

} // namespace nimble::vm::test

#endif // NIMBLE_TEST_VM_FORMAT_HARNESS_H
