//===- LinalgFuse.cpp - Two products summed as one product ---------------===//
//
// DLVM's linear algebra fusion (seed 004, §3.1.2 "Domain-specific compiler
// passes"): "we can apply the same approach to a polynomial of multiple
// matrix multiplications, turning the polynomial into a single matrix
// multiplication. For example, in a simple recurrent neural network ...
// h_t = f(W x_{t-1} + U h_{t-1} + b) [goes] from two matrix multiplications
// and two additions into a single matrix multiplication." In Nimble's row
// convention (activations are rows, as in the models):
//
//   add(matmul(x, W), matmul(h, U))  ->  matmul(concat([x, h], axis=1),
//                                               concat([W, U], axis=0))
//
// x: M x K1, h: M x K2, W: K1 x N, U: K2 x N. With transpose_b (weights
// stored N x K, PyTorch's layout, as models/lstm does) the weights are
// concatenated along axis 1 and the product keeps transpose_b; with
// transpose_a the activations along axis 0. A trailing bias stays the
// product's epilogue (`fuse` puts it in the matmul's kernel), and the form
// add(add(matmul, b), matmul) becomes add(matmul(...), b).
//
// Legality (each a negative golden in test/passes/linalg-fuse.nir):
//   * both products are rank-2 `matmul`s in the add's block with no other
//     use (a product read elsewhere would still be computed: two products
//     and a concat are more work, and a product licm hoisted out of the loop
//     must stay out), the same transpose flags, and one dtype;
//   * M and N are static and equal in both products (the add's type is the
//     products' type: no broadcast). A `?` row count is not provably equal
//     in the two products (`add` broadcasts 1 against n), so the pass leaves
//     it as written;
//   * the weight concat runs once: W and U are invariant in the innermost
//     loop holding the add, which has a preheader, and the pass puts the
//     concat there (where licm would: defined outside the loop, they
//     dominate its end; it cannot fail, N being static); or both are
//     literal constants, and canonicalize folds the concat. Otherwise (weights passed to a cell function called per step,
//     an add outside any loop) the concat would copy the weights on every
//     call, as many bytes as the products read, and the pass leaves it.
//
// Where it pays (docs/perf.md, "Linear-algebra fusion"): the product on the
// concatenation replaces a matmul call by a concat call (as many kernel
// calls: the epilogue is fused either way), saves the epilogue's read of a
// second M x N product and costs a copy of [x, h]. Measured on an LSTM cell
// (4H gates) run as a decoder loop: 1.09-1.12x at H = 32 and 64 for one row,
// 1.18-1.44x for 4 and 16 rows, and a loss from H = 96 (0.96x) and 128
// (0.90x; 0.18x at 4 rows, cause not investigated). So the pass fuses only
// when M <= max-rows (default 16, the largest measured) and N <= max-cols
// (default 256, H = 64's gates). On models/lstm it finds nothing: see the
// pipeline order below.
//
// Exactness: one product sums K1 + K2 terms in one accumulation where the
// two products sum K1 and K2 terms and add the sums, so the result rounds
// differently (a reassociation). Like matmul-reassociate the pass is in no
// default pipeline: `nimblec -O2 --fp-reassociate` adds it, after
// batch-input-projection (an RNN's input projection batched over the
// sequence before the loop beats fusing it into each step: 0.95x at H = 16
// down to 0.15x at H = 256 on a 1-layer LSTM when linalg-fuse goes first),
// then canonicalize and licm for a concat of literal weights; -O0 and -O2
// stay bit-identical without the flag.
//
//===----------------------------------------------------------------------===//

#include "ir/Builder.h"
#include "passes/Pass.h"
#include "passes/Statistic.h"
#include "passes/analysis/Loops.h"

#include <limits>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

NIMBLE_STATISTIC(NumFused, "linalg-fuse", "Number of sums of two matmuls made one matmul on concatenations");

