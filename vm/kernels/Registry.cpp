//===- Registry.cpp - referenceKernel(): the op -> kernel table ----------===//
//
// A table indexed by OpCode, generated from ir/Ops.def with the relation of
// each row deciding between its kernel and null (Kernels.h). Two
// static_asserts keep it in step with the op table: it has one entry per op,
// and an entry is null exactly when the op's relation is Structural.
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

constexpr bool everyComputeOpHasAKernel() {
  for (size_t i = 0; i < std::size(kKernels); ++i)
    if ((kRelations[i] == Relation::Structural) != (kKernels[i] == nullptr)) return false;
  return true;
}
static_assert(everyComputeOpHasAKernel(),
              "every op whose relation is not Structural has a reference kernel");

} // namespace

KernelFn referenceKernel(OpCode op) {
  size_t i = static_cast<size_t>(op);
  return i < std::size(kKernels) ? kKernels[i] : nullptr;
}

} // namespace nimble::vm
