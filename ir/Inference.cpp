//===- Inference.cpp - Result types of one operation ----------------------===//

#include "ir/Inference.h"

#include "ir/Limits.h"

namespace nimble::ir {

const DenseValue *constantValue(const Value *v) {
  if (const Operation *def = v->definingOp())
    return def->is(OpCode::Constant) ? &def->attr("value").getDense() : nullptr;
  if (const Global *g = dyn_cast<Global>(v))
    return !g->isExternal() && !g->literal().isNull() ? &g->literal().getDense() : nullptr;
  return nullptr;
}

namespace {

InferredTypes fail(std::string msg, int operand = -1) {
  InferredTypes r;
  r.error = std::move(msg);
  r.errorOperand = operand;
  return r;
}

InferredTypes failAttr(const Operation &op, std::string_view attr, std::string msg) {
  InferredTypes r = fail(std::move(msg));
  r.errorAttr = op.info().attrIndex(attr);
  return r;
}

bool isScalarInt(Type t) { return t.isTensor() && t.rank() == 0 && isInteger(t.dtype()); }

InferredTypes inferStructural(const Operation &op, const Module &m) {
  Context &ctx = m.context();
  InferredTypes r;
  switch (op.code()) {
  case OpCode::Call: {
    const std::string &callee = op.attr("callee").getStr();
    Function *f = m.lookupFunction(op.attr("callee"));
    if (!f) return failAttr(op, "callee", "callee @" + callee + " is not defined");
    r.types = f->resultTypes();
    return r;
  }
  case OpCode::InvokeShapeFunc: {
    // One 1-D i64 shape per kernel result, as long as the result's rank.
    const std::string &callee = op.attr("callee").getStr();
    Function *f = m.lookupFunction(op.attr("callee"));
    if (!f) return failAttr(op, "callee", "kernel @" + callee + " is not defined");
    for (Type t : f->resultTypes()) {
      if (!t.isTensor())
        return failAttr(op, "callee", "kernel @" + callee + " returns " + t.str() + ", not a tensor");
      r.types.push_back(ctx.tensor(DType::I64, {static_cast<int64_t>(t.rank())}));
    }
    return r;
  }
  case OpCode::Construct: {
    const std::string &adt = op.attr("adt").getStr();
    if (!m.lookupAdt(adt)) return failAttr(op, "adt", "type @" + adt + " is not defined");
    r.types = {ctx.adt(adt)};
    return r;
  }
  case OpCode::Tuple: {
    std::vector<Type> elems;
    for (Value *v : op.operands()) {
      // Checked before the type is made: a chain of tuples must not build
      // types of any depth (every walk over a type recurses on its nesting).
      if (v->type().depth() >= limits::kMaxTypeDepth)
        return fail("the tuple would be nested more than " +
                        std::to_string(limits::kMaxTypeDepth) + " levels deep (the limit)",
                    static_cast<int>(elems.size()));
      elems.push_back(v->type());
    }
    r.types = {ctx.tuple(elems)};
    return r;
  }
  case OpCode::GetTuple: {
    Type t = op.operand(0)->type();
    if (!t.isTuple()) return fail("operand must be a tuple, got " + t.str(), 0);
    int64_t i = op.intAttr("index");
    auto elems = t.elems();
    if (i < 0 || i >= static_cast<int64_t>(elems.size()))
      return failAttr(op, "index", "index " + std::to_string(i) + " is out of range for " + t.str());
    r.types = {elems[static_cast<size_t>(i)]};
    return r;
  }
  case OpCode::AllocStorage: {
    if (!isScalarInt(op.operand(0)->type()))
      return fail("size must be a scalar integer tensor, got " + op.operand(0)->type().str(), 0);
    if (op.intAttr("alignment") <= 0 || (op.intAttr("alignment") & (op.intAttr("alignment") - 1)))
      return failAttr(op, "alignment", "alignment must be a positive power of two, got " +
                  std::to_string(op.intAttr("alignment")));
    // A constant size is checked here (a run-time one by the VM): it must be
    // a size some tensor could have, and room for the 64-byte rounding of
    // memory planning is left.
    if (const DenseValue *v = constantValue(op.operand(0)); v && v->numElements() == 1) {
      int64_t size = v->getInt(0);
      if (size < 0 || size > limits::kMaxTensorBytes)
        return fail("size " + std::to_string(size) + " is " +
                        (size < 0 ? std::string("negative")
                                  : "more than " + std::to_string(limits::kMaxTensorBytes) +
                                        " bytes (2^48, the limit)"),
                    0);
    }
    r.types = {ctx.storage()};
    return r;
  }
  case OpCode::AllocTensor: {
    if (!op.operand(0)->type().isStorage())
      return fail("operand 0 must be a storage, got " + op.operand(0)->type().str(), 0);
    if (!isScalarInt(op.operand(1)->type()))
      return fail("offset must be a scalar integer tensor, got " + op.operand(1)->type().str(), 1);
    DType dt = op.attr("dtype").getDType();
    if (op.numOperands() == 2) {
      for (int64_t d : op.attr("shape").getInts())
        if (d < 0) return failAttr(op, "shape", "shape entry " + std::to_string(d) + " is negative");
      r.types = {ctx.tensor(dt, op.attr("shape").getInts())};
      return r;
    }
    Type s = op.operand(2)->type();
    if (!s.isTensor() || s.rank() != 1 || !isInteger(s.dtype()) || s.dims()[0] == kDynamic)
      return fail("shape must be a 1-D integer tensor of static length, got " + s.str(), 2);
    // The length is the result's rank: keep a huge one from allocating here.
    if (s.dims()[0] > (1 << 16))
      return fail("shape has " + std::to_string(s.dims()[0]) +
                      " entries; at most 65536 (the rank of the result) are supported",
                  2);
    if (!op.attr("shape").getInts().empty())
      return failAttr(op, "shape", "give the shape either as operand or as attribute, not both");
    std::vector<int64_t> dims(static_cast<size_t>(s.dims()[0]), kDynamic);
    if (const DenseValue *v = constantValue(op.operand(2)))
      for (size_t k = 0; k < dims.size(); ++k) dims[k] = v->getInt(static_cast<int64_t>(k));
    r.types = {ctx.tensor(dt, dims)};
    return r;
  }
  default: return r; // terminators, invoke_mut, invoke_shape_func, kill: no results
  }
}

InferredTypes inferUnchecked(const Operation &op, const Module &m);

} // namespace

InferredTypes inferResultTypes(const Operation &op, const Module &m) {
  InferredTypes r = inferUnchecked(op, m);
  if (!r.ok()) return r;
  // The limits of ir/Limits.h hold for every type a relation makes (the
  // tensor relations check rank and size themselves; this catches the
  // structural ops, e.g. alloc_tensor's shape attribute).
  for (Type t : r.types)
    if (std::string why = checkTypeLimits(t); !why.empty()) return fail("result " + why);
  return r;
}

namespace {

/// The results of tensor relations already computed, by op, operand types
/// and attributes: a relation is a function of those when no operand is a
/// constant whose value it may read. Direct-mapped, so that its size is
/// bounded, and kept by the Context (Context::inferenceCache), whose types
/// its keys point to: it was a thread_local keyed by the Context's id until
/// issue 51's fuzz campaign, where the entries of every finished Context
/// stayed allocated, so each input left more allocations than it freed and
/// libFuzzer ran a full leak scan after every one (45 executions a second
/// instead of 300). Ops with a dense attribute are not cached (an entry
/// would keep the literal alive). A model repeats its layers, and
/// type-infer and the verifier see each op at least twice: on a generated
/// program of 300,000 ops the relations, with the vectors they build and the
/// uniquing of their results, were 40% of type-infer (issue 23).
class RelationCache final : public Context::Cache {
public:
  struct Entry {
    bool used = false;
    OpCode code{};
    std::vector<Type> operands;
    std::vector<Attr> attrs;
    InferredTypes result;
  };

