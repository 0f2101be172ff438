//===- BatchInputProjection.cpp - Hoist row-wise work on sliced inputs -===//
//
// The input projection of an RNN (`x_t · W_ihᵀ` for each token) does not
// depend on the recurrence: computed for all tokens at once before the loop
// it is one GEMM instead of a GEMV per token, and the loop only slices its
// rows. cuDNN does this for RNNs; ACROBAT hoists such loop-invariant work
// statically (seed 001, §4, "static hoisting"); the Nimble paper's LSTM
// spends half its weight traffic on it.
//
// The pass looks, in every loop with a preheader (passes/analysis/Loops.h), for a
// *counted* loop over the rows of an invariant tensor:
//
//   ^pre:  ... br ^h(%zero, ...)          %zero = constant 0 : tensor<i64>
//   ^h(%t: tensor<i64>, ...):
//     %done = greater_equal %t, %n        (or %more = less %t, %n, the body
//     cond_br %done, ^exit, ^body          on the true side)
//   ...    br ^h(%t1, ...)                 %t1 = add %t, %one  (every latch)
//                                          %one = constant 1 : tensor<i64>
//   with %n = dim %X, axis=0 and %X defined outside the loop,
//
// and, inside the loop, `%x = dynamic_slice %X, %t, axis=0, size=1`: row t
// of X. An op whose only loop-varying operand is such a slice, and which
// works row by row, gives row t of the same op applied to all of X:
//
//   matmul %x, %W (transpose_a=false, %W invariant)   row t of X·W
//   an element-wise unary op of %x                    row t of f(X)
//   an element-wise binary op of %x and an invariant %b that does not
//     broadcast along axis 0 (rank below %x's, or a static leading 1)
//
// Such an op is replaced by `dynamic_slice %Y, %t, axis=0, size=1` of
// `%Y = op(%X, ...)` placed in the preheader, and the replacement is itself
// a slice of an invariant tensor, so chains (a projection plus a bias add)
// move together, to a fixpoint.
//
// Why the conditions: the loop runs t = 0, 1, ..., dim(X, 0) - 1, so the
// hoisted op computes exactly the rows the loop would have computed, no more
// (on an empty X the hoisted op runs on zero rows and the loop body never
// runs, so none of its slices are taken); each row of the result depends on
// the same row of X only, so the slices equal the per-iteration results. The
// reference kernels compute each output element in the same order whatever
// the row count, so -O0 and -O2 stay bit-identical on them; faster kernels
// (a GEMM instead of a GEMV) may sum in another order (docs/passes.md).
//
//===----------------------------------------------------------------------===//

#include "ir/Builder.h"
#include "passes/analysis/Loops.h"
#include "passes/Pass.h"
#include "passes/Statistic.h"

#include <unordered_set>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

NIMBLE_STATISTIC(NumBatched, "batch-input-projection",
                 "Number of ops computed for all rows before their loop");

/// Tensors whose rows are exactly the rows the loop visits: X, and what was
/// computed from X row by row by this pass.
using RowTensors = std::unordered_set<const Value *>;

/// `v` is `dynamic_slice %Y, %t, axis=0, size=1` of such a %Y: returns %Y.
Value *rowOf(Value *v, const BlockArgument *t, const Loop &loop, const RowTensors &rows) {
  Operation *s = v->definingOp();
  if (!s || !s->is(OpCode::DynamicSlice) || s->operand(1) != t || !loop.contains(s->block())) return nullptr;
  if (s->intAttr("axis") != 0 || s->intAttr("size") != 1) return nullptr;
  Value *y = s->operand(0);
  return rows.count(y) && loop.isInvariant(y) && y->type().isTensor() && y->type().rank() >= 1 ? y : nullptr;
}

