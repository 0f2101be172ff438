//===- nimble-opt.cpp - Verify and optimize .nir ---------------------------===//
//
// The `opt` / `mlir-opt` of Nimble: parse, verify, run a pass pipeline, print.
// docs/nimble-opt.md is the manual; `--help` below says the same.
//
//===----------------------------------------------------------------------===//

#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/CrashReproducer.h"
#include "passes/Pass.h"
#include "passes/analysis/DotGraph.h"
#include "passes/Statistic.h"
#include "tools/ToolSupport.h"

#include <cstdio>
#include <iostream>
#include <sstream>

using namespace nimble;
using namespace nimble::tools;

namespace {

constexpr const char *kHelp = R"(OVERVIEW: nimble-opt - verify and optimize Nimble IR (.nir)

USAGE: nimble-opt [options] [input.nir | -]

Reads the input (standard input when absent or '-'), verifies it, runs the
passes named by --passes in order, and prints the resulting IR.

OPTIONS:
  -o <file>                   Write the output to <file> (atomically) instead of stdout
  --passes=<pipeline>         Comma-separated passes, e.g. type-infer,canonicalize,cse;
                              options in braces: inline{max-cost=40}
  --list-passes               List the registered passes and exit
  --split-input-file          Treat '// -----' lines as boundaries between
                              independent inputs; outputs are joined the same way
  --verify-diagnostics        Check the diagnostics against the
                              '// expected-error@+N {{...}}' comments of the input
  --verify-each[=true|false]  Verify the IR after every pass (default: true)
  --no-verify-each            Same as --verify-each=false
  --print-ir-before=<names>   Print the IR before the named passes (comma-separated)
  --print-ir-after=<names>    Print the IR after the named passes
  --print-ir-before-all       Print the IR before every pass
  --print-ir-after-all        Print the IR after every pass
  --print-ir-after-change     With --print-ir-after*, print only when the pass changed the IR
  --print-debuginfo           Print loc("file":line:col) after each operation
  --time-passes               Print the wall time of each pass to stderr
  --stats                     Print the passes' statistics (what each did) to stderr
  --crash-reproducer=<file>   When a pass breaks the IR, reports an internal error or
                              dies of a signal, write a .nir that replays it to <file>
                              (default: a new file in $TMPDIR, named in the error)
  --no-crash-reproducer       Write no reproducer
  --crash-reproducer-local    Print the IR before every pass, so that a signal's
                              reproducer starts at the failing pass (slower)
  --run-reproducer            Run the pipeline of the input's
                              '// nimble-reproducer: --passes=...' first line
  --emit=<ir|dot>             Print the IR (default) or Graphviz graphs of its functions
  --dot-graph=<kind>          With --emit=dot: cfg (default), dataflow or memory
  --help                      Show this help and exit
  --version                   Show the version and exit

IR dumps go to stderr. Exit status: 0 on success, 1 when the input is invalid or
a pass fails (with a file:line:col: error: message), 2 on a usage error.
)";

struct Options {
  std::string input = "-", output = "-", pipeline;
  bool split = false, verifyDiagnostics = false, stats = false;
  bool runReproducer = false, reproducerGiven = false;
  bool emitDot = false, dotGraphGiven = false;
  passes::DotGraphKind dotGraph = passes::DotGraphKind::Cfg;
  /// Without --verify-each the module is still verified once after the
  /// last pass (as nimblec does): nimble-opt never prints invalid IR.
  passes::PassManagerOptions pm = [] {
    passes::PassManagerOptions p;
    p.verifyAfterPipeline = true;
    p.reproducer.enabled = true;
    p.reproducer.tool = "nimble-opt";
    return p;
  }();
};

int usageError(const std::string &msg) { return tools::usageError("nimble-opt", msg); }