  /// The cache of `ctx`, made on first use.
  static RelationCache &of(Context &ctx) {
    std::unique_ptr<Context::Cache> &slot = ctx.inferenceCache();
    if (!slot) slot = std::make_unique<RelationCache>();
    return static_cast<RelationCache &>(*slot);
  }

  /// The entry for `op`: its result when `hit`, else the slot to fill.
  Entry &slot(const Operation &op, bool &hit) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(op.code());
    for (const Value *v : op.operandValues()) h = (h ^ reinterpret_cast<uintptr_t>(v->type().impl())) * 0x100000001b3ull;
    for (const Attr &a : op.attrs()) h = (h ^ a.hash()) * 0x100000001b3ull;
    // The table grows with use (by 4x when it has seen 8 lookups a slot,
    // dropping its entries: it is a cache) up to kMaxSize: a Context that
    // infers a few ops (a small module, each input of the .nir fuzzer) does
    // not pay for constructing 4,096 entries, which was a fifth of the
    // fuzzer's time.
    if (++lookups_ > 8 * table_.size() && table_.size() < kMaxSize) {
      table_ = std::vector<Entry>(table_.size() * 4);
      lookups_ = 0;
    }
    Entry &e = table_[(h ^ (h >> 29)) & (table_.size() - 1)];
    hit = e.used && e.code == op.code() && e.operands.size() == op.numOperands() &&
          e.attrs.size() == op.attrs().size();
    for (unsigned i = 0; hit && i < op.numOperands(); ++i) hit = e.operands[i] == op.operand(i)->type();
    for (size_t i = 0; hit && i < op.attrs().size(); ++i) hit = e.attrs[i] == op.attrs()[i];
    return e;
  }

