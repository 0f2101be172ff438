//===- Pipelines.h - The pass pipeline of each optimisation level -*- C++ -*-===//
//
// What `nimblec -O0..-O3 --target=T` runs, as --passes text (docs/passes.md,
// "Pipelines"; LLVM's PassBuilder::buildPerModuleDefaultPipeline plays this
// part there). One place, so that nimblec, the Python module
// (tools/driver/Compiler.h) and the .nir fuzzer (test/fuzz/NirFuzzer.cpp)
// run the same passes.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_PIPELINES_H
#define NIMBLE_PASSES_PIPELINES_H

#include <string>

namespace nimble::passes {

/// The pipeline of -O`level` (0..3) for `target` ("cpu" or "cuda");
/// `batchRemarks` asks auto-batch for its remarks (nimblec --print-batching);
/// `fpReassociate` adds matmul-reassociate at -O1 and up and linalg-fuse at
/// -O2 and up (nimblec --fp-reassociate: they change rounding, so no level
/// runs them by default).
std::string pipelineFor(int level, const std::string &target, bool batchRemarks = false,
                        bool fpReassociate = false);

} // namespace nimble::passes

#endif // NIMBLE_PASSES_PIPELINES_H
