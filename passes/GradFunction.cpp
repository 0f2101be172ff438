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
// Calls: `call @h` becomes `call @<root>.<h>.fwd`, whose tape is a field of
// the caller's record; the reverse calls `@<root>.<h>.bwd` with it. Recursion
// (Tree-LSTM) needs nothing more. Const adjoints are threaded through every
// reverse block and every bwd call as accumulators, so each const weight
// gets one running sum.
//
//===----------------------------------------------------------------------===//

#include "passes/GradFunction.h"

#include "ir/Builder.h"
#include "passes/Analysis.h"
#include "passes/Gradients.h"
#include "passes/Liveness.h"

#include <algorithm>
#include <cctype>
#include <functional>
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
               Checkpoint mode, std::function<FuncGrad *(Function *)> declareCallee)
      : m_(m), ctx_(m.context()), diag_(diag), fg_(fg), consts_(consts), mode_(mode),
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
  bool varied(const Value *v) const { return varied_.count(v) != 0; }
  BlockGrad &info(const Block *b) { return blocks_[index_.at(b)]; }
  Block *unreachableBlock();

  Module &m_;
  Context &ctx_;
  DiagnosticEngine &diag_;
  FuncGrad &fg_;
  const std::vector<Global *> &consts_;
  Checkpoint mode_;
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
      Function *callee = m_.lookupFunction(op->strAttr("callee"));
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

// A value is varied when it is a floating-point tensor that depends on a
// differentiated parameter or const (forward activity analysis, to a fixed
// point over the CFG). Only varied values get adjoints, and a NonDiff op is an
// error only when one of its operands is varied.
LogicalResult FunctionGrad::analyzeActivity() {
  Function &fwd = *fg_.fwd;
  auto mark = [&](Value *v, bool &changed) {
    if (isDifferentiableType(v->type()) && varied_.insert(v).second) changed = true;
  };
  bool changed = false;
  for (unsigned p : fg_.adjParams) mark(fwd.entry()->argument(p), changed);
  for (Global *g : consts_) varied_.insert(g);
  std::vector<Block *> rpo = fwd.reversePostOrder();
  std::unordered_set<const Operation *> reported;
  do {
    changed = false;
    for (Block *b : rpo)
      for (Operation &op : *b) {
        bool any = false;
        for (Value *v : op.operands()) any |= varied(v);
        if (op.is(OpCode::Call)) {
          if (any || !consts_.empty())
            for (Value *r : op.results()) mark(r, changed);
        } else if (op.is(OpCode::Br) || op.is(OpCode::CondBr)) {
          for (unsigned s = 0; s < op.successors().size(); ++s) {
            std::vector<Value *> vals = op.successorOperands(s);
            for (unsigned k = 0; k < vals.size(); ++k)
              if (varied(vals[k])) mark(op.successors()[s].block->argument(k), changed);
          }
        } else if (gradKind(op.code()) == GradKind::Rule) {
          if (any)
            for (Value *r : op.results()) mark(r, changed);
        } else if (gradKind(op.code()) == GradKind::NonDiff && any && reported.insert(&op).second) {
          diag_.error(op.loc(), "grad: cannot differentiate through '" + std::string(op.name()) +
                                    "' in @" + fg_.src->name() + " (" +
                                    std::string(gradFormula(op.code())) +
                                    "); an operand depends on a differentiated value");
          ok_ = false;
        }
      }
  } while (changed);
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
        Operation *placed = bg.rev->push_back(std::move(c));
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
    if (t->is(OpCode::Ret))
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
    bg.rev = bwd.addBlock(std::move(blk));
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
    if (varied(x)) adj[x] = em.add(lookup(x), d);
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
        Value *s = lookup(op.result(r));
        args.push_back(em.coerce(s ? s : em.zerosLike(op.result(r)), op.result(r)->type()));
      }
      args.insert(args.end(), accs.begin(), accs.end());
      std::vector<Type> types = h->bwd->resultTypes();
      Operation *c = b.create(OpCode::Call, args, {{"callee", Attr::getSym(h->bwd->name())}}, types);
      for (size_t k = 0; k < h->adjParams.size(); ++k) accumulate(op.operand(h->adjParams[k]), c->result(static_cast<unsigned>(k)));
      for (size_t k = 0; k < accs.size(); ++k) accs[k] = c->result(static_cast<unsigned>(h->adjParams.size() + k));
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
  bg.inAdj = std::move(adj);
  bg.accOut = std::move(accs);
  return success();
}

