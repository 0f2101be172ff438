//===- Canonicalize.cpp - Constant folding and algebraic simplification ---===//
//
// DLVM §3.1.2 ("algebra simplification"): a tensor IR that knows its
// mathematical operators can replace expensive or redundant ones — x^2 by
// x ⊙ x, x^0 by the constant 1 — and, like MLIR's canonicalizer, the same pass
// gives every later pass one normal form to match. Per function:
//
//  1. A worklist of operations, seeded in block order, is drained to a
//     fixpoint. Each popped op is, in this order,
//       - erased when trivially dead (no uses, opflags::Pure);
//       - folded when its operands are constants (ConstantFold.h): the values
//         become new `constant` ops before it, its uses move to them;
//       - put in canonical form: a commutative op with a constant on the left
//         gets its operands swapped, so patterns see `x op c` only;
//       - rewritten by the first algebraic or control-flow pattern that
//         matches (each pattern is written as a comment where it is matched;
//         docs/passes.md lists them with where they must not fire).
//     Whatever a rewrite touches goes back on the list: users of a replaced
//     value, new ops, and the definitions of an erased op's operands (they
//     may have become dead). The number of steps is bounded, so a pair of
//     patterns that undo each other cannot hang the pass.
//  2. The control-flow graph is cleaned: blocks unreachable from the entry are
//     deleted (references dropped first, so they may use each other), then a
//     non-entry block whose only predecessor ends in `br` to it is merged into
//     that predecessor, its arguments replaced by the branch operands.
//     Unreachable blocks are also deleted before the first worklist run: the
//     verifier exempts them from dominance, so two of their ops may use each
//     other (`%a = neg %b` in one block, `%b = neg %a` in the next), and
//     neg(neg(x)) -> x would replace %a by itself.
//  Merging exposes new folds (a block argument becomes a constant), so 1 and 2
//  repeat while the CFG changes. Every CFG change deletes a block, so this
//  happens at most once per block.
//
// Every replacement keeps the IR typed: a value replaces a result only when
// its type is a subtype of the result's (sub-shaping), and an operand replaces
// a broadcasting op's result only when no other operand can grow the shape
// (canForwardOperand). A rewrite that would change the result for some
// run-time shape or value is not made, nor one that would skip a run-time
// check (a `?` dimension the op verifies) on a value that is still computed;
// ops left dead are deleted like any Pure op, as DCE does. In particular
// float x * 0 and x - x are kept (NaN and inf make them non-zero), integer
// division by zero is kept (the runtime reports it), and folded constants are
// limited to `fold-limit` elements (ConstantFold.h says why).
//
// Every rule is exact on IEEE special values: ±0, ±inf, NaN (compared as
// NaN), subnormals, and the integer minimum and maximum. The result of the
// rewritten program equals the original's bit for bit through the reference
// kernels; test/passes/canonicalize-exact.test applies each rule alone to
// exactly those values, and docs/passes.md lists what each rule was checked
// on. Hence x + 0.0 and x - (-0.0) stay (they are +0.0 at x = -0.0) while
// x + (-0.0) and x - 0.0 go, and pow(x, 0.5) is not sqrt(x) (see simplifyPow).
//
//===----------------------------------------------------------------------===//

#include "passes/analysis/Analysis.h"
#include "passes/analysis/SameExtent.h"
#include "passes/transforms/ConstantFold.h"
#include "passes/Pass.h"
#include "passes/PatternUtils.h"

#include "ir/FlatMap.h"

#include <limits>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

/// Drives the rewrites of one function and keeps its worklist in step with
/// every IR edit (MLIR's greedy pattern rewrite driver, without regions).
class Canonicalizer {
public:
  Canonicalizer(Module &m, int64_t foldLimit) : m_(m), ctx_(m.context()), foldLimit_(foldLimit) {}

  /// Rewrites `f` to a fixpoint; returns true when anything changed.
  bool run(Function &f);

private:
  //===-- Worklist -----------------------------------------------------------===//
  void push(Operation *op) {
    if (op && pos_.tryEmplace(op, list_.size()).second) list_.push_back(op);
  }
  void pushDef(Value *v) { push(v->definingOp()); }
  void pushUsers(Value *v) {
    for (Operation *u : v->users()) push(u);
  }
  void forget(Operation *op) {
    const size_t *at = pos_.find(op);
    if (!at) return;
    list_[*at] = nullptr;
    pos_.erase(op);
  }
  bool drain(Function &f);