  static bool cacheable(const Operation &op) {
    for (const Attr &a : op.attrs())
      if (a.kind() == AttrKind::Dense) return false;
    return true;
  }

private:
  static constexpr size_t kMaxSize = 4096; // a power of 4 times the first size
  std::vector<Entry> table_ = std::vector<Entry>(64);
  size_t lookups_ = 0;
};

InferredTypes inferUnchecked(const Operation &op, const Module &m) {
  const OpInfo &info = op.info();
  if (info.relation == Relation::Structural) return inferStructural(op, m);

  std::vector<TensorSig> sigs;
  std::vector<const DenseValue *> values;
  bool anyValue = false;
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    Type t = op.operand(i)->type();
    if (!t.isTensor())
      return fail("operand " + std::to_string(i) + " must be a tensor, got " + t.str(),
                  static_cast<int>(i));
    values.push_back(constantValue(op.operand(i)));
    anyValue |= values.back() != nullptr;
  }
  if (!anyValue) values.clear();
  RelationCache::Entry *entry = nullptr;
  if (!anyValue && RelationCache::cacheable(op)) {
    bool hit = false;
    entry = &RelationCache::of(m.context()).slot(op, hit);
    if (hit) return entry->result;
  }
  sigs.reserve(op.numOperands());
  for (const Value *v : op.operandValues()) sigs.push_back(v->type().sig());
  ShapeFnResult sr = inferShapes(op.code(), sigs, op.attrs(), values);
  InferredTypes r;
  if (!sr.ok()) {
    InferredTypes f = fail(sr.error, sr.errorOperand);
    f.errorAttr = sr.errorAttr;
    return f;
  }
  for (TensorSig s : sr.results) {
    // Upper-bound mode (paper §3.2): the relation gives the bound of the
    // leading dimension, which sizes the kernel's output buffer; the value's
    // true extent is known only when the kernel returns, so the type says `?`.
    if (sr.upperBound && !s.dims.empty()) s.dims[0] = kDynamic;
    r.types.push_back(m.context().tensor(s));
  }
  r.deferred = std::move(sr.deferred);
  if (entry) {
    entry->used = true;
    entry->code = op.code();
    entry->operands.clear();
    for (const Value *v : op.operandValues()) entry->operands.push_back(v->type());
    entry->attrs.assign(op.attrs().begin(), op.attrs().end());
    entry->result = r;
  }
  return r;
}

} // namespace

Diagnostic relationError(const Operation &op, const InferredTypes &inf) {
  Diagnostic d{Severity::Error, op.loc(), "'" + std::string(op.name()) + "' op " + inf.error, {}};
  if (inf.errorOperand >= 0 && static_cast<unsigned>(inf.errorOperand) < op.numOperands()) {
    unsigned i = static_cast<unsigned>(inf.errorOperand);
    const Value *v = op.operand(i);
    d.loc = op.operandLoc(i);
    if (v)
      d.note(v->loc(), "operand " + std::to_string(i) + " (" + (isa<Global>(v) ? "@" : "%") +
                           v->name() + ") is defined here");
  } else if (inf.errorAttr >= 0 && static_cast<size_t>(inf.errorAttr) < op.attrs().size()) {
    d.loc = op.attrLoc(static_cast<unsigned>(inf.errorAttr));
  }
  return d;
}

} // namespace nimble::ir
