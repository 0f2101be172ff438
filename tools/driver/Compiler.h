//===- Compiler.h - The compiler driver: .nir text to an executable -*- C++ -*-===//
//
// What nimblec does between reading its input and writing its output, as a
// library that nimblec's main and the Python module (`nimble.compile`) both
// call, so the two can never compile differently:
//
//   parse -> verify -> pipeline of the -O level (or --passes) -> weights ->
//   bytecode emission -> verify the executable -> native kernels (LLVM) ->
//   cuda kernels (NVPTX)
//
// One stage per method of Compilation, so that nimblec can stop after any
// of them for its --emit kinds and print statistics between them. Errors
// located in the .nir go to the DiagnosticEngine's stream (the usual
// `file:line:col: error:` with the source line); the others come back as a
// message that starts with `error: ` or `internal error: ` (a compiler bug),
// for the caller to prefix with its name.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_TOOLS_DRIVER_COMPILER_H
#define NIMBLE_TOOLS_DRIVER_COMPILER_H

#include "codegen/llvm/CudaCodegen.h"
#include "codegen/llvm/NativeCodegen.h"
#include "ir/Diagnostics.h"
#include "ir/IR.h"
#include "ir/Types.h"
#include "passes/Pass.h"
#include "passes/Pipelines.h"
#include "vm/format/Executable.h"

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace nimble::driver {

struct CompileOptions {
  int optLevel = 2;                // -O0..-O3
  std::string target = "cpu";      // cpu | cuda
  std::string kernels = "native";  // native | reference (native needs target cpu)
  std::string mcpu, mattr;         // of the native kernels; empty: this machine's
  std::string cudaArch = "sm_80";  // sm_80 | sm_90
  std::string ptxas;               // "" finds one, "none" writes PTX only
  std::string weightsDir = ".";    // where relative external(...) files are read
  std::string passes;              // replaces the -O level's pipeline when not empty
  bool printBatching = false;      // auto-batch remarks (--print-batching)
  bool fpReassociate = false;      // reorder matmul chains (--fp-reassociate)
  passes::PassManagerOptions pm = defaultPassManagerOptions();

  /// nimblec's: no verification after each pass (llc's and clang's default:
  /// verifying after every pass was a quarter of the compile time of large
  /// programs); the output of the whole pipeline is verified once before
  /// anything is emitted from it.
  static passes::PassManagerOptions defaultPassManagerOptions();
};

/// The pipeline of each -O level: passes::pipelineFor (passes/Pipelines.h).
using passes::pipelineFor;
/// `opts.passes`, or the pipeline of its level and target.
std::string pipelineOf(const CompileOptions &opts);
/// Checks a --passes pipeline before anything is read: it must parse and
/// make memory explicit. False with the reason (a usage error).
bool checkCustomPipeline(const std::string &passes, std::string &error);

/// One compilation, stage by stage. The module, the executable and the
/// source text live as long as the Compilation.
class Compilation {
public:
  /// Diagnostics, pass dumps and remarks go to `diagStream`.
  Compilation(CompileOptions opts, std::ostream &diagStream);
  ~Compilation();
  Compilation(const Compilation &) = delete;
  Compilation &operator=(const Compilation &) = delete;

  /// Parses and verifies `text`, named `name` in diagnostics. False when it
  /// is invalid (diagnostics emitted).
  bool parse(std::string text, const std::string &name);
  /// Runs the pipeline. False when a pass failed (diagnostics emitted) or,
  /// with `error` set, when the pipeline does not parse.
  bool optimize(std::string &error);
  /// Reads the weights, emits the bytecode and verifies it. False with
  /// diagnostics emitted, or with `error` set (an internal error).
  bool emitBytecode(std::string &error);
  /// Generates the native kernels and embeds them (`link`; without it only
  /// the LLVM IR and the object are made, for --emit=llvm|obj).
  bool generateNative(bool link, codegen::NativeResult &out, std::string &error);
  /// Generates the cuda kernels (target cuda).
  bool generateCuda(bool assemble, codegen::CudaResult &out, std::string &error);

  const CompileOptions &options() const { return opts_; }
  ir::Module &module() { return *module_; }
  vm::Executable &executable() { return exe_; }
  passes::PassManager &passManager() { return *pm_; }

private:
  CompileOptions opts_;
  std::ostream &diagStream_;
  ir::SourceMgr sm_;
  std::string name_; // of the input in sm_
  ir::DiagnosticEngine diag_;
  ir::Context ctx_;
  std::unique_ptr<ir::Module> module_;
  std::unique_ptr<passes::PassManager> pm_;
  vm::Executable exe_;
};

/// Every stage for a library user: `text` (named `name`) to the bytes of a
/// verified .nbc with the kernels `opts` asks for, as nimblec -o writes them.
/// On failure returns false with `error` holding what nimblec would print
/// (diagnostics with their source lines, or `error: ...`), without the tool
/// name and the trailing newline.
bool compileToBytes(std::string text, const std::string &name, const CompileOptions &opts,
                    std::vector<uint8_t> &bytes, std::string &error);

} // namespace nimble::driver

#endif // NIMBLE_TOOLS_DRIVER_COMPILER_H
