//===- GradFunction.cpp - Adjoint code generation for one function --------===//
//
// Reverse-mode AD by adjoint code generation (DLVM, seed 004, §3.1.3), over a
// CFG with block arguments, loops, calls and recursion. The forward function
// is a copy of @g that also builds a *tape*: a stack of records, one per
// executed block, as a value of a generated ADT
//
//   type @<root>.<g>.tape = start | b0_entry(fields..., tape) | b1_loop(...) | ...
//
// Each block B pushes its record just before its terminator and passes the
// new tape on (an extra block argument; match targets, whose arguments are
// the constructor's fields, see their single predecessor's tape by
// dominance); `ret` returns it after the results. The backward function pops
// it: a reverse block rev.B per forward block B receives
//
//   (adjoints of V(B)..., const accumulators..., the tape below B, B's fields...)
//
// where V(B) are the floating-point values that leave B (its successor
// operands and its live-out values, after type-directed activity: only
// values that depend on a differentiated parameter or const count). rev.B
// runs B's ops backwards through the rules of Gradients.def, which yields the
// adjoints of B's arguments and live-in values, then matches the tape below:
// its top is the record of the predecessor P that branched to B. The case
// block for P (one per edge P -> B) sums, for every v in V(P), what B gave v
// (as a live-in, and as each argument P passed it to), or zeros, and branches
// to rev.P. The entry block's reverse returns the parameter adjoints.
//
// Checkpointing (DLVM §2, "AD checkpointing"): with `checkpoint=store` a
// record holds every forward value B's reverse reads; with `recompute` it
// holds only B's inputs (arguments, live-ins), call results and tapes, and
// rev.B recomputes the rest from them. Loops carry one record per iteration
// either way, so the trade is the intermediates of each iteration.
//
// Tuples and ADT values carry adjoints of their own type (GradAggregates.h):
// the adjoint of `match %t` is rebuilt on each edge as the case's
// constructor over the adjoints of its fields; `construct` splits the reverse
// block at a `match` of its result's adjoint; `tuple`/`get_tuple` pack and
// unpack. Which parameters of each function get adjoints is found over the
// call graph first (interprocedural activity), so a recursion over a tree
// computes the tree's adjoint only when something asks for it.
//
// Calls: `call @h` becomes `call @<root>.<h>.fwd`, whose tape is a field of
// the caller's record; the reverse calls `@<root>.<h>.bwd` with it. Recursion
// (Tree-LSTM) needs nothing more. Const adjoints are threaded through every
// reverse block and every bwd call as accumulators, so each const weight
// gets one running sum.
//
//===----------------------------------------------------------------------===//

#include "passes/autodiff/GradFunction.h"

#include "ir/Builder.h"
#include "passes/analysis/Analysis.h"
#include "passes/autodiff/Gradients.h"
#include "passes/analysis/Liveness.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace nimble::passes {

using namespace nimble::ir;

namespace {

std::string sanitize(const std::string &s) {
  std::string r;
  for (char c : s) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return r;
}

/// A tape record field: a forward value, or (for zeros) its run-time shape.
struct Field {
  Value *v;
  bool shape;
  BlockArgument *revArg;
};

struct BlockGrad {
  Block *fwd = nullptr;
  std::string ctor;
  std::vector<Value *> outs; // V(B)
  Block *rev = nullptr;
  /// Where rev.B's code continues: rev.B, or the last block it was split
  /// into (a `construct`'s adjoint is unpacked by a `match`).
  Block *revEnd = nullptr;
  /// For a `match` case: the adjoint of the matched value from this case
  /// (its constructor over the fields' adjoints), or null.
  Value *matchAdj = nullptr;
  std::vector<Value *> accIn;
  Value *rest = nullptr;
  std::vector<Field> fields;
  std::map<std::pair<const Value *, bool>, unsigned> fieldIndex;
  std::unordered_map<const Value *, Value *> recomputed;
  // End of the reverse body.
  std::unordered_map<const Value *, Value *> inAdj;
  std::vector<Value *> accOut;
  // Forward tape values.
  Value *tapeIn = nullptr, *tapeOut = nullptr;
};

class FunctionGrad {
public:
  FunctionGrad(Module &m, DiagnosticEngine &diag, FuncGrad &fg, const std::vector<Global *> &consts,
               Checkpoint mode, AggregateAdjoints &agg, std::function<FuncGrad *(Function *)> declareCallee)
      : m_(m), ctx_(m.context()), diag_(diag), fg_(fg), consts_(consts), mode_(mode), agg_(agg),
        declareCallee_(std::move(declareCallee)) {}

  LogicalResult run();

private:
  LogicalResult cloneAndRewriteCalls();
  LogicalResult analyzeActivity();
  void buildReverseBlocks();
  LogicalResult buildReverseBody(BlockGrad &bg);
  void buildEdges();
  void buildTapeInForward();

