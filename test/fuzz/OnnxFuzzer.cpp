//===- OnnxFuzzer.cpp - .onnx bytes -> import -> verify -> nimblec's pipeline ===//
//
// nimble-import-onnx's front half on arbitrary bytes (issue 47: "a malformed,
// truncated or hostile .onnx gives one located error and exit 1"). For every
// input the ModelProto parser and the importer (frontend/onnx) accept:
//
//   * the module must verify (the importer promises a verified module or an
//     error, never a module nimblec would reject);
//   * its printed text must parse and verify again (the .nir the tool writes
//     is what nimblec reads in `nimble-import-onnx m.onnx | nimblec -`);
//   * one of nimblec's pipelines (-O0 or -O2 by a hash of the input, so an
//     input always takes the same one) runs with the passes' own verification,
//     and the bytecode emitter's output must pass vm::verify.
//
// Every initializer is inlined (no side file): the fuzzer writes nothing.
// External data resolves against an empty directory, so a hostile location
// can only fail to open; the importer refuses absolute and upward paths
// before that. Errors the importer returns are fine; crashes, sanitizer
// reports and the checks below (__builtin_trap) are bugs. libprotobuf itself
// is not instrumented: coverage comes from the importer, which is what this
// target is for.
//
//===----------------------------------------------------------------------===//

#include "codegen/BytecodeEmitter.h"
#include "frontend/onnx/Importer.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Pass.h"
#include "passes/Pipelines.h"
#include "test/fuzz/FuzzSupport.h"
#include "vm/format/Format.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <ostream>
#include <streambuf>
#include <string>

using namespace nimble;

namespace {

[[noreturn]] void bug(const char *what, const std::string &detail) { fuzz::bug("onnx", what, detail); }

/// An empty directory of this process's own for external-data lookups.
const std::string &modelPath() {
  static const std::string path = [] {
    char dir[] = "/tmp/nimble-onnx-fuzz-XXXXXX";
    const char *made = mkdtemp(dir);
    return std::string(made ? made : "/nonexistent") + "/fuzz.onnx";
  }();
  return path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string bytes(reinterpret_cast<const char *>(data), size);
  onnx_import::ImportOptions opts;
  opts.modelPath = modelPath();
  opts.displayName = "fuzz.onnx";
  opts.inlineLimit = UINT64_MAX;
  ir::Context ctx;
  onnx_import::ImportResult result;
  std::string error;
  if (!onnx_import::importOnnxBytes(bytes, opts, ctx, result, error)) {
    if (error.empty() || error.find('\n') != std::string::npos)
      bug("the importer failed without one line of error", error);
    return 0;
  }
  if (!result.module) bug("the importer succeeded without a module", "");
  if (!result.weights.empty()) bug("an initializer went to a side file with inlineLimit = UINT64_MAX", "");

  ir::SourceMgr sm;
  ir::DiagnosticEngine diag(&sm, fuzz::diagStream());
  std::string printed = ir::printModuleToString(*result.module);
  if (ir::failed(ir::verifyModule(*result.module, diag)))
    bug("the importer returned a module that does not verify", printed);
  {
    ir::SourceMgr sm2;
    sm2.addBuffer("printed.nir", printed);
    ir::DiagnosticEngine diag2(&sm2, std::cerr);
    ir::Context ctx2;
    auto m2 = ir::parseModule(*sm2.buffer("printed.nir"), "printed.nir", ctx2, diag2);
    if (!m2 || ir::failed(ir::verifyModule(*m2, diag2)))
      bug("the imported module's printed text does not parse and verify", printed);
  }

  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 0x100000001b3ull;
  const std::string pipeline = passes::pipelineFor(h % 2 ? 2 : 0, "cpu");
  passes::PassManager pm(diag, fuzz::diagStream());
  if (!pm.parsePipeline(pipeline, error)) bug("nimblec's pipeline does not parse", pipeline + ": " + error);
  if (ir::failed(pm.run(*result.module))) return 0;
  codegen::GlobalData weights;
  vm::Executable exe;
  if (ir::failed(codegen::emitExecutable(*result.module, weights, exe, diag))) return 0;
  if (!vm::verify(exe, error)) bug("the emitted executable does not verify", pipeline + ": " + error);
  return 0;
}
