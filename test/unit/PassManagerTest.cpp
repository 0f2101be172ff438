//===- PassManagerTest.cpp - passes::PassManager ---------------------------===//
//
// Skipping an idempotent pass (Pass::idempotent): a pass that runs to its
// fixpoint is skipped where no pass has changed the IR since it last ran
// with the same options, and run again once one has; with checkIdempotent
// (builds with assertions) it runs all the same, and a pass that claims the
// property but changes IR it left stops the pipeline with an error.
//
//===----------------------------------------------------------------------===//

#include "ir/Parser.h"
#include "passes/Pass.h"

#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

/// Counts its runs; changes the IR (renames the first function's entry
/// block) when asked to, on every run.
class ProbePass : public Pass {
public:
  ProbePass(int &runs, bool changes, bool idempotent) : runs_(runs), changes_(changes), idempotent_(idempotent) {}
  std::string_view name() const override { return "probe"; }
  bool idempotent() const override { return idempotent_; }
  LogicalResult run(Module &m, DiagnosticEngine &, bool &changed) override {
    ++runs_;
    if (changes_) {
      Block *b = m.functions().front()->entry();
      b->setLabel(b->label() + "x");
      changed = true;
    }
    return success();
  }

private:
  int &runs_;
  bool changes_, idempotent_;
};

class PassManagerTest : public ::testing::Test {
protected:
  PassManagerTest() : diag(nullptr, diagOut) {
    m = parseModule("func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                    "  %a = neg %x\n"
                    "  %b = neg %x\n"
                    "  %c = add %a, %b\n"
                    "  ret %c\n"
                    "}\n",
                    "t.nir", ctx, diag);
  }
  /// A pass manager that skips idempotent passes (`check` false) or runs
  /// them and checks them (`check` true).
  std::unique_ptr<PassManager> manager(bool check) {
    PassManagerOptions o;
    o.checkIdempotent = check;
    return std::make_unique<PassManager>(diag, dump, o);
  }
  std::string timings(const PassManager &pm) {
    std::ostringstream os;
    pm.printTimings(os);
    return os.str();
  }
  Context ctx;
  std::ostringstream diagOut, dump;
  DiagnosticEngine diag;
  std::unique_ptr<Module> m;
};

TEST_F(PassManagerTest, SkipsAnIdempotentPassWhenNothingChangedSinceItRan) {
  ASSERT_TRUE(m);
  auto owned = manager(false);
  PassManager &pm = *owned;
  int runs = 0;
  std::string error;
  // cse merges the two negs (a change); dce then changes nothing; the second
  // cse finds the IR as the first left it, apart from dce, which changed
  // nothing: skipped. The probe changes nothing and is not idempotent, so
  // the second dce is skipped too.
  ASSERT_TRUE(pm.parsePipeline("cse,dce", error)) << error;
  pm.addPass(std::make_unique<ProbePass>(runs, false, false));
  ASSERT_TRUE(pm.parsePipeline("cse,dce", error)) << error;
  ASSERT_TRUE(succeeded(pm.run(*m))) << diagOut.str();
  EXPECT_EQ(runs, 1);
  std::string t = timings(pm);
  EXPECT_NE(t.find("  cse (skipped: no pass changed the IR since its last run)"), std::string::npos) << t;
  EXPECT_NE(t.find("  dce (skipped: no pass changed the IR since its last run)"), std::string::npos) << t;
}

TEST_F(PassManagerTest, RunsAnIdempotentPassAgainAfterAChange) {
  ASSERT_TRUE(m);
  auto owned = manager(false);
  PassManager &pm = *owned;
  int runs = 0;
  std::string error;
  ASSERT_TRUE(pm.parsePipeline("dce", error)) << error;
  pm.addPass(std::make_unique<ProbePass>(runs, true, false));
  ASSERT_TRUE(pm.parsePipeline("dce", error)) << error;
  ASSERT_TRUE(succeeded(pm.run(*m))) << diagOut.str();
  EXPECT_EQ(timings(pm).find("skipped"), std::string::npos) << timings(pm);
}

TEST_F(PassManagerTest, OptionsArePartOfThePass) {
  ASSERT_TRUE(m);
  auto owned = manager(false);
  PassManager &pm = *owned;
  int a = 0, b = 0;
  // Two idempotent passes under different specs: neither skips the other.
  pm.addPass(std::make_unique<ProbePass>(a, false, true), "probe{mode=a}");
  pm.addPass(std::make_unique<ProbePass>(b, false, true), "probe{mode=b}");
  pm.addPass(std::make_unique<ProbePass>(a, false, true), "probe{mode=a}");
  ASSERT_TRUE(succeeded(pm.run(*m))) << diagOut.str();
  EXPECT_EQ(a, 1); // the second probe{mode=a} is skipped
  EXPECT_EQ(b, 1);
}

TEST_F(PassManagerTest, CheckedModeCatchesAPassThatIsNotIdempotent) {
  ASSERT_TRUE(m);
  auto owned = manager(true);
  PassManager &pm = *owned;
  int runs = 0;
  pm.addPass(std::make_unique<ProbePass>(runs, true, true), "probe");
  pm.addPass(std::make_unique<ProbePass>(runs, true, true), "probe");
  // The first run changes the IR; the second sees it as the first left it
  // and changes it again: the claim is false.
  EXPECT_TRUE(failed(pm.run(*m)));
  EXPECT_EQ(runs, 2);
  EXPECT_NE(diagOut.str().find("error: pass 'probe' changed IR that it had left and no pass had changed since "
                               "(it is declared idempotent: a bug in the pass)"),
            std::string::npos)
      << diagOut.str();
}

TEST_F(PassManagerTest, CheckedModeRunsEveryPass) {
  ASSERT_TRUE(m);
  auto owned = manager(true);
  PassManager &pm = *owned;
  int runs = 0;
  pm.addPass(std::make_unique<ProbePass>(runs, false, true), "probe");
  pm.addPass(std::make_unique<ProbePass>(runs, false, true), "probe");
  ASSERT_TRUE(succeeded(pm.run(*m))) << diagOut.str();
  EXPECT_EQ(runs, 2);
}

} // namespace
} // namespace nimble::passes
