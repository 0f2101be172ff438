//===- SameExtent.cpp - Run-time sizes proved equal from the IR -----------===//
//
// See SameExtent.h. Each step of rootOf is a fact of the op's relation
// (docs/LangRef.md) that holds for every run-time shape the op accepts; the
// op's own run-time checks have passed whenever its result exists, so the
// equality holds wherever both values are computed.
//
//===----------------------------------------------------------------------===//

#include "passes/analysis/SameExtent.h"

#include "ir/Inference.h"

namespace nimble::passes {
namespace {

using namespace nimble::ir;

bool isTensor(const Value *v) { return v && v->type().isTensor(); }

/// One step back from `d`, or nullopt.
std::optional<DimRef> step(DimRef d) {
  Operation *op = d.value->definingOp();
  if (!op || op->numResults() != 1) return std::nullopt;
  const int64_t r = d.value->type().rank();
  switch (op->info().relation) {
  case Relation::Unary:
  case Relation::Cast:
  case Relation::LayerNorm: {
    Value *x = op->operand(0);
    if (!isTensor(x) || x->type().rank() != r) return std::nullopt;
    return DimRef{x, d.axis};
  }
  case Relation::Broadcast:
  case Relation::Compare:
  case Relation::Select: {
    // The one operand that can set the size: every other one lacks the
    // axis or has a static 1 there (numpy alignment from the right).
    std::optional<DimRef> from;
    for (Value *o : op->operandValues()) {
      if (!isTensor(o)) return std::nullopt;
      int64_t k = d.axis - (r - o->type().rank());
      if (k < 0) continue;
      int64_t s = o->type().dims()[static_cast<size_t>(k)];
      if (s == 1) continue;
      if (s != kDynamic || from) return std::nullopt;
      from = DimRef{o, k};
    }
    return from;
  }
  case Relation::MatMul: {
    if (r != 2) return std::nullopt;
    Value *a = op->operand(0), *b = op->operand(1);
    if (!isTensor(a) || !isTensor(b) || a->type().rank() != 2 || b->type().rank() != 2) return std::nullopt;
    if (d.axis == 0) return DimRef{a, op->boolAttr("transpose_a") ? 1 : 0};
    return DimRef{b, op->boolAttr("transpose_b") ? 0 : 1};
  }
  case Relation::Transpose: {
    Value *x = op->operand(0);
    if (!isTensor(x) || x->type().rank() != r) return std::nullopt;
    std::vector<int64_t> p = op->attr("perm").getInts();
    if (p.empty()) return DimRef{x, r - 1 - d.axis};
    if (static_cast<int64_t>(p.size()) != r) return std::nullopt;
    int64_t a = p[static_cast<size_t>(d.axis)];
    return DimRef{x, a < 0 ? a + r : a};
  }
  case Relation::Attention: {
    // m x H x E from q (m x H x D) and v (n x H x E).
    Value *q = op->operand(0), *v = op->operand(2);
    if (r != 3 || !isTensor(q) || !isTensor(v) || q->type().rank() != 3 || v->type().rank() != 3)
      return std::nullopt;
    return d.axis < 2 ? DimRef{q, d.axis} : DimRef{v, 2};
  }
  case Relation::Reshape: {
    const std::vector<int64_t> &s = op->attr("shape").getInts();
    if (static_cast<int64_t>(s.size()) != r || s[static_cast<size_t>(d.axis)] != -1) return std::nullopt;
    return minusOneSource(op->operand(0), s, static_cast<size_t>(d.axis));
  }
  case Relation::DynReshape: {
    auto e = shapeEntries(op->operand(1));
    if (!e || static_cast<int64_t>(e->size()) != r) return std::nullopt;
    const ShapeEntry &at = (*e)[static_cast<size_t>(d.axis)];
    if (at.dim.value) return at.dim;
    if (at.size != -1) return std::nullopt;
    std::vector<int64_t> s;
    for (const ShapeEntry &x : *e) {
      if (x.dim.value) return std::nullopt;
      s.push_back(x.size);
    }
    return minusOneSource(op->operand(0), s, static_cast<size_t>(d.axis));
  }
  default: return std::nullopt;
  }
}

} // namespace

std::optional<DimRef> minusOneSource(Value *x, const std::vector<int64_t> &target, size_t at) {
  if (!isTensor(x)) return std::nullopt;
  int64_t other = 1, known = 1, dynAxis = -1;
  for (size_t k = 0; k < target.size(); ++k) {
    if (k == at) continue;
    if (target[k] < 0 || __builtin_mul_overflow(other, target[k], &other)) return std::nullopt;
  }
  const std::vector<int64_t> &xd = x->type().dims();
  for (size_t k = 0; k < xd.size(); ++k) {
    if (xd[k] == kDynamic) {
      if (dynAxis >= 0) return std::nullopt;
      dynAxis = static_cast<int64_t>(k);
    } else if (__builtin_mul_overflow(known, xd[k], &known)) {
      return std::nullopt;
    }
  }
  if (dynAxis < 0 || other == 0 || other != known) return std::nullopt;
  return DimRef{x, dynAxis};
}

DimRef rootOf(DimRef d) {
  // Bounded: a chain of a few hundred ops is far more than any model's
  // reshape targets reach back, and the walk stays linear per query.
  for (int n = 0; n < 256; ++n) {
    if (!isTensor(d.value) || d.axis < 0 || d.axis >= d.value->type().rank()) return d;
    std::optional<DimRef> up = step(d);
    if (!up || !isTensor(up->value) || up->axis < 0 || up->axis >= up->value->type().rank()) return d;
    d = *up;
  }
  return d;
}

bool sameExtent(DimRef a, DimRef b) {
  if (!isTensor(a.value) || !isTensor(b.value) || a.axis < 0 || b.axis < 0 ||
      a.axis >= a.value->type().rank() || b.axis >= b.value->type().rank())
    return false;
  int64_t sa = a.value->type().dims()[static_cast<size_t>(a.axis)];
  int64_t sb = b.value->type().dims()[static_cast<size_t>(b.axis)];
  if (sa != kDynamic && sb != kDynamic) return sa == sb;
  return rootOf(a) == rootOf(b);
}

std::optional<std::vector<ShapeEntry>> shapeEntries(Value *shape) {
  if (!isTensor(shape) || shape->type().rank() != 1 || !isInteger(shape->type().dtype())) return std::nullopt;
  if (const DenseValue *c = constantValue(shape)) {
    std::vector<ShapeEntry> out;
    for (int64_t i = 0; i < c->numElements(); ++i) out.push_back({c->getInt(i), {}});
    return out;
  }
  Operation *op = shape->definingOp();
  if (!op) return std::nullopt;
  auto dimEntry = [](Value *scalar) -> std::optional<std::vector<ShapeEntry>> {
    Operation *d = scalar->definingOp();
    if (!d || !d->is(OpCode::Dim) || !isTensor(d->operand(0))) return std::nullopt;
    int64_t r = d->operand(0)->type().rank(), a = d->intAttr("axis");
    a = a < 0 ? a + r : a;
    if (a < 0 || a >= r) return std::nullopt;
    return std::vector<ShapeEntry>{{0, {d->operand(0), a}}};
  };
  switch (op->code()) {
  case OpCode::ExpandDims:
  case OpCode::Reshape:
    // A scalar made a one-entry vector.
    if (!isTensor(op->operand(0)) || op->operand(0)->type().rank() != 0 || shape->type().dims()[0] != 1)
      return std::nullopt;
    return dimEntry(op->operand(0));
  case OpCode::Concat: {
    if (op->intAttr("axis") != 0 && op->intAttr("axis") != -1) return std::nullopt;
    std::vector<ShapeEntry> out;
    for (Value *v : op->operandValues()) {
      auto e = shapeEntries(v);
      if (!e) return std::nullopt;
      out.insert(out.end(), e->begin(), e->end());
    }
    return out;
  }
  default: return std::nullopt;
  }
}

} // namespace nimble::passes
