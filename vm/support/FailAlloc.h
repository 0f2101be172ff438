//===- FailAlloc.h - Injected allocation failures for tests -------*- C++ -*-===//
//
// The out-of-memory paths of the runtime are tested the way SQLite tests its
// own: run a program once to count its allocations, then once per k with the
// k-th allocation failing, and require every run to end either with the
// right answer or with one located `error: out of memory ...` and exit 1
// (test/tools/fail-alloc.test, test/fail_alloc.py; docs/nimble-run.md).
//
// Off unless the environment variable NIMBLE_FAIL_ALLOC is set; read by
// armAllocationFailures(), which a tool calls first thing in main. Nothing
// counts before that: the static initializers of the libraries the tool loads
// (oneDNN's among them) allocate before main, outside anything a test of the
// tool can observe.
//
//   NIMBLE_FAIL_ALLOC=k   (k >= 1) the k-th allocation fails, once; the
//                         ones after it succeed
//   NIMBLE_FAIL_ALLOC=0   nothing fails; at exit the count of allocations
//                         is printed to stderr as
//                         "NIMBLE_FAIL_ALLOC: N allocations"
//
// What counts as an allocation: every C++ `new` of a tool that installs the
// counting operator new (nimble-run does, tools/nimble-run.cpp) and every
// request to the tensor allocators (vm/support/Allocator.cpp). A failed `new` throws
// std::bad_alloc, a failed allocator request returns null, as for real.
//
// Not counted: what is allocated while a oneDNN primitive executes
// (vm/dispatch/LibraryKernels.cpp holds an AllocationFailuresSuspended around each
// execute). Those allocations happen on the threads of oneDNN's OpenMP
// region, the interpreter's thread among them, where an exception reaches no
// handler of ours: a failure injected there ended the run in std::terminate
// (found when BERT's k-th allocation moved onto one), which says nothing
// about the VM. They are also not deterministic in number or order across
// threads. oneDNN's allocations for a primitive outside execution (creation,
// memory objects, packed weights) are counted, and their failure is the VM's
// out-of-memory error.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_FAILALLOC_H
#define NIMBLE_VM_FAILALLOC_H

#include <cstdint>

namespace nimble::vm {

/// Reads NIMBLE_FAIL_ALLOC and starts counting (once; later calls do nothing).
void armAllocationFailures();

/// Counts one allocation; true when it is the one that must fail. Cheap (one
/// load) when not armed or NIMBLE_FAIL_ALLOC is not set. Thread-safe.
bool injectAllocationFailure();

/// While one exists (on any thread), no allocation counts or fails: see
/// "Not counted" above. Nests.
class AllocationFailuresSuspended {
public:
  AllocationFailuresSuspended();
  ~AllocationFailuresSuspended();
  AllocationFailuresSuspended(const AllocationFailuresSuspended &) = delete;
  AllocationFailuresSuspended &operator=(const AllocationFailuresSuspended &) = delete;
};

} // namespace nimble::vm

#endif // NIMBLE_VM_FAILALLOC_H
