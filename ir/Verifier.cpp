//===- Verifier.cpp - IR invariants (see Verifier.h for the list) ---------===//

#include "ir/Verifier.h"

#include "ir/FlatMap.h"
#include "ir/Inference.h"
#include "ir/Printer.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <string>
#include <unordered_set>

namespace nimble::ir {

//===-- Dominance ----------------------------------------------------------===//

DominanceInfo::DominanceInfo(const Function &f) {
  rpo_ = f.reversePostOrder();
  const int n = static_cast<int>(rpo_.size());
  tag_ = newScratchTag();
  for (int i = 0; i < n; ++i) rpo_[i]->setDomWord((tag_ << 32) | static_cast<uint32_t>(i));
  if (n == 0) return;
  // Predecessors and, below, dominator-tree children as flat arrays with
  // offsets (compressed rows): two allocations, not one per block (issue 23:
  // the tree is built about ten times per function of 140,000 blocks).
  std::vector<int> succ; // (from, to) pairs of the reachable edges
  for (int i = 0; i < n; ++i)
    if (Operation *t = rpo_[i]->terminator())
      for (const Successor &s : t->successors())
        if (int j = index(s.block); j >= 0) {
          succ.push_back(i);
          succ.push_back(j);
        }
  predBegin_.assign(static_cast<size_t>(n) + 1, 0);
  for (size_t e = 0; e < succ.size(); e += 2) ++predBegin_[static_cast<size_t>(succ[e + 1]) + 1];
  for (int i = 0; i < n; ++i) predBegin_[i + 1] += predBegin_[i];
  preds_.resize(succ.size() / 2);
  {
    std::vector<uint32_t> at(predBegin_.begin(), predBegin_.end() - 1);
    for (size_t e = 0; e < succ.size(); e += 2) preds_[at[static_cast<size_t>(succ[e + 1])]++] = succ[e];
  }
  idom_.assign(rpo_.size(), -1);
  idom_[0] = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 1; i < n; ++i) {
      int nd = -1;
      for (int p : predecessors(i)) {
        if (idom_[p] < 0) continue;
        nd = nd < 0 ? p : intersect(p, nd);
      }
      if (nd >= 0 && idom_[i] != nd) {
        idom_[i] = nd;
        changed = true;
      }
    }
  }
  // Pre/post numbers of the dominator tree (iterative DFS).
  kidBegin_.assign(static_cast<size_t>(n) + 1, 0);
  for (int i = 1; i < n; ++i) ++kidBegin_[static_cast<size_t>(idom_[i]) + 1];
  for (int i = 0; i < n; ++i) kidBegin_[i + 1] += kidBegin_[i];
  kids_.assign(static_cast<size_t>(n > 0 ? n - 1 : 0), 0);
  {
    std::vector<uint32_t> at(kidBegin_.begin(), kidBegin_.end() - 1);
    for (int i = 1; i < n; ++i) kids_[at[static_cast<size_t>(idom_[i])]++] = i;
  }
  pre_.assign(rpo_.size(), 0);
  post_.assign(rpo_.size(), 0);
  uint32_t clock = 0;
  std::vector<std::pair<int, size_t>> stack = {{0, 0}};
  pre_[0] = clock++;
  while (!stack.empty()) {
    auto &[b, k] = stack.back();
    if (k < children(b).size()) {
      int c = children(b)[k++];
      pre_[c] = clock++;
      stack.push_back({c, 0});
    } else {
      post_[b] = clock++;
      stack.pop_back();
    }
  }
}

int DominanceInfo::slowIndex(const Block *b) const {
  if (!indexed_) {
    for (size_t i = 0; i < rpo_.size(); ++i) index_.tryEmplace(rpo_[i], static_cast<int>(i));
    indexed_ = true;
  }
  const int *i = index_.find(b);
  return i ? *i : -1;
}

Block *DominanceInfo::idom(const Block *b) const {
  int i = index(b);
  return i <= 0 ? nullptr : rpo_[idom_[i]];
}

bool DominanceInfo::dominates(const Block *a, const Block *b) const {
  int ia = index(a), ib = index(b);
  if (ia < 0 || ib < 0) return false;
  return pre_[ia] <= pre_[ib] && post_[ib] <= post_[ia];
}