bool isRank2MatMul(const Operation *op) {
  return op && op->is(OpCode::MatMul) && op->numResults() == 1 && op->result(0)->type().isTensor() &&
         op->result(0)->type().rank() == 2;
}

/// A product the add may absorb: a rank-2 matmul of the add's block whose
/// only use is `user`.
Operation *absorbable(Value *v, const Operation &user) {
  Operation *d = v->definingOp();
  if (!isRank2MatMul(d) || d->block() != user.block() || !d->result(0)->hasOneUse()) return nullptr;
  return d;
}

/// A literal constant: folded at compile time once concatenated.
bool isLiteral(const Value *v) {
  if (const auto *g = dyn_cast<Global>(v)) return !g->isExternal();
  const Operation *d = v->definingOp();
  return d && d->is(OpCode::Constant);
}

/// The match: root = p1 + p2 (+ bias when the root was add(add(p, b), q)).
struct Match {
  Operation *root = nullptr;
  Operation *p1 = nullptr, *p2 = nullptr;
  Operation *inner = nullptr; // add(p, b) of the bias form, erased with the products
  Value *bias = nullptr;
  Operation *weightsAt = nullptr; // the weight concat goes before this op
};

std::optional<Match> matchSum(Operation &add) {
  if (!add.is(OpCode::Add) || add.numResults() != 1 || add.numOperands() != 2) return std::nullopt;
  Operation *a = absorbable(add.operand(0), add), *b = absorbable(add.operand(1), add);
  if (a && b) return Match{&add, a, b, nullptr, nullptr, nullptr};
  // add(add(p, bias), q) in either operand order at both levels.
  for (unsigned i = 0; i < 2; ++i) {
    Operation *q = i == 0 ? b : a;
    Operation *inner = add.operand(i)->definingOp();
    if (!q || !inner || !inner->is(OpCode::Add) || inner->numOperands() != 2 || inner->block() != add.block() ||
        !inner->result(0)->hasOneUse() || inner->result(0)->type() != add.result(0)->type())
      continue;
    for (unsigned j = 0; j < 2; ++j)
      if (Operation *p = absorbable(inner->operand(j), *inner))
        return Match{&add, p, q, inner, inner->operand(1 - j), nullptr};
  }
  return std::nullopt;
}

class LinalgFusePass : public Pass {
public:
  std::string_view name() const override { return "linalg-fuse"; }

  std::string setOption(std::string_view key, std::string_view value) override {
    int64_t *slot = key == "max-rows" ? &maxRows_ : key == "max-cols" ? &maxCols_ : nullptr;
    if (!slot) return Pass::setOption(key, value);
    if (!parseIntOption(value, 0, std::numeric_limits<int64_t>::max(), *slot))
      return "option '" + std::string(key) + "' of 'linalg-fuse' takes a non-negative integer, got '" +
             std::string(value) + "'";
    return "";
  }

  LogicalResult run(Module &m, DiagnosticEngine &, bool &changed) override {
    for (auto &f : m.functions()) {
      // The rewrites change no block, so the loops stay valid.
      DominanceInfo dom(*f);
      std::vector<Loop> loops = findLoops(*f, dom); // innermost first
      // To a fixpoint: x·W + h·U + z·V fuses two products per round.
      for (bool again = true; again;) {
        again = false;
        std::vector<Match> matches;
        std::unordered_set<const Operation *> claimed;
        for (auto &blk : f->blocks()) {
          const Loop *loop = nullptr;
          for (const Loop &l : loops)
            if (l.contains(blk.get())) {
              loop = &l;
              break;
            }
          for (Operation &op : *blk) {
            std::optional<Match> mt = matchSum(op);
            if (!mt || !legal(*mt, loop)) continue;
            // add(add(p, q), r) matches twice: as p + q, and as (p + b) + r
            // with b = q. The first (inner) match takes p and the inner add.
            if (claimed.count(mt->p1) || claimed.count(mt->p2) || (mt->inner && claimed.count(mt->inner))) continue;
            for (Operation *o : {mt->root, mt->p1, mt->p2, mt->inner}) claimed.insert(o);
            matches.push_back(*mt);
          }
        }
        // Rewritten after the walk: a match erases ops of its block.
        for (Match &mt : matches) again |= rewrite(m, mt);
        changed |= again;
      }
    }
    return success();
  }

private:
  int64_t maxRows_ = 16;
  int64_t maxCols_ = 256;

