//===- Registry.cpp - referenceKernel(): the op -> kernel table ----------===//
//
// A table indexed by OpCode, generated from ir/Ops.def with the relation of
// each row deciding between its kernel and null (Kernels.h). static_asserts
// keep it in step with the op table: one entry per op, and a kernel exactly
// for the ops whose relation is not Structural. Each kernel named in the
// table must be defined, so a missing one is a link error; the unit test
// Registry.EveryComputeOpHasAKernel checks the same at run time.
//
//===----------------------------------------------------------------------===//

#include "vm/kernels/Kernels.h"

#include <cassert>
#include <iterator>

namespace nimble::vm {

const Attr &KernelArgs::attr(OpCode op, std::string_view name) const {
  int i = opInfo(op).attrIndex(name);
  assert(i >= 0 && attrs && static_cast<size_t>(i) < attrs->size() &&
         "kernel reads an attribute its op does not have");
  return (*attrs)[static_cast<size_t>(i)];
}

namespace {

using namespace kernels;

#define NIMBLE_KERNEL_ENTRY(Id) &ref##Id,
#define NIMBLE_NULL_ENTRY(Id) nullptr,
constexpr KernelFn kKernels[] = {
#define NIMBLE_OP(Id, Mnemonic, MinOps, MaxOps, NumResults, Attrs, Rel, ...)                \
  NIMBLE_HAS_KERNEL_##Rel(NIMBLE_KERNEL_ENTRY, NIMBLE_NULL_ENTRY, Id)
#include "ir/Ops.def"
};
#undef NIMBLE_KERNEL_ENTRY
#undef NIMBLE_NULL_ENTRY

constexpr Relation kRelations[] = {
#define NIMBLE_OP(Id, Mnemonic, MinOps, MaxOps, NumResults, Attrs, Rel, ...) Relation::Rel,
#include "ir/Ops.def"
};

static_assert(std::size(kKernels) == static_cast<size_t>(kNumOpCodes),
              "one kernel entry per op of Ops.def");
static_assert(std::size(kRelations) == static_cast<size_t>(kNumOpCodes));

// Whether the NIMBLE_HAS_KERNEL_* mapping gave each op a kernel. (Comparing
// the function pointers above with nullptr is not a constant expression under
// GCC's sanitizers; this reads the same decision.)
#define NIMBLE_YES(Id) true,
#define NIMBLE_NO(Id) false,
constexpr bool kHasKernel[] = {
#define NIMBLE_OP(Id, Mnemonic, MinOps, MaxOps, NumResults, Attrs, Rel, ...)                \
  NIMBLE_HAS_KERNEL_##Rel(NIMBLE_YES, NIMBLE_NO, Id)
#include "ir/Ops.def"
};
#undef NIMBLE_YES
#undef NIMBLE_NO

constexpr bool everyComputeOpHasAKernel() {
  for (size_t i = 0; i < std::size(kHasKernel); ++i)
    if ((kRelations[i] == Relation::Structural) == kHasKernel[i]) return false;
  return true;
}
static_assert(everyComputeOpHasAKernel(),
              "every op whose relation is not Structural has a reference kernel, and "
              "structural ops have none");

} // namespace

KernelFn referenceKernel(OpCode op) {
  size_t i = static_cast<size_t>(op);
  return i < std::size(kKernels) ? kKernels[i] : nullptr;
}

} // namespace nimble::vm
