//===- CudaCodegen.h - Kernels to PTX and a cubin for --target=cuda -*- C++ -*-===//
//
// The CUDA back end beside NativeCodegen: the same lowering (KernelGen.cpp,
// with KernelTarget::Kind::NVPTX) for the nvptx64-nvidia-cuda target, PTX from
// LLVM's NVPTX back end, a cubin from the toolkit's ptxas when it can be found
// (else the .nbc carries PTX only and the driver compiles it at load), all in
// the executable's cuda-code section (vm::CudaCode). A kernel that is one f32
// matmul or batch_matmul is recorded as a cuBLAS call instead. Nothing here
// has run on a GPU (docs/codegen.md, "CUDA").
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_CODEGEN_LLVM_CUDACODEGEN_H
#define NIMBLE_CODEGEN_LLVM_CUDACODEGEN_H

#include "ir/IR.h"
#include "vm/format/Executable.h"

#include <string>
#include <utility>
#include <vector>

namespace nimble::codegen {

struct CudaOptions {
  std::string arch = "sm_80"; // --cuda-arch: sm_80 or sm_90
  int optLevel = 2;
  /// --ptxas: "" finds ptxas on PATH, then in /usr/local/cuda/bin; "none"
  /// writes PTX only; anything else is the program to run.
  std::string ptxas;
};

struct CudaResult {
  std::string ptx;
  bool assembled = false; // a cubin was made
  std::string ptxasPath;  // the ptxas that made it
  unsigned generated = 0, cublas = 0, missing = 0;
  /// (kernel name, why it has no device form)
  std::vector<std::pair<std::string, std::string>> reasons;
};

/// The architectures --cuda-arch accepts.
bool isSupportedCudaArch(const std::string &arch);

/// Fills exe.cuda for the kernels of `exe` (made from `m`). Returns false with
/// `error` when LLVM, libdevice or ptxas fails (ptxas rejecting the PTX is a
/// compiler bug and reported with its message).
bool generateCudaKernels(const ir::Module &m, vm::Executable &exe, const CudaOptions &opts,
                         CudaResult &out, std::string &error);

} // namespace nimble::codegen

#endif // NIMBLE_CODEGEN_LLVM_CUDACODEGEN_H
