//===- FuseAttention.cpp - Scaled dot-product attention as one op ----------===//
//
// Recognises multi-head attention as BERT (models/bert/gen_bert.py) and the
// usual exports write it, token-major q, k, v split into heads by a reshape:
//
//   %qt = transpose %q, perm=[1, 0, 2]            // H x m x D   (q: m x H x D)
//   %kt = transpose %k, perm=[1, 0, 2]            // H x n x D
//   %vt = transpose %v, perm=[1, 0, 2]            // H x n x E
//   %s0 = batch_matmul %qt, %kt, transpose_b=true // H x m x n
//   %s1 = mul %s0, %c                             // or div %s0, %c, or neither
//   %s  = add %s1, %mask                          // optional
//   %p  = softmax %s, axis=-1
//   %o0 = batch_matmul %p, %vt                    // H x m x E
//   %o  = transpose %o0, perm=[1, 0, 2]           // m x H x E
//
// and replaces %o by `attention %q, %k, %v (, %mask), scale=c` (1/c for div):
// one kernel per call instead of five, heads read by strides instead of
// three transposed copies in and one out (issue 52; the kernel is
// vm/dispatch/LibraryAttention.cpp, the semantics docs/LangRef.md).
//
// Conditions: every value of the chain from %s0 to %o0 has no other use
// (else it is needed anyway and fusing would compute it twice); the
// transposes of q, k, v may have other uses (they stay); `c` is a constant
// with all elements equal that does not change the scores' shape; the mask
// broadcasts into the scores (static 1 or equal, `?` only against `?`, rank
// at most 3), of the scores' element type; all float, rank 3.
//
// Why at every -O level: the fused kernel rounds differently from the
// composition (f32 sums in another order), and the project pins -O0 and -O2
// to the same bits (test/models/differential.test); running the rewrite at
// -O0 too keeps them the same program. It runs right after type-infer, before
// canonicalize can reshape the chain, so each level sees the same IR here.
// The ops it leaves unused are erased (at -O0 no DCE follows).
//
//===----------------------------------------------------------------------===//

#include "ir/Builder.h"
#include "passes/Pass.h"
#include "passes/PatternUtils.h"
#include "passes/Statistic.h"

#include <algorithm>
#include <vector>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

NIMBLE_STATISTIC(NumFused, "fuse-attention", "Number of attention chains replaced by one attention op");

bool isHeadTranspose(const Operation *op) {
  return op && op->is(OpCode::Transpose) && op->attr("perm").getInts() == std::vector<int64_t>{1, 0, 2};
}

bool floatRank3(const Value *v) {
  return v->type().isTensor() && v->type().rank() == 3 && isFloat(v->type().dtype());
}

/// The single splat value of constant `c` when it cannot change the shape of
/// `x` under broadcasting.
bool scalarConstant(const Value *c, const Value *x, double &out) {
  const DenseValue *d = constantValue(c);
  if (!d || d->numElements() < 1 || !broadcastsInto(c->type(), x->type())) return false;
  out = d->getDouble(0);
  return allElementsEqual(*d, out);
}

/// The mask broadcasts into the scores without enlarging them.
bool maskFits(Type mask, Type scores) {
  if (!mask.isTensor() || mask.rank() > 3 || mask.dtype() != scores.dtype()) return false;
  size_t off = static_cast<size_t>(scores.rank() - mask.rank());
  for (size_t k = 0; k < mask.dims().size(); ++k) {
    int64_t a = mask.dims()[k], t = scores.dims()[off + k];
    if (a == 1 || (a == kDynamic && t == kDynamic) || (a != kDynamic && a == t)) continue;
    return false;
  }
  return true;
}

