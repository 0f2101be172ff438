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

} // namespace

const std::vector<PassInfo> &testPasses() {
  static const std::vector<PassInfo> passes = {
      {"test-break-ir", [] { return std::unique_ptr<Pass>(new TestBreakIRPass()); },
       "Testing only: erase the first function's entry terminator (the IR is then invalid)"},
  };
  return passes;
}

} // namespace nimble::passes
