//===- NirFuzzer.cpp - .nir text -> parse -> verify -> -O0..-O2, cpu|cuda -> bytecode ===//
//
// The compiler's front half on arbitrary text, split at `// -----` lines like
// nimble-opt --split-input-file. For every chunk the parser accepts and the
// verifier passes, one of nimblec's pipelines runs with --verify-each (so a
// pass that breaks the IR is a finding), the result prints, and the printed
// text must parse and verify again (the printer/parser pair); then the
// bytecode emitter runs and vm::verify must accept what it emitted. Errors
// reported through diagnostics are fine; crashes, sanitizer reports, and the
// internal-consistency checks below (__builtin_trap) are bugs.
//
// The pipeline is nimblec's own (passes/Pipelines.h) for one of -O0, -O1,
// -O2 and --target=cpu or cuda, picked by a hash of the chunk, so an input
// always takes the same one (a crash reproduces) and the corpus covers all
// six (issue 51 §2: plan-memory crashed on the cuda pipeline, which the
// fuzzer never ran). NIMBLE_FUZZ_PIPELINE=LEVEL:TARGET pins one.
//
//===----------------------------------------------------------------------===//

#include "codegen/BytecodeEmitter.h"
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

/// The pipeline for `text`: NIMBLE_FUZZ_PIPELINE=LEVEL:TARGET, or one of
/// the six (level 0-2, cpu or cuda) by an FNV-1a hash of the text.
std::string pipelineForChunk(std::string_view text) {
  static const char *pinned = std::getenv("NIMBLE_FUZZ_PIPELINE");
  if (pinned && pinned[0] >= '0' && pinned[0] <= '3' && pinned[1] == ':')
    return passes::pipelineFor(pinned[0] - '0', pinned + 2);
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : text) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return passes::pipelineFor(static_cast<int>(h % 3), (h / 3) % 2 ? "cuda" : "cpu");
}

[[noreturn]] void bug(const char *what, const std::string &detail) { fuzz::bug("nir", what, detail); }

void compileChunk(std::string_view text) {
  ir::SourceMgr sm;
  sm.addBuffer("fuzz.nir", std::string(text));
  ir::DiagnosticEngine diag(&sm, fuzz::diagStream());
  ir::Context ctx;
  auto m = ir::parseModule(*sm.buffer("fuzz.nir"), "fuzz.nir", ctx, diag);
  if (!m || ir::failed(ir::verifyModule(*m, diag))) return;

  passes::PassManager pm(diag, fuzz::diagStream());
  std::string error;
  const std::string pipeline = pipelineForChunk(text);
  if (!pm.parsePipeline(pipeline, error)) bug("nimblec's pipeline does not parse", pipeline + ": " + error);
  if (ir::failed(pm.run(*m))) return;

  std::string printed = ir::printModuleToString(*m);
  {
    ir::SourceMgr sm2;
    sm2.addBuffer("printed.nir", printed);
    ir::DiagnosticEngine diag2(&sm2, std::cerr);
    ir::Context ctx2;
    auto m2 = ir::parseModule(*sm2.buffer("printed.nir"), "printed.nir", ctx2, diag2);
    if (!m2 || ir::failed(ir::verifyModule(*m2, diag2)))
      bug("the printed module does not parse and verify again", pipeline + "\n" + printed);
  }

  for (auto &g : m->globals())
    if (g->isExternal()) return; // nimblec loads its weights first
  codegen::GlobalData weights;
  vm::Executable exe;
  if (ir::failed(codegen::emitExecutable(*m, weights, exe, diag))) return;
  if (!vm::verify(exe, error)) bug("the emitted executable does not verify", pipeline + ": " + error + "\n" + printed);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  for (std::string_view chunk : fuzz::splitChunks(text)) compileChunk(chunk);
  return 0;
}