  //===-- IR edits that keep the worklist right ------------------------------===//
  /// Inserts `op` before `before`, queues it, and names its first result
  /// after `nameFrom` (so `%y = pow %x, 2` becomes `%y = mul %x, %x`).
  Operation *insert(Operation *before, std::unique_ptr<Operation> op, Value *nameFrom = nullptr);
  Value *constant(Operation *before, DenseValue v, Value *nameFrom);
  Value *create(Operation *before, OpCode code, const std::vector<Value *> &operands, Type type,
                std::vector<Attr> attrs, Value *nameFrom);
  /// Replaces `op`'s results by `vals` and erases it.
  void replace(Operation *op, const std::vector<Value *> &vals);
  void replace(Operation *op, Value *v) { replace(op, std::vector<Value *>{v}); }
  bool replaceBy(Operation *op, Value *v) {
    replace(op, v);
    return true;
  }
  void erase(Operation *op);
  /// Replaces terminator `t` by `br` to `target` with `args`.
  void replaceWithBr(Operation *t, Block *target, const std::vector<Value *> &args);

  //===-- Rewrites -----------------------------------------------------------===//
  bool process(Operation *op);
  bool fold(Operation *op);
  bool swapCommutative(Operation *op);
  bool simplify(Operation *op);
  bool scalarizeSplatOperand(Operation *op);
  bool simplifyArith(Operation *op);
  bool simplifyPow(Operation *op);
  bool simplifyShape(Operation *op);
  bool staticReshapeTarget(Operation *op);
  bool hoistAboveReshape(Operation *op);
  bool simplifyCast(Operation *op);
  bool simplifySelect(Operation *op);
  bool simplifyBranch(Operation *op);
  bool simplifyPrimitiveCall(Operation *op);
  /// Replaces `op` by `x` if x's type fits where op's result is used.
  bool forwardIfSubtype(Operation *op, Value *x);
  /// A splat constant of `op`'s result type, when all operand types and the
  /// result type are static (so no run-time shape check is lost).
  bool replaceWithSplat(Operation *op, double v);

  //===-- Control flow -------------------------------------------------------===//
  bool simplifyCFG(Function &f);
  bool eraseUnreachableBlocks(Function &f);
  bool mergeBlocks(Function &f);

  Module &m_;
  Context &ctx_;
  int64_t foldLimit_;
  std::vector<Operation *> list_;
  /// Where each queued op is in list_ (an open-addressing map: a node per
  /// queued op was a tenth of the pass on a function of a million ops).
  FlatMap<Operation *, size_t> pos_;
};

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

bool Canonicalizer::run(Function &f) {
  // Unreachable code goes first: dominance does not hold there (see the
  // file comment), and the patterns assume it.
  bool changed = eraseUnreachableBlocks(f);
  for (;;) {
    changed |= drain(f);
    if (!simplifyCFG(f)) return changed;
    changed = true; // and a block fewer: the loop ends
  }
}

bool Canonicalizer::drain(Function &f) {
  list_.clear();
  pos_.clear();
  size_t numOps = 0;
  for (auto &b : f.blocks())
    for (Operation &op : *b) {
      push(&op);
      ++numOps;
    }
  // Each pattern removes or simplifies something; the bound only guards
  // against patterns that would undo each other.
  size_t budget = 64 * numOps + 1024;
  bool changed = false;
  for (size_t i = 0; i < list_.size() && budget > 0; ++i) {
    Operation *op = list_[i];
    if (!op) continue;
    pos_.erase(op);
    --budget;
    changed |= process(op);
  }
  list_.clear();
  pos_.clear();
  return changed;
}

bool Canonicalizer::process(Operation *op) {
  if (op->numResults() > 0 && !op->hasResultUses() && op->info().hasFlag(opflags::Pure)) {
    erase(op);
    return true;
  }
  // An op whose result is killed (explicit memory) is folded (its kill then
  // ends the new constant's life) but never replaced by an existing value,
  // which would inherit the kill before its own later uses.
  return fold(op) || swapCommutative(op) || (!hasKilledResult(*op) && simplify(op));
}

Operation *Canonicalizer::insert(Operation *before, std::unique_ptr<Operation> op,
                                 Value *nameFrom) {
  Operation *o = before->block()->insertBefore(before, std::move(op));
  if (nameFrom && o->numResults()) o->result(0)->setName(nameFrom->name());
  push(o);
  return o;
}

Value *Canonicalizer::constant(Operation *before, DenseValue v, Value *nameFrom) {
  Type t = ctx_.tensor(v.dtype, v.shape);
  auto op = Operation::create(OpCode::Constant, before->loc(), {}, {t},
                              {Attr::getDense(std::move(v))});
  return insert(before, std::move(op), nameFrom)->result(0);
}

Value *Canonicalizer::create(Operation *before, OpCode code, const std::vector<Value *> &operands,
                             Type type, std::vector<Attr> attrs, Value *nameFrom) {
  auto op = Operation::create(code, before->loc(), operands, {type}, std::move(attrs));
  return insert(before, std::move(op), nameFrom)->result(0);
}