  Value *field(BlockGrad &bg, Value *v, bool shape);
  Value *fwdValue(BlockGrad &bg, Builder &b, Value *v);
  Value *zerosFor(Builder &b, Value *v, Value *shapeField);
  /// The zero adjoint of `v` at the end of an edge block of P, from P's
  /// record fields (`fieldArgs`).
  Value *zerosFromFields(Builder &b, BlockGrad &P, Value *v, const std::vector<Value *> &fieldArgs);
  /// Sum of two adjoints of one value (tensors, tuples, ADTs).
  Value *addAdj(Builder &b, AdjointEmitter &em, Value *x, Value *y) {
    if (!x) return y;
    if (!y) return x;
    return x->type().isTensor() ? em.add(x, y) : agg_.add(b, x, y);
  }
  Value *coerceAdj(Builder &b, AdjointEmitter &em, Value *v, Type t) {
    return agg_.coerce(b, v, t, [&](Value *x, Type u) { return em.coerce(x, u); });
  }
  /// For a `match` case: the matched value's adjoint from this case, its
  /// constructor over the arguments' adjoints (zeros where one has none;
  /// the forward value for an argument that holds no float).
  void buildMatchAdjoint(BlockGrad &bg, Builder &b, AdjointEmitter &em,
                         std::unordered_map<const Value *, Value *> &adj);
  bool varied(const Value *v) const { return varied_.count(v) != 0; }
  BlockGrad &info(const Block *b) { return blocks_[index_.at(b)]; }
  Block *unreachableBlock();

  Module &m_;
  Context &ctx_;
  DiagnosticEngine &diag_;
  FuncGrad &fg_;
  const std::vector<Global *> &consts_;
  Checkpoint mode_;
  AggregateAdjoints &agg_;
  std::function<FuncGrad *(Function *)> declareCallee_;

