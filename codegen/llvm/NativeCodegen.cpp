//===- NativeCodegen.cpp - Kernels to an object, the object to a shared object ---===//
//
// The driver of the kernel generator: one LLVM module for all the kernels of
// an executable, optimised with the new pass manager at the chosen level,
// compiled by an x86-64 TargetMachine for the chosen CPU, and linked by lld.
//
// Why lld as a library (liblld-19-dev) rather than the system linker: the
// compiler then needs no binutils and no temporary file visible to anyone
// but itself, links in milliseconds, and produces the same bytes on every
// machine; the object has no dependency beyond libc and libm symbols, which
// nimble-run already has loaded when it maps it (docs/codegen.md).
//
// The CPU: --mcpu (default: the host's, as LLVM's sys::getHostCPUName sees
// it) and --mattr; the features actually enabled are recorded in the .nbc so
// that nimble-run can refuse, in one line, to map code its CPU cannot run.
//
//===----------------------------------------------------------------------===//

#include "codegen/llvm/NativeCodegen.h"

#include "codegen/llvm/KernelGen.h"
#include "passes/analysis/Analysis.h"
#include "vm/format/Format.h"
#include "vm/format/NativeSignature.h"

#include <lld/Common/Driver.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/SubtargetFeature.h>
#include <llvm/TargetParser/Triple.h>

#include <mutex>
#include <unordered_map>

LLD_HAS_DRIVER(elf)

namespace nimble::codegen {

namespace {

void initLLVM() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
  });
}

// The features a TargetMachine for `cpu` + `attrs` enables that nimble-run
// checks at load (the ISA extensions that change which instructions exist).
std::vector<std::string> recordedFeatures(const llvm::TargetMachine &tm, const std::string &cpu) {
  static const char *const kChecked[] = {"sse4.2", "avx",      "avx2",     "fma",      "f16c",
                                         "bmi",    "bmi2",     "avx512f",  "avx512bw", "avx512dq",
                                         "avx512vl", "avx512vnni", "avx512bf16", "amx-tile"};
  llvm::StringMap<bool> host;
  std::vector<std::string> out;
  const llvm::MCSubtargetInfo *sti = tm.getMCSubtargetInfo();
  for (const char *f : kChecked)
    if (sti->checkFeatures(std::string("+") + f)) out.push_back(f);
  (void)cpu;
  (void)host;
  return out;
}

unsigned vectorWidthFor(const std::vector<std::string> &features) {
  for (const std::string &f : features)
    if (f == "avx512f") return 16;
  for (const std::string &f : features)
    if (f == "avx") return 8;
  return 4; // SSE
}

bool linkSharedObject(const std::vector<uint8_t> &object, std::vector<uint8_t> &so,
                      std::string &error) {
  std::string dir;
  if (!makeTemporaryDirectory("nimblec-link", "the linker", dir, error)) return false;
  std::string in = dir + "/kernels.o", out = dir + "/kernels.so";
  bool ok = false;
  {
    if (writeTemporaryFile(in, llvm::StringRef(reinterpret_cast<const char *>(object.data()), object.size()), error)) {
      // -shared, no soname, no undefined-symbol check (libc/libm symbols are
      // resolved by the dynamic loader in nimble-run), symbols hashed both
      // ways, no build-id: the bytes depend only on the object.
      const char *args[] = {"ld.lld",         "-shared",         "--hash-style=both", "-z",
                            "noexecstack",    "--build-id=none", "-O1",               in.c_str(),
                            "-o",             out.c_str()};
      std::string diag;
      llvm::raw_string_ostream errOS(diag), outOS(diag);
      lld::Result r = lld::lldMain(args, outOS, errOS, {{lld::Gnu, &lld::elf::link}});
      if (r.retCode != 0) {
        error = "lld failed: " + errOS.str();
      } else if (auto buf = llvm::MemoryBuffer::getFile(out)) {
        so.assign((*buf)->getBufferStart(), (*buf)->getBufferEnd());
        ok = true;
      } else {
        error = "cannot read the linked object " + out;
      }
    }
  }
  llvm::sys::fs::remove(in);
  llvm::sys::fs::remove(out);
  llvm::sys::fs::remove(dir);
  return ok;
}

} // namespace

std::string hostCPUName() { return llvm::sys::getHostCPUName().str(); }