Block *DominanceInfo::common(const std::vector<const Block *> &bs) const {
  int lo = -1, hi = -1;
  for (const Block *b : bs) {
    int i = index(b);
    if (lo < 0 || pre_[i] < pre_[lo]) lo = i;
    if (hi < 0 || pre_[i] > pre_[hi]) hi = i;
  }
  return rpo_[intersect(lo, hi)];
}

Block *DominanceInfo::childToward(const Block *d, const Block *c) const {
  std::span<const int> ks = children(index(d));
  uint32_t pc = pre_[index(c)];
  auto it = std::upper_bound(ks.begin(), ks.end(), pc,
                             [&](uint32_t p, int k) { return p < pre_[k]; });
  assert(it != ks.begin() && "childToward: d does not strictly dominate c");
  return rpo_[*(it - 1)];
}

bool DominanceInfo::valueDominates(const Value *v, const Operation *user) const {
  const Block *useBlock = user->block();
  if (isa<Global>(v)) return true;
  if (const BlockArgument *a = dyn_cast<BlockArgument>(v)) {
    if (a->owner() == useBlock) return true;
    return !isReachable(useBlock) || dominates(a->owner(), useBlock);
  }
  const Operation *def = v->definingOp();
  if (def->block() == useBlock) return def->isBeforeInBlock(user);
  return !isReachable(useBlock) || dominates(def->block(), useBlock);
}

//===-- Verification -------------------------------------------------------===//

namespace {

class Verifier {
public:
  Verifier(DiagnosticEngine &diag, const VerifyOptions &opts) : diag_(diag), opts_(opts) {}

  /// With `ops`, the walk also verifies each op (verifyOp) and each
  /// block's arguments once the structure seen so far is sound; those
  /// diagnostics are held (held_) for the caller.
  bool structure(const Function &f, bool ops = false);
  bool module(const Module &m);

private:
  void fail(const Operation *op, Location loc, std::string msg,
            std::vector<Diagnostic::Note> notes = {}) {
    Diagnostic d{Severity::Error, loc, std::move(msg), std::move(notes)};
    if (opts_.printOp && op) d.note(op->loc(), "see current operation: " + printOperation(*op));
    if (held_) held_->push_back(std::move(d));
    else diag_.emit(std::move(d));
    ok_ = false;
  }
  void fail(const Operation &op, std::string msg, std::vector<Diagnostic::Note> notes = {}) {
    fail(&op, op.loc(), std::move(msg), std::move(notes));
  }
  std::string opName(const Operation &op) { return "'" + std::string(op.name()) + "'"; }
  static std::string blockName(const Block *b) {
    return "^" + (b->label().empty() ? std::string(b->isEntry() ? "entry" : "<unnamed>")
                                     : b->label());
  }
  static std::string valueName(const Value *v) {
    return (isa<Global>(v) ? "@" : "%") + v->name();
  }
  static Location succLoc(const Operation &op, const Successor &s) {
    return s.loc.known() ? s.loc : op.loc();
  }

  bool checkNamedTypes(Type t, Location loc, const Operation *op);
  void checkAdtsInhabited(const Module &m);
  void verifyOp(const Operation &op, const Function &f);
  /// T3 for operands [first, first + targets.size()) of `op`: `what(i)` names
  /// the i-th value ("argument 0 of the call to @f"), `target(i)` what takes
  /// it ("@f takes"); `decl` optionally locates the receiving declaration.
  void checkFlow(const Operation &op, unsigned first, const std::vector<Type> &targets,
                 const std::function<std::string(size_t)> &what,
                 const std::function<std::string(size_t)> &target,
                 const std::function<Diagnostic::Note(size_t)> &decl = nullptr);
  void verifySuccessors(const Operation &op);
  void verifyMatch(const Operation &op);

