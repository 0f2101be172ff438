#!/usr/bin/env python3
"""Coefficients of the native kernels' f64-evaluated erf / erfc
(codegen/llvm/MathApprox.cpp), fitted here and checked against mpmath.

    /usr/bin/python3 scripts/fit_math.py      (needs numpy and mpmath)

Prints the two C++ coefficient arrays and the largest relative error of each
approximation, evaluated in float64 exactly as the generated code does
(Horner in the mapped variable u in [-1, 1]):

  erf(x)  = x * P(u),          u = 2 x^2 - 1,             0 <= x <= 1
  erfc(z) = exp(-z^2) * R(u),  u = (1/z - 1/11) * 2 / (1 - 1/11) - 1,
                               1 <= z <= 11 (z is clamped to 11: beyond it
                               erfc(z) < 1e-53, zero in f32 after any
                               factor an f32 input can supply)

Both are least-squares Chebyshev fits on 4,000 Chebyshev nodes, converted to
monomials in u; the f32 results round the f64 value once, so an error of
1e-12 relative is far below f32's half ulp (3e-8).
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 40
C = np.polynomial.chebyshev
TA, TB = 1.0 / 11.0, 1.0


def fit(f, deg, n=4000):
    k = np.arange(n)
    u = np.cos(np.pi * (k + 0.5) / n)
    y = np.array([float(f(mp.mpf(float(v)))) for v in u])
    return C.cheb2poly(C.chebfit(u, y, deg))


def horner(c, u):
    acc = np.zeros_like(u) + c[-1]
    for k in c[-2::-1]:
        acc = acc * u + k
    return acc


def max_rel(f, xs, got):
    return max(float(abs((mp.mpf(float(g)) - f(mp.mpf(float(x)))) / f(mp.mpf(float(x))))) for x, g in zip(xs, got))


def erf_over_x(u):
    x = mp.sqrt((u + 1) / 2)
    return mp.erf(x) / x if x > 0 else 2 / mp.sqrt(mp.pi)


def erfc_scaled(u):
    z = 1 / (TA + (TB - TA) * (u + 1) / 2)
    return mp.exp(z * z) * mp.erfc(z)


def main():
    p = fit(erf_over_x, 9)
    r = fit(erfc_scaled, 20)
    xs = np.linspace(1e-3, 1, 20001)
    e1 = max_rel(mp.erf, xs, xs * horner(p, 2 * xs * xs - 1))
    zs = np.linspace(1, 11, 20001)
    e2 = max_rel(lambda z: mp.exp(z * z) * mp.erfc(z), zs, horner(r, (1 / zs - TA) * (2 / (TB - TA)) - 1))
    for name, c in (("kErfP", p), ("kErfcR", r)):
        print("// %s[k]: the coefficient of u^k." % name)
        print("const double %s[] = {%s};" % (name, ", ".join(repr(float(v)) for v in c)))
    print("// max relative error: erf %.2e on [1e-3, 1], erfc scaled %.2e on [1, 11]" % (e1, e2))


if __name__ == "__main__":
    main()