  std::unordered_map<const Operation *, FuncGrad *> calls_;
  std::unordered_set<const Value *> varied_;
  std::unordered_map<const Global *, unsigned> constIndex_;
  std::vector<BlockGrad> blocks_;
  std::unordered_map<const Block *, size_t> index_;
  std::unique_ptr<Liveness> live_;
  std::vector<Value *> seedArgs_, accArgs_;
  Value *tapeArg_ = nullptr;
  Block *unreachable_ = nullptr;
  /// Blocks whose predecessor's `match` targets them.
  std::unordered_map<const Block *, std::vector<Block *>> matchPreds_;
  unsigned splits_ = 0;
  bool ok_ = true;
};

//===-- Forward copy ---------------------------------------------------------===//

LogicalResult FunctionGrad::cloneAndRewriteCalls() {
  Function &src = *fg_.src, &fwd = *fg_.fwd;
  std::vector<Block *> rpo = src.reversePostOrder();
  std::unordered_set<Block *> reachable(rpo.begin(), rpo.end());
  std::vector<Block *> order;
  for (auto &b : src.blocks())
    if (reachable.count(b.get())) order.push_back(b.get());
  Block *dummy = fwd.addBlock(std::make_unique<Block>("dummy"));
  IRMapping map;
  cloneBlocksInto(order, fwd, dummy, map, "");
  fwd.eraseBlock(dummy);

  for (auto &b : fwd.blocks())
    for (Operation *op : b->opsSnapshot()) {
      if (!op->is(OpCode::Call)) continue;
      Function *callee = m_.lookupFunction(op->attr("callee"));
      if (!callee || callee->blocks().empty() || isPrimitive(*callee)) {
        diag_.error(op->loc(), "grad: cannot differentiate the call to @" + op->strAttr("callee") +
                                   ": it is a kernel (primitive) function, not a differentiable body");
        return failure();
      }
      FuncGrad *h = declareCallee_(callee);
      std::vector<Type> types = callee->resultTypes();
      types.push_back(h->tapeType);
      Builder bld(m_, op->loc());
      bld.setInsertionPoint(op);
      Operation *nc = bld.create(OpCode::Call, op->operands(),
                                 {{"callee", Attr::getSym(h->fwd->name())}}, types);
      for (unsigned i = 0; i < op->numResults(); ++i) {
        nc->result(i)->setName(op->result(i)->name());
        op->result(i)->replaceAllUsesWith(nc->result(i));
      }
      nc->result(op->numResults())->setName(callee->name() + ".tape");
      op->erase();
      calls_[nc] = h;
    }
  return success();
}

//===-- Activity ---------------------------------------------------------------===//

// A value is varied when it carries an adjoint (a floating-point tensor, or
// a tuple or ADT holding one) and depends on a differentiated parameter or
// const (forward activity analysis, to a fixed point over the CFG). Only
// varied values get adjoints, and a NonDiff op is an error only when one of
// its operands is varied. `tapeCall(op)` is true for the calls whose last
// result is a tape (the forward copy's), which is never varied.
void propagateActivity(Function &f, std::unordered_set<const Value *> &varied, bool withConsts,
                       AggregateAdjoints &agg, const std::function<bool(const Operation &)> &tapeCall,
                       const std::function<void(const Operation &)> &onNonDiff) {
  bool changed = false;
  auto mark = [&](Value *v) {
    if (agg.carries(v->type()) && varied.insert(v).second) changed = true;
  };
  auto isVaried = [&](const Value *v) { return varied.count(v) != 0; };
  std::vector<Block *> rpo = f.reversePostOrder();
  do {
    changed = false;
    for (Block *b : rpo)
      for (Operation &op : *b) {
        bool any = false;
        for (Value *v : op.operands()) any |= isVaried(v);
        switch (op.code()) {
        case OpCode::Call:
          if (any || withConsts)
            for (unsigned i = 0; i < op.numResults() - (tapeCall(op) ? 1u : 0u); ++i) mark(op.result(i));
          break;
        case OpCode::Br:
        case OpCode::CondBr:
          for (unsigned s = 0; s < op.successors().size(); ++s) {
            std::vector<Value *> vals = op.successorOperands(s);
            for (unsigned k = 0; k < vals.size(); ++k)
              if (isVaried(vals[k])) mark(op.successors()[s].block->argument(k));
          }
          break;
        case OpCode::Match:
          if (any)
            for (const Successor &s : op.successors())
              for (Value *a : s.block->arguments()) mark(a);
          break;
        case OpCode::Construct:
        case OpCode::Tuple:
        case OpCode::GetTuple:
          if (any) mark(op.result());
          break;
        default:
          if (gradKind(op.code()) == GradKind::Rule) {
            if (any)
              for (Value *r : op.results()) mark(r);
          } else if (gradKind(op.code()) == GradKind::NonDiff && any) {
            onNonDiff(op);
          }
        }
      }
  } while (changed);
}

LogicalResult FunctionGrad::analyzeActivity() {
  Function &fwd = *fg_.fwd;
  for (unsigned p : fg_.adjParams) varied_.insert(fwd.entry()->argument(p));
  for (Global *g : consts_) varied_.insert(g);
  std::unordered_set<const Operation *> reported;
  propagateActivity(
      fwd, varied_, !consts_.empty(), agg_, [&](const Operation &op) { return calls_.count(&op) != 0; },
      [&](const Operation &op) {
        if (!reported.insert(&op).second) return;
        diag_.error(op.loc(), "grad: cannot differentiate through '" + std::string(op.name()) + "' in @" +
                                  fg_.src->name() + " (" + std::string(gradFormula(op.code())) +
                                  "); an operand depends on a differentiated value");
        ok_ = false;
      });
  return success(ok_);
}

//===-- Reverse blocks -------------------------------------------------------===//

Value *FunctionGrad::field(BlockGrad &bg, Value *v, bool shape) {
  auto key = std::make_pair(static_cast<const Value *>(v), shape);
  auto it = bg.fieldIndex.find(key);
  if (it != bg.fieldIndex.end()) return bg.fields[it->second].revArg;
  Type t = shape ? ctx_.tensor(DType::I64, {v->type().rank()}) : v->type();
  BlockArgument *a = bg.rev->addArgument(t, v->loc());
  a->setName(v->name().empty() ? std::string(shape ? "shape" : "fwd") : v->name() + (shape ? ".shape" : ""));
  bg.fieldIndex[key] = static_cast<unsigned>(bg.fields.size());
  bg.fields.push_back({v, shape, a});
  return a;
}

// The forward value `v` inside rev.B: globals are themselves; with
// `recompute`, ops of B other than calls are re-executed (memoized, placed at
// first use, which precedes every later use); everything else is a field.
Value *FunctionGrad::fwdValue(BlockGrad &bg, Builder &b, Value *v) {
  if (isa<Global>(v)) return v;
  if (mode_ == Checkpoint::Recompute)
    if (auto *r = dyn_cast<OpResult>(v))
      if (r->owner()->block() == bg.fwd && !r->owner()->is(OpCode::Call)) {
        auto it = bg.recomputed.find(v);
        if (it != bg.recomputed.end()) return it->second;
        Operation *op = r->owner();
        IRMapping map;
        for (Value *o : op->operands()) map.values[o] = fwdValue(bg, b, o);
        std::unique_ptr<Operation> c = cloneOp(*op, map);
        Operation *placed = bg.revEnd->push_back(std::move(c));
        for (unsigned i = 0; i < op->numResults(); ++i) bg.recomputed[op->result(i)] = placed->result(i);
        return bg.recomputed.at(v);
      }
  return field(bg, v, false);
}

void FunctionGrad::buildReverseBlocks() {
  Function &fwd = *fg_.fwd;
  live_ = std::make_unique<Liveness>(fwd);
  unsigned n = 0;
  for (Block *b : fwd.reversePostOrder()) {
    BlockGrad bg;
    bg.fwd = b;
    bg.ctor = "b" + std::to_string(n++) + "_" + sanitize(blockLabelOrDefault(*b));
    std::unordered_set<const Value *> seen;
    auto addOut = [&](Value *v) {
      if (varied(v) && !isa<Global>(v) && seen.insert(v).second) bg.outs.push_back(v);
    };
    Operation *t = b->terminator();
    if (t->is(OpCode::Ret) || t->is(OpCode::Br) || t->is(OpCode::CondBr))
      for (unsigned i = t->numNonSuccessorOperands(); i < t->numOperands(); ++i) addOut(t->operand(i));
    if (t->is(OpCode::Ret) || t->is(OpCode::Match))
      for (Value *v : t->operands()) addOut(v);
    for (int id : live_->liveOut(b)) addOut(live_->value(id));
    index_[b] = blocks_.size();
    blocks_.push_back(std::move(bg));
  }
  for (Global *g : consts_) constIndex_[g] = static_cast<unsigned>(constIndex_.size());

  // The bwd entry: (tape, seeds..., accs...).
  Function &bwd = *fg_.bwd;
  Block *entry = bwd.addBlock(std::make_unique<Block>("entry"));
  entry->setLoc(fg_.src->loc());
  tapeArg_ = entry->addArgument(fg_.tapeType, fg_.src->loc());
  tapeArg_->setName("tape");
  std::vector<Type> results = fg_.src->resultTypes();
  for (unsigned r : fg_.seedResults) {
    Value *a = entry->addArgument(results[r], fg_.src->loc());
    a->setName("seed" + std::to_string(r));
    seedArgs_.push_back(a);
  }
  for (Global *g : consts_) {
    Value *a = entry->addArgument(g->type(), g->declLoc());
    a->setName("d." + g->name());
    accArgs_.push_back(a);
  }
  for (BlockGrad &bg : blocks_) {
    auto blk = std::make_unique<Block>("rev." + sanitize(blockLabelOrDefault(*bg.fwd)));
    blk->setLoc(bg.fwd->loc());
    bg.rev = bg.revEnd = bwd.addBlock(std::move(blk));
    for (Value *v : bg.outs) bg.rev->addArgument(v->type(), v->loc())->setName("d." + v->name());
    for (Global *g : consts_) {
      BlockArgument *a = bg.rev->addArgument(g->type(), g->declLoc());
      a->setName("d." + g->name());
      bg.accIn.push_back(a);
    }
    bg.rest = bg.rev->addArgument(fg_.tapeType, bg.fwd->loc());
    bg.rest->setName("tape");
  }
}

LogicalResult FunctionGrad::buildReverseBody(BlockGrad &bg) {
  Builder b(m_, bg.fwd->loc());
  b.setInsertionPointToEnd(bg.rev);
  std::unordered_map<const Value *, Value *> adj;
  for (size_t i = 0; i < bg.outs.size(); ++i) adj[bg.outs[i]] = bg.rev->argument(static_cast<unsigned>(i));
  std::vector<Value *> accs = bg.accIn;
  AdjointEmitter em(b, [&](Value *v) { return fwdValue(bg, b, v); });
  auto lookup = [&](Value *v) -> Value * {
    auto it = adj.find(v);
    return it == adj.end() ? nullptr : it->second;
  };
  auto accumulate = [&](Value *x, Value *d) {
    if (!d) return;
    if (auto *g = dyn_cast<Global>(x)) {
      auto it = constIndex_.find(g);
      if (it != constIndex_.end()) accs[it->second] = em.coerce(em.add(accs[it->second], d), g->type());
      return;
    }
    if (varied(x)) adj[x] = addAdj(b, em, lookup(x), d);
  };

  std::vector<Operation *> ops = bg.fwd->opsSnapshot();
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    Operation &op = **it;
    if (op.isTerminator()) continue;
    b.setLoc(op.loc());
    if (op.is(OpCode::Call)) {
      FuncGrad *h = calls_.at(&op);
      bool any = false;
      for (unsigned r : h->seedResults) any |= lookup(op.result(r)) != nullptr;
      if (!any && consts_.empty()) continue;
      std::vector<Value *> args = {fwdValue(bg, b, op.result(op.numResults() - 1))};
      for (unsigned r : h->seedResults) {
        Value *res = op.result(r), *s = lookup(res);
        if (!s) s = res->type().isTensor() ? em.zerosLike(res) : agg_.zerosLike(b, fwdValue(bg, b, res));
        args.push_back(coerceAdj(b, em, s, res->type()));
      }
      args.insert(args.end(), accs.begin(), accs.end());
      std::vector<Type> types = h->bwd->resultTypes();
      Operation *c = b.create(OpCode::Call, args, {{"callee", Attr::getSym(h->bwd->name())}}, types);
      for (size_t k = 0; k < h->adjParams.size(); ++k) accumulate(op.operand(h->adjParams[k]), c->result(static_cast<unsigned>(k)));
      for (size_t k = 0; k < accs.size(); ++k) accs[k] = c->result(static_cast<unsigned>(h->adjParams.size() + k));
      continue;
    }
    if (op.is(OpCode::Tuple)) {
      if (Value *d = lookup(op.result()))
        for (unsigned i = 0; i < op.numOperands(); ++i)
          if (varied(op.operand(i)))
            accumulate(op.operand(i), b.create(OpCode::GetTuple, {d}, {{"index", Attr::getInt(i)}})->result());
      continue;
    }
    if (op.is(OpCode::GetTuple)) {
      Value *d = lookup(op.result());
      if (!d) continue;
      // The tuple's adjoint: d at the index, zeros (or the primal, for an
      // element that carries none) elsewhere.
      Value *x = op.operand(0);
      std::vector<Type> ts = x->type().elems();
      int64_t at = op.intAttr("index");
      std::vector<Value *> elems;
      Value *xf = nullptr;
      for (size_t j = 0; j < ts.size(); ++j) {
        if (static_cast<int64_t>(j) == at) {
          elems.push_back(coerceAdj(b, em, d, ts[j]));
          continue;
        }
        if (ts[j].isTensor() && ts[j].hasStaticShape() && agg_.carries(ts[j])) {
          elems.push_back(b.splat(ts[j], 0.0)); // no need for the forward tuple
          continue;
        }
        if (!xf) xf = fwdValue(bg, b, x);
        Value *e = b.create(OpCode::GetTuple, {xf}, {{"index", Attr::getInt(static_cast<int64_t>(j))}})->result();
        elems.push_back(agg_.zerosLike(b, e));
      }
      accumulate(x, b.create(OpCode::Tuple, elems, {}, {x->type()})->result());
      continue;
    }
    if (op.is(OpCode::Construct)) {
      Value *d = lookup(op.result());
      bool any = false;
      for (Value *v : op.operands()) any |= varied(v);
      if (!d || !any) continue;
      // Unpack the adjoint by matching it (same constructor as the forward
      // value) and go on in the case block.
      const AdtDecl *adt = m_.lookupAdt(op.strAttr("adt"));
      const AdtDecl::Ctor &ctor = adt->ctors[static_cast<size_t>(adt->ctorIndex(op.strAttr("ctor")))];
      auto blk = std::make_unique<Block>(bg.rev->label() + "." + sanitize(ctor.name) + "." +
                                         std::to_string(splits_++));
      blk->setLoc(op.loc());
      Block *k = fg_.bwd->addBlock(std::move(blk));
      for (Type ft : ctor.fields) k->addArgument(ft, op.loc());
      std::vector<Successor> cases = {{k, 0, 0, ctor.name, {}}};
      if (adt->ctors.size() > 1) cases.push_back({unreachableBlock(), 0, 0, "", {}});
      b.create(OpCode::Match, {d}, {}, {}, cases);
      bg.revEnd = k;
      b.setInsertionPointToEnd(k);
      for (unsigned i = 0; i < op.numOperands(); ++i)
        if (varied(op.operand(i))) accumulate(op.operand(i), k->argument(i));
      continue;
    }
    if (gradKind(op.code()) != GradKind::Rule) continue;
    std::vector<Value *> resultAdj;
    bool any = false;
    for (Value *r : op.results()) {
      resultAdj.push_back(lookup(r));
      any |= resultAdj.back() != nullptr;
    }
    if (!any) continue;
    // A slice of something with a running adjoint (the token matrix an LSTM
    // slices per iteration): add into the window, not a full-size padding.
    if (op.is(OpCode::DynamicSlice) && resultAdj[0]) {
      Value *x = op.operand(0), **acc = nullptr;
      if (auto *g = dyn_cast<Global>(x)) {
        auto ci = constIndex_.find(g);
        if (ci != constIndex_.end()) acc = &accs[ci->second];
      } else if (varied(x) && lookup(x)) {
        acc = &adj[x];
      }
      if (acc && *acc)
        if (Value *r = em.coerce(em.addToWindow(op, *acc, resultAdj[0]), (*acc)->type())) {
          *acc = r;
          continue;
        }
    }
    std::vector<Value *> dx;
    if (!em.emit(op, resultAdj, dx)) {
      diag_.error(op.loc(), "grad: " + em.error());
      return failure();
    }
    for (unsigned i = 0; i < op.numOperands(); ++i) accumulate(op.operand(i), dx[i]);
  }
  buildMatchAdjoint(bg, b, em, adj);
  bg.inAdj = std::move(adj);
  bg.accOut = std::move(accs);
  return success();
}