Value *FunctionGrad::zerosFor(Builder &b, Value *v, Value *shapeField) {
  if (v->type().hasStaticShape()) return b.splat(v->type(), 0.0);
  return b.create(OpCode::Zeros, {shapeField}, {{"dtype", Attr::getDType(v->type().dtype())}})->result();
}

Block *FunctionGrad::unreachableBlock() {
  // Never taken: the tape below a record is always a record of a predecessor
  // (the forward function built it). A match must still cover every
  // constructor; this default returns zeros (empty where a dim is `?`).
  if (unreachable_) return unreachable_;
  unreachable_ = fg_.bwd->addBlock(std::make_unique<Block>("rev.unreachable"));
  Builder b(m_, fg_.src->loc());
  b.setInsertionPointToEnd(unreachable_);
  std::vector<Value *> vals;
  for (Type t : fg_.bwd->resultTypes()) {
    std::vector<int64_t> dims = t.dims();
    for (int64_t &d : dims)
      if (d == kDynamic) d = 0;
    vals.push_back(b.splat(ctx_.tensor(t.dtype(), dims), 0.0));
  }
  b.create(OpCode::Ret, vals, {}, {});
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
      for (size_t i = 0; i < g.size(); ++i)
        if (g[i].empty() && !P.outs[i]->type().hasStaticShape()) field(P, P.outs[i], true);
    }
  }
  {
    BlockGrad &E = info(fwd.entry());
    for (unsigned p : fg_.adjParams) {
      Value *a = fwd.entry()->argument(p);
      if (!E.inAdj.count(a) && !a->type().hasStaticShape()) field(E, a, true);
    }
  }

  // Pass 2: terminators of the reverse blocks and the edge blocks.
  for (BlockGrad &B : blocks_) {
    Builder b(m_, B.fwd->loc());
    b.setInsertionPointToEnd(B.rev);
    if (B.fwd->isEntry()) {
      std::vector<Value *> vals;
      AdjointEmitter em(b, [&](Value *v) { return v; });
      for (unsigned p : fg_.adjParams) {
        Value *a = fwd.entry()->argument(p);
        auto it = B.inAdj.find(a);
        Value *d = it != B.inAdj.end() ? it->second
                                       : zerosFor(b, a, a->type().hasStaticShape() ? nullptr : field(B, a, true));
        vals.push_back(em.coerce(d, a->type()));
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
        for (Value *part : g[i]) d = em.add(d, part);
        if (!d) {
          Value *shape = nullptr;
          if (!v->type().hasStaticShape()) shape = fieldArgs[P.fieldIndex.at({v, true})];
          d = zerosFor(eb, v, shape);
        }
        operands.push_back(em.coerce(d, v->type()));
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
      for (size_t k = 0; k < fg_.seedResults.size(); ++k)
        if (t->operand(fg_.seedResults[k]) == v)
          sum = sum ? eb.create(OpCode::Add, {sum, seedArgs_[k]})->result() : seedArgs_[k];
      AdjointEmitter em(eb, [&](Value *x) { return x; });
      operands.push_back(em.coerce(sum, v->type()));
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
    t->successors() = succs;
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
    for (const Successor &s : b->terminator()->successors())
      ++(b->terminator()->is(OpCode::Match) ? matchPreds : otherPreds)[s.block];
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
    if (isDifferentiableType(results[i])) fg.seedResults.push_back(i);
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
    std::vector<unsigned> all;
    std::vector<Type> params = h->argTypes();
    for (unsigned i = 0; i < params.size(); ++i)
      if (isDifferentiableType(params[i])) all.push_back(i);
    return declare(h, all);
  };
  for (size_t i = 0; i < order_.size(); ++i) {
    FuncGrad &fg = *order_[i];
    if (fg.built) continue;
    fg.built = true;
    FunctionGrad fgr(m_, diag_, fg, consts_, mode_, declareCallee);
    if (failed(fgr.run())) return failure();
  }
  return success();
}

} // namespace nimble::passes
