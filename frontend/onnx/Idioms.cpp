//===- Idioms.cpp - Exporters' decompositions of Nimble ops ----------------===//
//
// ONNX has no GELU before opset 20, so torch (F.gelu, nn.GELU: BERT's and
// ViT's feed-forward) exports the exact GELU as arithmetic around Erf:
//
//   %d = div %x, 1.4142135        // or mul %x, 0.70710677
//   %e = erf %d
//   %p = add %e, 1.0              // either operand order
//   %m = mul %x, %p
//   %y = mul %m, 0.5              // or (x * 0.5) * p, (0.5 * x) * p, ...
//
// which is x Phi(x), Nimble's `gelu`: one kernel, the same as a hand-written
// model's (issue 47: the imported BERT-base against models/bert/bert_base.nir).
// The importer writes `gelu %x` for it, after the graph is built (each node
// converts on its own; only then are the uses of %d, %e, %p, %m known).
//
// Not bit for bit: `gelu` is 0.5 x erfc(-x / sqrt 2) evaluated in f64 and
// rounded once (vm/kernels/Elementwise.cpp; the native kernels the same
// formula, codegen/llvm/MathApprox.cpp), the arithmetic rounds after each of
// its five f32 ops, and for x << 0 its 1 + erf cancels (at x = -5 10% off,
// where gelu keeps the relative accuracy). Hence here, where the model's
// meaning is decided once for every -O level, and not in canonicalize, which
// keeps every result's bits (docs/passes.md). ONNX Runtime's GeluFusion does
// the same on the same graphs.
//
// Conditions: %x float; the constants are splats of one element (scalars or
// all-1 shapes no wider than x), 0.5, 1, and sqrt 2 or 1/sqrt 2 to the
// precision of the element type; %d, %e, %p and %m have no other use (else
// they are computed anyway).
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Graph.h"

#include "ir/Builder.h"
#include "ir/Inference.h"

#include <cmath>

namespace nimble::onnx_import {
namespace {

using namespace nimble::ir;

/// The one element of a constant that broadcasts into x without widening
/// it, or NaN.
double scalarOf(Value *c, Value *x) {
  const DenseValue *d = constantValue(c);
  if (!d || d->numElements() != 1 || !c->type().isTensor() || c->type().rank() > x->type().rank() ||
      c->type().dtype() != x->type().dtype())
    return std::nan("");
  return d->getDouble(0);
}

/// Relative tolerance of a constant written in `t`: half an ulp, as the
/// exporter rounded sqrt 2.
bool near(double c, double want, DType t) {
  double eps = t == DType::F64 ? 0x1p-52 : t == DType::F32 ? 0x1p-23 : t == DType::F16 ? 0x1p-10 : 0x1p-7;
  return std::fabs(c - want) <= eps * want;
}

Operation *soleUse(Value *v, OpCode code) {
  Operation *d = v->definingOp();
  return d && d->is(code) && v->hasOneUse() ? d : nullptr;
}

/// p = 1 + erf(x / sqrt 2), p used once: x, else null.
Value *onePlusErf(Value *p) {
  Operation *add = soleUse(p, OpCode::Add);
  if (!add) return nullptr;
  for (unsigned i = 0; i < 2; ++i) {
    Value *e = add->operand(i);
    Operation *erf = soleUse(e, OpCode::Erf);
    if (!erf || !(scalarOf(add->operand(1 - i), e) == 1.0)) continue;
    Value *dv = erf->operand(0);
    Operation *d = soleUse(dv, OpCode::Div);
    DType t = dv->type().dtype();
    if (d && near(scalarOf(d->operand(1), dv), std::sqrt(2.0), t)) return d->operand(0);
    if ((d = soleUse(dv, OpCode::Mul)))
      for (unsigned j = 0; j < 2; ++j)
        if (near(scalarOf(d->operand(1 - j), dv), std::sqrt(0.5), t)) return d->operand(j);
  }
  return nullptr;
}

/// The x of `y` = x * p * 0.5 in any grouping and order, or null.
Value *geluOperand(Operation *y) {
  if (!y->is(OpCode::Mul)) return nullptr;
  // The three factors: the inner product (used once) and the outer operand.
  for (unsigned i = 0; i < 2; ++i) {
    Operation *inner = soleUse(y->operand(i), OpCode::Mul);
    if (!inner) continue;
    Value *f[3] = {inner->operand(0), inner->operand(1), y->operand(1 - i)};
    for (int h = 0; h < 3; ++h)     // the 0.5
      for (int p = 0; p < 3; ++p) { // the 1 + erf
        if (p == h) continue;
        Value *x = f[3 - h - p];
        if (!(scalarOf(f[h], x) == 0.5) || onePlusErf(f[p]) != x) continue;
        Type t = x->type();
        if (t.isTensor() && isFloat(t.dtype()) && t == y->result(0)->type()) return x;
      }
  }
  return nullptr;
}

} // namespace

void recogniseIdioms(Module &m) {
  for (const auto &f : m.functions())
    for (const auto &b : f->blocks())
      for (Operation *op : b->opsSnapshot()) {
        Value *x = geluOperand(op);
        if (!x) continue;
        Builder bld(m, op->loc());
        bld.setInsertionPoint(op);
        Operation *g = bld.create(OpCode::Gelu, {x});
        if (!g) continue;
        std::string name(op->result(0)->name());
        op->result(0)->replaceAllUsesWith(g->result(0));
        op->erase(); // the rest of the chain is left unused: cleanUp erases it
        g->result(0)->setName(name);
      }
}

} // namespace nimble::onnx_import
