//===- KernelGen.h - One kernel of the executable to one LLVM function -*- C++ -*-===//
#ifndef NIMBLE_CODEGEN_LLVM_KERNELGEN_H
#define NIMBLE_CODEGEN_LLVM_KERNELGEN_H

#include "ir/IR.h"
#include "vm/Executable.h"

#include <llvm/IR/Module.h>

#include <string>

namespace nimble::codegen {

/// The exported name of kernel `index` (a C identifier, unique per index).
std::string kernelSymbol(size_t index, const std::string &name);

/// Adds to `mod` the native function `symbol` for kernel `k`, whose IR is the
/// primitive function `f`, vectorized `vectorWidth` f32 lanes wide (1: not
/// vectorized). Returns false with `reason` when the generator does not
/// handle one of its members (the kernel then stays on the reference path).
bool lowerKernel(llvm::Module &mod, const vm::KernelDesc &k, const ir::Function &f,
                 unsigned vectorWidth, const std::string &symbol, std::string &reason);

} // namespace nimble::codegen

#endif // NIMBLE_CODEGEN_LLVM_KERNELGEN_H
