//===- CudaCodegen.cpp - Kernels to PTX (LLVM NVPTX) and a cubin (ptxas) ---===//
//
// One LLVM module for the kernels of an executable, lowered by KernelGen.cpp
// for the NVPTX target (grid-stride loops, block barriers between stages:
// see KernelTarget), with libdevice linked in for the functions the generator
// does not inline (log, erf, pow, ...; device code cannot call libm), then
// optimised and printed as PTX by LLVM 19's NVPTX back end for the chosen
// sm_XX with PTX ISA 8.0 (the newest LLVM 19 emits that ptxas of CUDA 12+
// accepts for both sm_80 and sm_90). ptxas, when found, assembles the PTX to
// a cubin at compile time so the driver need not JIT it at load; its
// rejection of the PTX is a compiler bug, reported with its message.
//
// Why libdevice and not inline approximations for every function: it is the
// toolkit's own implementation, accurate to 1-2 ulp, present whenever the
// toolkit is (nvvm/libdevice/libdevice.10.bc), and linked only for the
// functions used (LinkOnlyNeeded). exp, tanh and sigmoid stay the inline
// polynomials of MathApprox.cpp on both targets.
//
//===----------------------------------------------------------------------===//

#include "codegen/llvm/CudaCodegen.h"

#include "codegen/llvm/KernelGen.h"
#include "codegen/llvm/NativeCodegen.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Linker/Linker.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Program.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace nimble::codegen {

namespace {

constexpr const char *kTriple = "nvptx64-nvidia-cuda";
constexpr const char *kToolkit = "/usr/local/cuda";

void initNVPTX() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

// CUDA_HOME or /usr/local/cuda, as nvcc does.
std::string toolkitDir() {
  const char *home = std::getenv("CUDA_HOME");
  return home && *home ? home : kToolkit;
}

// The kind of device implementation of kernel `k`: cuBLAS for a lone f32
// matmul / batch_matmul (the dense ops), generated code otherwise.
vm::CudaCode::Kind deviceKind(const vm::KernelDesc &k) {
  if (k.members.size() == 1 && k.inputDTypes.size() == 2 && k.inputDTypes[0] == DType::F32 &&
      k.inputDTypes[1] == DType::F32) {
    if (k.members[0].op == OpCode::MatMul) return vm::CudaCode::Kind::CublasGemm;
    if (k.members[0].op == OpCode::BatchMatMul) return vm::CudaCode::Kind::CublasBatched;
  }
  return vm::CudaCode::Kind::Generated;
}

bool linkLibdevice(llvm::Module &mod, std::string &error) {
  bool needed = false;
  for (const llvm::Function &f : mod) needed |= f.isDeclaration() && f.getName().starts_with("__nv_");
  if (!needed) return true;
  std::string path = toolkitDir() + "/nvvm/libdevice/libdevice.10.bc";
  llvm::SMDiagnostic diag;
  std::unique_ptr<llvm::Module> lib = llvm::parseIRFile(path, diag, mod.getContext());
  if (!lib) {
    error = "cannot read libdevice (" + path + "): " + diag.getMessage().str() +
            "; --target=cuda needs the CUDA toolkit's libdevice for log, erf, pow and the f64 functions";
    return false;
  }
  lib->setTargetTriple(mod.getTargetTriple());
  lib->setDataLayout(mod.getDataLayout());
  if (llvm::Linker::linkModules(mod, std::move(lib), llvm::Linker::LinkOnlyNeeded)) {
    error = "cannot link libdevice (" + path + ")";
    return false;
  }
  // Only the kernel entries are visible; libdevice's functions and the
  // stages' helpers are internal, so the optimiser inlines and drops them.
  for (llvm::Function &f : mod)
    if (!f.isDeclaration() && f.getCallingConv() != llvm::CallingConv::PTX_Kernel)
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
  return true;
}

std::string findPtxas(const std::string &requested) {
  if (!requested.empty()) return requested;
  if (auto p = llvm::sys::findProgramByName("ptxas")) return *p;
  if (auto p = llvm::sys::findProgramByName("ptxas", {toolkitDir() + "/bin"})) return *p;
  return "";
}

bool runPtxas(const std::string &ptxas, const std::string &arch, int optLevel, const std::string &ptx,
              std::vector<uint8_t> &cubin, std::string &error) {
  std::string dir;
  if (!makeTemporaryDirectory("nimblec-ptxas", "ptxas", dir, error)) return false;
  std::string in = dir + "/kernels.ptx", out = dir + "/kernels.cubin", log = dir + "/ptxas.log";
  bool ok = false;
  {
    if (writeTemporaryFile(in, ptx, error)) {
      std::string archFlag = "-arch=" + arch, olevel = "-O" + std::to_string(optLevel < 0 ? 0 : optLevel);
      llvm::StringRef args[] = {ptxas, archFlag, olevel, in, "-o", out};
      std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log), llvm::StringRef(log)};
      std::string msg;
      int rc = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects, 0, 0, &msg);
      if (rc != 0) {
        std::string text;
        if (auto buf = llvm::MemoryBuffer::getFile(log)) text = (*buf)->getBuffer().str();
        while (!text.empty() && text.back() == '\n') text.pop_back();
        error = "internal error: " + ptxas + " rejected the generated PTX for " + arch + ": " +
                (text.empty() ? msg : text);
      } else if (auto buf = llvm::MemoryBuffer::getFile(out)) {
        cubin.assign((*buf)->getBufferStart(), (*buf)->getBufferEnd());
        ok = true;
      } else {
        error = "cannot read the cubin " + out;
      }
    }
  }
  for (const std::string &f : {in, out, log}) llvm::sys::fs::remove(f);
  llvm::sys::fs::remove(dir);
  return ok;
}

} // namespace

