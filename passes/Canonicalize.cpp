// PLACEHOLDER: being written; must not be committed in this form.
#include "passes/Pass.h"
namespace nimble::passes {
namespace {
class P : public Pass {
public:
  std::string_view name() const override { return "canonicalize"; }
  LogicalResult run(Module &, DiagnosticEngine &diag, bool &) override {
    diag.error({}, "pass 'canonicalize' is not implemented yet");
    return ir::failure();
  }
};
} // namespace
std::unique_ptr<Pass> createCanonicalizePass() { return std::make_unique<P>(); }
} // namespace nimble::passes
