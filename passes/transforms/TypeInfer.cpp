//===- TypeInfer.cpp - Type inference and refinement over `?` dims --------===//
//
// Nimble paper §3.1 ("Type Inference"): unknown dimensions propagate through
// inference and cost precision, so the compiler refines false dynamic
// dimensions wherever it can prove them static. This pass:
//
//  1. Re-infers every op's result types from its operands (the op's relation
//     in Ops.def / ShapeFns) and keeps the meet of declared and inferred: a
//     declared `?` that the operands fix becomes static; a declared static
//     size the relation cannot prove stays (it is a run-time check).
//  2. Refines block arguments optimistically: non-entry block arguments start
//     at "no information" and take the join of what their predecessors pass
//     (the constructor fields for `match` targets), iterated to a fixpoint
//     with the ops in between. A loop-carried tensor<?x512xf32> whose initial
//     value and back-edge value are both 1x512 becomes tensor<1x512xf32>.
//     Dimensions only move from static to `?` during the iteration, so it
//     terminates.
//  3. Refines function result types to the join of the values returned, and
//     repeats over the module until no signature changes (callers' call
//     results pick up the refinement). Function parameters are never changed:
//     they are the function's interface. Result refinement starts from the
//     declared types (pessimistic), so recursion keeps what was declared.
//
// With `remarks=true` every check left for run time (gradual typing) is
// reported as a remark at its op: the list of what the runtime will verify.
//
// Not done yet: equal unknown dimensions are not given a shared symbol (the
// paper's "single variable dimension for equivalent dynamic dimensions"); that
// belongs with symbolic code generation.
//
//===----------------------------------------------------------------------===//

#include "passes/Pass.h"

#include "ir/Inference.h"

#include <unordered_map>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

/// Least upper bound under sub-shaping; null when the two are unrelated.
Type join(Context &ctx, Type a, Type b) {
  if (!a) return b;
  if (!b) return a;
  if (a == b) return a;
  if (a.isTensor() && b.isTensor() && a.dtype() == b.dtype() && a.rank() == b.rank()) {
    std::vector<int64_t> dims(a.dims().size());
    for (size_t i = 0; i < dims.size(); ++i) dims[i] = joinDim(a.dims()[i], b.dims()[i]);
    return ctx.tensor(a.dtype(), dims);
  }
  if (a.isTuple() && b.isTuple() && a.elems().size() == b.elems().size()) {
    std::vector<Type> es;
    for (size_t i = 0; i < a.elems().size(); ++i) {
      Type j = join(ctx, a.elems()[i], b.elems()[i]);
      if (!j) return Type();
      es.push_back(j);
    }
    return ctx.tuple(es);
  }
  return Type();
}

/// The most precise type both describe (declared `?` takes the inferred size);
/// `declared` when they conflict (the verifier reports that).
Type meet(Context &ctx, Type declared, Type inferred) {
  if (!inferred || !declared.isCompatibleWith(inferred)) return declared;
  if (declared.isTensor()) {
    std::vector<int64_t> dims = declared.dims();
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] == kDynamic) dims[i] = inferred.dims()[i];
    return ctx.tensor(declared.dtype(), dims);
  }
  if (declared.isTuple()) {
    std::vector<Type> es;
    for (size_t i = 0; i < declared.elems().size(); ++i)
      es.push_back(meet(ctx, declared.elems()[i], inferred.elems()[i]));
    return ctx.tuple(es);
  }
  return declared;
}

class TypeInferPass : public Pass {
public:
  std::string_view name() const override { return "type-infer"; }
  /// A fixpoint: run again on what it left, it finds nothing (Pass::idempotent).
  bool idempotent() const override { return true; }
  std::string setOption(std::string_view key, std::string_view value) override {
    if (key == "remarks" && (value == "true" || value == "false")) {
      remarks_ = value == "true";
      return "";
    }
    if (key == "remarks") return "option 'remarks' of 'type-infer' takes true or false";
    return Pass::setOption(key, value);
  }

  LogicalResult run(Module &m, DiagnosticEngine &diag, bool &changed) override {
    // Signatures feed callers: repeat until no function result type changes.
    for (int round = 0; round < 16; ++round) {
      bool sigChanged = false;
      for (auto &f : m.functions()) inferFunction(*f, m, changed, sigChanged);
      if (!sigChanged) break;
    }
    if (remarks_)
      for (auto &f : m.functions()) reportChecks(*f, m, diag);
    return success();
  }

private:
  void inferFunction(Function &f, Module &m, bool &changed, bool &sigChanged);
  void reportChecks(Function &f, Module &m, DiagnosticEngine &diag);
  bool remarks_ = false;
};

