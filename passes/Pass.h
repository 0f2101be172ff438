//===- Pass.h - Passes and the pass manager ------------------------*- C++ -*-===//
//
// A pass transforms a Module in place and reports whether it changed anything
// (Glow's convention). Passes are registered once, in Passes.def; the pass
// manager builds pipelines from their names, verifies the IR after each pass
// (naming the pass that broke it), prints IR before/after passes and times
// them — the options of LLVM's `opt` and `mlir-opt`.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_PASS_H
#define NIMBLE_PASSES_PASS_H

#include "ir/IR.h"
#include "passes/CrashReproducer.h"

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace nimble::passes {

using ir::DiagnosticEngine;
using ir::LogicalResult;
using ir::Module;

class CallGraph;
class EffectAnalysis;

/// The analyses a pass may reuse from the passes before it in one pass
/// manager run (MLIR's AnalysisManager, reduced to what is expensive to
/// recompute here): the effects of functions, which CSE and DCE each built
/// from a call graph over every op (issue 23: on a program of 125,000
/// functions that was half of both passes). The pass manager drops them
/// after a pass that changed the IR without preserving them
/// (Pass::preservesEffects).
class AnalysisCache {
public:
  explicit AnalysisCache(const Module &m);
  ~AnalysisCache();
  /// Built on first use; valid until invalidate().
  const EffectAnalysis &effects();
  void invalidate();

private:
  const Module &m_;
  std::unique_ptr<CallGraph> cg_;
  std::unique_ptr<EffectAnalysis> effects_;
};

class Pass {
public:
  virtual ~Pass() = default;
  /// The registry name (`type-infer`).
  virtual std::string_view name() const = 0;
  /// Runs on `m`. Returns failure after reporting an error through `diag`;
  /// sets `changed` when the IR was modified.
  virtual LogicalResult run(Module &m, DiagnosticEngine &diag, bool &changed) = 0;
  /// Sets option `key` (from `--passes=name{key=value}`). Returns an error
  /// message, or "" on success.
  virtual std::string setOption(std::string_view key, std::string_view value) {
    return "pass '" + std::string(name()) + "' has no option '" + std::string(key) + "'";
  }
  /// True when the pass, even when it changes the IR, leaves every
  /// function's effects (EffectAnalysis) and calls as they were.
  virtual bool preservesEffects() const { return false; }
  /// True when running the pass on IR it left changes nothing (it runs to
  /// its fixpoint: cse, dce, type-infer). The pass manager then skips it
  /// where no pass has changed the IR since it last ran with the same
  /// options: nimblec -O2 runs cse, dce and type-infer a second time for
  /// what licm, loop-distribute and batch-input-projection change, and when
  /// they change nothing the second round would walk every op to find
  /// nothing. Builds with assertions run it anyway and check that it
  /// changes nothing.
  virtual bool idempotent() const { return false; }
  /// Set by the pass manager around run(); null when run alone.
  void setAnalysisCache(AnalysisCache *c) { analyses_ = c; }

protected:
  AnalysisCache *analyses() const { return analyses_; }
  /// Parses all of `text` as a decimal integer in [lo, hi] (option values).
  static bool parseIntOption(std::string_view text, int64_t lo, int64_t hi, int64_t &out);

private:
  AnalysisCache *analyses_ = nullptr;
};

struct PassInfo {
  std::string_view name;
  std::unique_ptr<Pass> (*create)();
  std::string_view summary;
};
/// Every registered pass, in Passes.def order.
const std::vector<PassInfo> &registeredPasses();
/// Passes for tests only (passes/TestPasses.cpp): createPass finds them by
/// name, but they are not registered (not listed, never in a pipeline that
/// walks the registry).
const std::vector<PassInfo> &testPasses();
/// The registered or test pass `name`, or null.
std::unique_ptr<Pass> createPass(std::string_view name);

#define NIMBLE_PASS(Name, Factory, Summary) std::unique_ptr<Pass> Factory();
#include "passes/Passes.def"

struct PassManagerOptions {
  bool verifyEach = true;
  /// Without verifyEach: verify once after the last pass (nimblec, as llc:
  /// a pass bug still stops the compile before anything is emitted).
  bool verifyAfterPipeline = false;
  bool printBeforeAll = false, printAfterAll = false;
  std::set<std::string> printBefore, printAfter;
  /// Print after a pass only when it changed the IR.
  bool printAfterChange = false;
  bool timePasses = false;
  bool debugInfo = false;
  /// A file that replays a failing pass (passes/CrashReproducer.h); needs
  /// PassManager::setSource and a textual pipeline.
  ReproducerOptions reproducer;
  /// Run an idempotent pass even where it would be skipped, and stop with an
  /// error if it changes the IR (Pass::idempotent): on in builds with
  /// assertions, so that every test checks the passes' claim.
#ifdef NDEBUG
  bool checkIdempotent = false;
#else
  bool checkIdempotent = true;
#endif
};

class PassManager {
public:
  PassManager(DiagnosticEngine &diag, std::ostream &dumpStream, PassManagerOptions opts = {});
  ~PassManager();

  /// `spec` names the pass and its options for Pass::idempotent (empty:
  /// never skipped).
  void addPass(std::unique_ptr<Pass> p, std::string spec = "") {
    passes_.push_back(std::move(p));
    specs_.push_back(std::move(spec));
  }
  /// Appends the passes of a textual pipeline "a,b{key=value,...},c".
  /// Reports unknown passes or options through the error string.
  bool parsePipeline(std::string_view text, std::string &error);
  const std::vector<std::unique_ptr<Pass>> &passes() const { return passes_; }

  /// The text the module to run on was parsed from, for crash reproducers.
  /// It must outlive run().
  void setSource(ReproducerSource src) { source_ = std::move(src); }
  /// Runs every pass in order; stops at the first failure.
  LogicalResult run(Module &m);
  /// Prints the --time-passes report accumulated over all runs.
  void printTimings(std::ostream &os) const;

private:
  /// Verifies `m`; when it is invalid, reports `headline` first, then the
  /// verifier's errors (each with the offending operation).
  bool verifyOrExplain(Module &m, const std::string &headline);

  DiagnosticEngine &diag_;
  std::ostream &dump_;
  PassManagerOptions opts_;
  std::vector<std::unique_ptr<Pass>> passes_;
  /// Each pass as the pipeline wrote it (`cse`, `manifest-memory{kills=false}`):
  /// an idempotent pass is skipped only after a run with the same options
  /// (empty for addPass: never skipped).
  std::vector<std::string> specs_;
  ReproducerSource source_;
  std::vector<double> seconds_;
  /// Per pass: the runs skipped (Pass::idempotent) and made.
  std::vector<int> skipped_, ran_;
  double verifySeconds_ = 0;
};

} // namespace nimble::passes

#endif // NIMBLE_PASSES_PASS_H