/// The operands of `op` with its row operand replaced by the whole tensor,
/// if `op` works row by row on it (see the file comment); empty otherwise.
std::vector<Value *> rowWise(Operation &op, const BlockArgument *t, const Loop &loop, const RowTensors &rows) {
  if (op.numResults() != 1 || !op.info().hasFlag(opflags::Pure)) return {};
  std::vector<Value *> ops;
  for (unsigned i = 0; i < op.numOperands(); ++i) ops.push_back(op.operand(i));
  if (op.is(OpCode::MatMul)) {
    Value *y = rowOf(op.operand(0), t, loop, rows);
    if (!y || op.boolAttr("transpose_a") || !loop.isInvariant(op.operand(1))) return {};
    ops[0] = y;
    return ops;
  }
  FusionPattern p = op.info().fusion;
  if (p != FusionPattern::ElemWise && p != FusionPattern::Broadcast) return {};
  if (op.info().shapeMode != ShapeMode::DataIndependent) return {};
  int row = -1;
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    if (Value *y = rowOf(op.operand(i), t, loop, rows)) {
      if (row >= 0) return {};
      row = static_cast<int>(i);
      ops[i] = y;
    }
  }
  if (row < 0) return {};
  Type rt = op.operand(static_cast<unsigned>(row))->type();
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    if (static_cast<int>(i) == row) continue;
    Value *b = op.operand(i);
    if (!loop.isInvariant(b) || !b->type().isTensor()) return {};
    // b must not broadcast along axis 0 of the row.
    if (b->type().rank() >= rt.rank() && !(b->type().rank() == rt.rank() && b->type().dims()[0] == 1))
      return {};
  }
  return ops;
}

class BatchInputProjectionPass : public Pass {
public:
  std::string_view name() const override { return "batch-input-projection"; }
  LogicalResult run(Module &m, DiagnosticEngine &, bool &changed) override {
    for (auto &f : m.functions()) {
      DominanceInfo dom(*f);
      for (Loop &loop : findLoops(*f, dom)) {
        if (!loop.preheader) continue;
        CountedLoop counted = matchCountedLoop(loop);
        if (!counted.counter) continue;
        BlockArgument *t = counted.counter;
        Value *x = counted.rows;
        RowTensors rows{x};
        bool again = true;
        while (again) {
          again = false;
          for (Block *b : loop.blocks) {
            for (Operation *op = b->front(); op;) {
              Operation *next = op->nextOp();
              if (batch(*op, t, loop, rows, m)) {
                changed = again = true;
                ++NumBatched;
              }
              op = next;
            }
          }
        }
      }
    }
    return success();
  }

private:
  /// Replaces `op` by a slice of the op applied to every row; true if done.
  static bool batch(Operation &op, BlockArgument *t, const Loop &loop, RowTensors &rows, Module &m) {
    std::vector<Value *> ops = rowWise(op, t, loop, rows);
    if (ops.empty()) return false;
    Builder pre(m, op.loc());
    pre.setInsertionPoint(loop.preheader->back());
    std::vector<std::pair<std::string, Attr>> attrs;
    for (unsigned i = 0; i < op.info().attrs.size(); ++i) attrs.push_back({op.info().attrs[i].name, op.attr(i)});
    Operation *all = pre.create(op.code(), ops, attrs);
    if (!all) return false;
    Builder in(m, op.loc());
    in.setInsertionPoint(&op);
    Operation *row = in.create(OpCode::DynamicSlice, {all->result(0), t},
                               {{"axis", Attr::getInt(0)}, {"size", Attr::getInt(1)}});
    if (!row || row->result(0)->type() != op.result(0)->type()) {
      // The types differ (a `?` the row op knew statically): keep the op.
      if (row) row->erase();
      all->erase();
      return false;
    }
    if (!op.result(0)->name().empty()) {
      all->result(0)->setName(op.result(0)->name() + ".all");
      row->result(0)->setName(op.result(0)->name());
    }
    rows.insert(all->result(0));
    op.result(0)->replaceAllUsesWith(row->result(0));
    op.erase();
    return true;
  }

};

} // namespace

std::unique_ptr<Pass> createBatchInputProjectionPass() { return std::make_unique<BatchInputProjectionPass>(); }

} // namespace nimble::passes
