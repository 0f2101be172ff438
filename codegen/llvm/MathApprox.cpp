//===- MathApprox.cpp - Vectorizable f32 transcendental functions --------===//
//
// The transcendental functions the three models spend their element-wise time
// in (sigmoid and tanh in every LSTM / Tree-LSTM gate, exp in softmax) are
// written as inline polynomials in the generated IR, as XLA and TVM do, so
// they vectorize at whatever width the target has (AVX2: 8 lanes, AVX-512:
// 16) with no vector-math library at run time: the kernel object depends on
// nothing but libc/libm, and the same .nbc gives the same bits on every CPU
// that runs it. (The alternative, LLVM's vector-library mapping to glibc's
// libmvec, ties the object to one glibc and still leaves tanh and erf scalar.)
//
// log, erf, gelu and pow of f32 are evaluated in f64 with inline polynomials
// and rounded to f32 once: their argument reductions (exp(-z^2) for erfc,
// y * log(x) for pow) lose more than f32 can spare, and f64 keeps them
// exact enough (relative error below 1e-12 before the one rounding), so
// the result is the correctly rounded value except within 1e-12 of a
// rounding boundary: at most 1 ulp from any faithful libm. They still
// vectorize (at half the lanes of the f32 code).
//
//   exp(x):  n = roundeven(x log2 e); r = x - n ln2 (two-constant Cody-Waite
//            split, exact for |n| < 2^9); exp(r) by a degree-6 polynomial on
//            |r| <= ln2/2 (Cephes expf coefficients); times 2^n built in two
//            halves so that results in the subnormal range round once.
//            Overflow to +inf above 88.72284, 0 below -103.97208, NaN stays.
//   tanh(x): |x| < 0.625: x + x z P(z), z = x^2 (Cephes tanhf); otherwise
//            1 - 2 / (exp(2 min(|x|, 9.1)) + 1) (1 from |x| = 9.01 on: the
//            exp needs one scaling and no overflow checks); then the sign
//            of x (copysign).
//   The f32 functions' reductions and polynomials use fused multiply-adds
//   (llvm.fma, one rounding each: about a fifth fewer operations per exp,
//   tanh and sigmoid than separate multiplies and adds, and no less
//   accurate; Tree-LSTM's cells, 4 or 6 of them a point, docs/perf.md). A
//   target without FMA instructions gets libm's fmaf per lane: the same
//   bits, slowly.
//   sigmoid: e = exp(-|x|); x >= 0 ? 1 / (1 + e) : e / (1 + e), the
//            reference's two branches without a branch.
//
//   exp64(t) (a helper): t clamped to [-200, 200] (every f32 result is 0 or
//            inf beyond it), n = roundeven(t / ln2), r = t - n ln2 (ln2 in
//            two parts), e^r by its Taylor polynomial of degree 11
//            (|r| <= ln2/2: truncation below 7e-15), times 2^n in the bits.
//   log64(x) (a helper, x > 0 normal f64): x = m 2^e, m in [sqrt(1/2),
//            sqrt(2)); log m = 2 atanh(s), s = (m - 1)/(m + 1), |s| <= 0.172,
//            by its series to s^17 (truncation below 3e-14).
//   erf(x):  |x| <= 1: x P(2x^2 - 1); otherwise sign(x) (1 - erfc(|x|)).
//   erfc(z), z >= 1: exp64(-z^2) R(u), u affine in 1/min(z, 11). P
//            (degree 9) and R (degree 20) are least-squares Chebyshev fits,
//            made and checked against mpmath by scripts/fit_math.py (max
//            relative error 2.2e-14 and 4.0e-13).
//   gelu(x): 0.5 x erfc(-x / sqrt(2)), the reference's formula (erfc, not
//            1 + erf: no cancellation for x << 0); gelu(-inf) is NaN, as
//            the reference (and PyTorch) give.
//   log(x):  log64(x); x < 0 or NaN -> NaN, 0 -> -inf, inf -> inf.
//   pow(x,y): exp64(y log64(|x|)), with C99 Annex F's special cases
//            (pow(x, ±0) = 1, pow(1, y) = 1, negative x: odd integer y
//            negates, a finite non-integer y gives NaN; zeros and
//            infinities through log64's -inf / inf).
// On NVPTX the device's libdevice provides log, erf and pow instead
// (ElementOps.cpp).
//
// Accuracy against libm (the reference kernels) is measured over every f32
// bit pattern class by test/codegen/math-accuracy.test; figures in
// docs/codegen.md.
//
//===----------------------------------------------------------------------===//

