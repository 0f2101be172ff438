//===- Idioms.cpp - Exporters' decompositions of Nimble ops ---------------===//
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
// Likewise LayerNormalization, an ONNX op only from opset 17: torch exports
// nn.LayerNorm below it (Hugging Face's BERT and ViT at opset 14) as
//
//   %m = mean %x, axes=[-1], keepdims=true
//   %d = sub %x, %m
//   %q = pow %d, 2.0               // or mul %d, %d
//   %v = mean %q, axes=[-1], keepdims=true
//   %s = sqrt (add %v, eps)
//   %y = add (mul (div %d, %s), %gamma), %beta
//
// which is `layer_norm %x, %gamma, %beta, eps=eps` (one kernel for nine, the
// two reductions in one pass each). gamma and beta must be vectors of x's
// static last dimension; every intermediate value has no other use (d: the
// square and the division). Not bit for bit either: layer_norm's kernels
// accumulate in double and round once, the ops round each in f32.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Graph.h"

#include "ir/Builder.h"
#include "ir/Inference.h"

#include <cmath>
#include <optional>
#include <tuple>

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

/// mean over the last axis, kept: its operand, else null.
Value *lastAxisMean(Value *v) {
  Operation *m = soleUse(v, OpCode::Mean);
  if (!m || !m->boolAttr("keepdims") || !m->operand(0)->type().isTensor()) return nullptr;
  int64_t r = m->operand(0)->type().rank();
  const std::vector<int64_t> &axes = m->attr("axes").getInts();
  return r >= 1 && axes.size() == 1 && (axes[0] == -1 || axes[0] == r - 1) ? m->operand(0) : nullptr;
}

/// A rank-1 operand of x's last dimension (gamma, beta).
bool lastAxisVector(Value *v, Value *x) {
  Type t = v->type(), xt = x->type();
  return t.isTensor() && t.rank() == 1 && t.dtype() == xt.dtype() && t.dims()[0] != kDynamic &&
         t.dims()[0] == xt.dims().back();
}

/// torch's LayerNorm below opset 17 (ReduceMean, Sub, Pow 2, ReduceMean,
/// Add eps, Sqrt, Div, Mul gamma, Add beta), rooted at the last add:
/// {x, gamma, beta, eps}, or nothing.
std::optional<std::tuple<Value *, Value *, Value *, double>> layerNormOf(Operation *y) {
  if (!y->is(OpCode::Add)) return std::nullopt;
  for (unsigned i = 0; i < 2; ++i) {
    Operation *mg = soleUse(y->operand(i), OpCode::Mul);
    Value *beta = y->operand(1 - i);
    if (!mg) continue;
    for (unsigned j = 0; j < 2; ++j) {
      Operation *div = soleUse(mg->operand(j), OpCode::Div);
      Value *gamma = mg->operand(1 - j);
      if (!div) continue;
      // d = x - mean(x).
      Value *d = div->operand(0);
      Operation *sub = d->definingOp();
      if (!sub || !sub->is(OpCode::Sub)) continue;
      Value *x = sub->operand(0);
      if (lastAxisMean(sub->operand(1)) != x) continue;
      Operation *sq = soleUse(div->operand(1), OpCode::Sqrt);
      Operation *ve = sq ? soleUse(sq->operand(0), OpCode::Add) : nullptr;
      if (!ve) continue;
      for (unsigned k = 0; k < 2; ++k) {
        Value *p = lastAxisMean(ve->operand(k));
        double eps = p ? scalarOf(ve->operand(1 - k), p) : std::nan("");
        if (!(eps >= 0)) continue;
        Operation *pw = p ? p->definingOp() : nullptr;
        if (!pw || !p->hasOneUse()) continue;
        // d feeds the division and the square only.
        bool square = (pw->is(OpCode::Pow) && pw->operand(0) == d && scalarOf(pw->operand(1), d) == 2.0 &&
                       d->numUses() == 2) ||
                      (pw->is(OpCode::Mul) && pw->operand(0) == d && pw->operand(1) == d && d->numUses() == 3);
        Type xt = x->type();
        if (square && xt.isTensor() && isFloat(xt.dtype()) && xt.rank() >= 1 && d->type() == xt &&
            y->result(0)->type() == xt && lastAxisVector(gamma, x) && lastAxisVector(beta, x))
          return std::make_tuple(x, gamma, beta, eps);
      }
    }
  }
  return std::nullopt;
}

} // namespace

void recogniseIdioms(Module &m) {
  for (const auto &f : m.functions())
    for (const auto &b : f->blocks())
      for (Operation *op : b->opsSnapshot()) {
        Builder bld(m, op->loc());
        bld.setInsertionPoint(op);
        Operation *g = nullptr;
        if (Value *x = geluOperand(op)) {
          g = bld.create(OpCode::Gelu, {x});
        } else if (auto ln = layerNormOf(op)) {
          auto [x, gamma, beta, eps] = *ln;
          g = bld.create(OpCode::LayerNorm, {x, gamma, beta}, {{"eps", Attr::getFloat(eps)}});
        }
        if (!g) continue;
        std::string name(op->result(0)->name());
        op->result(0)->replaceAllUsesWith(g->result(0));
        op->erase(); // the rest of the chain is left unused: cleanUp erases it
        g->result(0)->setName(name);
      }
}

} // namespace nimble::onnx_import