void TypeInferPass::inferFunction(Function &f, Module &m, bool &changed, bool &sigChanged) {
  Context &ctx = m.context();
  std::vector<Block *> rpo = f.reversePostOrder();
  if (rpo.empty()) return;

  // Blocks and values are numbered in their scratch words under a tag of
  // this run, so that the tables below are vectors: a lookup is a load, not
  // a hash (issue 23: two hash maps were most of the pass on big programs).
  const uint64_t tag = newScratchTag();
  for (size_t i = 0; i < rpo.size(); ++i) rpo[i]->setScratch((tag << 32) | i);
  auto blockNumber = [&](const Block *b) { return static_cast<uint32_t>(b->scratch()); };

  // Incoming edges of each block: (terminator, successor index).
  // Whether some edge goes back in the reverse post-order (a cycle).
  std::vector<std::vector<std::pair<Operation *, unsigned>>> preds(rpo.size());
  bool cyclic = false;
  for (Block *b : rpo)
    if (Operation *t = b->terminator())
      for (unsigned k = 0; k < t->successors().size(); ++k) {
        uint32_t to = blockNumber(t->successors()[k].block);
        cyclic |= to <= blockNumber(b);
        preds[to].push_back({t, k});
      }

  // Declared types; optimistic start: nothing known yet about non-entry block
  // arguments and op results (back edges are read before they are computed).
  std::vector<std::pair<Value *, Type>> declared;
  auto declare = [&](Value *v) {
    v->setScratch((tag << 32) | declared.size());
    declared.push_back({v, v->type()});
  };
  auto declaredOf = [&](const Value *v) { return declared[static_cast<uint32_t>(v->scratch())].second; };
  for (Block *b : rpo) {
    for (Value *a : b->arguments()) {
      declare(a);
      if (!b->isEntry()) a->setType(Type());
    }
    for (Operation &op : *b)
      for (Value *r : op.resultValues()) {
        declare(r);
        r->setType(Type());
      }
  }

  // Without a cycle one sweep in reverse post-order is the fixpoint: every
  // definition is visited before its uses, and a sweep that confirms it
  // changes nothing (issue 23: that second sweep was half the pass).
  bool moving = true;
  for (int iter = 0; moving && iter < (cyclic ? 64 : 1); ++iter) {
    moving = false;
    auto update = [&](Value *v, Type t) {
      if (v->type() == t) return;
      v->setType(t);
      moving = true;
    };
    for (Block *b : rpo) {
      if (!b->isEntry()) {
        for (unsigned i = 0; i < b->numArguments(); ++i) {
          Value *arg = b->argument(i);
          Type in;
          bool any = false, unrelated = false;
          for (auto &[term, k] : preds[blockNumber(b)]) {
            const Successor &s = term->successors()[k];
            Type t;
            if (term->is(OpCode::Match)) {
              Type adtT = term->operand(0)->type();
              const AdtDecl *adt = adtT && adtT.isAdt() ? m.lookupAdt(adtT.adtName()) : nullptr;
              int ci = adt ? adt->ctorIndex(s.label, k) : -1;
              if (ci >= 0 && i < adt->ctors[static_cast<size_t>(ci)].fields.size())
                t = adt->ctors[static_cast<size_t>(ci)].fields[i];
            } else if (i < s.operandCount) {
              t = term->operand(s.operandBegin + i)->type();
            }
            if (!t) continue; // not known yet
            Type j = any ? join(ctx, in, t) : t;
            if (!j) unrelated = true;
            in = j;
            any = true;
          }
          if (unrelated) update(arg, declaredOf(arg));
          else if (any) update(arg, meet(ctx, declaredOf(arg), in));
        }
      }
      for (Operation &op : *b) {
        if (op.numResults() == 0) continue;
        bool ready = true;
        for (unsigned i = 0; i < op.numOperands(); ++i) ready &= bool(op.operand(i)->type());
        if (!ready) {
          for (Value *r : op.resultValues()) update(r, Type());
          continue;
        }
        InferredTypes inf = inferResultTypes(op, m);
        for (unsigned i = 0; i < op.numResults(); ++i) {
          Value *r = op.result(i);
          Type t = inf.ok() && i < inf.types.size() ? meet(ctx, declaredOf(r), inf.types[i])
                                                     : declaredOf(r);
          update(r, t);
        }
      }
    }
  }
  // What the iteration never reached keeps its declared type.
  for (auto &[v, t] : declared) {
    if (!v->type()) v->setType(t);
    if (v->type() != t) changed = true;
  }

  // Function results: the join of every returned value, met with the signature.
  std::vector<Type> rts = f.resultTypes();
  std::vector<Type> joined(rts.size());
  bool sawRet = false;
  for (Block *b : rpo) {
    Operation *t = b->terminator();
    if (!t || !t->is(OpCode::Ret) || t->numOperands() != rts.size()) continue;
    for (size_t i = 0; i < rts.size(); ++i)
      joined[i] = sawRet ? join(ctx, joined[i], t->operand(static_cast<unsigned>(i))->type())
                         : t->operand(static_cast<unsigned>(i))->type();
    sawRet = true;
  }
  if (!sawRet) return;
  std::vector<Type> refined(rts.size());
  for (size_t i = 0; i < rts.size(); ++i) refined[i] = joined[i] ? meet(ctx, rts[i], joined[i]) : rts[i];
  if (refined != rts) {
    f.setType(ctx.func(f.argTypes(), refined));
    changed = sigChanged = true;
  }
}

void TypeInferPass::reportChecks(Function &f, Module &m, DiagnosticEngine &diag) {
  for (auto &b : f.blocks())
    for (Operation &op : *b) {
      if (op.numResults() == 0) continue;
      InferredTypes inf = inferResultTypes(op, m);
      if (!inf.ok()) continue;
      for (const std::string &d : inf.deferred)
        diag.remark(op.loc(), "run-time check: " + d);
      for (unsigned i = 0; i < op.numResults() && i < inf.types.size(); ++i) {
        Type declared = op.result(i)->type(), t = inf.types[i];
        if (!declared.isTensor() || !t.isTensor() || declared.rank() != t.rank()) continue;
        for (size_t k = 0; k < declared.dims().size(); ++k)
          if (declared.dims()[k] != kDynamic && t.dims()[k] == kDynamic)
            diag.remark(op.loc(), "run-time check: result " + std::to_string(i) +
                                      " dimension " + std::to_string(k) + " is declared " +
                                      std::to_string(declared.dims()[k]));
      }
    }
}

} // namespace

std::unique_ptr<Pass> createTypeInferPass() { return std::make_unique<TypeInferPass>(); }

} // namespace nimble::passes