void Canonicalizer::replace(Operation *op, const std::vector<Value *> &vals) {
  for (unsigned i = 0; i < op->numResults(); ++i) {
    pushUsers(op->result(i));
    op->result(i)->replaceAllUsesWith(vals[i]);
  }
  erase(op);
}

void Canonicalizer::erase(Operation *op) {
  for (Value *v : op->operandValues())
    if (v) pushDef(v);
  forget(op);
  op->erase();
}

void Canonicalizer::replaceWithBr(Operation *t, Block *target, const std::vector<Value *> &args) {
  Successor s{target, 0, static_cast<unsigned>(args.size()), "", t->loc()};
  insert(t, Operation::create(OpCode::Br, t->loc(), args, {}, defaultAttrs(OpCode::Br), {s}));
  erase(t);
}

//===----------------------------------------------------------------------===//
// Constant folding and canonical operand order
//===----------------------------------------------------------------------===//

bool Canonicalizer::fold(Operation *op) {
  std::optional<std::vector<DenseValue>> vals = foldOperation(*op, foldLimit_);
  if (!vals) return false;
  // The folded (static) type must fit every use of the result it replaces.
  for (unsigned i = 0; i < op->numResults(); ++i) {
    const DenseValue &v = (*vals)[i];
    if (!ctx_.tensor(v.dtype, v.shape).isSubtypeOf(op->result(i)->type())) return false;
  }
  std::vector<Value *> repl;
  for (unsigned i = 0; i < op->numResults(); ++i)
    repl.push_back(constant(op, std::move((*vals)[i]), op->result(i)));
  replace(op, repl);
  return true;
}

bool Canonicalizer::swapCommutative(Operation *op) {
  if (!op->info().hasFlag(opflags::Commutative) || op->numOperands() != 2) return false;
  Value *lhs = op->operand(0), *rhs = op->operand(1);
  if (!constantValue(lhs) || constantValue(rhs)) return false;
  op->setOperands({rhs, lhs});
  push(op); // the patterns run on the canonical form next
  return true;
}

//===----------------------------------------------------------------------===//
// Algebraic simplification
//===----------------------------------------------------------------------===//

bool Canonicalizer::forwardIfSubtype(Operation *op, Value *x) {
  if (!x->type().isSubtypeOf(op->result(0)->type())) return false;
  replace(op, x);
  return true;
}

bool Canonicalizer::replaceWithSplat(Operation *op, double v) {
  Type t = op->result(0)->type();
  if (!t.isTensor() || !t.hasStaticShape()) return false;
  if (elementCount(t.dims()) > foldLimit_) return false;
  for (Value *o : op->operandValues())
    if (!o->type().isTensor() || !o->type().hasStaticShape()) return false;
  replace(op, constant(op, makeSplat(t.dtype(), t.dims(), v), op->result(0)));
  return true;
}

/// A splat constant of more than one element, as the operand of a
/// broadcasting element-wise op (add, less, select, ...) whose other operand
/// alone has the result's shape, becomes a rank-0 constant: broadcasting
/// gives the same elements, and every kernel path (reference, native,
/// oneDNN) then reads one element instead of a dense tensor the VM must
/// make (issue 51: `add %x, constant 1.0 : tensor<100000x100000xf32>`).
/// Only on static shapes, so no run-time shape check is lost; the results
/// are bit for bit those of the dense operand.
bool Canonicalizer::scalarizeSplatOperand(Operation *op) {
  if (op->info().fusion != FusionPattern::Broadcast || op->numResults() != 1) return false;
  Type rt = op->result(0)->type();
  if (!rt.isTensor() || !rt.hasStaticShape() || rt.rank() == 0) return false;
  auto isFullSplat = [&](Value *v) {
    const DenseValue *d = constantValue(v);
    return d && d->splat && !d->shape.empty();
  };
  bool full = false; // another operand, not a splat, has the result's shape
  for (unsigned i = 0; i < op->numOperands(); ++i) {
    Value *v = op->operand(i);
    Type t = v->type();
    if (!t.isTensor() || !t.hasStaticShape()) return false;
    full |= t.dims() == rt.dims() && !isFullSplat(v);
  }
  if (!full) return false;
  for (unsigned i = 0; i < op->numOperands(); ++i) {
    Value *v = op->operand(i);
    if (!isFullSplat(v)) continue;
    const DenseValue *d = constantValue(v);
    DenseValue scalar;
    scalar.dtype = d->dtype;
    scalar.bytes = d->bytes; // the one element
    op->setOperand(i, constant(op, std::move(scalar), nullptr));
    push(op);
    pushDef(v);
    return true;
  }
  return false;
}

