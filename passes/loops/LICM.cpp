//===- LICM.cpp - Loop-invariant code motion ------------------------------===//
//
// Moves pure ops whose operands are all defined outside a loop into the
// loop's preheader (passes/analysis/Loops.h), innermost loops first, so an op hoisted
// out of an inner loop can leave the outer one too. Ops are visited in
// reverse post-order, so an invariant chain moves in one sweep.
//
// An op moves when:
//   - it is Pure (Ops.def: no effect, no allocation of its own), not a
//     terminator, and has results;
//   - every operand is loop-invariant (a global, or defined outside the loop,
//     including by an op hoisted earlier);
//   - it would run on every entry to the loop anyway, i.e. it is in the
//     header (which runs at least once per entry), or it is safe to
//     *speculate*: running it when the loop body would not have run cannot
//     fail or change the program's result. Nimble's ops can fail at run time
//     only through their shape checks or their data (an index out of range,
//     an integer division by zero, a shape computed from values), so an op is
//     speculatable when its shape is decided by its operands' types alone
//     (DataIndependent), every operand type is fully static (the type
//     checker has already proved the shape checks), and it is not one of the
//     ops that read indices or divide integers (take, dynamic_slice,
//     integer div). `constant` always is.
//
// Calls are not moved (Ops.def flags `call` as an effect); nor is anything in
// a loop without a preheader (its header has several outside predecessors, or
// one that ends in a conditional branch).
//
//===----------------------------------------------------------------------===//

#include "passes/analysis/Loops.h"
#include "passes/Pass.h"
#include "passes/Statistic.h"

namespace nimble::passes {
namespace {

using namespace nimble::ir;

NIMBLE_STATISTIC(NumHoisted, "licm", "Number of loop-invariant ops moved to a preheader");
NIMBLE_STATISTIC(NumSpeculated, "licm", "Number of hoisted ops that the loop ran conditionally (speculated)");

bool isSpeculatable(const Operation &op) {
  if (op.is(OpCode::Constant)) return true;
  const OpInfo &info = op.info();
  if (info.shapeMode != ShapeMode::DataIndependent) return false;
  // Their operand values can fail them (an index, a start, cumsum's axis;
  // grid_sample: an empty spatial axis to sample).
  if (op.is(OpCode::Take) || op.is(OpCode::DynamicSlice) || op.is(OpCode::DynamicUpdateSlice) ||
      op.is(OpCode::CumSum) || op.is(OpCode::GatherND) || op.is(OpCode::ScatterElements) ||
      op.is(OpCode::ScatterND) || op.is(OpCode::GridSample))
    return false;
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    Type t = op.operand(i)->type();
    if (!t.isTensor() || !t.hasStaticShape()) return false;
    if ((op.is(OpCode::Div) || op.is(OpCode::Fmod)) && !isFloat(t.dtype())) return false;
  }
  for (unsigned i = 0; i < op.numResults(); ++i)
    if (!op.result(i)->type().isTensor()) return false;
  return true;
}

bool hoistable(const Operation &op, const Loop &loop) {
  if (op.isTerminator() || op.numResults() == 0 || !op.info().hasFlag(opflags::Pure) ||
      op.info().hasFlag(opflags::Alloc) || op.info().hasFlag(opflags::Effect))
    return false;
  for (unsigned i = 0; i < op.numOperands(); ++i)
    if (!loop.isInvariant(op.operand(i))) return false;
  return true;
}

class LICMPass : public Pass {
public:
  std::string_view name() const override { return "licm"; }
  LogicalResult run(Module &m, DiagnosticEngine &, bool &changed) override {
    for (auto &f : m.functions()) {
      DominanceInfo dom(*f);
      // Loops are recomputed per function only: moving ops never changes
      // the CFG, so the loops (and dominance) stay valid.
      for (Loop &loop : findLoops(*f, dom)) {
        if (!loop.preheader) continue;
        Operation *insertAt = loop.preheader->back();
        for (Block *b : loop.blocks) {
          for (Operation *op = b->front(); op;) {
            Operation *next = op->nextOp();
            if (hoistable(*op, loop) && (b == loop.header || isSpeculatable(*op))) {
              op->moveBefore(insertAt);
              ++NumHoisted;
              if (b != loop.header) ++NumSpeculated;
              changed = true;
            }
            op = next;
          }
        }
      }
    }
    return success();
  }
};

} // namespace

std::unique_ptr<Pass> createLICMPass() { return std::make_unique<LICMPass>(); }

} // namespace nimble::passes