void FunctionGrad::buildMatchAdjoint(BlockGrad &bg, Builder &b, AdjointEmitter &em,
                                     std::unordered_map<const Value *, Value *> &adj) {
  // bg.fwd is a case of P's `match %t` (its one predecessor, checked in
  // run()): %t's adjoint from here is the case's constructor over the
  // adjoints of the fields (its block arguments). A `_` case binds no
  // fields: nothing to rebuild.
  for (Block *p : matchPreds_[bg.fwd]) {
    Operation *t = p->terminator();
    Value *v = t->operand(0);
    if (!varied(v)) continue;
    for (const Successor &s : t->successors()) {
      if (s.block != bg.fwd || s.label.empty()) continue;
      std::vector<Value *> fields;
      for (Value *a : bg.fwd->arguments()) {
        auto it = adj.find(a);
        if (!agg_.carries(a->type())) fields.push_back(fwdValue(bg, b, a));
        else if (it != adj.end()) fields.push_back(coerceAdj(b, em, it->second, a->type()));
        else fields.push_back(a->type().isTensor() ? em.zerosLike(a) : agg_.zerosLike(b, fwdValue(bg, b, a)));
      }
      bg.matchAdj = b.create(OpCode::Construct, fields,
                             {{"adt", Attr::getSym(v->type().adtName())}, {"ctor", Attr::getStr(s.label)}},
                             {v->type()})->result();
    }
  }
}