bool Canonicalizer::simplify(Operation *op) {
  if (scalarizeSplatOperand(op)) return true;
  if (op->info().relation == Relation::Unary && op->info().fusion == FusionPattern::ElemWise &&
      hoistAboveReshape(op))
    return true;
  switch (op->code()) {
  case OpCode::Add:
  case OpCode::Sub:
  case OpCode::Mul:
  case OpCode::Div:
    return simplifyArith(op) || hoistAboveReshape(op);
  case OpCode::LogicalAnd:
  case OpCode::LogicalOr: return simplifyArith(op);
  case OpCode::Pow: return simplifyPow(op);
  case OpCode::Neg:
  case OpCode::LogicalNot:
    // neg(neg(x)) -> x (also for integers: negation wraps both ways);
    // logical_not(logical_not(x)) -> x.
    if (Operation *inner = definedBy(op->operand(0), op->code()))
      return forwardIfSubtype(op, inner->operand(0));
    return false;
  case OpCode::Transpose:
  case OpCode::Reshape:
  case OpCode::DynReshape:
  case OpCode::Squeeze:
  case OpCode::BroadcastTo: return simplifyShape(op);
  case OpCode::Cast: return simplifyCast(op);
  case OpCode::Select: return simplifySelect(op);
  case OpCode::GetTuple:
    // get_tuple(tuple(a, b), index=1) -> b
    if (Operation *t = definedBy(op->operand(0), OpCode::Tuple)) {
      int64_t i = op->intAttr("index");
      if (i >= 0 && i < static_cast<int64_t>(t->numOperands()))
        return forwardIfSubtype(op, t->operand(static_cast<unsigned>(i)));
    }
    return false;
  case OpCode::CondBr:
  case OpCode::Match: return simplifyBranch(op);
  case OpCode::Call: return simplifyPrimitiveCall(op);
  default: return false;
  }
}

bool Canonicalizer::simplifyPrimitiveCall(Operation *op) {
  // A call of a primitive function (a fused group) whose body returns one of
  // its arguments as result i: result i is that call operand. When every
  // result is forwarded the call goes (primitives have no side effects).
  // MLIR's linalg canonicalizer erases identity generic ops the same way;
  // this is what `fuse` followed by canonicalize leaves of
  // softmax(neg(neg x)): a group whose body became `ret %in0`. The runtime
  // also runs such a kernel (a copy), for pipelines that empty a body after
  // manifest-memory has turned the call into invoke_mut.
  const Function *callee = m_.lookupFunction(op->attr("callee"));
  if (!callee || !isPrimitive(*callee) || callee->blocks().size() != 1) return false;
  const Block *body = callee->entry();
  const Operation *ret = body->terminator();
  if (!ret || !ret->is(OpCode::Ret) || ret->numOperands() != op->numResults() ||
      body->numArguments() != op->numOperands())
    return false;
  bool changed = false, allForwarded = true;
  for (unsigned i = 0; i < op->numResults(); ++i) {
    Value *r = op->result(i);
    Value *in = nullptr;
    for (unsigned j = 0; j < body->numArguments(); ++j)
      if (ret->operand(i) == body->argument(j)) in = op->operand(j);
    if (!in || !in->type().isSubtypeOf(r->type())) {
      allForwarded = false;
      continue;
    }
    if (r->hasUses()) {
      pushUsers(r);
      r->replaceAllUsesWith(in);
      changed = true;
    }
  }
  if (allForwarded) {
    erase(op);
    return true;
  }
  return changed;
}

bool Canonicalizer::simplifyArith(Operation *op) {
  Value *x = op->operand(0), *c = op->operand(1);
  Type rt = op->result(0)->type();
  bool isInt = rt.isTensor() && isInteger(rt.dtype());
  switch (op->code()) {
  case OpCode::Add: // x + (-0.0) -> x (0 + x was swapped to this form)
  case OpCode::Sub: // x - (+0.0) -> x
    // Only the zero that is neutral at x = -0.0 too (isNeutralZero): x + 0.0
    // is +0.0 there and stays. Integers: any zero.
    if (isNeutralZero(c, op->is(OpCode::Add)) && canForwardOperand(*op, x)) return replaceBy(op, x);
    // x - x -> 0 for integers only: for floats inf - inf and NaN - NaN are NaN.
    if (op->is(OpCode::Sub) && x == c && isInt) return replaceWithSplat(op, 0);
    return false;
  case OpCode::Mul: // x * 1 -> x
    if (isConstantSplat(c, 1) && canForwardOperand(*op, x)) return replaceBy(op, x);
    // x * 0 -> 0 for integers only: for floats NaN * 0 is NaN and inf * 0 NaN.
    if (isConstantSplat(c, 0) && isInt) return replaceWithSplat(op, 0);
    return false;
  case OpCode::Div: // x / 1 -> x
    if (isConstantSplat(c, 1) && canForwardOperand(*op, x)) return replaceBy(op, x);
    return false;
  case OpCode::LogicalAnd:
  case OpCode::LogicalOr: {
    // x and true -> x, x and false -> false; x or false -> x, x or true -> true.
    bool isAnd = op->is(OpCode::LogicalAnd);
    if (isConstantSplat(c, isAnd ? 1 : 0) && canForwardOperand(*op, x)) return replaceBy(op, x);
    if (isConstantSplat(c, isAnd ? 0 : 1)) return replaceWithSplat(op, isAnd ? 0 : 1);
    return false;
  }
  default: return false;
  }
}

