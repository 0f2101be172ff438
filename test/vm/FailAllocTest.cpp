//===- FailAllocTest.cpp - The allocation-failure hook's contract ---------===//
//
// vm/support/FailAlloc.h: with NIMBLE_FAIL_ALLOC=k the k-th counted allocation
// fails, once; while an AllocationFailuresSuspended exists (a oneDNN
// primitive executing, vm/dispatch/LibraryKernels.cpp) nothing counts or fails, so
// no failure is injected where no handler can catch it and the count does
// not depend on how oneDNN's threads interleave.
//
//===----------------------------------------------------------------------===//

#include "vm/support/FailAlloc.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace nimble::vm {
namespace {

TEST(FailAlloc, SuspendedAllocationsNeitherCountNorFail) {
  // The only test of this binary: the hook reads the variable once.
  ASSERT_EQ(setenv("NIMBLE_FAIL_ALLOC", "3", 1), 0);
  armAllocationFailures();
  EXPECT_FALSE(injectAllocationFailure()); // 1
  {
    AllocationFailuresSuspended inLibrary;
    for (int i = 0; i < 10; ++i) EXPECT_FALSE(injectAllocationFailure()) << i;
    {
      AllocationFailuresSuspended nested;
      EXPECT_FALSE(injectAllocationFailure());
    }
    EXPECT_FALSE(injectAllocationFailure()); // still suspended after the inner scope
  }
  EXPECT_FALSE(injectAllocationFailure()); // 2
  EXPECT_TRUE(injectAllocationFailure());  // 3: the one that fails
  EXPECT_FALSE(injectAllocationFailure()); // 4: only once
}

} // namespace
} // namespace nimble::vm