Value *FunctionGrad::zerosFor(Builder &b, Value *v, Value *shapeField) {
  if (v->type().hasStaticShape()) return b.splat(v->type(), 0.0);
  return b.create(OpCode::Zeros, {shapeField}, {{"dtype", Attr::getDType(v->type().dtype())}})->result();
}

Value *FunctionGrad::zerosFromFields(Builder &b, BlockGrad &P, Value *v, const std::vector<Value *> &fieldArgs) {
  if (!v->type().isTensor()) return agg_.zerosLike(b, fieldArgs[P.fieldIndex.at({v, false})]);
  return zerosFor(b, v, v->type().hasStaticShape() ? nullptr : fieldArgs[P.fieldIndex.at({v, true})]);
}

Block *FunctionGrad::unreachableBlock() {
  // Never taken: the tape below a record is always a record of a
  // predecessor (the forward function built it), and an adjoint has its
  // forward value's constructor. A match must still cover every one.
  if (unreachable_) return unreachable_;
  unreachable_ = fg_.bwd->addBlock(std::make_unique<Block>("rev.unreachable"));
  Builder b(m_, fg_.src->loc());
  b.setInsertionPointToEnd(unreachable_);
  b.create(OpCode::Unreachable, {});
  return unreachable_;
}

void FunctionGrad::buildEdges() {
  Function &fwd = *fg_.fwd;
  // Predecessors of each block, in a fixed order.
  std::unordered_map<const Block *, std::vector<Block *>> preds;
  for (BlockGrad &bg : blocks_)
    for (Block *s : bg.fwd->successors()) {
      auto &p = preds[s];
      if (std::find(p.begin(), p.end(), bg.fwd) == p.end()) p.push_back(bg.fwd);
    }

  // What the edge P -> B gives each v in V(P): B's adjoint of v as a live-in
  // and of each argument P passed v to (none: zeros).
  auto gather = [&](BlockGrad &P, BlockGrad &B) {
    std::vector<std::vector<Value *>> r;
    Operation *t = P.fwd->terminator();
    for (Value *v : P.outs) {
      std::vector<Value *> parts;
      if (live_->isLiveIn(B.fwd, live_->id(v))) {
        auto it = B.inAdj.find(v);
        if (it != B.inAdj.end()) parts.push_back(it->second);
      }
      if (t->is(OpCode::Match) && v == t->operand(0) && B.matchAdj) parts.push_back(B.matchAdj);
      if (!t->is(OpCode::Match))
        for (unsigned s = 0; s < t->successors().size(); ++s) {
          if (t->successors()[s].block != B.fwd) continue;
          std::vector<Value *> vals = t->successorOperands(s);
          for (unsigned k = 0; k < vals.size(); ++k)
            if (vals[k] == v) {
              auto it = B.inAdj.find(B.fwd->argument(k));
              if (it != B.inAdj.end()) parts.push_back(it->second);
            }
        }
      r.push_back(std::move(parts));
    }
    return r;
  };

  // Pass 1: fields the zeros need (so every record is final before pass 2).
  for (BlockGrad &B : blocks_) {
    if (B.fwd->isEntry()) continue;
    for (Block *p : preds[B.fwd]) {
      BlockGrad &P = info(p);
      std::vector<std::vector<Value *>> g = gather(P, B);
      for (size_t i = 0; i < g.size(); ++i) {
        Value *v = P.outs[i];
        if (!g[i].empty()) continue;
        if (!v->type().isTensor()) field(P, v, false);
        else if (!v->type().hasStaticShape()) field(P, v, true);
      }
    }
  }
  {
    BlockGrad &E = info(fwd.entry());
    for (unsigned p : fg_.adjParams) {
      Value *a = fwd.entry()->argument(p);
      if (E.inAdj.count(a)) continue;
      if (!a->type().isTensor()) field(E, a, false);
      else if (!a->type().hasStaticShape()) field(E, a, true);
    }
  }

  // Pass 2: terminators of the reverse blocks and the edge blocks.
  for (BlockGrad &B : blocks_) {
    Builder b(m_, B.fwd->loc());
    b.setInsertionPointToEnd(B.revEnd);
    if (B.fwd->isEntry()) {
      std::vector<Value *> vals;
      AdjointEmitter em(b, [&](Value *v) { return v; });
      for (unsigned p : fg_.adjParams) {
        Value *a = fwd.entry()->argument(p);
        auto it = B.inAdj.find(a);
        Value *d = nullptr;
        if (it != B.inAdj.end()) d = it->second;
        else if (!a->type().isTensor()) d = agg_.zerosLike(b, field(B, a, false));
        else d = zerosFor(b, a, a->type().hasStaticShape() ? nullptr : field(B, a, true));
        vals.push_back(coerceAdj(b, em, d, a->type()));
      }
      vals.insert(vals.end(), B.accOut.begin(), B.accOut.end());
      b.create(OpCode::Ret, vals, {}, {});
      continue;
    }
    std::vector<Successor> cases;
    std::unordered_set<std::string> covered;
    for (Block *p : preds[B.fwd]) {
      BlockGrad &P = info(p);
      auto edge = std::make_unique<Block>("rev." + sanitize(blockLabelOrDefault(*P.fwd)) + ".from." +
                                          sanitize(blockLabelOrDefault(*B.fwd)));
      edge->setLoc(P.fwd->loc());
      Block *e = fg_.bwd->addBlock(std::move(edge));
      std::vector<Value *> fieldArgs;
      for (const Field &f : P.fields) {
        BlockArgument *a = e->addArgument(f.revArg->type(), f.revArg->argLoc());
        a->setName(f.revArg->name());
        fieldArgs.push_back(a);
      }
      Value *below = e->addArgument(fg_.tapeType, P.fwd->loc());
      below->setName("tape");
      Builder eb(m_, P.fwd->loc());
      eb.setInsertionPointToEnd(e);
      AdjointEmitter em(eb, [&](Value *v) { return v; });
      std::vector<std::vector<Value *>> g = gather(P, B);
      std::vector<Value *> operands;
      for (size_t i = 0; i < g.size(); ++i) {
        Value *v = P.outs[i];
        Value *d = nullptr;
        for (Value *part : g[i]) d = addAdj(eb, em, d, part);
        if (!d) d = zerosFromFields(eb, P, v, fieldArgs);
        operands.push_back(coerceAdj(eb, em, d, v->type()));
      }
      operands.insert(operands.end(), B.accOut.begin(), B.accOut.end());
      operands.push_back(below);
      operands.insert(operands.end(), fieldArgs.begin(), fieldArgs.end());
      Successor s{P.rev, 0, static_cast<unsigned>(operands.size()), "", {}};
      eb.create(OpCode::Br, operands, {}, {}, {s});
      cases.push_back({e, 0, 0, P.ctor, {}});
      covered.insert(P.ctor);
    }
    if (covered.size() != blocks_.size() + 1) cases.push_back({unreachableBlock(), 0, 0, "", {}});
    b.create(OpCode::Match, {B.rest}, {}, {}, cases);
  }

  // The bwd entry dispatches on the returning block.
  Block *entry = fg_.bwd->entry();
  std::vector<Successor> cases;
  for (BlockGrad &R : blocks_) {
    Operation *t = R.fwd->terminator();
    if (!t->is(OpCode::Ret)) continue;
    Block *e = fg_.bwd->addBlock(std::make_unique<Block>("rev.start." + sanitize(blockLabelOrDefault(*R.fwd))));
    std::vector<Value *> fieldArgs;
    for (const Field &f : R.fields) {
      BlockArgument *a = e->addArgument(f.revArg->type(), f.revArg->argLoc());
      a->setName(f.revArg->name());
      fieldArgs.push_back(a);
    }
    Value *below = e->addArgument(fg_.tapeType, R.fwd->loc());
    below->setName("tape");
    Builder eb(m_, t->loc());
    eb.setInsertionPointToEnd(e);
    std::vector<Value *> operands;
    for (Value *v : R.outs) {
      Value *sum = nullptr;
      AdjointEmitter em(eb, [&](Value *x) { return x; });
      for (size_t k = 0; k < fg_.seedResults.size(); ++k)
        if (t->operand(fg_.seedResults[k]) == v) sum = addAdj(eb, em, sum, seedArgs_[k]);
      operands.push_back(coerceAdj(eb, em, sum, v->type()));
    }
    operands.insert(operands.end(), accArgs_.begin(), accArgs_.end());
    operands.push_back(below);
    operands.insert(operands.end(), fieldArgs.begin(), fieldArgs.end());
    Successor s{R.rev, 0, static_cast<unsigned>(operands.size()), "", {}};
    eb.create(OpCode::Br, operands, {}, {}, {s});
    cases.push_back({e, 0, 0, R.ctor, {}});
  }
  if (cases.size() != blocks_.size() + 1) cases.push_back({unreachableBlock(), 0, 0, "", {}});
  Builder b(m_, fg_.src->loc());
  b.setInsertionPointToEnd(entry);
  b.create(OpCode::Match, {tapeArg_}, {}, {}, cases);
}

