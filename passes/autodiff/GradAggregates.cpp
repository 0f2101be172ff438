//===- GradAggregates.cpp - Adjoints of tuples and ADT values -------------===//
//
// See GradAggregates.h.
//
//===----------------------------------------------------------------------===//

#include "passes/autodiff/GradAggregates.h"

#include "passes/autodiff/Gradients.h"

#include <set>

namespace nimble::passes {

using namespace nimble::ir;

bool AggregateAdjoints::carries(Type t) {
  if (!t) return false;
  if (t.isTensor()) return isDifferentiableType(t);
  if (t.isTuple()) {
    for (Type e : t.elems())
      if (carries(e)) return true;
    return false;
  }
  if (!t.isAdt()) return false;
  auto it = carries_.find(t.adtName());
  if (it != carries_.end()) return it->second;
  // A fixed point over the ADTs reachable from t: an ADT carries when one of
  // its fields carries, directly or through another ADT.
  std::vector<const AdtDecl *> adts;
  std::set<std::string> seen = {t.adtName()};
  std::vector<Type> work = {t};
  while (!work.empty()) {
    Type u = work.back();
    work.pop_back();
    if (u.isTuple()) {
      for (Type e : u.elems()) work.push_back(e);
      continue;
    }
    if (!u.isAdt()) continue;
    const AdtDecl *d = m_.lookupAdt(u.adtName());
    if (!d) continue;
    adts.push_back(d);
    for (const AdtDecl::Ctor &c : d->ctors)
      for (Type f : c.fields)
        if (!f.isAdt() || seen.insert(f.adtName()).second) work.push_back(f);
  }
  std::map<std::string, bool> result;
  for (const AdtDecl *d : adts) result[d->name] = false;
  std::function<bool(Type)> direct = [&](Type f) -> bool {
    if (f.isTensor()) return isDifferentiableType(f);
    if (f.isTuple()) {
      for (Type e : f.elems())
        if (direct(e)) return true;
      return false;
    }
    if (f.isAdt()) {
      auto r = result.find(f.adtName());
      if (r != result.end()) return r->second;
      auto c = carries_.find(f.adtName());
      return c != carries_.end() && c->second;
    }
    return false;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (const AdtDecl *d : adts) {
      if (result[d->name]) continue;
      for (const AdtDecl::Ctor &c : d->ctors)
        for (Type f : c.fields)
          if (!result[d->name] && direct(f)) result[d->name] = changed = true;
    }
  }
  for (auto &[n, v] : result) carries_[n] = v;
  return carries_[t.adtName()];
}

Value *AggregateAdjoints::tensorZeros(Builder &b, Value *x) {
  Type t = x->type();
  if (t.hasStaticShape()) return b.splat(t, 0.0);
  Value *s = b.create(OpCode::ShapeOf, {x})->result();
  return b.create(OpCode::Zeros, {s}, {{"dtype", Attr::getDType(t.dtype())}})->result();
}

Value *AggregateAdjoints::zerosLike(Builder &b, Value *x) {
  Type t = x->type();
  if (!carries(t)) return x; // no adjoint: the primal keeps the structure
  if (t.isTensor()) return tensorZeros(b, x);
  if (t.isTuple()) {
    std::vector<Value *> elems;
    std::vector<Type> ts = t.elems();
    for (size_t i = 0; i < ts.size(); ++i) {
      Value *e = b.create(OpCode::GetTuple, {x}, {{"index", Attr::getInt(static_cast<int64_t>(i))}})->result();
      elems.push_back(zerosLike(b, e));
    }
    return b.create(OpCode::Tuple, elems, {}, {t})->result();
  }
  const AdtDecl *d = m_.lookupAdt(t.adtName());
  Function *f = zerosFn(*d);
  return b.create(OpCode::Call, {x}, {{"callee", Attr::getSym(f->name())}}, {t})->result();
}

Value *AggregateAdjoints::add(Builder &b, Value *x, Value *y) {
  if (!x) return y;
  if (!y) return x;
  Type t = x->type();
  if (t.isTensor()) return b.create(OpCode::Add, {x, y})->result();
  if (t.isTuple()) {
    std::vector<Value *> elems;
    std::vector<Type> ts = t.elems();
    for (size_t i = 0; i < ts.size(); ++i) {
      auto idx = Attr::getInt(static_cast<int64_t>(i));
      Value *xe = b.create(OpCode::GetTuple, {x}, {{"index", idx}})->result();
      if (!carries(ts[i])) {
        elems.push_back(xe);
        continue;
      }
      Value *ye = b.create(OpCode::GetTuple, {y}, {{"index", idx}})->result();
      // Both have the element's declared type: the sum has it too.
      elems.push_back(add(b, xe, ye));
    }
    return b.create(OpCode::Tuple, elems, {}, {t})->result();
  }
  const AdtDecl *d = m_.lookupAdt(t.adtName());
  Function *f = addFn(*d);
  return b.create(OpCode::Call, {x, y}, {{"callee", Attr::getSym(f->name())}}, {t})->result();
}

Value *AggregateAdjoints::coerce(Builder &b, Value *v, Type t,
                                 const std::function<Value *(Value *, Type)> &coerceTensor) {
  if (!v || v->type() == t || v->type().isSubtypeOf(t)) return v;
  if (v->type().isTensor()) return coerceTensor(v, t);
  if (!v->type().isTuple() || !t.isTuple()) return nullptr;
  std::vector<Type> from = v->type().elems(), to = t.elems();
  if (from.size() != to.size()) return nullptr;
  std::vector<Value *> elems;
  for (size_t i = 0; i < to.size(); ++i) {
    Value *e = b.create(OpCode::GetTuple, {v}, {{"index", Attr::getInt(static_cast<int64_t>(i))}})->result();
    Value *c = coerce(b, e, to[i], coerceTensor);
    if (!c) return nullptr;
    elems.push_back(c);
  }
  return b.create(OpCode::Tuple, elems, {}, {t})->result();
}

std::vector<std::string> AggregateAdjoints::helperNames() const {
  std::vector<std::string> r;
  for (auto &a : m_.adts()) {
    r.push_back(prefix_ + ".zeros." + a->name);
    r.push_back(prefix_ + ".add." + a->name);
  }
  return r;
}

Function *AggregateAdjoints::helper(const AdtDecl &adt, const std::string &kind,
                                    const std::vector<std::string> &params) {
  Context &ctx = m_.context();
  Type t = ctx.adt(adt.name);
  std::vector<Type> types(params.size(), t);
  Function *f = m_.addFunction(
      std::make_unique<Function>(prefix_ + "." + kind + "." + adt.name, ctx.func(types, {t}), adt.loc));
  Block *entry = f->addBlock(std::make_unique<Block>("entry"));
  entry->setLoc(adt.loc);
  for (const std::string &n : params) entry->addArgument(t, adt.loc)->setName(n);
  return f;
}

Function *AggregateAdjoints::zerosFn(const AdtDecl &adt) {
  auto it = zeros_.find(adt.name);
  if (it != zeros_.end()) return it->second;
  Type t = m_.context().adt(adt.name);
  Function *f = helper(adt, "zeros", {"x"});
  zeros_[adt.name] = f; // before the body: the body may call it
  Block *entry = f->entry();
  Value *x = entry->argument(0);
  std::vector<Successor> cases;
  for (const AdtDecl::Ctor &c : adt.ctors) {
    Block *cb = f->addBlock(std::make_unique<Block>(c.name));
    cb->setLoc(c.loc);
    Builder b(m_, c.loc);
    b.setInsertionPointToEnd(cb);
    std::vector<Value *> fields;
    for (Type ft : c.fields) {
      BlockArgument *a = cb->addArgument(ft, c.loc);
      fields.push_back(zerosLike(b, a));
    }
    Value *r = b.create(OpCode::Construct, fields,
                        {{"adt", Attr::getSym(adt.name)}, {"ctor", Attr::getStr(c.name)}}, {t})->result();
    b.create(OpCode::Ret, {r});
    cases.push_back({cb, 0, 0, c.name, {}});
  }
  Builder b(m_, adt.loc);
  b.setInsertionPointToEnd(entry);
  b.create(OpCode::Match, {x}, {}, {}, cases);
  return f;
}

Function *AggregateAdjoints::addFn(const AdtDecl &adt) {
  auto it = add_.find(adt.name);
  if (it != add_.end()) return it->second;
  Type t = m_.context().adt(adt.name);
  Function *f = helper(adt, "add", {"a", "b"});
  add_[adt.name] = f;
  Block *entry = f->entry();
  Value *x = entry->argument(0), *y = entry->argument(1);
  // Both adjoints are of one forward value: same constructor everywhere.
  Block *bad = nullptr;
  if (adt.ctors.size() > 1) {
    bad = f->addBlock(std::make_unique<Block>("mismatch"));
    bad->setLoc(adt.loc);
    Builder b(m_, adt.loc);
    b.setInsertionPointToEnd(bad);
    b.create(OpCode::Unreachable, {});
  }
  std::vector<Successor> cases;
  for (const AdtDecl::Ctor &c : adt.ctors) {
    Block *ca = f->addBlock(std::make_unique<Block>(c.name + ".a"));
    Block *cb = f->addBlock(std::make_unique<Block>(c.name + ".b"));
    ca->setLoc(c.loc);
    cb->setLoc(c.loc);
    std::vector<Value *> fa, fb;
    for (Type ft : c.fields) {
      fa.push_back(ca->addArgument(ft, c.loc));
      fb.push_back(cb->addArgument(ft, c.loc));
    }
    Builder b(m_, c.loc);
    b.setInsertionPointToEnd(ca);
    std::vector<Successor> inner = {{cb, 0, 0, c.name, {}}};
    if (bad) inner.push_back({bad, 0, 0, "", {}});
    b.create(OpCode::Match, {y}, {}, {}, inner);
    b.setInsertionPointToEnd(cb);
    std::vector<Value *> fields;
    for (size_t k = 0; k < c.fields.size(); ++k) {
      fields.push_back(carries(c.fields[k]) ? add(b, fa[k], fb[k]) : fa[k]);
    }
    Value *r = b.create(OpCode::Construct, fields,
                        {{"adt", Attr::getSym(adt.name)}, {"ctor", Attr::getStr(c.name)}}, {t})->result();
    b.create(OpCode::Ret, {r});
    cases.push_back({ca, 0, 0, c.name, {}});
  }
  Builder b(m_, adt.loc);
  b.setInsertionPointToEnd(entry);
  b.create(OpCode::Match, {x}, {}, {}, cases);
  return f;
}

} // namespace nimble::passes
