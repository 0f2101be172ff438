//===- nimblec.cpp - Compile .nir to a VM executable (.nbc) ---------------===//
//
// parse -> verify -> pipeline for the -O level -> manifest-memory ->
// place-devices -> bytecode emission -> verify the executable -> write it atomically.
// The stages are the compiler driver's (tools/driver/Compiler.h, shared with
// the Python module); this file parses the flags and writes the outputs.
// docs/nimblec.md is the manual; --help below says the same.
//
//===----------------------------------------------------------------------===//

#include "codegen/llvm/CudaCodegen.h"
#include "codegen/llvm/NativeCodegen.h"
#include "ir/Printer.h"
#include "passes/Pass.h"
#include "passes/analysis/DotGraph.h"
#include "passes/Statistic.h"
#include "tools/ToolSupport.h"
#include "tools/driver/Compiler.h"
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
                              for --emit=asm, nir and dot, required for bytecode
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
                              ptx (the cuda kernels' PTX; implies --target=cuda), dot
                              (Graphviz graphs of the IR after the pipeline)
  --dot-graph=<kind>          With --emit=dot: cfg (default), dataflow or memory (the
                              memory plan as a timeline)
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
  --fp-reassociate            Let -O1 and up reorder chains of matrix products to the
                              fewest multiply-adds (matmul-reassociate), and -O2 and up
                              sum two small products as one (linalg-fuse);
                              changes rounding
  --print-batching            Print the auto-batch pass's decision for every kernel
                              (batched along rows, instance-invariant, or why not) as
                              remarks on stderr (docs/autobatch.md)
  --stats                     Print the passes' statistics (static counts of kernels,
                              allocations, kills, copies) to stderr
  --print-debuginfo           With --emit=nir, print loc(...) after each operation
  --crash-reproducer=<file>   When a pass breaks the IR, reports an internal error or
                              dies of a signal, write a .nir that replays it with
                              nimble-opt --run-reproducer to <file> (default: a new file
                              in $TMPDIR, named in the error)
  --no-crash-reproducer       Write no reproducer
  --crash-reproducer-local    Print the IR before every pass, so that a signal's
                              reproducer starts at the failing pass (slower)
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
  bool stats = false, printPipeline = false, printBatching = false, fpReassociate = false;
  bool dotGraphGiven = false;
  passes::DotGraphKind dotGraph = passes::DotGraphKind::Cfg;
  std::string passes; // --passes: replaces the -O level's pipeline
  // --verify-each off, the pipeline's output verified once (the driver's
  // defaults).
  passes::PassManagerOptions pm = [] {
    passes::PassManagerOptions p = driver::CompileOptions::defaultPassManagerOptions();
    p.reproducer.enabled = true; // the Python module's compile leaves it off
    p.reproducer.tool = "nimblec";
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
      if (*v != "bytecode" && *v != "asm" && *v != "nir" && *v != "llvm" && *v != "obj" && *v != "ptx" &&
          *v != "dot")
        return usageError("--emit takes bytecode, asm, nir, llvm, obj, ptx or dot, got '" + *v + "'");
      o.emit = *v;
    } else if ((v = flagValue(a, "--dot-graph"))) {
      if (!passes::parseDotGraphKind(*v, o.dotGraph))
        return usageError("--dot-graph takes cfg, dataflow or memory, got '" + *v + "'");
      o.dotGraphGiven = true;
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
    } else if (a == "--fp-reassociate") {
      o.fpReassociate = true;
    } else if (a == "--print-debuginfo") {
      o.pm.debugInfo = true;
    } else if ((v = flagValue(a, "--crash-reproducer"))) {
      if (v->empty()) return usageError("--crash-reproducer needs a file name");
      o.pm.reproducer.enabled = true;
      o.pm.reproducer.path = *v;
    } else if (a == "--no-crash-reproducer") {
      o.pm.reproducer.enabled = false;
    } else if (a == "--crash-reproducer-local") {
      o.pm.reproducer.local = true;
    } else if (a.size() > 1 && a[0] == '-') {
      return usageError("unknown option '" + a + "'");
    } else {
      if (haveInput) return usageError("more than one input file");
      o.input = a;
      haveInput = true;
    }
  }
  if (o.dotGraphGiven && o.emit != "dot") return usageError("--dot-graph needs --emit=dot");
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