//===-- The tape in the forward function --------------------------------------===//

void FunctionGrad::buildTapeInForward() {
  // The tape type's constructors, now that every record is known.
  fg_.tape->ctors.clear();
  fg_.tape->ctors.push_back({"start", {}, fg_.src->loc()});
  for (BlockGrad &bg : blocks_) {
    AdtDecl::Ctor c{bg.ctor, {}, bg.fwd->loc()};
    for (const Field &f : bg.fields) c.fields.push_back(f.revArg->type());
    c.fields.push_back(fg_.tapeType);
    fg_.tape->ctors.push_back(std::move(c));
  }
  std::string adt = fg_.tape->name;
  for (BlockGrad &bg : blocks_) {
    Block *b = bg.fwd;
    if (b->isEntry()) {
      Builder s(m_, fg_.src->loc());
      s.setInsertionPoint(b->front());
      bg.tapeIn = s.create(OpCode::Construct, {}, {{"adt", Attr::getSym(adt)}, {"ctor", Attr::getStr("start")}})->result();
    }
  }
  // Match targets see their predecessor's record; other blocks take it as an
  // argument. (RPO: a match target's single predecessor comes first.)
  std::unordered_set<const Block *> matchTargets;
  for (BlockGrad &bg : blocks_)
    if (bg.fwd->terminator()->is(OpCode::Match))
      for (const Successor &s : bg.fwd->terminator()->successors()) matchTargets.insert(s.block);
  for (BlockGrad &bg : blocks_) {
    Block *b = bg.fwd;
    if (!b->isEntry() && !matchTargets.count(b)) {
      bg.tapeIn = b->addArgument(fg_.tapeType, b->loc());
      bg.tapeIn->setName("tape");
    }
  }
  for (BlockGrad &bg : blocks_) {
    Block *b = bg.fwd;
    Operation *t = b->terminator();
    if (!bg.tapeIn) {
      // A match target: its predecessor's record is built already (RPO).
      for (BlockGrad &p : blocks_)
        if (p.fwd->terminator()->is(OpCode::Match))
          for (const Successor &s : p.fwd->terminator()->successors())
            if (s.block == b) bg.tapeIn = p.tapeOut;
    }
    Builder s(m_, t->loc());
    s.setInsertionPoint(t);
    std::vector<Value *> vals;
    for (const Field &f : bg.fields)
      vals.push_back(f.shape ? s.create(OpCode::ShapeOf, {f.v})->result() : f.v);
    vals.push_back(bg.tapeIn);
    bg.tapeOut = s.create(OpCode::Construct, vals, {{"adt", Attr::getSym(adt)}, {"ctor", Attr::getStr(bg.ctor)}})->result();
    bg.tapeOut->setName("tape." + bg.ctor);
  }
  // Pass the new tape along every edge and out of every `ret`.
  for (BlockGrad &bg : blocks_) {
    Operation *t = bg.fwd->terminator();
    if (t->is(OpCode::Match)) continue;
    if (t->is(OpCode::Ret)) {
      std::vector<Value *> vals = t->operands();
      vals.push_back(bg.tapeOut);
      t->setOperands(vals);
      continue;
    }
    std::vector<Value *> vals;
    for (unsigned i = 0; i < t->numNonSuccessorOperands(); ++i) vals.push_back(t->operand(i));
    std::vector<Successor> succs = t->successors();
    for (unsigned s = 0; s < succs.size(); ++s) {
      std::vector<Value *> ops = t->successorOperands(s);
      succs[s].operandBegin = static_cast<unsigned>(vals.size());
      vals.insert(vals.end(), ops.begin(), ops.end());
      vals.push_back(bg.tapeOut);
      succs[s].operandCount = static_cast<unsigned>(ops.size() + 1);
    }
    t->setOperands(vals);
    t->mutableSuccessors() = succs;
  }
}

