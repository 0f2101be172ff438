//===- MathApprox.cpp - Vectorizable exp, tanh, sigmoid for f32 ----------===//
//
// The transcendental functions the three models spend their element-wise time
// in (sigmoid and tanh in every LSTM / Tree-LSTM gate, exp in softmax) are
// written as inline polynomials in the generated IR, as XLA and TVM do, so
// they vectorize at whatever width the target has (AVX2: 8 lanes, AVX-512:
// 16) with no vector-math library at run time: the kernel object depends on
// nothing but libc/libm, and the same .nbc gives the same bits on every CPU
// that runs it. (The alternative, LLVM's vector-library mapping to glibc's
// libmvec, ties the object to one glibc and still leaves tanh and erf scalar.)
// log, erf and pow are rare in the models and call libm lane by lane: exactly
// the reference kernels' values.
//
//   exp(x):  n = roundeven(x log2 e); r = x - n ln2 (two-constant Cody-Waite
//            split, exact for |n| < 2^9); exp(r) by a degree-6 polynomial on
//            |r| <= ln2/2 (Cephes expf coefficients); times 2^n built in two
//            halves so that results in the subnormal range round once.
//            Overflow to +inf above 88.72284, 0 below -103.97208, NaN stays.
//   tanh(x): |x| < 0.625: x + x z P(z), z = x^2 (Cephes tanhf); otherwise
//            1 - 2 / (exp(2|x|) + 1); then the sign of x (copysign).
//   sigmoid: e = exp(-|x|); x >= 0 ? 1 / (1 + e) : e / (1 + e), the
//            reference's two branches without a branch.
//
// Accuracy against libm (the reference kernels) is measured over every f32
// bit pattern class by test/codegen/math-accuracy.test; figures in
// docs/codegen.md.
//
//===----------------------------------------------------------------------===//

#include "codegen/llvm/Lowering.h"

#include <llvm/IR/Intrinsics.h>

namespace nimble::codegen::lowering {

using llvm::Value;

namespace {

Value *poly(llvm::IRBuilder<> &b, Value *x, std::initializer_list<double> coeffs) {
  Value *acc = nullptr;
  for (double c : coeffs)
    acc = acc ? b.CreateFAdd(b.CreateFMul(acc, x), constLike(x, c)) : constLike(x, c);
  return acc;
}

llvm::Type *intLike(llvm::Type *t) {
  llvm::Type *i32 = llvm::Type::getInt32Ty(t->getContext());
  if (auto *vt = llvm::dyn_cast<llvm::FixedVectorType>(t))
    return llvm::FixedVectorType::get(i32, vt->getNumElements());
  return i32;
}

// 2^k for integer-valued float k in [-126, 127].
Value *pow2(llvm::IRBuilder<> &b, Value *k) {
  llvm::Type *it = intLike(k->getType());
  Value *ki = b.CreateFPToSI(k, it);
  Value *bits = b.CreateShl(b.CreateAdd(ki, llvm::ConstantInt::get(it, 127)), llvm::ConstantInt::get(it, 23));
  return b.CreateBitCast(bits, k->getType());
}

} // namespace

Value *emitExp(llvm::IRBuilder<> &b, Value *x) {
  llvm::Type *t = x->getType();
  const double hi = 88.72283935546875, lo = -103.97208404541015625;
  Value *xc = b.CreateIntrinsic(llvm::Intrinsic::minnum, {t}, {x, constLike(x, hi)});
  xc = b.CreateIntrinsic(llvm::Intrinsic::maxnum, {t}, {xc, constLike(x, lo)});
  Value *n = b.CreateIntrinsic(llvm::Intrinsic::roundeven, {t},
                               {b.CreateFMul(xc, constLike(x, 1.44269504088896341))});
  Value *r = b.CreateFSub(xc, b.CreateFMul(n, constLike(x, 0.693359375)));
  r = b.CreateFSub(r, b.CreateFMul(n, constLike(x, -2.12194440e-4)));
  Value *r2 = b.CreateFMul(r, r);
  Value *p = poly(b, r, {1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                         1.6666665459e-1, 5.0000001201e-1});
  p = b.CreateFAdd(b.CreateFAdd(b.CreateFMul(p, r2), r), constLike(x, 1.0));
  // n in [-150, 128]: scale by 2^(n/2) then 2^(n - n/2), each in range.
  Value *n1 = b.CreateIntrinsic(llvm::Intrinsic::trunc, {t}, {b.CreateFMul(n, constLike(x, 0.5))});
  Value *n2 = b.CreateFSub(n, n1);
  Value *y = b.CreateFMul(b.CreateFMul(p, pow2(b, n1)), pow2(b, n2));
  y = b.CreateSelect(b.CreateFCmpOGT(x, constLike(x, hi)), llvm::ConstantFP::getInfinity(t), y);
  y = b.CreateSelect(b.CreateFCmpOLT(x, constLike(x, lo)), constLike(x, 0.0), y);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, y);
}

Value *emitTanh(llvm::IRBuilder<> &b, Value *x) {
  llvm::Type *t = x->getType();
  Value *ax = b.CreateIntrinsic(llvm::Intrinsic::fabs, {t}, {x});
  // Small: odd polynomial.
  Value *z = b.CreateFMul(x, x);
  Value *p = poly(b, z, {-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
                         -3.33332819422e-1});
  Value *small = b.CreateFAdd(b.CreateFMul(b.CreateFMul(p, z), x), x);
  // Large: 1 - 2 / (exp(2|x|) + 1), with the sign of x.
  Value *e = emitExp(b, b.CreateFMul(ax, constLike(x, 2.0)));
  Value *large = b.CreateFSub(constLike(x, 1.0), b.CreateFDiv(constLike(x, 2.0), b.CreateFAdd(e, constLike(x, 1.0))));
  // tanh is odd: the sign of x, exactly (also for -0, where the polynomial's
  // sum of +0 and -0 would give +0).
  Value *r = b.CreateSelect(b.CreateFCmpOLT(ax, constLike(x, 0.625)), small, large);
  return b.CreateIntrinsic(llvm::Intrinsic::copysign, {t}, {r, x});
}

Value *emitSigmoid(llvm::IRBuilder<> &b, Value *x) {
  llvm::Type *t = x->getType();
  Value *e = emitExp(b, b.CreateFNeg(b.CreateIntrinsic(llvm::Intrinsic::fabs, {t}, {x})));
  Value *one = constLike(x, 1.0);
  Value *den = b.CreateFAdd(one, e);
  return b.CreateSelect(b.CreateFCmpOLT(x, constLike(x, 0.0)), b.CreateFDiv(e, den), b.CreateFDiv(one, den));
}

} // namespace nimble::codegen::lowering