std::string dirOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  int early = parseArgs(argc, argv, o);
  if (early >= 0) return early;

  driver::CompileOptions copts;
  copts.optLevel = o.optLevel;
  copts.target = o.target;
  copts.kernels = o.kernels;
  copts.mcpu = o.mcpu;
  copts.mattr = o.mattr;
  copts.cudaArch = o.cudaArch;
  copts.ptxas = o.ptxas;
  copts.weightsDir = !o.weightsDir.empty() ? o.weightsDir : o.input == "-" ? "." : dirOf(o.input);
  copts.passes = o.passes;
  copts.printBatching = o.printBatching;
  copts.fpReassociate = o.fpReassociate;
  copts.pm = o.pm;
  if (o.printPipeline) {
    std::cout << driver::pipelineOf(copts) << "\n";
    return kExitOk;
  }

  std::string text, error;
  // Check the pipeline before reading the input: a bad one is a usage error.
  if (!o.passes.empty() && !driver::checkCustomPipeline(o.passes, error)) return usageError(error);
  if (!readInput(o.input, text, error)) {
    std::cerr << "nimblec: error: " << error << "\n";
    return kExitError;
  }
  // Never destroyed (ExitOwned): tearing down the module of a big program
  // object by object costs a good part of a second for nothing.
  ExitOwned<driver::Compilation> c(std::make_unique<driver::Compilation>(copts, std::cerr));
  auto fail = [&](const std::string &msg) {
    std::cerr << "nimblec: " << msg << "\n";
    return kExitError;
  };
  if (!c->parse(std::move(text), displayName(o.input))) return kExitError;
  error.clear();
  bool ok = c->optimize(error);
  if (!error.empty()) return fail(error);
  if (o.pm.timePasses) c->passManager().printTimings(std::cerr);
  if (o.stats) passes::printStatistics(std::cerr);
  if (!ok) return kExitError;

  if (o.emit == "nir" || o.emit == "dot") {
    ir::PrintOptions popts;
    popts.debugInfo = o.pm.debugInfo;
    std::string text = o.emit == "dot" ? passes::printDot(c->module(), o.dotGraph)
                                       : ir::printModuleToString(c->module(), popts);
    if (!writeOutputAtomically(o.output, text, error)) return fail("error: " + error);
    return kExitOk;
  }

  error.clear();
  if (!c->emitBytecode(error)) return error.empty() ? kExitError : fail(error);
  vm::Executable &exe = c->executable();
  if (o.kernels == "native") {
    codegen::NativeResult nres;
    bool link = o.emit == "bytecode" || o.emit == "asm";
    if (!c->generateNative(link, nres, error)) return fail(error);
    if (o.stats)
      std::cerr << "native kernels: " << nres.nativeKernels << ", reference kernels: "
                << nres.referenceKernels << "\n"
                << "native kernels sharing an identical kernel's code: " << nres.sharedKernels << "\n";
    for (const auto &[kname, why] : nres.reasons)
      if (o.stats) std::cerr << "  reference @" << kname << ": " << why << "\n";
    if (o.emit == "llvm" || o.emit == "obj") {
      std::string text = o.emit == "llvm" ? nres.llvmIR
                                          : std::string(nres.object.begin(), nres.object.end());
      if (!writeOutputAtomically(o.output, text, error)) return fail("error: " + error);
      return kExitOk;
    }
  }
  if (o.target == "cuda") {
    codegen::CudaResult cres;
    if (!c->generateCuda(o.emit != "ptx", cres, error)) return fail(error);
    if (o.stats) {
      std::cerr << "cuda kernels: " << cres.generated << " generated, " << cres.cublas << " cuBLAS, "
                << cres.missing << " without a device form; "
                << (cres.assembled ? "cubin by " + cres.ptxasPath : std::string("PTX only (no ptxas)"))
                << "\n";
      for (const auto &[kname, why] : cres.reasons) std::cerr << "  no device form @" << kname << ": " << why << "\n";
    }
    if (o.emit == "ptx") {
      if (!writeOutputAtomically(o.output, cres.ptx, error)) return fail("error: " + error);
      return kExitOk;
    }
  }
  // Into the file as it is made (vm::writeExecutable): a copy of a big .nbc
  // in memory would raise the peak by its size (164 MB at a million ops; a
  // model's weights). Standard output and special files get the bytes in
  // memory, written from where they were made.
  if (o.emit != "asm" && isRegularOutput(o.output)) {
    if (!writeOutputAtomicallyWith(
            o.output, [&](int fd, std::string &why) { return vm::writeExecutable(fd, exe, why); }, error))
      return fail("error: " + error);
    return kExitOk;
  }
  std::string asmText;
  std::vector<uint8_t> bytes;
  if (o.emit == "asm") asmText = vm::disassemble(exe);
  else bytes = vm::serialize(exe);
  std::string_view out = o.emit == "asm" ? std::string_view(asmText)
                                         : std::string_view(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  if (!writeOutputAtomically(o.output, out, error)) return fail("error: " + error);
  return kExitOk;
}
