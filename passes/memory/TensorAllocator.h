//===- TensorAllocator.h - NNC's static tensor allocation algorithm -*- C++ -*-===//
//
// The allocator core of `plan-memory` (passes/memory/PlanMemory.cpp), separate from
// the IR so that it can be tested on hand-made interference graphs: given
// tensors (sizes in bytes, an access order) and which pairs interfere, assign
// each an offset in one buffer such that interfering tensors get disjoint
// byte ranges, keeping the buffer small. The algorithm is NNC's (seed 002,
// "The NNC Tensor Allocation Algorithm": interference graph, allocation
// graph, candidate selection, insertion); PlanMemory.cpp's header says where
// it departs from it.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_TENSORALLOCATOR_H
#define NIMBLE_PASSES_TENSORALLOCATOR_H

#include <cstdint>
#include <vector>

namespace nimble::passes {

struct AllocProblem {
  /// Bytes of each tensor; every size must be a multiple of `alignment`.
  std::vector<int64_t> sizes;
  /// The order in which tensors are first accessed (a position per tensor;
  /// ties are broken by index). Orders the members of a tuple on a chain.
  std::vector<int64_t> order;
  /// Symmetric: interferes[i][j] when i and j must not overlap.
  std::vector<std::vector<bool>> interferes;
  int64_t alignment = 64;
};

struct AllocSolution {
  std::vector<int64_t> offsets;
  /// The buffer size: the sum of the weights on the source's out-edges.
  int64_t size = 0;
  /// How many insertions reused an existing edge of the allocation graph.
  unsigned reusedEdges = 0;
};

/// Runs NNC's allocation. Deterministic: the result depends only on the
/// problem. Sizes of 0 are allowed (such a tensor gets offset 0).
AllocSolution allocateTensors(const AllocProblem &p);

} // namespace nimble::passes

#endif // NIMBLE_PASSES_TENSORALLOCATOR_H