bool makeTemporaryDirectory(const char *prefix, const char *forWhom, std::string &dir, std::string &error) {
  llvm::SmallString<128> path;
  if (auto ec = llvm::sys::fs::createUniqueDirectory(prefix, path)) {
    error = std::string("cannot create a temporary directory for ") + forWhom + ": " + ec.message();
    return false;
  }
  dir = path.str().str();
  return true;
}

bool writeTemporaryFile(const std::string &path, llvm::StringRef bytes, std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    error = "cannot write " + path + ": " + ec.message();
    return false;
  }
  os << bytes;
  os.close();
  return true;
}

// The new pass manager's default pipeline at the level (the target machine
// adds its own passes: NVVMReflect for libdevice on NVPTX).
void optimizeKernelModule(llvm::Module &mod, llvm::TargetMachine &tm, int optLevel) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel ol = optLevel <= 0   ? llvm::OptimizationLevel::O0
                               : optLevel == 1 ? llvm::OptimizationLevel::O1
                               : optLevel == 2 ? llvm::OptimizationLevel::O2
                                                    : llvm::OptimizationLevel::O3;
  llvm::ModulePassManager mpm = ol == llvm::OptimizationLevel::O0
                                    ? pb.buildO0DefaultPipeline(ol)
                                    : pb.buildPerModuleDefaultPipeline(ol);
  mpm.run(mod, mam);
}