bool Canonicalizer::simplifyPow(Operation *op) {
  Value *x = op->operand(0), *e = op->operand(1);
  Type rt = op->result(0)->type();
  // pow(x, 0) -> 1: C's pow and numpy give 1 for every x, NaN included.
  if (isConstantSplat(e, 0)) return replaceWithSplat(op, 1);
  if (!canForwardOperand(*op, x)) return false;
  if (isConstantSplat(e, 1)) return replaceBy(op, x);
  if (isConstantSplat(e, 2)) { // DLVM's example: x^2 -> x ⊙ x
    replace(op, create(op, OpCode::Mul, {x, x}, rt, {}, op->result(0)));
    return true;
  }
  // No pow(x, 0.5) -> sqrt(x): besides -0.0 and -inf (which a select could
  // mend), the two differ in the last bit on ordinary values, because pow
  // is not correctly rounded and sqrt is (glibc's powf on 1.36 million
  // normal f32 inputs, pow on ~0.1% of random f64 ones). LLVM, likewise,
  // rewrites pow(x, 0.5) only under the `afn` fast-math flag.
  // x^2 and x^-1 are exact: pow's result is the correctly rounded x*x and
  // 1/x (glibc: every f32 input checked, 2e8 random f64 ones), and its
  // special cases (+-0, +-inf, NaN) agree with the IEEE * and /.
  if (isConstantSplat(e, -1)) {
    Value *one = constant(op, makeSplat(rt.dtype(), {}, 1.0), nullptr);
    replace(op, create(op, OpCode::Div, {one, x}, rt, {}, op->result(0)));
    return true;
  }
  return false;
}

/// Normalises a transpose's perm (default: reversed axes; negative entries).
std::vector<int64_t> permOf(const Operation &op) {
  int64_t r = op.operand(0)->type().rank();
  std::vector<int64_t> p = op.attr("perm").getInts();
  if (p.empty())
    for (int64_t k = r - 1; k >= 0; --k) p.push_back(k);
  for (int64_t &v : p)
    if (v < 0) v += r;
  return p;
}

bool isIdentityPerm(const std::vector<int64_t> &p) {
  for (size_t k = 0; k < p.size(); ++k)
    if (p[k] != static_cast<int64_t>(k)) return false;
  return true;
}

bool Canonicalizer::simplifyShape(Operation *op) {
  Value *x = op->operand(0);
  Type xt = x->type();
  switch (op->code()) {
  case OpCode::Transpose: {
    std::vector<int64_t> q = permOf(*op);
    if (isIdentityPerm(q)) return forwardIfSubtype(op, x);
    // transpose(transpose(y, p), q) = transpose(y, r) with r[i] = p[q[i]].
    Operation *inner = definedBy(x, OpCode::Transpose);
    if (!inner) return false;
    std::vector<int64_t> p = permOf(*inner), r;
    for (int64_t i : q) r.push_back(p[static_cast<size_t>(i)]);
    Value *y = inner->operand(0);
    if (isIdentityPerm(r)) return forwardIfSubtype(op, y);
    op->setOperand(0, y);
    op->setAttr("perm", Attr::getInts(r));
    push(op);
    pushDef(x);
    return true;
  }
  case OpCode::Reshape:
  case OpCode::DynReshape: {
    if (op->is(OpCode::DynReshape) && staticReshapeTarget(op)) return true;
    // Reshaping to x's own static shape is x.
    InferredTypes inf = inferResultTypes(*op, m_);
    if (inf.ok() && xt.isTensor() && xt.hasStaticShape() && inf.types.size() == 1 &&
        inf.types[0] == xt && forwardIfSubtype(op, x))
      return true;
    // reshape(reshape(y)) -> reshape(y): reshape keeps the element order, so
    // only the outer target matters (the outer op keeps it and its result
    // type). Only when the inner reshape is fully static: otherwise it checks
    // y's element count at run time (against its own target, or a multiple of
    // it for -1), and the outer op might not repeat that check.
    Operation *inner = x->definingOp();
    if (!inner || !(inner->is(OpCode::Reshape) || inner->is(OpCode::DynReshape))) return false;
    Value *y = inner->operand(0);
    if (!y->type().isTensor() || !y->type().hasStaticShape() || !xt.hasStaticShape())
      return false;
    op->setOperand(0, y);
    push(op);
    pushDef(x);
    return true;
  }
  case OpCode::Squeeze: {
    // squeeze(expand_dims(y, axis=a), axes=[a]) -> y
    Operation *inner = definedBy(x, OpCode::ExpandDims);
    const std::vector<int64_t> &axes = op->attr("axes").getInts();
    if (!inner || axes.size() != 1) return false;
    int64_t r = xt.rank(); // rank after expand_dims
    int64_t a = inner->intAttr("axis"), b = axes[0];
    if ((a < 0 ? a + r : a) != (b < 0 ? b + r : b)) return false;
    return forwardIfSubtype(op, inner->operand(0));
  }
  case OpCode::BroadcastTo:
    // broadcast_to x's own static shape is x.
    if (xt.isTensor() && xt.hasStaticShape() && xt.dims() == op->attr("shape").getInts())
      return forwardIfSubtype(op, x);
    return false;
  default: return false;
  }
}

