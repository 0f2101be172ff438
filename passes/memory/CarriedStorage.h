//===- CarriedStorage.h - Loop-carried tensors in rotating storages -*- C++ -*-===//
//
// plan-memory's step 0 (CarriedStorage.cpp has the design): NNC's
// multi-view tensors in SSA form, so that a loop-carried tensor is not
// allocated on every iteration.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_MEMORY_CARRIEDSTORAGE_H
#define NIMBLE_PASSES_MEMORY_CARRIEDSTORAGE_H

#include "ir/IR.h"

#include <cstddef>

namespace nimble::passes {

/// Gives each loop-carried tensor of `f` whose storage size repeats a
/// rotation of storages allocated in the loop's preheader, carried as header
/// arguments. Returns the number of tensors rotated. Runs on the
/// explicit-memory IR, before plan-memory places its kills.
size_t rotateCarriedStorages(ir::Module &m, ir::Function &f);

} // namespace nimble::passes

#endif // NIMBLE_PASSES_MEMORY_CARRIEDSTORAGE_H
