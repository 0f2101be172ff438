//===- TestPasses.cpp - Passes that exist only for testing ----------------===//
//
// Like MLIR's `-test-*` passes: reachable by name in a pipeline
// (`--passes=test-break-ir`) but not registered, so `--list-passes` does not
// show them and nothing that walks the registry (the -O pipelines,
// test/pass_orderings.py's random pipelines) ever runs them. They let tests
// reach the pass manager's paths that only a bug in a real pass would take.
//
//===----------------------------------------------------------------------===//

#include "passes/Pass.h"

#include <csignal>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

/// Breaks the IR the way a buggy pass could: erases the terminator of the
/// first function with a body, leaving its entry block unterminated. The
/// verifier after the pass (--verify-each) or after the pipeline must then
/// stop the compilation with a headline that names the culprit.
class TestBreakIRPass : public Pass {
public:
  std::string_view name() const override { return "test-break-ir"; }
  LogicalResult run(Module &m, DiagnosticEngine &, bool &changed) override {
    for (auto &f : m.functions()) {
      Block *entry = f->entry();
      Operation *t = entry ? entry->terminator() : nullptr;
      if (!t) continue;
      t->erase();
      changed = true;
      break;
    }
    return success();
  }
};

/// Dies of a signal, as a pass with a memory error would: the crash
/// reproducer's signal path (passes/CrashReproducer.h). `signal` is segv
/// (default), abort, bus, fpe or ill; raised, not provoked, so that every
/// build (sanitizers, optimisation) dies the same way.
class TestCrashPass : public Pass {
public:
  std::string_view name() const override { return "test-crash"; }
  std::string setOption(std::string_view key, std::string_view value) override {
    static const std::pair<std::string_view, int> kinds[] = {
        {"segv", SIGSEGV}, {"abort", SIGABRT}, {"bus", SIGBUS}, {"fpe", SIGFPE}, {"ill", SIGILL}};
    if (key != "signal") return Pass::setOption(key, value);
    for (const auto &[text, sig] : kinds)
      if (value == text) {
        signal_ = sig;
        return "";
      }
    return "option 'signal' of 'test-crash' takes segv, abort, bus, fpe or ill, got '" + std::string(value) + "'";
  }
  LogicalResult run(Module &, DiagnosticEngine &, bool &) override {
    std::raise(signal_);
    return success();
  }

private:
  int signal_ = SIGSEGV;
};

/// Reports an internal error (a compiler bug, not the input's) and fails.
class TestInternalErrorPass : public Pass {
public:
  std::string_view name() const override { return "test-internal-error"; }
  LogicalResult run(Module &, DiagnosticEngine &diag, bool &) override {
    diag.error({}, "internal error: test-internal-error always fails");
    return failure();
  }
};

} // namespace

const std::vector<PassInfo> &testPasses() {
  static const std::vector<PassInfo> passes = {
      {"test-break-ir", [] { return std::unique_ptr<Pass>(new TestBreakIRPass()); },
       "Testing only: erase the first function's entry terminator (the IR is then invalid)"},
      {"test-crash", [] { return std::unique_ptr<Pass>(new TestCrashPass()); },
       "Testing only: raise a fatal signal (test-crash{signal=segv|abort|bus|fpe|ill})"},
      {"test-internal-error", [] { return std::unique_ptr<Pass>(new TestInternalErrorPass()); },
       "Testing only: report an internal error and fail"},
  };
  return passes;
}

} // namespace nimble::passes