LogicalResult FunctionGrad::run() {
  if (failed(cloneAndRewriteCalls())) return failure();
  // Shapes the tape cannot tell apart.
  for (auto &b : fg_.fwd->blocks()) {
    Operation *t = b->terminator();
    if (t->is(OpCode::CondBr) && t->successors().size() == 2 &&
        t->successors()[0].block == t->successors()[1].block) {
      diag_.error(t->loc(), "grad: 'cond_br' whose two targets are the same block is not "
                            "supported (the tape records blocks, not edges)");
      return failure();
    }
  }
  std::unordered_map<const Block *, unsigned> matchPreds, otherPreds;
  for (auto &b : fg_.fwd->blocks())
    for (const Successor &s : b->terminator()->successors()) {
      ++(b->terminator()->is(OpCode::Match) ? matchPreds : otherPreds)[s.block];
      if (b->terminator()->is(OpCode::Match)) {
        auto &p = matchPreds_[s.block];
        if (std::find(p.begin(), p.end(), b.get()) == p.end()) p.push_back(b.get());
      }
    }
  for (auto &[blk, n] : matchPreds)
    if (n > 1 || otherPreds.count(blk)) {
      diag_.error(blk->loc(), "grad: block ^" + blockLabelOrDefault(*blk) +
                                  " is a 'match' case with more than one predecessor; the tape "
                                  "needs one predecessor per case block");
      return failure();
    }
  if (failed(analyzeActivity())) return failure();
  buildReverseBlocks();
  for (BlockGrad &bg : blocks_)
    if (failed(buildReverseBody(bg))) return failure();
  buildEdges();
  buildTapeInForward();
  return success();
}

} // namespace

