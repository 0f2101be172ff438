//===- ReferenceTensorAllocator.h - NNC's allocator, the plain way -*- C++ -*-===//
//
// The oracle of TensorAllocatorTest's differential test: NNC's allocation
// (seed 002) written as directly as possible, every round rebuilding and
// sorting all candidates and scanning every edge, with none of the
// incremental structures of passes/memory/TensorAllocator.cpp (the candidate set
// kept across rounds, the log of edges by round, the sorted edge list).
// Both must return the same offsets, buffer size and reuse count on every
// problem: the optimised allocator is a faster way to the same plan.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_TEST_UNIT_REFERENCETENSORALLOCATOR_H
#define NIMBLE_TEST_UNIT_REFERENCETENSORALLOCATOR_H

#include "passes/memory/TensorAllocator.h"

namespace nimble::testing {

passes::AllocSolution referenceAllocateTensors(const passes::AllocProblem &p);

} // namespace nimble::testing

#endif // NIMBLE_TEST_UNIT_REFERENCETENSORALLOCATOR_H