bool generateNativeKernels(const ir::Module &m, vm::Executable &exe, const NativeOptions &opts,
                           bool link, NativeResult &out, std::string &error) {
  initLLVM();
  llvm::Triple triple("x86_64-unknown-linux-gnu");
  std::string lookupError;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple.str(), lookupError);
  if (!target) {
    error = "LLVM has no x86-64 target: " + lookupError;
    return false;
  }
  std::string cpu = opts.cpu.empty() ? hostCPUName() : opts.cpu;
  std::string attrs = opts.attrs;
  if (opts.cpu.empty() && opts.attrs.empty()) {
    // The host: its CPU name plus the features it really has (a CPU name
    // alone over-promises on virtual machines that mask AVX-512).
    llvm::SubtargetFeatures f;
    for (const auto &kv : llvm::sys::getHostCPUFeatures()) f.AddFeature(kv.first(), kv.second);
    attrs = f.getString();
  }
  {
    // An unknown --mcpu is a user error (LLVM would only warn on stderr).
    std::unique_ptr<llvm::MCSubtargetInfo> probe(target->createMCSubtargetInfo(triple.str(), "", ""));
    if (!opts.cpu.empty() && !probe->isCPUStringValid(opts.cpu)) {
      error = "unknown --mcpu '" + opts.cpu + "' (try e.g. znver3, znver4, skylake-avx512, x86-64-v3)";
      return false;
    }
  }
  llvm::TargetOptions to;
  auto level = opts.optLevel <= 0 ? llvm::CodeGenOptLevel::None
               : opts.optLevel == 1 ? llvm::CodeGenOptLevel::Less
               : opts.optLevel == 2 ? llvm::CodeGenOptLevel::Default
                                    : llvm::CodeGenOptLevel::Aggressive;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple.str(), cpu, attrs, to, llvm::Reloc::PIC_, llvm::CodeModel::Small, level));
  if (!tm) {
    error = "cannot create an LLVM target machine for cpu '" + cpu + "'";
    return false;
  }
  std::vector<std::string> features = recordedFeatures(*tm, cpu);
  unsigned vf = vectorWidthFor(features);

  llvm::LLVMContext ctx;
  auto mod = std::make_unique<llvm::Module>("nimble_kernels", ctx);
  mod->setTargetTriple(triple.str());
  mod->setDataLayout(tm->createDataLayout());

  vm::NativeCode native;
  native.triple = triple.str();
  native.cpu = cpu;
  native.features = features;
  // Gather fusion (docs/autobatch.md): the batched variant of a `rows`
  // kernel also gets an entry that reads its per-instance inputs and writes
  // its outputs through row tables; the mask follows the batching section
  // (every output, the inputs not shared), which nimble-run reads too.
  std::vector<std::vector<bool>> gatherMask(exe.kernels.size());
  for (const vm::KernelBatching &b : exe.batching) {
    if (b.mode != vm::KernelBatching::Mode::Rows || b.batched >= exe.kernels.size()) continue;
    const vm::KernelDesc &kb = exe.kernels[b.batched];
    if (b.shared.size() != kb.numInputs) continue;
    size_t values = kb.numInputs;
    for (const auto &mem : kb.members) values += mem.numResults;
    std::vector<bool> mask(values + kb.outputs.size(), false);
    for (size_t in = 0; in < kb.numInputs; ++in) mask[in] = !b.shared[in];
    for (size_t o = 0; o < kb.outputs.size(); ++o) mask[values + o] = true;
    gatherMask[b.batched] = std::move(mask);
  }
  // Kernels whose code would be identical (kernelCodeKey, and the same
  // gather mask) share the first one's function: its entry symbol (and
  // _gather entry) serves them all, and LLVM compiles it once.
  struct Made {
    bool native;
    std::string symbol; // or the reason it stays on the reference path
    bool gathered;
  };
  std::unordered_map<std::string, Made> made;
  for (size_t i = 0; i < exe.kernels.size(); ++i) {
    const vm::KernelDesc &k = exe.kernels[i];
    const ir::Function *f = m.lookupFunction(k.name);
    std::string reason;
    std::string sym = kernelSymbol(i, k.name);
    KernelTarget cpu{KernelTarget::Kind::CPU, vf};
    if (!f) {
      reason = "no primitive function @" + k.name;
    } else {
      std::string key = kernelCodeKey(k, *f) + "|gather:";
      for (bool g : gatherMask[i]) key += g ? '1' : '0';
      auto it = made.find(key);
      if (it != made.end()) {
        const Made &first = it->second;
        if (first.native) {
          native.entries.push_back({static_cast<uint32_t>(i), first.symbol});
          ++out.nativeKernels;
          ++out.sharedKernels;
          out.gatheredKernels += first.gathered;
          continue;
        }
        reason = first.symbol;
      } else if (lowerKernel(*mod, k, *f, cpu, sym, reason)) {
        native.entries.push_back({static_cast<uint32_t>(i), sym});
        ++out.nativeKernels;
        std::string why;
        bool gathered = !gatherMask[i].empty() && lowerGatheredKernel(*mod, k, *f, cpu, sym, gatherMask[i], why);
        out.gatheredKernels += gathered;
        made.emplace(std::move(key), Made{true, sym, gathered});
        continue;
      } else {
        made.emplace(std::move(key), Made{false, reason, false});
      }
    }
    ++out.referenceKernels;
    out.reasons.push_back({k.name, reason});
  }

  // What each entry was compiled for, in a section of its own that the
  // loader reads before mapping the object (vm/format/NativeSignature.h).
  if (!native.entries.empty()) {
    std::vector<vm::NativeSignature> sigs;
    auto bufferSig = [](ir::Type t) {
      vm::NativeBufferSig b;
      b.dtype = t.dtype();
      for (int64_t d : t.dims()) b.dims.push_back(d);
      return b;
    };
    for (const vm::NativeCode::Entry &en : native.entries) {
      const vm::KernelDesc &k = exe.kernels[en.kernel];
      const ir::Function *f = m.lookupFunction(k.name);
      vm::NativeSignature sig;
      sig.kernel = en.kernel;
      sig.symbol = en.symbol;
      sig.digest = vm::kernelDigest(k);
      for (ir::Type t : f->argTypes()) sig.inputs.push_back(bufferSig(t));
      for (ir::Type t : f->resultTypes()) sig.outputs.push_back(bufferSig(t));
      sigs.push_back(std::move(sig));
    }
    llvm::Constant *text =
        llvm::ConstantDataArray::getString(ctx, vm::formatNativeSignatures(sigs), /*AddNull=*/false);
    auto *gv = new llvm::GlobalVariable(*mod, text->getType(), /*isConstant=*/true,
                                        llvm::GlobalValue::PrivateLinkage, text, "nimble_kernel_sigs");
    gv->setSection(vm::kNativeSigSection);
    gv->setAlignment(llvm::Align(1));
    llvm::appendToUsed(*mod, {gv});
  }

  optimizeKernelModule(*mod, *tm, opts.optLevel);
  {
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(*mod, &os)) {
      error = "internal error: the optimised kernel module is invalid: " + os.str();
      return false;
    }
  }
  {
    llvm::raw_string_ostream os(out.llvmIR);
    mod->print(os, nullptr);
  }
  {
    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
      error = "LLVM cannot emit an object for this target";
      return false;
    }
    pm.run(*mod);
    out.object.assign(buf.begin(), buf.end());
  }
  if (!link || native.entries.empty()) return true;
  if (!linkSharedObject(out.object, native.object, error)) return false;
  exe.native = std::move(native);
  return true;
}

} // namespace nimble::codegen
