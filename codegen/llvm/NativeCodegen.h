//===- NativeCodegen.h - Kernel objects: primitive functions to native code -*- C++ -*-===//
//
// The second half of nimblec's back end (the first is BytecodeEmitter): every
// kernel of the executable whose members the generator handles becomes one
// LLVM function with the C ABI of vm/KernelABI.h; the functions are compiled
// for one CPU by an LLVM TargetMachine, linked into an ELF shared object with
// lld (in-process), and stored in the executable's native-code section
// (vm::NativeCode). nimble-run maps that object and calls the functions; it
// never links LLVM. docs/codegen.md describes the lowering.
//
// Kernels the generator does not handle (upper-bound ops, f16/bf16, ...)
// keep the reference implementation; `reasons` says why for each.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_CODEGEN_LLVM_NATIVECODEGEN_H
#define NIMBLE_CODEGEN_LLVM_NATIVECODEGEN_H

#include "ir/IR.h"
#include "vm/format/Executable.h"

#include <string>
#include <utility>
#include <vector>

namespace llvm {
class StringRef;
class Module;
class TargetMachine;
} // namespace llvm

namespace nimble::codegen {

struct NativeOptions {
  std::string cpu;   // --mcpu; empty: the host's CPU
  std::string attrs; // --mattr (e.g. "+avx2,-avx512f"); empty: the CPU's own
  int optLevel = 2;  // LLVM optimisation level of the kernels (0..3)
};

struct NativeResult {
  std::string llvmIR;          // the optimised module as text (--emit=llvm)
  std::vector<uint8_t> object; // the relocatable ELF object (--emit=obj)
  unsigned nativeKernels = 0, referenceKernels = 0;
  /// Native kernels that share an identical earlier kernel's function
  /// (kernelCodeKey) instead of getting their own.
  unsigned sharedKernels = 0;
  /// Batched variants that also got a gather-fused entry (gatherSymbol).
  unsigned gatheredKernels = 0;
  /// (kernel name, why it stays on the reference path)
  std::vector<std::pair<std::string, std::string>> reasons;
};

/// Generates native code for the kernels of `exe` (made from `m` by the
/// bytecode emitter), fills exe.native with the linked shared object and its
/// symbol table, and returns the intermediate forms in `out`. With
/// `link = false` only the LLVM IR and the object are made (--emit=llvm|obj).
/// Returns false with `error` set when LLVM or the linker fails (a bug or a
/// bad --mcpu/--mattr, never a property of the program).
bool generateNativeKernels(const ir::Module &m, vm::Executable &exe, const NativeOptions &opts,
                           bool link, NativeResult &out, std::string &error);

/// Runs LLVM's default optimisation pipeline for `optLevel` (0..3) on a
/// kernel module (shared by the CPU and CUDA back ends).
void optimizeKernelModule(llvm::Module &mod, llvm::TargetMachine &tm, int optLevel);

/// A private temporary directory for a tool's files (`forWhom` names the
/// tool in the error), and a file written into it.
bool makeTemporaryDirectory(const char *prefix, const char *forWhom, std::string &dir, std::string &error);
bool writeTemporaryFile(const std::string &path, llvm::StringRef bytes, std::string &error);

/// The host CPU's name and the features LLVM sees on it (for --help/--version).
std::string hostCPUName();

} // namespace nimble::codegen

#endif // NIMBLE_CODEGEN_LLVM_NATIVECODEGEN_H