  /// Whether the match may be rewritten; sets where its weight concat goes.
  bool legal(Match &mt, const Loop *loop) const {
    const Operation &p1 = *mt.p1, &p2 = *mt.p2;
    for (const char *flag : {"transpose_a", "transpose_b"})
      if (p1.boolAttr(flag) != p2.boolAttr(flag)) return false;
    Type t = p1.result(0)->type();
    // M x N static and the same in both products and the sum (no broadcast).
    if (!t.hasStaticShape() || p2.result(0)->type() != t || mt.root->result(0)->type() != t) return false;
    if (t.dims()[0] > maxRows_ || t.dims()[1] > maxCols_) return false;
    for (const Operation *p : {&p1, &p2})
      for (unsigned i = 0; i < 2; ++i)
        if (p->operand(i)->type().dtype() != t.dtype()) return false;
    Value *w = p1.operand(1), *u = p2.operand(1);
    if (isLiteral(w) && isLiteral(u)) {
      mt.weightsAt = mt.root; // canonicalize folds it (or licm hoists it)
      return true;
    }
    // Invariant weights: their concat goes to the loop's preheader (where
    // licm would move it: they are defined outside the loop, so they
    // dominate its end), once per entry to the loop.
    if (!loop || !loop->preheader || !loop->isInvariant(w) || !loop->isInvariant(u)) return false;
    mt.weightsAt = loop->preheader->terminator();
    return mt.weightsAt != nullptr;
  }

  static bool rewrite(Module &m, Match &mt) {
    Operation &root = *mt.root;
    bool ta = mt.p1->boolAttr("transpose_a"), tb = mt.p1->boolAttr("transpose_b");
    Builder b(m, root.loc());
    b.setInsertionPoint(&root);
    // Activations side by side along K: axis 1 of M x K, axis 0 of K x M.
    Operation *acts = b.create(OpCode::Concat, {mt.p1->operand(0), mt.p2->operand(0)},
                               {{"axis", Attr::getInt(ta ? 0 : 1)}});
    // Weights stacked along K: axis 0 of K x N, axis 1 of N x K.
    Builder wb(m, root.loc());
    wb.setInsertionPoint(mt.weightsAt);
    Operation *weights = wb.create(OpCode::Concat, {mt.p1->operand(1), mt.p2->operand(1)},
                                  {{"axis", Attr::getInt(tb ? 1 : 0)}});
    if (!acts || !weights) return false; // cannot happen: K1, K2 along the axis, the rest equal
    Operation *prod = b.create(OpCode::MatMul, {acts->result(0), weights->result(0)},
                               {{"transpose_a", Attr::getBool(ta)}, {"transpose_b", Attr::getBool(tb)}});
    if (!prod || prod->result(0)->type() != root.result(0)->type()) return false;
    Value *v = prod->result(0);
    if (mt.bias) {
      Operation *withBias = b.create(OpCode::Add, {v, mt.bias});
      if (!withBias || withBias->result(0)->type() != root.result(0)->type()) return false;
      v = withBias->result(0);
    }
    v->setName(root.result(0)->name());
    root.result(0)->replaceAllUsesWith(v);
    root.erase();
    if (mt.inner) mt.inner->erase();
    mt.p1->erase();
    mt.p2->erase();
    ++NumFused;
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createLinalgFusePass() { return std::make_unique<LinalgFusePass>(); }

} // namespace nimble::passes
