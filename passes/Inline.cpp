// PLACEHOLDER: being written; must not be committed in this form.
#include "passes/Pass.h"
namespace nimble::passes {
namespace {
class P : public Pass {
public:
  std::string_view name() const override { return "inline"; }
  LogicalResult run(Module &, DiagnosticEngine &diag, bool &) override {
    diag.error({}, "pass 'inline' is not implemented yet");
    return ir::failure();
  }
};
} // namespace
std::unique_ptr<Pass> createInlinePass() { return std::make_unique<P>(); }
} // namespace nimble::passes