//===-- GradBuilder ----------------------------------------------------------===//

std::vector<std::string> GradBuilder::namesFor(const Function &f) const {
  std::string base = prefix_ + "." + f.name();
  return {base + ".fwd", base + ".bwd", base + ".tape"};
}

FuncGrad *GradBuilder::declareRoot(Function *f, const std::vector<unsigned> &wrt) {
  // Interprocedural activity: a function's parameter gets an adjoint when
  // some call passes it a varied value (or it is the root's wrt), to a fixed
  // point over the call graph (a function is re-analysed when one of its
  // parameters becomes varied).
  std::map<const Function *, std::set<unsigned>> params;
  std::vector<Function *> work = {f};
  params[f].insert(wrt.begin(), wrt.end());
  while (!work.empty()) {
    Function *g = work.back();
    work.pop_back();
    if (g->blocks().empty() || isPrimitive(*g)) continue;
    std::unordered_set<const Value *> varied;
    for (unsigned p : params[g]) varied.insert(g->entry()->argument(p));
    for (Global *c : consts_) varied.insert(c);
    propagateActivity(*g, varied, !consts_.empty(), agg_, [](const Operation &) { return false; },
                      [](const Operation &) {});
    for (auto &b : g->blocks())
      for (Operation &op : *b) {
        if (!op.is(OpCode::Call)) continue;
        Function *h = m_.lookupFunction(op.attr("callee"));
        if (!h) continue;
        bool fresh = !params.count(h), grew = false;
        std::set<unsigned> &hp = params[h];
        for (unsigned i = 0; i < op.numOperands(); ++i)
          if (varied.count(op.operand(i)) && hp.insert(i).second) grew = true;
        if (fresh || grew) work.push_back(h);
      }
  }
  for (auto &[g, ps] : params) variedParams_[g] = std::vector<unsigned>(ps.begin(), ps.end());
  return declare(f, variedParams_[f]);
}

FuncGrad *GradBuilder::declare(Function *f, std::vector<unsigned> adjParams) {
  auto it = funcs_.find(f->name());
  if (it != funcs_.end()) return &it->second;
  FuncGrad &fg = funcs_[f->name()];
  fg.src = f;
  fg.adjParams = std::move(adjParams);
  std::vector<std::string> names = namesFor(*f);
  Context &ctx = m_.context();
  auto adt = std::make_unique<AdtDecl>();
  adt->name = names[2];
  adt->loc = f->loc();
  fg.tape = m_.addAdt(std::move(adt));
  fg.tapeType = ctx.adt(names[2]);
  std::vector<Type> params = f->argTypes(), results = f->resultTypes();
  for (unsigned i = 0; i < results.size(); ++i)
    if (agg_.carries(results[i])) fg.seedResults.push_back(i);
  std::vector<Type> fwdResults = results;
  fwdResults.push_back(fg.tapeType);
  fg.fwd = m_.addFunction(std::make_unique<Function>(names[0], ctx.func(params, fwdResults), f->loc()));
  std::vector<Type> bwdParams = {fg.tapeType}, bwdResults;
  for (unsigned r : fg.seedResults) bwdParams.push_back(results[r]);
  for (unsigned p : fg.adjParams) bwdResults.push_back(params[p]);
  for (Global *g : consts_) {
    bwdParams.push_back(g->type());
    bwdResults.push_back(g->type());
  }
  fg.bwd = m_.addFunction(std::make_unique<Function>(names[1], ctx.func(bwdParams, bwdResults), f->loc()));
  order_.push_back(&fg);
  return &fg;
}

LogicalResult GradBuilder::buildAll() {
  auto declareCallee = [&](Function *h) {
    auto it = variedParams_.find(h);
    return declare(h, it != variedParams_.end() ? it->second : std::vector<unsigned>{});
  };
  for (size_t i = 0; i < order_.size(); ++i) {
    FuncGrad &fg = *order_[i];
    if (fg.built) continue;
    fg.built = true;
    FunctionGrad fgr(m_, diag_, fg, consts_, mode_, agg_, declareCallee);
    if (failed(fgr.run())) return failure();
  }
  return success();
}

} // namespace nimble::passes