/// dyn_reshape %x, %s -> reshape %x, shape=[...] when %s is known at compile
/// time but for at most one entry, a `dim` that provably equals x's only `?`
/// dimension (SameExtent.h) while the other entries multiply to x's static
/// sizes: that entry is then what -1 computes. torch's exports split heads by
/// Reshape(q, [Shape(h)[0], 12, 64]) with h the input of q = h W^T + b
/// (issue 47); as `reshape %q, shape=[-1, 12, 64]` no target vector is built
/// at run time (dim, expand_dims, concat), and later patterns and passes see
/// a static reshape. Exact: the dyn_reshape's run-time check (x's element
/// count is the target's product) always passes, and the reshape's (a
/// multiple of the other entries) too; both give the same shape.
bool Canonicalizer::staticReshapeTarget(Operation *op) {
  Value *x = op->operand(0);
  if (!x->type().isTensor()) return false;
  auto entries = shapeEntries(op->operand(1));
  if (!entries) return false;
  std::vector<int64_t> target;
  int64_t dynAt = -1, minusOnes = 0;
  for (size_t i = 0; i < entries->size(); ++i) {
    const ShapeEntry &e = (*entries)[i];
    if (e.dim.value) {
      if (dynAt >= 0) return false;
      dynAt = static_cast<int64_t>(i);
      target.push_back(-1);
      continue;
    }
    if (e.size < -1) return false; // an error the runtime reports
    minusOnes += e.size == -1;
    target.push_back(e.size);
  }
  if (dynAt >= 0) {
    std::optional<DimRef> src = minusOneSource(x, target, static_cast<size_t>(dynAt));
    if (minusOnes > 0 || !src || !sameExtent(*src, (*entries)[static_cast<size_t>(dynAt)].dim)) return false;
  } else if (minusOnes > 1) {
    return false;
  }
  replace(op, create(op, OpCode::Reshape, {x}, op->result(0)->type(), {Attr::getInts(target)}, op->result(0)));
  return true;
}

/// u(reshape(y)) -> reshape(u(y)) for an element-wise unary op u (gelu, exp,
/// relu, ...); add(reshape(y), c) -> reshape(add(y, c)) (also sub, mul, div, c on either
/// side) when c is a vector along the last axis (rank <= 1: size 1 or the
/// last dim) and the reshape keeps y's static last dimension: each element
/// meets the same element of c either way, and the reshape, a view, checks
/// the same element count. An imported linear layer on a stack of rows is
/// reshape, matmul, reshape back, then the bias add (ONNX MatMul then Add,
/// issue 47: Hugging Face's BERT, ViT); with the add (and a GELU after it)
/// next to the matmul, fuse makes them the GEMM's epilogue instead of
/// kernels of their own.
bool Canonicalizer::hoistAboveReshape(Operation *op) {
  if (op->numResults() != 1) return false;
  Type rt = op->result(0)->type();
  // Only onto a value that fuse can extend (the GEMM, an element-wise
  // group) and nothing else reads: the moved op then joins that group, and
  // no program gets a kernel more (the reshape, a view, splits groups).
  auto extendable = [](Value *y) {
    Operation *d = y->definingOp();
    if (!d || !y->hasOneUse()) return false;
    FusionPattern p = d->info().fusion;
    return p == FusionPattern::OutputFusable || p == FusionPattern::ElemWise || p == FusionPattern::Broadcast;
  };
  if (op->numOperands() == 1) {
    // An element-wise unary op meets each element alone, in any shape.
    Value *x = op->operand(0);
    Operation *r = definedBy(x, OpCode::Reshape);
    if (!r || !x->hasOneUse() || !rt.isTensor() || !x->type().isTensor() || rt.dims() != x->type().dims())
      return false;
    Value *y = r->operand(0);
    if (!y->type().isTensor() || !extendable(y)) return false;
    std::vector<Attr> attrs(op->attrs().begin(), op->attrs().end());
    Value *inner = create(op, op->code(), {y}, ctx_.tensor(rt.dtype(), y->type().dims()), std::move(attrs), nullptr);
    replace(op, create(op, OpCode::Reshape, {inner}, rt, {r->attr("shape")}, op->result(0)));
    return true;
  }
  if (op->numOperands() != 2) return false;
  for (unsigned i = 0; i < 2; ++i) {
    Value *x = op->operand(i), *c = op->operand(1 - i);
    Operation *r = definedBy(x, OpCode::Reshape);
    if (!r || !x->hasOneUse()) continue;
    Value *y = r->operand(0);
    if (!extendable(y)) continue;
    Type yt = y->type(), xt = x->type(), ct = c->type();
    if (!yt.isTensor() || !xt.isTensor() || !ct.isTensor() || !rt.isTensor() || yt.rank() < 1 ||
        xt.rank() < 1 || ct.rank() > 1 || yt.dtype() != ct.dtype() || rt.dims() != xt.dims())
      continue;
    int64_t last = yt.dims().back();
    if (last == kDynamic || xt.dims().back() != last) continue;
    if (ct.rank() == 1 && ct.dims()[0] != last && ct.dims()[0] != 1) continue;
    std::vector<Value *> operands = i == 0 ? std::vector<Value *>{y, c} : std::vector<Value *>{c, y};
    Value *inner = create(op, op->code(), operands, ctx_.tensor(rt.dtype(), yt.dims()), defaultAttrs(op->code()), nullptr);
    replace(op, create(op, OpCode::Reshape, {inner}, rt, {r->attr("shape")}, op->result(0)));
    return true;
  }
  return false;
}