  DiagnosticEngine &diag_;
  const VerifyOptions &opts_;
  const Module *m_ = nullptr;
  bool ok_ = true;
  /// Non-null: fail() keeps its diagnostics here instead of emitting them.
  std::vector<Diagnostic> *held_ = nullptr;
};

bool Verifier::structure(const Function &f, bool ops) {
  if (f.blocks().empty()) {
    diag_.error(f.loc(), "function @" + f.name() + " has no body");
    return false;
  }
  bool ok = true;
  // The function's blocks, by address: a successor is checked against the
  // set, not through its pointer (a pass's bug may leave one dangling).
  FlatMap<const Block *, char> own;
  for (auto &b : f.blocks()) own.tryEmplace(b.get(), 1);
  auto checkSuccessors = [&](const Operation &op) {
    for (const Successor &s : op.successors())
      if (!s.block || !own.find(s.block)) {
        diag_.error(succLoc(op, s), "successor is not a block of @" + f.name());
        ok = false;
      } else if (s.block == f.entry()) {
        diag_.error(succLoc(op, s), "the entry block of @" + f.name() +
                                        " cannot be a branch target");
        ok = false;
      }
  };
  // One walk over the ops checks the structure and every operand's
  // dominance (issue 23: two walks over the ops of a lowered program of
  // millions were 2% of nimblec). The dominator tree needs a sound CFG: a
  // first look at the terminators alone says whether it is; the walk then
  // reports in the order it always did, and a structural error anywhere
  // suppresses the dominance errors, which are kept until the end.
  bool cfgOk = true;
  for (auto &b : f.blocks()) {
    Operation *term = b->empty() ? nullptr : b->terminator();
    if (!term) {
      cfgOk = false;
      break;
    }
    for (const Successor &s : term->successors())
      cfgOk = cfgOk && s.block && own.find(s.block) && s.block != f.entry();
  }
  std::unique_ptr<DominanceInfo> dom;
  if (cfgOk) dom = std::make_unique<DominanceInfo>(f);
  std::vector<std::pair<const Operation *, unsigned>> undominated;
  for (auto &b : f.blocks()) {
    Operation *term = b->terminator();
    if (b->empty() || !term) {
      Location loc = b->empty() ? b->loc() : b->back()->loc();
      diag_.error(loc, "block ^" + (b->label().empty() ? std::string("entry") : b->label()) +
                           " of @" + f.name() +
                           " does not end with a terminator (br, cond_br, match or ret)");
      ok = false;
      continue;
    }
    if (ops && ok)
      for (unsigned i = 0; i < b->numArguments(); ++i)
        checkNamedTypes(b->argument(i)->type(), b->argument(i)->argLoc(), nullptr);
    for (Operation &op : *b) {
      if (op.isTerminator() && &op != term) {
        diag_.error(op.loc(), "'" + std::string(op.name()) +
                                  "' must be the last operation of its block");
        ok = false;
      }
      for (unsigned i = 0; i < op.numOperands(); ++i)
        if (!op.operand(i)) {
          diag_.error(op.operandLoc(i), "operand " + std::to_string(i) + " is undefined");
          ok = false;
        }
      checkSuccessors(op);
      if (!ok) continue;
      if (dom)
        for (unsigned i = 0; i < op.numOperands(); ++i)
          if (!dom->valueDominates(op.operand(i), &op)) undominated.push_back({&op, i});
      // The op's own structure is sound (operands defined, successors
      // blocks of f): its checks may run in this walk (issue 23).
      if (ops) verifyOp(op, f);
    }
  }
  if (!ok) return false;
  for (auto [op, i] : undominated) {
    Value *v = op->operand(i);
    // Say why: a later definition in the same block, or a block that is
    // not on every path to this one (e.g. a sibling branch).
    const Block *defBlock = v->definingOp() ? v->definingOp()->block()
                                            : cast<BlockArgument>(v)->owner();
    std::string why =
        defBlock == op->block()
            ? "it is used before its definition"
            : "it is defined in " + blockName(defBlock) + ", which does not dominate " +
                  blockName(op->block());
    Diagnostic d{Severity::Error, op->operandLoc(i),
                 "operand " + std::to_string(i) + " (" + valueName(v) +
                     ") does not dominate this use: " + why,
                 {}};
    d.note(v->loc(), valueName(v) + " is defined here");
    if (opts_.printOp) d.note(op->loc(), "see current operation: " + printOperation(*op));
    diag_.emit(std::move(d));
  }
  return undominated.empty();
}

bool Verifier::checkNamedTypes(Type t, Location loc, const Operation *op) {
  if (!t) return true;
  // L1: the limits of ir/Limits.h (a pass may build a type the parser never
  // saw); checked first, so the walk below recurses a bounded depth.
  if (std::string why = checkTypeLimits(t); !why.empty()) {
    fail(op, loc, why);
    return false;
  }
  switch (t.kind()) {
  case TypeKind::Adt:
    if (!m_->lookupAdt(t.adtName())) {
      fail(op, loc, "unknown type @" + t.adtName());
      return false;
    }
    return true;
  case TypeKind::Tuple:
  case TypeKind::Func: {
    for (Type e : t.elems())
      if (!checkNamedTypes(e, loc, op)) return false;
    for (Type e : t.results())
      if (!checkNamedTypes(e, loc, op)) return false;
    return true;
  }
  default: return true;
  }
}

void Verifier::checkFlow(const Operation &op, unsigned first, const std::vector<Type> &targets,
                         const std::function<std::string(size_t)> &what,
                         const std::function<std::string(size_t)> &target,
                         const std::function<Diagnostic::Note(size_t)> &decl) {
  for (size_t i = 0; i < targets.size() && first + i < op.numOperands(); ++i) {
    unsigned k = first + static_cast<unsigned>(i);
    const Value *v = op.operand(k);
    Type t = v->type();
    if (t.isSubtypeOf(targets[i])) continue;
    // Sub-shaping (paper §3.1) is one-way: tensor<3xf32> flows into
    // tensor<?xf32>, but a `?` cannot be promised to be 3.
    std::string hint = t.isCompatibleWith(targets[i])
                           ? " (a value with unknown dimensions cannot flow into a more static type)"
                           : "";
    std::vector<Diagnostic::Note> notes = {{v->loc(), valueName(v) + " is defined here"}};
    if (decl) notes.push_back(decl(i));
    fail(&op, op.operandLoc(k),
         what(i) + " has type " + t.str() + " but " + target(i) + " " + targets[i].str() + hint,
         std::move(notes));
  }
}

void Verifier::verifySuccessors(const Operation &op) {
  for (size_t k = 0; k < op.successors().size(); ++k) {
    const Successor &s = op.successors()[k];
    std::vector<Value *> args = op.successorOperands(static_cast<unsigned>(k));
    std::vector<Type> params = s.block->argumentTypes();
    std::string target = blockName(s.block);
    if (args.size() != params.size()) {
      fail(&op, succLoc(op, s),
           "branch to " + target + " passes " + std::to_string(args.size()) + " argument" +
               (args.size() == 1 ? "" : "s") + " but " + target + " takes " +
               std::to_string(params.size()),
           {{s.block->loc(), target + " is defined here"}});
      continue;
    }
    const Block *blk = s.block;
    checkFlow(
        op, s.operandBegin, params,
        [&](size_t i) { return "argument " + std::to_string(i) + " of the branch to " + target; },
        [&](size_t) { return target + " takes"; },
        [&](size_t i) -> Diagnostic::Note {
          const BlockArgument *a = blk->argument(static_cast<unsigned>(i));
          return {a->argLoc(), "block argument %" + a->name() + " is declared here"};
        });
  }
}

void Verifier::verifyMatch(const Operation &op) {
  Type t = op.operand(0)->type();
  if (!t.isAdt()) {
    fail(&op, op.operandLoc(0),
         "'match' needs a value of an algebraic data type, got " + t.str(),
         {{op.operand(0)->loc(), valueName(op.operand(0)) + " is defined here"}});
    return;
  }
  const AdtDecl *adt = m_->lookupAdt(t.adtName());
  if (!adt) return; // reported by checkNamedTypes
  // The case that first covered each constructor (and `_`), for notes.
  std::vector<const Successor *> covered(adt->ctors.size(), nullptr);
  const Successor *defaultCase = nullptr;
  for (size_t k = 0; k < op.successors().size(); ++k) {
    const Successor &s = op.successors()[k];
    // Built for a message only (a match may have thousands of cases).
    auto target = [&] { return blockName(s.block); };
    Location at = succLoc(op, s);
    if (s.label.empty()) {
      if (defaultCase)
        fail(&op, at, "'match' has more than one '_' case",
             {{succLoc(op, *defaultCase), "the first '_' case is here"}});
      else
        defaultCase = &s;
      if (s.block->numArguments() != 0)
        fail(&op, at, "the '_' case target " + target() + " must take no arguments",
             {{s.block->loc(), target() + " is defined here"}});
      continue;
    }
    int ci = adt->ctorIndex(s.label, k);
    if (ci < 0) {
      fail(&op, at, "@" + adt->name + " has no constructor '" + s.label + "'",
           {{adt->loc, "@" + adt->name + " is declared here"}});
      continue;
    }
    if (const Successor *prev = covered[static_cast<size_t>(ci)]) {
      fail(&op, at, "constructor '" + s.label + "' is matched twice",
           {{succLoc(op, *prev), "the first case for '" + s.label + "' is here"}});
      continue;
    }
    covered[static_cast<size_t>(ci)] = &s;
    const auto &ctor = adt->ctors[static_cast<size_t>(ci)];
    const auto &fields = ctor.fields;
    if (s.block->numArguments() != fields.size()) {
      fail(&op, at,
           "case '" + s.label + "' has " + std::to_string(fields.size()) + " field" +
               (fields.size() == 1 ? "" : "s") + " but its target " + target() + " takes " +
               std::to_string(s.block->numArguments()) + " argument" +
               (s.block->numArguments() == 1 ? "" : "s"),
           {{s.block->loc(), target() + " is defined here"},
            {ctor.loc, "'" + ctor.name + "' is declared here"}});
      continue;
    }
    for (unsigned i = 0; i < fields.size(); ++i)
      if (!fields[i].isSubtypeOf(s.block->argument(i)->type()))
        fail(&op, at,
             "field " + std::to_string(i) + " of '" + s.label + "' has type " +
                 fields[i].str() + " but " + target() + " argument " + std::to_string(i) +
                 " has type " + s.block->argument(i)->type().str(),
             {{s.block->argument(i)->argLoc(),
               "block argument %" + s.block->argument(i)->name() + " is declared here"}});
  }
  if (!defaultCase)
    for (size_t i = 0; i < covered.size(); ++i)
      if (!covered[i]) {
        fail(op, "'match' does not cover constructor '" + adt->ctors[i].name +
                     "' of @" + adt->name + "; add a case or a '_' default");
        break;
      }
}

void Verifier::verifyOp(const Operation &op, const Function &f) {
  for (unsigned i = 0; i < op.numOperands(); ++i)
    if (!op.operand(i)->type()) {
      fail(op, "operand " + std::to_string(i) + " has no type");
      return;
    }
  for (unsigned i = 0; i < op.numResults(); ++i) {
    if (!op.result(i)->type()) {
      fail(op, "result " + std::to_string(i) + " has no type");
      return;
    }
    if (!checkNamedTypes(op.result(i)->type(), op.loc(), &op)) return;
  }

  // T2: the relation, and declared against inferred result types.
  InferredTypes inf = inferResultTypes(op, *m_);
  if (!inf.ok()) {
    Diagnostic d = relationError(op, inf);
    fail(&op, d.loc, std::move(d.message), std::move(d.notes));
    return;
  }
  bool typedByRelation = op.info().relation != Relation::Structural ||
                         op.is(OpCode::Call) || op.is(OpCode::Construct) ||
                         op.is(OpCode::Tuple) || op.is(OpCode::GetTuple) ||
                         op.is(OpCode::AllocStorage) || op.is(OpCode::AllocTensor);
  if (typedByRelation) {
    if (inf.types.size() != op.numResults()) {
      fail(op, opName(op) + " produces " + std::to_string(inf.types.size()) + " result" +
                   (inf.types.size() == 1 ? "" : "s") + " but has " +
                   std::to_string(op.numResults()));
      return;
    }
    for (unsigned i = 0; i < op.numResults(); ++i) {
      Type declared = op.result(i)->type();
      if (!inf.types[i].isCompatibleWith(declared)) {
        // Say where the type comes from: the callee's signature, the ADT, or
        // the op's relation over its operands.
        std::string source = "the operands give";
        std::vector<Diagnostic::Note> notes;
        if (op.is(OpCode::Call)) {
          const Function *callee = m_->lookupFunction(op.attr("callee"));
          source = "@" + callee->name() + " returns";
          notes.push_back({callee->loc(), "@" + callee->name() + " is declared here"});
        } else if (op.is(OpCode::Construct)) {
          source = "the constructor builds";
        }
        fail(op, opName(op) + " result " + std::to_string(i) + " is declared " + declared.str() +
                     " but " + source + " " + inf.types[i].str(),
             std::move(notes));
        return;
      }
    }
  }

  switch (op.code()) {
  case OpCode::Br:
  case OpCode::CondBr:
    if (op.is(OpCode::CondBr)) {
      Type c = op.operand(0)->type();
      if (!c.isTensor() || c.rank() != 0 || c.dtype() != DType::I1)
        fail(&op, op.operandLoc(0), "'cond_br' condition must be tensor<i1>, got " + c.str(),
             {{op.operand(0)->loc(), valueName(op.operand(0)) + " is defined here"}});
    }
    verifySuccessors(op);
    break;
  case OpCode::Match: verifyMatch(op); break;
  case OpCode::Ret: {
    std::vector<Type> rts = f.resultTypes();
    if (op.numOperands() != rts.size()) {
      fail(op, "'ret' returns " + std::to_string(op.numOperands()) + " value" +
                   (op.numOperands() == 1 ? "" : "s") + " but @" + f.name() + " returns " +
                   std::to_string(rts.size()),
           {{f.loc(), "@" + f.name() + " is declared here"}});
      break;
    }
    checkFlow(
        op, 0, rts, [](size_t i) { return "returned value " + std::to_string(i); },
        [&](size_t) { return "@" + f.name() + " returns"; },
        [&](size_t) -> Diagnostic::Note { return {f.loc(), "@" + f.name() + " is declared here"}; });
    break;
  }
  case OpCode::Call: {
    const Function *callee = m_->lookupFunction(op.attr("callee"));
    std::vector<Type> params = callee->argTypes();
    if (op.numOperands() != params.size()) {
      fail(op, "call to @" + callee->name() + " passes " + std::to_string(op.numOperands()) +
                   " argument" + (op.numOperands() == 1 ? "" : "s") + " but it takes " +
                   std::to_string(params.size()),
           {{callee->loc(), "@" + callee->name() + " is declared here"}});
      break;
    }
    checkFlow(
        op, 0, params,
        [&](size_t i) {
          return "argument " + std::to_string(i) + " of the call to @" + callee->name();
        },
        [&](size_t) { return "@" + callee->name() + " takes"; },
        [&](size_t i) -> Diagnostic::Note {
          const Block *e = callee->entry();
          if (e && i < e->numArguments())
            return {e->argument(static_cast<unsigned>(i))->argLoc(),
                    "parameter %" + e->argument(static_cast<unsigned>(i))->name() +
                        " of @" + callee->name() + " is declared here"};
          return {callee->loc(), "@" + callee->name() + " is declared here"};
        });
    break;
  }
  case OpCode::Construct: {
    const AdtDecl *adt = m_->lookupAdt(op.strAttr("adt"));
    int ci = adt->ctorIndex(op.strAttr("ctor"));
    if (ci < 0) {
      fail(&op, op.attrLoc(static_cast<unsigned>(op.info().attrIndex("ctor"))),
           "@" + adt->name + " has no constructor '" + op.strAttr("ctor") + "'",
           {{adt->loc, "@" + adt->name + " is declared here"}});
      break;
    }
    const auto &ctor = adt->ctors[static_cast<size_t>(ci)];
    if (op.numOperands() != ctor.fields.size()) {
      fail(op, "constructor '" + ctor.name + "' of @" + adt->name + " takes " +
                   std::to_string(ctor.fields.size()) + " field" +
                   (ctor.fields.size() == 1 ? "" : "s") + " but " +
                   std::to_string(op.numOperands()) + " " +
                   (op.numOperands() == 1 ? "is" : "are") + " given",
           {{ctor.loc, "'" + ctor.name + "' is declared here"}});
      break;
    }
    checkFlow(
        op, 0, ctor.fields,
        [&](size_t i) {
          return "field " + std::to_string(i) + " of @" + adt->name + "::" + ctor.name;
        },
        [&](size_t) { return "'" + ctor.name + "' takes"; },
        [&](size_t) -> Diagnostic::Note { return {ctor.loc, "'" + ctor.name + "' is declared here"}; });
    break;
  }
  case OpCode::InvokeMut:
  case OpCode::InvokeShapeFunc: {
    const std::string &callee = op.strAttr("callee");
    const Function *k = m_->lookupFunction(op.attr("callee"));
    if (!k) {
      fail(&op, op.attrLoc(static_cast<unsigned>(op.info().attrIndex("callee"))),
           opName(op) + " of undefined function @" + callee);
      break;
    }
    const bool shapeFunc = op.is(OpCode::InvokeShapeFunc);
    int64_t nin = shapeFunc ? op.numOperands() : op.intAttr("num_inputs");
    if (nin < 0 || nin > op.numOperands()) {
      fail(op, "num_inputs " + std::to_string(nin) + " is out of range");
      break;
    }
    for (unsigned i = 0; i < op.numOperands(); ++i)
      if (!op.operand(i)->type().isTensor())
        fail(&op, op.operandLoc(i),
             opName(op) + " operands must be tensors, got " + op.operand(i)->type().str());
    if (shapeFunc) {
      // One input (a shape, or the value for a data-dependent one) per
      // kernel input; one result per kernel output, its 1-D i64 shape.
      if (op.numOperands() != k->argTypes().size() || op.numResults() != k->resultTypes().size()) {
        fail(op, "'invoke_shape_func' of @" + callee + " passes " + std::to_string(op.numOperands()) +
                     " inputs and returns " + std::to_string(op.numResults()) + " shapes but @" + callee +
                     " takes " + std::to_string(k->argTypes().size()) + " and returns " +
                     std::to_string(k->resultTypes().size()));
        break;
      }
      for (unsigned i = 0; i < op.numResults(); ++i) {
        Type want = k->resultTypes()[i];
        Type got = op.result(i)->type();
        if (!want.isTensor()) continue; // checked where @callee is a kernel
        if (!got.isTensor() || got.dtype() != DType::I64 || got.rank() != 1 ||
            got.dims()[0] != static_cast<int64_t>(want.rank()))
          fail(op, "result " + std::to_string(i) + " of 'invoke_shape_func' has type " + got.str() +
                       " but the shape of @" + callee + "'s result " + std::to_string(i) + " (" +
                       want.str() + ") is a tensor<" + std::to_string(want.rank()) + "xi64>");
      }
    }
    if (op.is(OpCode::InvokeMut)) {
      std::vector<Value *> all = op.operands();
      std::vector<Value *> ins(all.begin(), all.begin() + nin);
      std::vector<Value *> outs(all.begin() + nin, all.end());
      // An upper-bound kernel (unique, nonzero) takes one more output: the
      // true shape of its result (see manifest-memory).
      bool upperBound = false;
      if (Block *kb = k->entry())
        for (Operation &member : *kb) upperBound |= member.info().shapeMode == ShapeMode::UpperBound;
      if (upperBound && !outs.empty() && outs.size() == k->resultTypes().size() + 1) outs.pop_back();
      if (ins.size() != k->argTypes().size() || outs.size() != k->resultTypes().size()) {
        fail(op, "'invoke_mut' of @" + callee + " passes " + std::to_string(ins.size()) +
                     " inputs and " + std::to_string(outs.size()) + " outputs but @" + callee +
                     " takes " + std::to_string(k->argTypes().size()) + " and returns " +
                     std::to_string(k->resultTypes().size()));
        break;
      }
      for (size_t i = 0; i < ins.size(); ++i)
        if (!ins[i]->type().isCompatibleWith(k->argTypes()[i]))
          fail(&op, op.operandLoc(static_cast<unsigned>(i)), "input " + std::to_string(i) + " has type " + ins[i]->type().str() +
                       " but @" + callee + " takes " + k->argTypes()[i].str());
      for (size_t i = 0; i < outs.size(); ++i)
        if (!outs[i]->type().isCompatibleWith(k->resultTypes()[i]))
          fail(&op, op.operandLoc(static_cast<unsigned>(nin + static_cast<int64_t>(i))), "output " + std::to_string(i) + " has type " + outs[i]->type().str() +
                       " but @" + callee + " returns " + k->resultTypes()[i].str());
    }
    break;
  }
  case OpCode::Kill: {
    Type t = op.operand(0)->type();
    if (!t.isTensor() && !t.isStorage())
      fail(&op, op.operandLoc(0), "'kill' takes a tensor or a storage, got " + t.str());
    break;
  }
  default: break;
  }
}

/// The ADTs that have a finite value: one of their constructors has only
/// such fields (tensors, storage and functions always do; a tuple when its
/// elements do). A type without one (`type @L = Mk(@L)`) can never be built,
/// and the bytecode verifier refuses it (vm/format/Verifier.cpp,
/// checkAdtsInhabited): refused here first, at the declaration, rather than
/// by nimblec after the pipeline ran (found by the .nir fuzzer, issue 51).
/// Iterated to the fixed point: each round marks at least one more ADT.
void Verifier::checkAdtsInhabited(const Module &m) {
  std::unordered_set<std::string> inhabited;
  std::function<bool(Type)> finite = [&](Type t) {
    if (t.isAdt()) return inhabited.count(t.adtName()) != 0;
    if (t.isTuple()) {
      for (Type e : t.elems())
        if (!finite(e)) return false;
    }
    return true;
  };
  for (bool grew = true; grew;) {
    grew = false;
    for (auto &adt : m.adts()) {
      if (inhabited.count(adt->name)) continue;
      for (auto &c : adt->ctors) {
        bool all = true;
        for (Type t : c.fields) all = all && finite(t);
        if (all) {
          inhabited.insert(adt->name);
          grew = true;
          break;
        }
      }
    }
  }
  for (auto &adt : m.adts())
    if (!inhabited.count(adt->name))
      fail(nullptr, adt->loc,
           "type @" + adt->name + " has no finite value: every constructor needs a value of a type that has none");
}

bool Verifier::module(const Module &m) {
  m_ = &m;
  bool namesOk = true;
  for (auto &adt : m.adts())
    for (auto &c : adt->ctors)
      for (Type t : c.fields) namesOk = checkNamedTypes(t, c.loc, nullptr) && namesOk;
  if (namesOk) checkAdtsInhabited(m);
  for (auto &f : m.functions()) {
    // One walk over the ops checks the structure and verifies each op
    // (issue 23: two walks of a lowered program of millions of ops). The
    // signature's and the ops' diagnostics are held meanwhile: a structural
    // error anywhere in the function reports alone, as when the ops were
    // verified after the structure.
    std::vector<Diagnostic> held;
    held_ = &held;
    // Parameters and results one by one: the limits count their nesting, not
    // the function type's (the executable stores them so).
    bool typesOk = true;
    for (Type t : f->argTypes()) typesOk = typesOk && checkNamedTypes(t, f->loc(), nullptr);
    for (Type t : f->resultTypes()) typesOk = typesOk && checkNamedTypes(t, f->loc(), nullptr);
    bool signatureOk = typesOk;
    if (typesOk && !f->blocks().empty()) {
      std::vector<Type> params = f->argTypes();
      Block *entry = f->entry();
      if (entry->numArguments() != params.size()) {
        fail(nullptr, f->loc(), "the entry block of @" + f->name() + " has " +
                                    std::to_string(entry->numArguments()) +
                                    " arguments but the signature has " +
                                    std::to_string(params.size()) + " parameters");
        signatureOk = false;
      } else {
        for (unsigned i = 0; i < params.size(); ++i)
          if (entry->argument(i)->type() != params[i])
            fail(nullptr, entry->argument(i)->argLoc(),
                 "parameter " + std::to_string(i) + " of @" + f->name() + " has type " +
                     entry->argument(i)->type().str() + " but the signature says " +
                     params[i].str());
      }
    }
    bool structured = true;
    if (opts_.structureVerified) {
      if (signatureOk)
        for (auto &b : f->blocks()) {
          for (unsigned i = 0; i < b->numArguments(); ++i)
            checkNamedTypes(b->argument(i)->type(), b->argument(i)->argLoc(), nullptr);
          for (Operation &op : *b) verifyOp(op, *f);
        }
    } else {
      // The structure's own errors go out as found (it reports through
      // diag_, not fail()); verifyOp's are held.
      structured = structure(*f, signatureOk);
    }
    held_ = nullptr;
    if (!structured) {
      ok_ = false;
      continue;
    }
    for (Diagnostic &d : held) diag_.emit(std::move(d));
  }
  return ok_;
}

} // namespace

LogicalResult verifyStructure(const Function &f, DiagnosticEngine &diag,
                              const VerifyOptions &opts) {
  Verifier v(diag, opts);
  return success(v.structure(f));
}

LogicalResult verifyModule(const Module &m, DiagnosticEngine &diag, const VerifyOptions &opts) {
  Verifier v(diag, opts);
  return success(v.module(m));
}

} // namespace nimble::ir
