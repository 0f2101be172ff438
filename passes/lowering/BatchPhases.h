//===- BatchPhases.h - Program phases for auto-batching (private) ---------===//
//
// The auto-batch pass's phase assignment (BatchPhases.cpp has the design).
//
//===----------------------------------------------------------------------===//

#ifndef NIMBLE_PASSES_LOWERING_BATCHPHASES_H
#define NIMBLE_PASSES_LOWERING_BATCHPHASES_H

#include "ir/Diagnostics.h"
#include "ir/IR.h"

#include <cstdint>
#include <unordered_map>

namespace nimble::passes {

/// The largest phase a `phase` attribute may give (far more semantic phases
/// than any model has; the bound keeps the sum of the heuristic's offsets
/// in range).
inline constexpr int64_t kMaxBatchPhase = 1 << 16;

/// Per kernel (primitive function) called from the module's other
/// functions, the program phase of its calls: the lowest over its call
/// sites. False (with a located error) when a `phase` attribute is not an
/// integer in 0..kMaxBatchPhase.
bool assignBatchPhases(const ir::Module &m, ir::DiagnosticEngine &diag,
                       std::unordered_map<const ir::Function *, uint32_t> &phases);

} // namespace nimble::passes

#endif