/// Returns -1 to continue, else the exit code.
int parseArgs(int argc, char **argv, Options &o) {
  bool haveInput = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::optional<std::string> v;
    if (a == "--help" || a == "-help" || a == "-h") {
      std::cout << kHelp;
      return kExitOk;
    }
    if (a == "--version") {
      std::cout << "nimble-opt (Nimble) 0.1\n";
      return kExitOk;
    }
    if (a == "--list-passes") {
      std::cout << "Registered passes:\n";
      for (const auto &p : passes::registeredPasses()) {
        std::string name(p.name);
        std::cout << "  " << name << std::string(name.size() < 16 ? 16 - name.size() : 1, ' ')
                  << p.summary << "\n";
      }
      return kExitOk;
    }
    if (a == "-o") {
      if (i + 1 >= argc) return usageError("-o needs a file name");
      o.output = argv[++i];
    } else if (a.starts_with("-o") && a.size() > 2 && a[2] != '-') {
      o.output = a.substr(2);
    } else if ((v = flagValue(a, "--passes"))) {
      if (v->empty()) return usageError("--passes needs a pipeline, e.g. --passes=type-infer,cse");
      o.pipeline += (o.pipeline.empty() ? "" : ",") + *v;
    } else if (a == "--split-input-file") {
      o.split = true;
    } else if (a == "--verify-diagnostics") {
      o.verifyDiagnostics = true;
    } else if (std::string err; boolFlag(a, "--verify-each", o.pm.verifyEach, err)) {
      if (!err.empty()) return usageError(err);
    } else if (a == "--print-ir-before-all") {
      o.pm.printBeforeAll = true;
    } else if (a == "--print-ir-after-all") {
      o.pm.printAfterAll = true;
    } else if (a == "--print-ir-after-change") {
      o.pm.printAfterChange = true;
    } else if ((v = flagValue(a, "--print-ir-before"))) {
      if (v->empty()) return usageError("--print-ir-before needs pass names");
      addCommaSeparated(o.pm.printBefore, *v);
    } else if ((v = flagValue(a, "--print-ir-after"))) {
      if (v->empty()) return usageError("--print-ir-after needs pass names");
      addCommaSeparated(o.pm.printAfter, *v);
    } else if (a == "--print-debuginfo") {
      o.pm.debugInfo = true;
    } else if (a == "--time-passes") {
      o.pm.timePasses = true;
    } else if (a == "--stats") {
      o.stats = true;
    } else if ((v = flagValue(a, "--crash-reproducer"))) {
      if (v->empty()) return usageError("--crash-reproducer needs a file name");
      o.pm.reproducer.enabled = o.reproducerGiven = true;
      o.pm.reproducer.path = *v;
    } else if (a == "--no-crash-reproducer") {
      o.pm.reproducer.enabled = false;
      o.reproducerGiven = true;
    } else if (a == "--crash-reproducer-local") {
      o.pm.reproducer.local = true;
    } else if (a == "--run-reproducer") {
      o.runReproducer = true;
    } else if ((v = flagValue(a, "--emit"))) {
      if (*v != "ir" && *v != "dot") return usageError("--emit takes ir or dot, got '" + *v + "'");
      o.emitDot = *v == "dot";
    } else if ((v = flagValue(a, "--dot-graph"))) {
      if (!passes::parseDotGraphKind(*v, o.dotGraph))
        return usageError("--dot-graph takes cfg, dataflow or memory, got '" + *v + "'");
      o.dotGraphGiven = true;
    } else if (a.size() > 1 && a[0] == '-') {
      return usageError("unknown option '" + a + "'");
    } else {
      if (haveInput) return usageError("more than one input file ('" + o.input + "' and '" + a + "')");
      o.input = a;
      haveInput = true;
    }
  }
  for (const auto &names : {o.pm.printBefore, o.pm.printAfter})
    for (const std::string &n : names)
      if (!passes::createPass(n)) return usageError("unknown pass '" + n + "' (see --list-passes)");
  if (o.dotGraphGiven && !o.emitDot) return usageError("--dot-graph needs --emit=dot");
  if (o.runReproducer) {
    if (!o.pipeline.empty()) return usageError("--run-reproducer takes the pipeline from the input; drop --passes");
    if (o.split) return usageError("--run-reproducer replays one module; drop --split-input-file");
    // A replay that fails again writes no second file unless asked to.
    if (!o.reproducerGiven) o.pm.reproducer.enabled = false;
  }
  return -1;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  int early = parseArgs(argc, argv, o);
  if (early >= 0) return early;

  // Validate the pipeline before reading the input: a usage error must not
  // wait for standard input, nor hide behind an unreadable file.
  std::string text, error;
  if (!o.pipeline.empty()) {
    ir::DiagnosticEngine quiet(nullptr, std::cerr);
    passes::PassManager probe(quiet, std::cerr, o.pm);
    if (!probe.parsePipeline(o.pipeline, error)) return usageError(error);
  }

  if (!readInput(o.input, text, error)) {
    std::cerr << "nimble-opt: error: " << error << "\n";
    return kExitError;
  }
  std::string name = displayName(o.input);
  if (o.runReproducer) {
    std::vector<std::string> flags;
    if (!passes::readReproducerHeader(text, flags)) {
      std::cerr << name << ": error: not a reproducer (its first line does not start with '"
                << passes::kReproducerTag << "')\n";
      return kExitError;
    }
    for (const std::string &f : flags) {
      std::optional<std::string> v = flagValue(f, "--passes");
      if (!v) {
        std::cerr << name << ": error: the reproducer's first line has an unknown flag '" << f << "'\n";
        return kExitError;
      }
      o.pipeline += (o.pipeline.empty() || v->empty() ? "" : ",") + *v;
    }
    ir::DiagnosticEngine quiet(nullptr, std::cerr);
    passes::PassManager probe(quiet, std::cerr, o.pm);
    if (!o.pipeline.empty() && !probe.parsePipeline(o.pipeline, error)) {
      std::cerr << name << ": error: the reproducer's pipeline: " << error << "\n";
      return kExitError;
    }
  }
  ir::SourceMgr sm;
  sm.addBuffer(name, std::move(text)); // the only copy
  const std::string &buffer = *sm.buffer(name);
  ir::DiagnosticEngine diag(&sm, std::cerr);
  ir::Context ctx;

  std::vector<Chunk> chunks =
      o.split ? splitInput(buffer) : std::vector<Chunk>{{buffer, 1}};
  std::string out;
  bool ok = true, printedAny = false;
  passes::PassManager timing(diag, std::cerr, o.pm);
  for (size_t i = 0; i < chunks.size(); ++i) {
    std::unique_ptr<ir::DiagnosticVerifier> verifier;
    if (o.verifyDiagnostics)
      verifier = std::make_unique<ir::DiagnosticVerifier>(diag, ctx.intern(name), chunks[i].text,
                                                         chunks[i].firstLine);
    passes::PassManager pm(diag, std::cerr, o.pm);
    std::string ignored;
    if (!o.pipeline.empty()) pm.parsePipeline(o.pipeline, ignored);
    pm.setSource({chunks[i].text, name, chunks[i].firstLine});
    bool chunkOk = false;
    std::string printed;
    if (ExitOwned<ir::Module> m(ir::parseModule(chunks[i].text, name, ctx, diag, chunks[i].firstLine)); m) {
      ir::VerifyOptions parsed;
      parsed.structureVerified = true; // by parseModule
      if (ir::succeeded(ir::verifyModule(*m, diag, parsed)) && ir::succeeded(pm.run(*m))) {
        ir::PrintOptions popts;
        popts.debugInfo = o.pm.debugInfo;
        printed = o.emitDot ? passes::printDot(*m, o.dotGraph) : ir::printModuleToString(*m, popts);
        chunkOk = true;
      }
    }
    if (o.pm.timePasses) pm.printTimings(std::cerr);
    if (o.stats) {
      passes::printStatistics(std::cerr);
      passes::resetStatistics();
    }
    if (verifier) {
      diag.setHandler(nullptr);
      bool matched = verifier->finish([&](const std::string &msg) { std::cerr << msg; });
      ok &= matched;
    } else {
      ok &= chunkOk;
    }
    // Outputs are joined by the separator; a chunk that failed (only possible
    // here under --verify-diagnostics) prints nothing and adds no separator.
    if (chunkOk) {
      if (printedAny) out += "// -----\n";
      out += printed;
      printedAny = true;
    }
  }
  if (!ok) return kExitError;
  if (!writeOutputAtomically(o.output, out, error)) {
    std::cerr << "nimble-opt: error: " << error << "\n";
    return kExitError;
  }
  return kExitOk;
}