/// Fuses the chain ending in transpose `out`; true if done.
bool fuse(Module &m, Operation *out) {
  if (!isHeadTranspose(out) || !floatRank3(out->result(0))) return false;
  Operation *pv = definedBy(out->operand(0), OpCode::BatchMatMul);
  if (!pv || !pv->result(0)->hasOneUse() || pv->boolAttr("transpose_a") || pv->boolAttr("transpose_b"))
    return false;
  Operation *sm = definedBy(pv->operand(0), OpCode::Softmax);
  Operation *vt = pv->operand(1)->definingOp();
  if (!sm || !sm->result(0)->hasOneUse() || !isHeadTranspose(vt)) return false;
  if (sm->intAttr("axis") != -1 && sm->intAttr("axis") != 2) return false;
  std::vector<Operation *> chain = {out, pv, sm};
  Value *s = sm->operand(0);
  Value *mask = nullptr;
  if (Operation *add = definedBy(s, OpCode::Add)) {
    // The mask is the operand that is not the scaled scores.
    for (unsigned i = 0; i < 2 && !mask; ++i) {
      Operation *inner = add->operand(i)->definingOp();
      if (inner && (inner->is(OpCode::Mul) || inner->is(OpCode::Div) || inner->is(OpCode::BatchMatMul))) {
        mask = add->operand(1 - i);
        s = add->operand(i);
      }
    }
    if (!mask || !add->result(0)->hasOneUse() || !maskFits(mask->type(), add->result(0)->type())) return false;
    chain.push_back(add);
  }
  double scale = 1.0;
  if (Operation *op = s->definingOp(); op && (op->is(OpCode::Mul) || op->is(OpCode::Div))) {
    if (!s->hasOneUse()) return false;
    double c;
    unsigned x;
    if (scalarConstant(op->operand(1), op->operand(0), c)) x = 0;
    else if (op->is(OpCode::Mul) && scalarConstant(op->operand(0), op->operand(1), c)) x = 1;
    else return false;
    scale = op->is(OpCode::Div) ? 1.0 / c : c;
    chain.push_back(op);
    s = op->operand(x);
  }
  Operation *qk = definedBy(s, OpCode::BatchMatMul);
  if (!qk || !s->hasOneUse() || qk->boolAttr("transpose_a") || !qk->boolAttr("transpose_b")) return false;
  Operation *qt = qk->operand(0)->definingOp(), *kt = qk->operand(1)->definingOp();
  if (!isHeadTranspose(qt) || !isHeadTranspose(kt)) return false;
  chain.push_back(qk);
  Value *q = qt->operand(0), *k = kt->operand(0), *v = vt->operand(0);
  if (!floatRank3(q) || !floatRank3(k) || !floatRank3(v)) return false;
  if (q->type().dtype() != k->type().dtype() || q->type().dtype() != v->type().dtype()) return false;

  Builder b(m, out->loc());
  b.setInsertionPoint(out);
  std::vector<Value *> operands = {q, k, v};
  if (mask) operands.push_back(mask);
  Operation *att = b.create(OpCode::Attention, operands, {{"scale", Attr::getFloat(scale)}});
  if (!att) return false;
  if (!att->result(0)->type().isSubtypeOf(out->result(0)->type())) {
    att->erase();
    return false;
  }
  if (!out->result(0)->name().empty()) att->result(0)->setName(out->result(0)->name());
  out->result(0)->replaceAllUsesWith(att->result(0));
  // The chain in use order (each op's only user erased before it), then
  // the head transposes and the scale's constant when nothing else reads them.
  Value *scaleConst = nullptr;
  for (Operation *op : chain)
    if (op->is(OpCode::Mul) || op->is(OpCode::Div))
      for (Value *c : op->operands())
        if (c->definingOp() && c->definingOp()->is(OpCode::Constant)) scaleConst = c;
  for (Operation *op : chain) op->erase();
  std::vector<Operation *> heads;
  for (Operation *t : {qt, kt, vt})
    if (std::find(heads.begin(), heads.end(), t) == heads.end()) heads.push_back(t);
  for (Operation *t : heads)
    if (!t->hasResultUses()) t->erase();
  if (scaleConst && !scaleConst->hasUses()) scaleConst->definingOp()->erase();
  return true;
}

class FuseAttentionPass : public Pass {
public:
  std::string_view name() const override { return "fuse-attention"; }
  LogicalResult run(Module &m, DiagnosticEngine &, bool &changed) override {
    for (auto &f : m.functions())
      for (Block *blk : f->reversePostOrder())
        for (Operation *op = blk->front(); op;) {
          Operation *next = op->nextOp();
          // The chain's ops all come before `op` (SSA), so `next` survives.
          if (fuse(m, op)) {
            changed = true;
            ++NumFused;
          }
          op = next;
        }
    return success();
  }
};

} // namespace

std::unique_ptr<Pass> createFuseAttentionPass() { return std::make_unique<FuseAttentionPass>(); }

} // namespace nimble::passes