bool Canonicalizer::simplifyCast(Operation *op) {
  Value *x = op->operand(0);
  DType to = op->attr("dtype").getDType();
  if (!x->type().isTensor()) return false;
  if (x->type().dtype() == to) return forwardIfSubtype(op, x); // cast to the same dtype
  // cast(cast(y, B), C) -> cast(y, C) when y's dtype A converts to B exactly
  // (isLosslessCast); -> y when C is A.
  Operation *inner = definedBy(x, OpCode::Cast);
  if (!inner) return false;
  Value *y = inner->operand(0);
  if (!y->type().isTensor() || !isLosslessCast(y->type().dtype(), x->type().dtype())) return false;
  if (y->type().dtype() == to) return forwardIfSubtype(op, y);
  op->setOperand(0, y);
  push(op);
  pushDef(x);
  return true;
}

bool Canonicalizer::simplifySelect(Operation *op) {
  Value *c = op->operand(0), *a = op->operand(1), *b = op->operand(2);
  // select(c, a, a) -> a, when c does not broadcast a to a bigger shape.
  if (a == b && canForwardOperand(*op, a)) return replaceBy(op, a);
  // A constant condition picks one side (if the other operands cannot grow it).
  if (isConstantSplat(c, 1) && canForwardOperand(*op, a)) return replaceBy(op, a);
  if (isConstantSplat(c, 0) && canForwardOperand(*op, b)) return replaceBy(op, b);
  return false;
}

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

bool Canonicalizer::simplifyBranch(Operation *op) {
  if (op->is(OpCode::CondBr)) {
    const Successor &t = op->successors()[0], &f = op->successors()[1];
    // cond_br on a constant -> br to the taken successor, with its operands.
    if (const DenseValue *c = constantValue(op->operand(0))) {
      unsigned k = c->getInt(0) ? 0 : 1;
      replaceWithBr(op, op->successors()[k].block, op->successorOperands(k));
      return true;
    }
    // Both ways lead to the same block with the same values: no branch.
    if (t.block == f.block && op->successorOperands(0) == op->successorOperands(1)) {
      replaceWithBr(op, t.block, op->successorOperands(0));
      return true;
    }
    return false;
  }
  // match on a value built by `construct` -> br to its case with the fields
  // (or to the `_` default, which takes no arguments).
  Operation *ctor = definedBy(op->operand(0), OpCode::Construct);
  if (!ctor) return false;
  const Successor *hit = nullptr, *dflt = nullptr;
  for (const Successor &s : op->successors()) {
    if (s.label == ctor->strAttr("ctor")) hit = &s;
    if (s.label.empty()) dflt = &s;
  }
  if (hit && hit->block->numArguments() == ctor->numOperands()) {
    replaceWithBr(op, hit->block, ctor->operands());
    return true;
  }
  if (!hit && dflt && dflt->block->numArguments() == 0) {
    replaceWithBr(op, dflt->block, {});
    return true;
  }
  return false;
}

bool Canonicalizer::simplifyCFG(Function &f) {
  bool changed = eraseUnreachableBlocks(f);
  changed |= mergeBlocks(f);
  return changed;
}

