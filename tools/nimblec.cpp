//===- nimblec.cpp - Compile .nir to a VM executable (.nbc) ---------------===//
//
// parse -> verify -> pipeline for the -O level -> manifest-memory ->
// place-devices -> bytecode emission -> verify the executable -> write it atomically.
// docs/nimblec.md is the manual; --help below says the same.
//
//===----------------------------------------------------------------------===//

#include "codegen/BytecodeEmitter.h"
#include "codegen/Safetensors.h"
#include "codegen/llvm/CudaCodegen.h"
#include "codegen/llvm/NativeCodegen.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Pass.h"
#include "passes/Statistic.h"
#include "tools/ToolSupport.h"
#include "vm/format/Disassembler.h"
#include "vm/format/Format.h"

#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

using namespace nimble;
using namespace nimble::tools;

namespace {

constexpr const char *kHelp = R"(OVERVIEW: nimblec - compile Nimble IR (.nir) to a VM executable (.nbc)

USAGE: nimblec [options] <input.nir | ->

OPTIONS:
  -o <file>                   Write the output to <file> (atomically); default: stdout
                              for --emit=asm and --emit=nir, required for bytecode
  -O0, -O1, -O2, -O3          Optimization level (default -O2); see docs/nimblec.md
  --target=<cpu|cuda>         Target device (default cpu): kernels and their buffers go to
                              it, shape computations stay on the cpu (place-devices); cuda
                              also generates PTX for the kernels (nvptx64-nvidia-cuda) and
                              records cuBLAS for lone f32 matmuls (docs/codegen.md#cuda)
  --cuda-arch=<sm_80|sm_90>   GPU architecture of the PTX and cubin (default sm_80)
  --ptxas=<path|none>         The ptxas that assembles the PTX to a cubin at compile time
                              (default: ptxas on PATH, then /usr/local/cuda/bin). Without
                              one (or with none) the .nbc carries PTX only, which the CUDA
                              driver JIT-compiles when nimble-run loads it
  --emit=<kind>               bytecode (default), asm (bytecode as text), nir (the IR
                              after the pipeline), llvm (the native kernels' optimised LLVM
                              IR), obj (their relocatable ELF object, for objdump -d),
                              ptx (the cuda kernels' PTX; implies --target=cuda)
  --kernels=<kind>            native (default for --target=cpu): generate an LLVM kernel
                              for every kernel the generator handles and embed the linked
                              shared object (docs/codegen.md); reference: the .nbc carries
                              no native code (nimble-run runs its reference kernels)
  --mcpu=<name>               CPU of the native kernels (default: this machine's), e.g.
                              znver3, znver4, skylake-avx512, x86-64-v3
  --mattr=<features>          LLVM target features, e.g. +avx2,+fma,-avx512f
  --weights-dir=<dir>         Where external(...) weight files are looked up when their
                              path is relative (default: the directory of the input)
  --print-ir-after-all        Print the IR after every pass (to stderr)
  --print-ir-after=<names>    Print the IR after the named passes
  --print-ir-before=<names>   Print the IR before the named passes
  --time-passes               Print the wall time of each pass to stderr
  --verify-each[=true|false]  Verify the IR after every pass (default: false; the IR is
                              verified after parsing and after the pipeline)
  --no-verify-each            Same as --verify-each=false
  --passes=<pipeline>         Run this pass pipeline (nimble-opt syntax) instead of the
                              -O level's; it must make memory explicit (manifest-memory)
  --print-pipeline            Print the pipeline of the -O level and target, and exit
  --print-batching            Print the auto-batch pass's decision for every kernel
                              (batched along rows, instance-invariant, or why not) as
                              remarks on stderr (docs/autobatch.md)
  --stats                     Print the passes' statistics (static counts of kernels,
                              allocations, kills, copies) to stderr
  --print-debuginfo           With --emit=nir, print loc(...) after each operation
  --help                      Show this help and exit
  --version                   Show the version and exit

Exit status: 0 on success, 1 when the input is invalid or cannot be compiled
(with a file:line:col: error: message), 2 on a usage error.
)";

struct Options {
  std::string input = "-", output, emit = "bytecode", weightsDir, target = "cpu";
  std::string kernels; // empty: native for --target=cpu, none of ours for cuda
  std::string mcpu, mattr;
  std::string cudaArch = "sm_80", ptxas;
  int optLevel = 2;
  bool stats = false, printPipeline = false, printBatching = false;
  std::string passes; // --passes: replaces the -O level's pipeline
  passes::PassManagerOptions pm = [] {
    passes::PassManagerOptions p;
    p.verifyEach = false; // --verify-each
    // Without it (llc's and clang's default: verifying after every pass was
    // a quarter of the compile time of large programs), the output of the
    // whole pipeline is verified once before anything is emitted from it.
    p.verifyAfterPipeline = true;
    return p;
  }();
};

int usageError(const std::string &msg) { return tools::usageError("nimblec", msg); }

int parseArgs(int argc, char **argv, Options &o) {
  bool haveInput = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::optional<std::string> v;
    if (a == "--help" || a == "-h") {
      std::cout << kHelp;
      return kExitOk;
    }
    if (a == "--version") {
      std::cout << "nimblec (Nimble) 0.1, bytecode format " << vm::Executable::kMajor << "."
                << vm::Executable::kMinor << "\n";
      return kExitOk;
    }
    if (a == "-o") {
      if (i + 1 >= argc) return usageError("-o needs a file name");
      o.output = argv[++i];
    } else if (a.size() == 3 && a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3') {
      o.optLevel = a[2] - '0';
    } else if ((v = flagValue(a, "--emit"))) {
      if (*v != "bytecode" && *v != "asm" && *v != "nir" && *v != "llvm" && *v != "obj" && *v != "ptx")
        return usageError("--emit takes bytecode, asm, nir, llvm, obj or ptx, got '" + *v + "'");
      o.emit = *v;
    } else if ((v = flagValue(a, "--kernels"))) {
      if (*v != "native" && *v != "reference")
        return usageError("--kernels takes native or reference, got '" + *v + "'");
      o.kernels = *v;
    } else if ((v = flagValue(a, "--mcpu"))) {
      if (v->empty()) return usageError("--mcpu needs a CPU name");
      o.mcpu = *v;
    } else if ((v = flagValue(a, "--cuda-arch"))) {
      if (!codegen::isSupportedCudaArch(*v)) return usageError("--cuda-arch takes sm_80 or sm_90, got '" + *v + "'");
      o.cudaArch = *v;
    } else if ((v = flagValue(a, "--ptxas"))) {
      if (v->empty()) return usageError("--ptxas needs a program or none");
      o.ptxas = *v;
    } else if ((v = flagValue(a, "--mattr"))) {
      o.mattr = *v;
    } else if ((v = flagValue(a, "--target"))) {
      if (*v != "cpu" && *v != "cuda") return usageError("--target takes cpu or cuda, got '" + *v + "'");
      o.target = *v;
    } else if ((v = flagValue(a, "--weights-dir"))) {
      if (v->empty()) return usageError("--weights-dir needs a directory");
      o.weightsDir = *v;
    } else if (a == "--print-ir-after-all") {
      o.pm.printAfterAll = true;
    } else if ((v = flagValue(a, "--print-ir-after"))) {
      addCommaSeparated(o.pm.printAfter, *v);
    } else if ((v = flagValue(a, "--print-ir-before"))) {
      addCommaSeparated(o.pm.printBefore, *v);
    } else if (a == "--time-passes") {
      o.pm.timePasses = true;
    } else if (std::string err; boolFlag(a, "--verify-each", o.pm.verifyEach, err)) {
      if (!err.empty()) return usageError(err);
    } else if (a == "--stats") {
      o.stats = true;
    } else if ((v = flagValue(a, "--passes"))) {
      if (v->empty()) return usageError("--passes needs a pipeline");
      o.passes = *v;
    } else if (a == "--print-pipeline") {
      o.printPipeline = true;
    } else if (a == "--print-batching") {
      o.printBatching = true;
    } else if (a == "--print-debuginfo") {
      o.pm.debugInfo = true;
    } else if (a.size() > 1 && a[0] == '-') {
      return usageError("unknown option '" + a + "'");
    } else {
      if (haveInput) return usageError("more than one input file");
      o.input = a;
      haveInput = true;
    }
  }
  if (o.printPipeline) return -1;
  if (!haveInput) return usageError("no input file (use '-' for standard input)");
  if ((o.emit == "bytecode" || o.emit == "obj") && o.output.empty())
    return usageError(o.emit == "obj" ? "obj output needs -o <file.o>" : "bytecode output needs -o <file.nbc>");
  if (o.emit == "llvm" || o.emit == "obj") o.kernels = "native";
  if (o.emit == "ptx") {
    if (o.target == "cpu" && o.kernels == "native") return usageError("--emit=ptx is cuda code; it excludes --kernels=native");
    o.target = "cuda";
  }
  if (o.kernels == "native" && o.target != "cpu")
    return usageError("--kernels=native generates cpu code; --target=" + o.target + " has no native kernels yet");
  // The default: native cpu kernels wherever the generator handles a kernel
  // (docs/codegen.md); the cuda target generates its own (PTX, cuBLAS).
  if (o.kernels.empty()) o.kernels = o.target == "cpu" ? "native" : "reference";
  if (o.output.empty()) o.output = "-";
  for (const auto &names : {o.pm.printBefore, o.pm.printAfter})
    for (const std::string &n : names)
      if (!passes::createPass(n)) return usageError("unknown pass '" + n + "'");
  return -1;
}

/// The pipeline of each -O level (docs/nimblec.md). manifest-memory comes
/// after the optimizations: it changes the calling convention, which the other
/// passes do not model (its kills would not survive CSE). place-devices runs
/// at every level, on the explicit-memory IR (a no-op for --target=cpu), and
/// plan-memory after it (it plans per device).
///
/// auto-batch (docs/autobatch.md) ends the CPU pipelines of -O1 and up: it
/// adds a batched variant of each kernel that can run many instances' calls
/// at once, for nimble-run --instances; -O0 executables run instances one
/// call at a time.
std::string pipelineFor(int level, const std::string &target, bool batchRemarks = false) {
  std::string place = ",place-devices{target=" + target + "}";
  std::string batch = target != "cpu" ? "" : batchRemarks ? ",auto-batch{remarks=true}" : ",auto-batch";
  // dynamic_update_slice, which distribution stacks rows with, has no device
  // form yet: on cuda the split loops would copy through the host.
  std::string distribute = target != "cpu" ? "" : "loop-distribute,";
  switch (level) {
  case 0: return "type-infer,manifest-memory" + place;
  case 1: return "type-infer,canonicalize,cse,dce,manifest-memory" + place + batch;
  default:
    return "inline,type-infer,canonicalize,cse,dce,licm," + distribute +
           "batch-input-projection,cse,dce,type-infer,fuse,manifest-memory{kills=false}" +
           place + ",plan-memory" + batch;
  }
}

std::string dirOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

/// Loads every external constant, checking names, dtypes and shapes.
bool loadWeights(const ir::Module &m, const std::string &dir, codegen::GlobalData &data,
                 ir::DiagnosticEngine &diag) {
  std::map<std::string, std::unique_ptr<codegen::SafetensorsFile>> files;
  for (auto &g : m.globals()) {
    if (!g->isExternal()) continue;
    std::string path = g->file();
    if (path.empty() || path[0] != '/') path = dir + "/" + path;
    auto &file = files[path];
    if (!file) {
      file = std::make_unique<codegen::SafetensorsFile>();
      std::string err;
      if (!file->load(path, err)) {
        diag.error(g->declLoc(), "constant @" + g->name() + ": " + err);
        return false;
      }
    }
    const auto *e = file->find(g->key());
    if (!e) {
      diag.error(g->declLoc(), "constant @" + g->name() + ": no tensor '" + g->key() + "' in '" + path + "'");
      return false;
    }
    ir::Type t = g->type();
    if (e->dtype != t.dtype() || e->shape != t.dims()) {
      diag.error(g->declLoc(), "constant @" + g->name() + ": tensor '" + g->key() + "' in '" + path +
                                   "' is " + formatSig({e->dtype, e->shape}) + " but the constant is declared " +
                                   t.str());
      return false;
    }
    const uint8_t *p = file->data(*e);
    data[g.get()] = std::vector<uint8_t>(p, p + (e->end - e->begin));
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  int early = parseArgs(argc, argv, o);
  if (early >= 0) return early;

  const std::string pipeline = o.passes.empty() ? pipelineFor(o.optLevel, o.target, o.printBatching) : o.passes;
  if (o.printPipeline) {
    std::cout << pipeline << "\n";
    return kExitOk;
  }

  std::string text, error;
  if (!o.passes.empty()) {
    // Check the pipeline before reading the input: a bad one is a usage error.
    ir::DiagnosticEngine quiet(nullptr, std::cerr);
    passes::PassManager probe(quiet, std::cerr);
    if (!probe.parsePipeline(o.passes, error)) {
      if (size_t at = error.find("(see --list-passes)"); at != std::string::npos)
        error.replace(at, 19, "(see nimble-opt --list-passes)");
      return usageError("--passes: " + error);
    }
    bool manifests = false;
    for (const auto &p : probe.passes()) manifests |= p->name() == "manifest-memory";
    if (!manifests)
      return usageError("--passes: the pipeline must run manifest-memory (bytecode needs explicit memory)");
  }
  if (!readInput(o.input, text, error)) {
    std::cerr << "nimblec: error: " << error << "\n";
    return kExitError;
  }
  std::string name = displayName(o.input);
  ir::SourceMgr sm;
  sm.addBuffer(name, std::move(text)); // the only copy: a source of a million ops is 30 MB
  ir::DiagnosticEngine diag(&sm, std::cerr);
  ir::Context ctx;
  ExitOwned<ir::Module> m(ir::parseModule(*sm.buffer(name), name, ctx, diag));
  ir::VerifyOptions parsed;
  parsed.structureVerified = true; // by parseModule
  if (!m || ir::failed(ir::verifyModule(*m, diag, parsed))) return kExitError;

  passes::PassManager pm(diag, std::cerr, o.pm);
  if (!pm.parsePipeline(pipeline, error)) {
    std::cerr << "nimblec: internal error: " << error << "\n";
    return kExitError;
  }
  bool ok = ir::succeeded(pm.run(*m));
  if (o.pm.timePasses) pm.printTimings(std::cerr);
  if (o.stats) passes::printStatistics(std::cerr);
  if (!ok) return kExitError;

  if (o.emit == "nir") {
    ir::PrintOptions popts;
    popts.debugInfo = o.pm.debugInfo;
    if (!writeOutputAtomically(o.output, ir::printModuleToString(*m, popts), error)) {
      std::cerr << "nimblec: error: " << error << "\n";
      return kExitError;
    }
    return kExitOk;
  }

  codegen::GlobalData weights;
  std::string wdir = !o.weightsDir.empty() ? o.weightsDir : o.input == "-" ? "." : dirOf(o.input);
  if (!loadWeights(*m, wdir, weights, diag)) return kExitError;
  vm::Executable exe;
  if (ir::failed(codegen::emitExecutable(*m, weights, exe, diag))) return kExitError;
  if (!vm::verify(exe, error)) {
    std::cerr << "nimblec: internal error: the emitted executable is invalid: " << error << "\n";
    return kExitError;
  }
  if (o.kernels == "native") {
    codegen::NativeOptions nopts;
    nopts.cpu = o.mcpu;
    nopts.attrs = o.mattr;
    nopts.optLevel = o.optLevel;
    codegen::NativeResult nres;
    bool link = o.emit == "bytecode" || o.emit == "asm";
    if (!codegen::generateNativeKernels(*m, exe, nopts, link, nres, error)) {
      std::cerr << "nimblec: error: " << error << "\n";
      return kExitError;
    }
    if (o.stats)
      std::cerr << "native kernels: " << nres.nativeKernels << ", reference kernels: "
                << nres.referenceKernels << "\n"
                << "native kernels sharing an identical kernel's code: " << nres.sharedKernels << "\n";
    for (const auto &[kname, why] : nres.reasons)
      if (o.stats) std::cerr << "  reference @" << kname << ": " << why << "\n";
    if (o.emit == "llvm" || o.emit == "obj") {
      std::string text = o.emit == "llvm" ? nres.llvmIR
                                          : std::string(nres.object.begin(), nres.object.end());
      if (!writeOutputAtomically(o.output, text, error)) {
        std::cerr << "nimblec: error: " << error << "\n";
        return kExitError;
      }
      return kExitOk;
    }
    if (!vm::verify(exe, error)) {
      std::cerr << "nimblec: internal error: the native-code table is invalid: " << error << "\n";
      return kExitError;
    }
  }
  if (o.target == "cuda") {
    codegen::CudaOptions copts;
    copts.arch = o.cudaArch;
    copts.optLevel = o.optLevel;
    copts.ptxas = o.emit == "ptx" ? "none" : o.ptxas;
    codegen::CudaResult cres;
    if (!codegen::generateCudaKernels(*m, exe, copts, cres, error)) {
      std::cerr << "nimblec: error: " << error << "\n";
      return kExitError;
    }
    if (o.stats) {
      std::cerr << "cuda kernels: " << cres.generated << " generated, " << cres.cublas << " cuBLAS, "
                << cres.missing << " without a device form; "
                << (cres.assembled ? "cubin by " + cres.ptxasPath : std::string("PTX only (no ptxas)"))
                << "\n";
      for (const auto &[kname, why] : cres.reasons) std::cerr << "  no device form @" << kname << ": " << why << "\n";
    }
    if (o.emit == "ptx") {
      if (!writeOutputAtomically(o.output, cres.ptx, error)) {
        std::cerr << "nimblec: error: " << error << "\n";
        return kExitError;
      }
      return kExitOk;
    }
    if (!vm::verify(exe, error)) {
      std::cerr << "nimblec: internal error: the cuda-code table is invalid: " << error << "\n";
      return kExitError;
    }
  }
  // Into the file as it is made (vm::writeExecutable): a copy of a big .nbc
  // in memory would raise the peak by its size (164 MB at a million ops; a
  // model's weights). Standard output and special files get the bytes in
  // memory, written from where they were made.
  if (o.emit != "asm" && isRegularOutput(o.output)) {
    if (!writeOutputAtomicallyWith(
            o.output, [&](int fd, std::string &why) { return vm::writeExecutable(fd, exe, why); }, error)) {
      std::cerr << "nimblec: error: " << error << "\n";
      return kExitError;
    }
    return kExitOk;
  }
  std::string asmText;
  std::vector<uint8_t> bytes;
  if (o.emit == "asm") asmText = vm::disassemble(exe);
  else bytes = vm::serialize(exe);
  std::string_view out = o.emit == "asm" ? std::string_view(asmText)
                                         : std::string_view(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  if (!writeOutputAtomically(o.output, out, error)) {
    std::cerr << "nimblec: error: " << error << "\n";
    return kExitError;
  }
  return kExitOk;
}
