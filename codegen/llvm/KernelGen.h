//===- KernelGen.h - One kernel of the executable to one LLVM function -*- C++ -*-===//
#ifndef NIMBLE_CODEGEN_LLVM_KERNELGEN_H
#define NIMBLE_CODEGEN_LLVM_KERNELGEN_H

#include "ir/IR.h"
#include "vm/format/Executable.h"

#include <llvm/IR/Module.h>

#include <string>
#include <vector>

namespace nimble::codegen {

/// The exported name of kernel `index` (a C identifier, unique per index).
std::string kernelSymbol(size_t index, const std::string &name);

/// What differs between the targets of the one lowering (docs/codegen.md,
/// "CUDA"). Everything else (stages, index algebra, element semantics,
/// residue dispatch) is shared.
///
///   CPU    the kernel is a C function of vm/KernelABI.h; a stage's outer
///          loop goes to the VM's thread pool (ctx->parallel_for);
///          temporaries come from malloc; libm for what is not inline.
///   NVPTX  the kernel is a `.entry` (bufs, num_bufs, status*) launched on
///          a grid; a stage's outer loop is a grid-stride loop over thread
///          ids, followed by a block barrier; temporaries come from
///          thread 0's device malloc, shared through shared memory; libdevice
///          (__nv_*) for what is not inline; never vectorized (vectorWidth 1).
struct KernelTarget {
  enum class Kind { CPU, NVPTX };
  Kind kind = Kind::CPU;
  unsigned vectorWidth = 4; // f32 lanes (1: not vectorized)
  bool gpu() const { return kind == Kind::NVPTX; }
};

/// Adds to `mod` the function `symbol` for kernel `k`, whose IR is the
/// primitive function `f`, for `target`. Returns false with `reason` when
/// the generator does not handle one of its members (the kernel then stays
/// on the reference path). `stages`, when given, receives the number of
/// stages (loop nests separated by a barrier on NVPTX) and whether the kernel
/// needs a temporary: a CUDA kernel with one stage and no temporary may run
/// on any number of blocks, the others on one block (vm::CudaCode).
bool lowerKernel(llvm::Module &mod, const vm::KernelDesc &k, const ir::Function &f,
                 const KernelTarget &target, const std::string &symbol, std::string &reason,
                 bool *multiBlock = nullptr);

/// What the generated code of kernel `k` (primitive function `f`) depends
/// on, as a string: the members with their attributes, operands and types,
/// the inputs, outputs and their types; not the names and not the
/// locations (a native kernel reports an error by returning 1, and the VM
/// then runs the reference kernel, which reports it at the kernel's own
/// member locations). Kernels with equal keys get the same code, so one
/// compiled function serves them all (the twelve layers of BERT-base: 165
/// kernels, 19 distinct).
std::string kernelCodeKey(const vm::KernelDesc &k, const ir::Function &f);

/// Gather fusion (seed 001 §5.2, docs/autobatch.md): the entry of a batched
/// variant that reads and writes the rows of its per-instance operands where
/// each instance keeps them. `gathered` has one flag per buffer of the ABI
/// (every value of the kernel in KernelDesc numbering, then every output);
/// the `data` of a flagged buffer is then a table of shape[0] row pointers,
/// row r of the buffer being at table[r] (its trailing dimensions dense
/// there), instead of the address of a dense tensor. Only inputs and
/// outputs may be flagged, each of rank >= 1. CPU only. The symbol is
/// gatherSymbol(kernelSymbol(...)); same signature as the kernel's entry.
bool lowerGatheredKernel(llvm::Module &mod, const vm::KernelDesc &k, const ir::Function &f,
                         const KernelTarget &target, const std::string &symbol,
                         const std::vector<bool> &gathered, std::string &reason);
/// The symbol of the gather-fused entry of the kernel whose entry is `symbol`.
std::string gatherSymbol(const std::string &symbol);

/// NVPTX only (CudaBlockRows.cpp): a lone f32 reduction over trailing axes
/// (sum, mean, max, min), softmax over the last axis or layer_norm, as a
/// kernel that gives each row to a block (threads stride over the row,
/// partials combined in a shared-memory tree). NotApplicable, adding
/// nothing, for any other kernel. `perOutput`: one row per output element
/// (reductions), else one per row of the output's last axis. Failed (with
/// `reason`, nothing added) when the generated function does not verify: a
/// compiler bug, reported as the kernel's reason for having no device form.
enum class BlockRows { NotApplicable, Done, Failed };
BlockRows lowerBlockRowKernel(llvm::Module &mod, const vm::KernelDesc &k, const ir::Function &f,
                              const std::string &symbol, bool *perOutput, std::string &reason);

} // namespace nimble::codegen

#endif // NIMBLE_CODEGEN_LLVM_KERNELGEN_H