#include "codegen/llvm/Lowering.h"

#include <llvm/IR/Intrinsics.h>

#include <iterator>
#include <utility>

namespace nimble::codegen::lowering {

using llvm::Value;

namespace {

// a * x + c, rounded once (llvm.fma: never split or contracted otherwise,
// so -O0 and -O2 give the same bits).
Value *fma(llvm::IRBuilder<> &b, Value *a, Value *x, Value *c) {
  return b.CreateIntrinsic(llvm::Intrinsic::fma, {a->getType()}, {a, x, c});
}

// Horner with fused multiply-adds (the f32 functions below).
Value *poly(llvm::IRBuilder<> &b, Value *x, std::initializer_list<double> coeffs) {
  Value *acc = nullptr;
  for (double c : coeffs) acc = acc ? fma(b, acc, x, constLike(x, c)) : constLike(x, c);
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

namespace {

// exp(x) for x in [-103.97, 88.72] (clamped by the caller): the reduction
// and polynomial, and the scaling by 2^n, in two halves when `wide` (n in
// [-150, 128]: every result, subnormals rounded once), in one when the
// caller knows n in [-126, 127] (the result is then normal and exact).
Value *expCore(llvm::IRBuilder<> &b, Value *xc, bool wide) {
  llvm::Type *t = xc->getType();
  Value *n = b.CreateIntrinsic(llvm::Intrinsic::roundeven, {t},
                               {b.CreateFMul(xc, constLike(xc, 1.44269504088896341))});
  Value *r = fma(b, n, constLike(xc, -0.693359375), xc);
  r = fma(b, n, constLike(xc, 2.12194440e-4), r);
  Value *r2 = b.CreateFMul(r, r);
  Value *p = poly(b, r, {1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                         1.6666665459e-1, 5.0000001201e-1});
  p = b.CreateFAdd(fma(b, p, r2, r), constLike(xc, 1.0));
  if (!wide) return b.CreateFMul(p, pow2(b, n));
  // n in [-150, 128]: scale by 2^(n/2) then 2^(n - n/2), each in range.
  Value *n1 = b.CreateIntrinsic(llvm::Intrinsic::trunc, {t}, {b.CreateFMul(n, constLike(xc, 0.5))});
  Value *n2 = b.CreateFSub(n, n1);
  return b.CreateFMul(b.CreateFMul(p, pow2(b, n1)), pow2(b, n2));
}

} // namespace

Value *emitExp(llvm::IRBuilder<> &b, Value *x) {
  llvm::Type *t = x->getType();
  const double hi = 88.72283935546875, lo = -103.97208404541015625;
  Value *xc = b.CreateIntrinsic(llvm::Intrinsic::minnum, {t}, {x, constLike(x, hi)});
  xc = b.CreateIntrinsic(llvm::Intrinsic::maxnum, {t}, {xc, constLike(x, lo)});
  Value *y = expCore(b, xc, /*wide=*/true);
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
  Value *small = fma(b, b.CreateFMul(p, z), x, x);
  // Large: 1 - 2 / (exp(2|x|) + 1), with the sign of x. From |x| = 9.01
  // on that is 1 (2 / (exp(2|x|) + 1) < 2^-25, half an ulp below 1), so
  // |x| is capped at 9.1 (NaN passes: the compare is false) and exp's
  // argument is in [0, 18.2]: its n in [0, 27], one scaling, no overflow
  // or underflow to select.
  Value *capped = b.CreateSelect(b.CreateFCmpOGT(ax, constLike(x, 9.1)), constLike(x, 9.1), ax);
  Value *twice = b.CreateFMul(capped, constLike(x, 2.0));
  Value *e = expCore(b, twice, /*wide=*/false);
  // A NaN reached fptosi in pow2 (poison): the NaN itself instead.
  e = b.CreateSelect(b.CreateFCmpUNO(twice, twice), twice, e);
  Value *large = b.CreateFSub(constLike(x, 1.0), b.CreateFDiv(constLike(x, 2.0), b.CreateFAdd(e, constLike(x, 1.0))));
  // tanh is odd: the sign of x, exactly (also for -0, where the polynomial's
  // sum of +0 and -0 would give +0).
  Value *r = b.CreateSelect(b.CreateFCmpOLT(ax, constLike(x, 0.625)), small, large);
  return b.CreateIntrinsic(llvm::Intrinsic::copysign, {t}, {r, x});
}

Value *emitSigmoid(llvm::IRBuilder<> &b, Value *x) {
  llvm::Type *t = x->getType();
  // exp(-|x|): its argument is at most 0 (or NaN), so emitExp's clamp and
  // select at the overflow threshold, which LLVM keeps, are left out: the
  // same values.
  Value *nx = b.CreateFNeg(b.CreateIntrinsic(llvm::Intrinsic::fabs, {t}, {x}));
  const double lo = -103.97208404541015625;
  Value *e = expCore(b, b.CreateIntrinsic(llvm::Intrinsic::maxnum, {t}, {nx, constLike(x, lo)}), /*wide=*/true);
  e = b.CreateSelect(b.CreateFCmpOLT(nx, constLike(x, lo)), constLike(x, 0.0), e);
  e = b.CreateSelect(b.CreateFCmpUNO(nx, nx), nx, e);
  Value *one = constLike(x, 1.0);
  Value *den = b.CreateFAdd(one, e);
  return b.CreateSelect(b.CreateFCmpOLT(x, constLike(x, 0.0)), b.CreateFDiv(e, den), b.CreateFDiv(one, den));
}


// ---- f32 functions evaluated in f64 ----------------------------------------

namespace {

llvm::Type *withElement(llvm::Type *like, llvm::Type *elem) {
  if (auto *vt = llvm::dyn_cast<llvm::FixedVectorType>(like))
    return llvm::FixedVectorType::get(elem, vt->getNumElements());
  return elem;
}

// Horner in u over coefficients of u^0, u^1, ...
Value *hornerUp(llvm::IRBuilder<> &b, Value *u, const double *c, size_t n) {
  Value *acc = constLike(u, c[n - 1]);
  for (size_t k = n - 1; k-- > 0;) acc = b.CreateFAdd(b.CreateFMul(acc, u), constLike(u, c[k]));
  return acc;
}

// scripts/fit_math.py: erf(x) = x P(2x^2 - 1) on [0, 1]; erfc(z) =
// exp(-z^2) R((1/z - 1/11) * 2 / (1 - 1/11) - 1) on [1, 11].
const double kErfP[] = {0.9654687386698849,     -0.14053608902272108,   0.01985249668808519,
                        -0.0022854855610643654, 0.00021751716322845172, -1.7537169892787398e-05,
                        1.223362620543682e-06,  -7.511465122550843e-08, 4.138776078051222e-09,
                        -2.0456907610123735e-10};
const double kErfcR[] = {0.2744322982663297,     0.1865835381448845,     -0.037539168524992866,
                         0.0030896662780505024,  0.0019890669789891955,  -0.0013790858325896027,
                         0.0005040737674219258,  -8.910341270881376e-05, -3.150452322663861e-05,
                         3.955039799707097e-05,  -2.2550163784001538e-05, 8.49054614134475e-06,
                         -1.4212991350162044e-06, -8.271232910342614e-07, 9.145971717993787e-07,
                         -6.496348931146296e-07, 4.707787414914529e-07,  -1.7722566037713757e-07,
                         -7.238511723738234e-08, 8.856094053774153e-08,  -2.203545932371129e-08};

Value *exp64(llvm::IRBuilder<> &b, Value *t) {
  llvm::Type *it = withElement(t->getType(), b.getInt64Ty());
  Value *tc = b.CreateIntrinsic(llvm::Intrinsic::minnum, {t->getType()}, {t, constLike(t, 200.0)});
  tc = b.CreateIntrinsic(llvm::Intrinsic::maxnum, {t->getType()}, {tc, constLike(t, -200.0)});
  Value *n = intrinsic(b, llvm::Intrinsic::roundeven, b.CreateFMul(tc, constLike(t, 1.4426950408889634)));
  // ln2 = kLn2Hi + kLn2Lo; kLn2Hi has 32 significant bits, so n * kLn2Hi
  // is exact for |n| <= 289.
  Value *r = b.CreateFSub(tc, b.CreateFMul(n, constLike(t, 0.6931471803691238)));
  r = b.CreateFSub(r, b.CreateFMul(n, constLike(t, 1.9082149292705877e-10)));
  double fact[12];
  fact[0] = 1;
  for (int k = 1; k < 12; ++k) fact[k] = fact[k - 1] / k;
  Value *p = hornerUp(b, r, fact, 12);
  Value *bits = b.CreateShl(b.CreateAdd(b.CreateFPToSI(n, it), llvm::ConstantInt::get(it, 1023)),
                            llvm::ConstantInt::get(it, 52));
  return b.CreateFMul(p, b.CreateBitCast(bits, t->getType()));
}

// x: positive, finite, normal f64 (every positive finite f32 is).
Value *log64(llvm::IRBuilder<> &b, Value *x) {
  llvm::Type *t = x->getType();
  llvm::Type *it = withElement(t, b.getInt64Ty());
  Value *bits = b.CreateBitCast(x, it);
  Value *e = b.CreateSub(b.CreateLShr(bits, llvm::ConstantInt::get(it, 52)), llvm::ConstantInt::get(it, 1023));
  Value *mb = b.CreateOr(b.CreateAnd(bits, llvm::ConstantInt::get(it, 0x000FFFFFFFFFFFFFULL)),
                         llvm::ConstantInt::get(it, 0x3FF0000000000000ULL));
  Value *m = b.CreateBitCast(mb, t);
  Value *big = b.CreateFCmpOGT(m, constLike(x, 1.4142135623730951));
  m = b.CreateSelect(big, b.CreateFMul(m, constLike(x, 0.5)), m);
  e = b.CreateAdd(e, b.CreateZExt(big, it));
  Value *s = b.CreateFDiv(b.CreateFSub(m, constLike(x, 1.0)), b.CreateFAdd(m, constLike(x, 1.0)));
  Value *s2 = b.CreateFMul(s, s);
  double c[9];
  for (int k = 0; k < 9; ++k) c[k] = 2.0 / (2 * k + 1);
  Value *l = b.CreateFMul(s, hornerUp(b, s2, c, 9));
  return b.CreateFAdd(b.CreateFMul(b.CreateSIToFP(e, t), constLike(x, 0.6931471805599453)), l);
}

// erf(w) and erfc(w) of an f64 w (NaN lanes give garbage: callers select).
std::pair<Value *, Value *> erfBoth(llvm::IRBuilder<> &b, Value *w) {
  Value *a = intrinsic(b, llvm::Intrinsic::fabs, w);
  Value *small = b.CreateFCmpOLE(a, constLike(w, 1.0));
  Value *as = b.CreateIntrinsic(llvm::Intrinsic::minnum, {w->getType()}, {a, constLike(w, 1.0)});
  Value *ws = b.CreateIntrinsic(llvm::Intrinsic::copysign, {w->getType()}, {as, w});
  Value *u = b.CreateFSub(b.CreateFMul(b.CreateFMul(ws, ws), constLike(w, 2.0)), constLike(w, 1.0));
  Value *erfSmall = b.CreateFMul(ws, hornerUp(b, u, kErfP, std::size(kErfP)));
  // Large |w|: erfc(|w|) = exp(-w^2) R(1/|w|), R's argument clamped to [1, 11].
  Value *z = b.CreateIntrinsic(llvm::Intrinsic::maxnum, {w->getType()}, {a, constLike(w, 1.0)});
  Value *zr = b.CreateIntrinsic(llvm::Intrinsic::minnum, {w->getType()}, {z, constLike(w, 11.0)});
  const double ta = 1.0 / 11.0, scale = 2.0 / (1.0 - ta);
  Value *v = b.CreateFSub(b.CreateFMul(b.CreateFSub(b.CreateFDiv(constLike(w, 1.0), zr), constLike(w, ta)),
                                       constLike(w, scale)),
                          constLike(w, 1.0));
  Value *c = b.CreateFMul(exp64(b, b.CreateFNeg(b.CreateFMul(z, z))), hornerUp(b, v, kErfcR, std::size(kErfcR)));
  Value *one = constLike(w, 1.0);
  Value *pos = b.CreateFCmpOGT(w, constLike(w, 0.0));
  Value *erfLarge = b.CreateIntrinsic(llvm::Intrinsic::copysign, {w->getType()}, {b.CreateFSub(one, c), w});
  Value *erfcLarge = b.CreateSelect(pos, c, b.CreateFSub(constLike(w, 2.0), c));
  return {b.CreateSelect(small, erfSmall, erfLarge),
          b.CreateSelect(small, b.CreateFSub(one, erfSmall), erfcLarge)};
}

Value *toF64(llvm::IRBuilder<> &b, Value *x) {
  return b.CreateFPExt(x, withElement(x->getType(), b.getDoubleTy()));
}

Value *toF32(llvm::IRBuilder<> &b, Value *x) {
  return b.CreateFPTrunc(x, withElement(x->getType(), b.getFloatTy()));
}

} // namespace

Value *emitErfF32(llvm::IRBuilder<> &b, Value *x) {
  Value *e = toF32(b, erfBoth(b, toF64(b, x)).first);
  return b.CreateSelect(isNaN(b, x), x, e);
}

Value *emitGeluF32(llvm::IRBuilder<> &b, Value *x) {
  Value *xd = toF64(b, x);
  Value *ec = erfBoth(b, b.CreateFMul(b.CreateFNeg(xd), constLike(xd, 0.70710678118654752440))).second;
  Value *g = toF32(b, b.CreateFMul(b.CreateFMul(constLike(xd, 0.5), xd), ec));
  Value *nanOrMinusInf = b.CreateOr(isNaN(b, x), b.CreateFCmpOEQ(x, llvm::ConstantFP::getInfinity(x->getType(), true)));
  return b.CreateSelect(nanOrMinusInf, llvm::ConstantFP::getNaN(x->getType()), g);
}

Value *emitLogF32(llvm::IRBuilder<> &b, Value *x) {
  llvm::Type *t = x->getType();
  Value *xd = toF64(b, x);
  Value *ok = b.CreateAnd(b.CreateFCmpOGT(x, constLike(x, 0.0)),
                          b.CreateFCmpOLT(x, llvm::ConstantFP::getInfinity(t)));
  Value *l = toF32(b, log64(b, b.CreateSelect(ok, xd, constLike(xd, 1.0))));
  l = b.CreateSelect(b.CreateFCmpOEQ(x, constLike(x, 0.0)), llvm::ConstantFP::getInfinity(t, true), l);
  l = b.CreateSelect(b.CreateFCmpOEQ(x, llvm::ConstantFP::getInfinity(t)), x, l);
  return b.CreateSelect(b.CreateOr(isNaN(b, x), b.CreateFCmpOLT(x, constLike(x, 0.0))),
                        llvm::ConstantFP::getNaN(t), l);
}

Value *emitPowF32(llvm::IRBuilder<> &b, Value *x, Value *y) {
  llvm::Type *t = x->getType();
  llvm::Type *it = withElement(t, b.getInt64Ty());
  Value *xd = toF64(b, x), *yd = toF64(b, y);
  Value *a = intrinsic(b, llvm::Intrinsic::fabs, xd);
  Value *normal = b.CreateAnd(b.CreateFCmpOGT(a, constLike(a, 0.0)),
                              b.CreateFCmpOLT(a, llvm::ConstantFP::getInfinity(a->getType())));
  // log|x|, with log 0 = -inf and log inf = inf; y log|x| is then the right
  // infinity for zeros, infinities and infinite y. |x| = 1 gives exactly 0,
  // also for infinite y (pow(-1, ±inf) = 1).
  Value *l = log64(b, b.CreateSelect(normal, a, constLike(a, 1.0)));
  l = b.CreateSelect(b.CreateFCmpOEQ(a, constLike(a, 0.0)), llvm::ConstantFP::getInfinity(a->getType(), true), l);
  l = b.CreateSelect(b.CreateFCmpOEQ(a, llvm::ConstantFP::getInfinity(a->getType())), a, l);
  Value *tl = b.CreateSelect(b.CreateFCmpOEQ(a, constLike(a, 1.0)), constLike(a, 0.0), b.CreateFMul(yd, l));
  Value *mag = exp64(b, tl);
  // The sign: a negative x (or -0, -inf) to an odd integer power. f32
  // integers of magnitude 2^24 and above are even.
  Value *ty = intrinsic(b, llvm::Intrinsic::trunc, yd);
  Value *ay = intrinsic(b, llvm::Intrinsic::fabs, yd);
  Value *inRange = b.CreateFCmpOLT(ay, constLike(ay, 16777216.0));
  Value *yi = b.CreateFPToSI(b.CreateSelect(inRange, ty, constLike(ty, 0.0)), it);
  Value *odd = b.CreateAnd(b.CreateAnd(inRange, b.CreateFCmpOEQ(ty, yd)),
                           b.CreateTrunc(b.CreateAnd(yi, llvm::ConstantInt::get(it, 1)),
                                         withElement(t, b.getInt1Ty())));
  Value *signX = b.CreateICmpSLT(b.CreateBitCast(x, withElement(t, b.getInt32Ty())),
                                 llvm::ConstantInt::get(withElement(t, b.getInt32Ty()), 0));
  Value *r = toF32(b, mag);
  r = b.CreateSelect(b.CreateAnd(signX, odd), b.CreateFNeg(r), r);
  // A finite negative x to a finite non-integer power: NaN; so is any NaN
  // operand, except that pow(x, ±0) = pow(1, y) = 1.
  Value *negFinite = b.CreateAnd(b.CreateFCmpOLT(x, constLike(x, 0.0)),
                                 b.CreateFCmpOGT(x, llvm::ConstantFP::getInfinity(t, true)));
  Value *nonInt = b.CreateFCmpONE(ty, yd);
  Value *nan = b.CreateOr(b.CreateAnd(negFinite, nonInt), b.CreateOr(isNaN(b, x), isNaN(b, y)));
  r = b.CreateSelect(nan, llvm::ConstantFP::getNaN(t), r);
  Value *one = b.CreateOr(b.CreateFCmpOEQ(y, constLike(y, 0.0)), b.CreateFCmpOEQ(x, constLike(x, 1.0)));
  return b.CreateSelect(one, constLike(x, 1.0), r);
}

} // namespace nimble::codegen::lowering
