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
// and the forms exporters write (issue 47): k^T as `transpose %k,
// perm=[1, 2, 0]` (or two transposes composing to it) instead of
// transpose_b; the scale on q before the product (torch's
// nn.MultiheadAttention: q/sqrt(d), heads of the whole batch on one axis),
// on the scores, or both; and rank 4, [1, m, H, D] split into heads by
// perm=[0, 2, 1, 3] (Hugging Face exports at batch 1), fused through a
// squeeze of the batch axis and an expand_dims of the result (views),
// and replaces %o by `attention %q, %k, %v (, %mask), scale=c` (1/c for div):
// one kernel per call instead of five, heads read by strides instead of
// three transposed copies in and one out (issue 52; the kernel is
// vm/dispatch/LibraryAttention.cpp, the semantics docs/LangRef.md).
//
// Conditions: every value of the chain from %s0 to %o0 has no other use
// (else it is needed anyway and fusing would compute it twice); the
// transposes of q, k, v may have other uses (they stay); `c` is a constant
// with all elements equal that does not change the scores' shape; the mask
// broadcasts into the scores (static 1 or equal, `?` only against `?`; at
// rank 4 its batch 1), of the scores' element type; all float, rank 3, or
// rank 4 with a static batch of 1.
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

/// Where the heads axis is: rank 3 is token-major q (m x H x D), rank 4 a
/// batch in front (1 x m x H x D, the Hugging Face form). Perms are the
/// transposes that take a token-major tensor to heads-major (`heads`) and to
/// heads-major with the last two axes swapped (`keysT`, k for q·k).
struct Layout {
  int64_t rank;
  std::vector<int64_t> heads, keysT;
};
const Layout kRank3{3, {1, 0, 2}, {1, 2, 0}};
const Layout kRank4{4, {0, 2, 1, 3}, {0, 2, 3, 1}};

bool floatRank(const Value *v, int64_t r) {
  return v->type().isTensor() && v->type().rank() == r && isFloat(v->type().dtype());
}

/// The value `x` is `want` of, through one transpose or two that compose to
/// it (exporters write k·ᵀ of a head transpose either way); null otherwise.
/// The transposes are appended to `ts`.
Value *transposed(Value *x, const std::vector<int64_t> &want, std::vector<Operation *> &ts) {
  Operation *t = definedBy(x, OpCode::Transpose);
  if (!t) return nullptr;
  std::vector<int64_t> p = t->attr("perm").getInts();
  if (p == want) {
    ts.push_back(t);
    return t->operand(0);
  }
  Operation *t2 = definedBy(t->operand(0), OpCode::Transpose);
  if (!t2 || p.size() != want.size()) return nullptr;
  std::vector<int64_t> p2 = t2->attr("perm").getInts(), composed;
  for (int64_t i : p) composed.push_back(i >= 0 && i < static_cast<int64_t>(p2.size()) ? p2[static_cast<size_t>(i)] : -1);
  if (composed != want) return nullptr;
  ts.push_back(t);
  ts.push_back(t2);
  return t2->operand(0);
}

/// The single splat value of constant `c` when it cannot change the shape of
/// `x` under broadcasting.
bool scalarConstant(const Value *c, const Value *x, double &out) {
  const DenseValue *d = constantValue(c);
  if (!d || d->numElements() < 1 || !broadcastsInto(c->type(), x->type())) return false;
  out = d->getDouble(0);
  return allElementsEqual(*d, out);
}

/// `op` is a mul or div of the single-use value it defines by a splat
/// constant: its factor (1/c for div) into `scale`, the other operand out.
Value *scaled(Operation *op, double &scale) {
  if (!op || !(op->is(OpCode::Mul) || op->is(OpCode::Div)) || !op->result(0)->hasOneUse()) return nullptr;
  double c;
  unsigned x;
  if (scalarConstant(op->operand(1), op->operand(0), c)) x = 0;
  else if (op->is(OpCode::Mul) && scalarConstant(op->operand(0), op->operand(1), c)) x = 1;
  else return nullptr;
  scale *= op->is(OpCode::Div) ? 1.0 / c : c;
  return op->operand(x);
}