bool isSupportedCudaArch(const std::string &arch) { return arch == "sm_80" || arch == "sm_90"; }

bool generateCudaKernels(const ir::Module &m, vm::Executable &exe, const CudaOptions &opts,
                         CudaResult &out, std::string &error) {
  initNVPTX();
  std::string lookupError;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(kTriple, lookupError);
  if (!target) {
    error = "LLVM has no NVPTX target: " + lookupError;
    return false;
  }
  auto level = opts.optLevel <= 0 ? llvm::CodeGenOptLevel::None
               : opts.optLevel == 1 ? llvm::CodeGenOptLevel::Less
               : opts.optLevel == 2 ? llvm::CodeGenOptLevel::Default
                                    : llvm::CodeGenOptLevel::Aggressive;
  llvm::TargetOptions to;
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(kTriple, opts.arch, "+ptx80", to, std::nullopt, std::nullopt, level));
  if (!tm) {
    error = "cannot create an LLVM NVPTX target machine for " + opts.arch;
    return false;
  }
  llvm::LLVMContext ctx;
  auto mod = std::make_unique<llvm::Module>("nimble_cuda_kernels", ctx);
  mod->setTargetTriple(kTriple);
  mod->setDataLayout(tm->createDataLayout());
  // libdevice's __nvvm_reflect("__CUDA_FTZ"): keep subnormals, as on the CPU.
  mod->addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t{0});

  vm::CudaCode cuda;
  cuda.arch = opts.arch;
  const KernelTarget nvptx{KernelTarget::Kind::NVPTX, 1};
  struct Made {
    bool generated;
    std::string symbol;
    uint8_t flags;
    std::string reason;
  };
  std::unordered_map<std::string, Made> made;
  for (size_t i = 0; i < exe.kernels.size(); ++i) {
    const vm::KernelDesc &k = exe.kernels[i];
    vm::CudaCode::Entry en;
    en.kernel = static_cast<uint32_t>(i);
    en.kind = deviceKind(k);
    if (en.kind != vm::CudaCode::Kind::Generated) {
      cuda.entries.push_back(en);
      ++out.cublas;
      continue;
    }
    const ir::Function *f = m.lookupFunction(k.name);
    std::string reason, sym = kernelSymbol(i, k.name);
    bool multiBlock = false, perOutput = false;
    BlockRows rows = BlockRows::NotApplicable;
    std::string key = f ? kernelCodeKey(k, *f) : std::string();
    // A kernel identical to an earlier one (kernelCodeKey) shares its entry,
    // as on the CPU (NativeCodegen.cpp).
    if (auto it = f ? made.find(key) : made.end(); it != made.end()) {
      const Made &first = it->second;
      if (first.generated) {
        en.symbol = first.symbol;
        en.flags = first.flags;
        cuda.entries.push_back(en);
        ++out.generated;
        continue;
      }
      reason = first.reason;
    } else if (!f) {
      reason = "no primitive function @" + k.name;
    } else if ((rows = lowerBlockRowKernel(*mod, k, *f, sym, &perOutput, reason)) == BlockRows::Done) {
      en.symbol = sym;
      en.flags = perOutput ? vm::CudaCode::kBlockPerOutput : vm::CudaCode::kBlockPerRow;
      cuda.entries.push_back(en);
      ++out.generated;
      made.emplace(std::move(key), Made{true, sym, en.flags, ""});
      continue;
    } else if (rows == BlockRows::NotApplicable && lowerKernel(*mod, k, *f, nvptx, sym, reason, &multiBlock)) {
      en.symbol = sym;
      en.flags = multiBlock ? vm::CudaCode::kMultiBlock : 0;
      cuda.entries.push_back(en);
      ++out.generated;
      made.emplace(std::move(key), Made{true, sym, en.flags, ""});
      continue;
    } else {
      made.emplace(std::move(key), Made{false, "", 0, reason});
    }
    ++out.missing;
    out.reasons.push_back({k.name, reason});
  }
  if (!linkLibdevice(*mod, error)) return false;
  optimizeKernelModule(*mod, *tm, opts.optLevel);
  {
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(*mod, &os)) {
      error = "internal error: the optimised CUDA kernel module is invalid: " + os.str();
      return false;
    }
  }
  {
    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile)) {
      error = "LLVM cannot emit PTX for " + opts.arch;
      return false;
    }
    pm.run(*mod);
    out.ptx.assign(buf.begin(), buf.end());
  }
  if (cuda.entries.empty()) return true;
  cuda.ptx = out.ptx;
  if (opts.ptxas != "none") {
    std::string ptxas = findPtxas(opts.ptxas);
    if (!ptxas.empty()) {
      if (!runPtxas(ptxas, opts.arch, opts.optLevel, out.ptx, cuda.cubin, error)) return false;
      out.assembled = true;
      out.ptxasPath = ptxas;
    }
  }
  exe.cuda = std::move(cuda);
  return true;
}

} // namespace nimble::codegen