bool Canonicalizer::eraseUnreachableBlocks(Function &f) {
  // Reachable blocks carry a fresh tag in their scratch word.
  const uint64_t mark = static_cast<uint64_t>(newScratchTag()) << 32;
  for (Block *b : f.reversePostOrder()) b->setScratch(mark);
  std::vector<Block *> dead;
  for (auto &b : f.blocks())
    if (b->scratch() != mark) dead.push_back(b.get());
  if (dead.empty()) return false;
  // Dead blocks may use each other's values and branch to each other: cut
  // every reference first, then delete. Reachable code cannot use their
  // values (dominance) nor branch to them.
  for (Block *b : dead) {
    for (Operation &op : *b) op.dropAllReferences();
    if (Operation *t = b->terminator()) t->mutableSuccessors().clear();
  }
  f.eraseBlocks(dead);
  return true;
}

/// True when `b` holds a `kill`.
static bool hasKills(Block &b) {
  for (Operation &op : b)
    if (op.is(OpCode::Kill)) return true;
  return false;
}

bool Canonicalizer::mergeBlocks(Function &f) {
  // Incoming edges per block, one per edge (a cond_br with both successors
  // to one block counts twice), and the first one's source: only a block
  // with one incoming edge merges, so the others need not be listed. In
  // block i's scratch word: (tag << 32 | i).
  struct Preds {
    size_t count = 0;
    Block *first = nullptr;
  };
  std::vector<Preds> preds;
  std::vector<Block *> blocks;
  const uint64_t tag = static_cast<uint64_t>(newScratchTag()) << 32;
  for (auto &b : f.blocks()) {
    b->setScratch(tag | blocks.size());
    blocks.push_back(b.get());
  }
  preds.resize(blocks.size());
  auto predsOf = [&](Block *b) -> Preds & { return preds[static_cast<uint32_t>(b->scratch())]; };
  for (Block *b : blocks)
    for (Block *s : b->successors()) {
      Preds &ps = predsOf(s);
      if (ps.count++ == 0) ps.first = b;
    }
  bool changed = false;
  // Merged blocks are erased together at the end: one at a time, each
  // erasure searches and shifts the block list (quadratic in a function of
  // many small blocks, such as a module whose calls were all inlined).
  std::vector<Block *> merged;
  for (Block *b : blocks) {
    if (b->isEntry()) continue;
    const Preds &ps = predsOf(b);
    if (ps.count != 1 || ps.first == b) continue;
    Block *p = ps.first;
    Operation *br = p->terminator();
    if (!br || !br->is(OpCode::Br) || br->successors()[0].block != b) continue;
    std::vector<Value *> args = br->operands();
    if (args.size() != b->numArguments()) continue;
    // With explicit kills (memory planning ended lives in b), merging
    // would make a branch operand and b's argument one value, so a kill of
    // either would come before the uses of the other.
    if (hasKills(*b)) continue;
    for (unsigned i = 0; i < args.size(); ++i)
      if (b->argument(i) != args[i]) b->argument(i)->replaceAllUsesWith(args[i]);
    // Appended after the branch is gone: each op takes the next order
    // number (inserting each before the branch halved one gap and
    // relabelled a range every few ops: 6% of a module of inlined calls).
    br->erase();
    while (Operation *op = b->front()) p->push_back(op->remove());
    // b's successors now have p as their predecessor.
    for (Block *s : p->successors())
      if (Preds &q = predsOf(s); q.first == b) q.first = p;
    merged.push_back(b);
    changed = true;
  }
  if (!merged.empty()) f.eraseBlocks(merged);
  return changed;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

class CanonicalizePass : public Pass {
public:
  std::string_view name() const override { return "canonicalize"; }
  std::string setOption(std::string_view key, std::string_view value) override {
    if (key != "fold-limit") return Pass::setOption(key, value);
    int64_t v = -1;
    if (!parseIntOption(value, 0, std::numeric_limits<int64_t>::max(), v))
      return "option 'fold-limit' of 'canonicalize' takes a non-negative integer, got '" +
             std::string(value) + "'";
    foldLimit_ = v;
    return "";
  }
  LogicalResult run(Module &m, DiagnosticEngine &, bool &changed) override {
    Canonicalizer c(m, foldLimit_);
    // Primitive functions first: a call is simplified by what its callee's
    // body has become (simplifyPrimitiveCall).
    for (bool primitives : {true, false})
      for (auto &f : m.functions())
        if (isPrimitive(*f) == primitives) changed |= c.run(*f);
    return success();
  }

private:
  int64_t foldLimit_ = kDefaultFoldLimit;
};

} // namespace

std::unique_ptr<Pass> createCanonicalizePass() { return std::make_unique<CanonicalizePass>(); }

} // namespace nimble::passes