/// The mask broadcasts into the scores without enlarging them.
bool maskFits(Type mask, Type scores) {
  if (!mask.isTensor() || mask.rank() > scores.rank() || mask.dtype() != scores.dtype()) return false;
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
  if (!out->is(OpCode::Transpose) || !out->result(0)->type().isTensor()) return false;
  const Layout &L = out->result(0)->type().rank() == 4 ? kRank4 : kRank3;
  // The heads perms are their own inverses: `out` takes the heads back.
  if (out->attr("perm").getInts() != L.heads || !floatRank(out->result(0), L.rank)) return false;
  std::vector<Operation *> heads; // transposes into heads: kept if used elsewhere
  Operation *pv = definedBy(out->operand(0), OpCode::BatchMatMul);
  if (!pv || !pv->result(0)->hasOneUse() || pv->boolAttr("transpose_a") ||
      pv->boolAttr("transpose_b"))
    return false;
  Operation *sm = definedBy(pv->operand(0), OpCode::Softmax);
  Value *v = transposed(pv->operand(1), L.heads, heads);
  if (!sm || !sm->result(0)->hasOneUse() || !v) return false;
  if (sm->intAttr("axis") != -1 && sm->intAttr("axis") != L.rank - 1) return false;
  std::vector<Operation *> chain = {out, pv, sm};
  Value *s = sm->operand(0);
  Value *mask = nullptr;
  if (Operation *add = definedBy(s, OpCode::Add)) {
    // The mask is the operand that is not the (scaled) scores.
    for (unsigned i = 0; i < 2 && !mask; ++i) {
      Operation *inner = add->operand(i)->definingOp();
      if (inner && (inner->is(OpCode::Mul) || inner->is(OpCode::Div) || inner->is(OpCode::BatchMatMul))) {
        mask = add->operand(1 - i);
        s = add->operand(i);
      }
    }
    if (!mask || !add->result(0)->hasOneUse() || !maskFits(mask->type(), add->result(0)->type())) return false;
    // The kernel's mask is at most rank 3 (heads, queries, keys): a rank-4
    // one must have the batch of 1 in front.
    if (mask->type().rank() == 4 && mask->type().dims()[0] != 1) return false;
    chain.push_back(add);
  }
  double scale = 1.0;
  // The scale on the scores (BERT's, Hugging Face's) ...
  if (Operation *op = s->definingOp(); op && (op->is(OpCode::Mul) || op->is(OpCode::Div))) {
    Value *x = scaled(op, scale);
    if (!x) return false;
    chain.push_back(op);
    s = x;
  }
  Operation *qk = definedBy(s, OpCode::BatchMatMul);
  if (!qk || !s->hasOneUse() || qk->boolAttr("transpose_a")) return false;
  chain.push_back(qk);
  // ... or on q before the product (torch's nn.MultiheadAttention), or both.
  Value *qs = qk->operand(0);
  if (Operation *op = qs->definingOp(); op && (op->is(OpCode::Mul) || op->is(OpCode::Div))) {
    Value *x = scaled(op, scale);
    if (!x) return false;
    chain.push_back(op);
    qs = x;
  }
  Value *q = transposed(qs, L.heads, heads);
  // k·ᵀ as the product's transpose_b of k's heads, or as a transpose of k
  // straight to heads x D x n.
  Value *k = transposed(qk->operand(1), qk->boolAttr("transpose_b") ? L.heads : L.keysT, heads);
  if (!q || !k || !floatRank(q, L.rank) || !floatRank(k, L.rank) || !floatRank(v, L.rank)) return false;
  if (q->type().dtype() != k->type().dtype() || q->type().dtype() != v->type().dtype()) return false;
  // Rank 4: one sequence (batch 1), which the rank-3 op reads with the
  // batch axis squeezed (a view; the kernel reads the same memory).
  if (L.rank == 4)
    for (Value *x : std::vector<Value *>{q, k, v, out->result(0)})
      if (x->type().dims()[0] != 1) return false;

  Builder b(m, out->loc());
  b.setInsertionPoint(out);
  std::vector<Operation *> built; // erased again if the result does not fit
  auto make = [&](OpCode code, std::vector<Value *> operands,
                  std::vector<std::pair<std::string, Attr>> attrs) -> Value * {
    Operation *op = b.create(code, operands, std::move(attrs));
    if (!op) return nullptr;
    built.push_back(op);
    return op->result(0);
  };
  std::vector<Value *> operands = {q, k, v};
  if (mask) operands.push_back(mask);
  bool ok = true;
  if (L.rank == 4)
    for (Value *&x : operands)
      if (ok && x->type().rank() == 4) ok = (x = make(OpCode::Squeeze, {x}, {{"axes", Attr::getInts({0})}}));
  Value *res = ok ? make(OpCode::Attention, operands, {{"scale", Attr::getFloat(scale)}}) : nullptr;
  if (res && L.rank == 4) res = make(OpCode::ExpandDims, {res}, {{"axis", Attr::getInt(0)}});
  if (!res || !res->type().isSubtypeOf(out->result(0)->type())) {
    for (size_t i = built.size(); i-- > 0;) built[i]->erase();
    return false;
  }
  if (!out->result(0)->name().empty()) res->setName(out->result(0)->name());
  out->result(0)->replaceAllUsesWith(res);
  // The chain in use order (each op's only user erased before it), then
  // the head transposes (outer before inner) and the scale's constants when
  // nothing else reads them.
  std::vector<Value *> scaleConsts;
  for (Operation *op : chain)
    if (op->is(OpCode::Mul) || op->is(OpCode::Div))
      for (Value *c : op->operands())
        if (c->definingOp() && c->definingOp()->is(OpCode::Constant)) scaleConsts.push_back(c);
  for (Operation *op : chain) op->erase();
  std::vector<Operation *> unique;
  for (Operation *t : heads)
    if (std::find(unique.begin(), unique.end(), t) == unique.end()) unique.push_back(t);
  for (bool progress = true; progress;) {
    progress = false;
    for (auto it = unique.begin(); it != unique.end();)
      if (!(*it)->hasResultUses()) {
        (*it)->erase();
        it = unique.erase(it);
        progress = true;
      } else {
        ++it;
      }
  }
  for (size_t i = 0; i < scaleConsts.size(); ++i)
    if (std::find(scaleConsts.begin(), scaleConsts.begin() + static_cast<long>(i), scaleConsts[i]) ==
            scaleConsts.begin() + static_cast<long>(i) &&
        !scaleConsts[i]->hasUses())
      scaleConsts[i]->definingOp()->erase();
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
