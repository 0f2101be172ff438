"""Accuracy of the native element-wise math against the reference kernels.

    math_accuracy.py NIMBLEC NIMBLE_RUN MATH_NIR WORK_DIR

Builds an input of every special f32 value (±0, ±inf, NaN, the smallest and
largest subnormals, the smallest normal, the largest finite), the overflow and
underflow thresholds of exp and their neighbours, and a dense sweep of
[-120, 120] plus random bit patterns over the whole finite range; runs each
function of MATH_NIR compiled with --kernels=native and with the reference
kernels (which call libm), and prints per function the largest distance in
units in the last place (ulp) over the values where the reference is finite
and the count of mismatched specials (NaN must give NaN, ±inf the same inf,
±0 the same zero). Exits 1 if a function exceeds its bound in BOUNDS.
"""
import os
import subprocess
import sys

import numpy as np

# Max ulp allowed per function (docs/codegen.md). erf, gelu, log and pow are
# evaluated in f64 and rounded once (at most 1 ulp from a faithful libm);
# rsqrt is two IEEE operations like the reference: 0 ulp.
BOUNDS = {"exp": 2, "tanh": 4, "sigmoid": 4, "gelu": 1, "erf": 1, "log": 1, "rsqrt": 0, "pow": 1}


def inputs():
    f = np.float32
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, -1.1754942e-38,
               1.17549435e-38, 3.4028235e38, -3.4028235e38, 88.72283, 88.72284, 88.7229, 89.0,
               -87.33654, -87.3366, -103.97207, -103.9721, -104.0, -150.0, 1e-30, -1e-30, 0.625,
               -0.625, 0.62499994, 9.0, -9.0, 1e30, -1e30, 0.5, 1.0, -1.0, 2.0]
    sweep = np.linspace(-120, 120, 200001, dtype=np.float64)
    small = np.concatenate([np.geomspace(1e-38, 1, 20000), -np.geomspace(1e-38, 1, 20000)])
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2**32, size=100000, dtype=np.uint64).astype(np.uint32)
    rand = bits.view(np.float32)
    x = np.concatenate([np.array(special, dtype=f), sweep.astype(f), small.astype(f), rand])
    return x


def pow_inputs(x):
    """(base, exponent) pairs: every pair of specials (C99 Annex F's cases:
    zeros, infinities, NaN, ±1, integers odd and even, non-integers, negative
    bases), random positive bases to random exponents, negative bases to
    integer exponents, and random bit patterns for both."""
    f = np.float32
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 2.5,
                   -2.5, 1e-45, -1e-45, 3.4028235e38, -3.4028235e38, 16777216.0, 16777215.0, -16777215.0,
                   0.9999999, 1.0000001, 127.0, 128.0, -149.0, -150.0], dtype=f)
    bx, by = np.meshgrid(sp, sp)
    rng = np.random.default_rng(7)
    n = 100000
    px = np.exp(rng.uniform(-80, 80, n)).astype(f)
    py = rng.uniform(-40, 40, n).astype(f)
    nx = (-np.exp(rng.uniform(-10, 10, n))).astype(f)
    ny = rng.integers(-30, 31, n).astype(f)
    rb = rng.integers(0, 2**32, size=(2, n), dtype=np.uint64).astype(np.uint32).view(np.float32)
    return (np.concatenate([bx.ravel(), px, nx, rb[0]]).astype(f),
            np.concatenate([by.ravel(), py, ny, rb[1]]).astype(f))


def ordered(a):
    i = a.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def main():
    nimblec, nimble_run, nir, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    x = inputs()
    xin = os.path.join(work, "x.npy")
    np.save(xin, x)
    pb, pe = pow_inputs(x)
    pin = [os.path.join(work, "pow.x.npy"), os.path.join(work, "pow.y.npy")]
    np.save(pin[0], pb)
    np.save(pin[1], pe)
    exes = {}
    for kind in ("native", "reference"):
        exes[kind] = os.path.join(work, kind + ".nbc")
        subprocess.run([nimblec, nir, "--kernels=" + kind, "-o", exes[kind]], check=True)
    failed = False
    for fn, bound in BOUNDS.items():
        out = {}
        for kind, exe in exes.items():
            path = os.path.join(work, "%s.%s.npy" % (fn, kind))
            ins = ["--input=@" + p for p in (pin if fn == "pow" else [xin])]
            subprocess.run([nimble_run, exe, "--kernels=" + kind, "--function=" + fn, *ins, "--output=@" + path],
                           check=True, stdout=subprocess.DEVNULL)
            out[kind] = np.load(path)
        got, want = out["native"], out["reference"]
        nan_bad = int(np.sum(np.isnan(got) != np.isnan(want)))
        inf = np.isinf(want)
        inf_bad = int(np.sum(inf & (got != want)))
        zero = want == 0
        zero_bad = int(np.sum(zero & (np.signbit(got) != np.signbit(want)) & ~np.isnan(got)))
        finite = np.isfinite(want) & np.isfinite(got)
        ulp = int(np.max(np.abs(ordered(got[finite]) - ordered(want[finite])))) if finite.any() else 0
        finite_bad = int(np.sum(np.isfinite(want) != np.isfinite(got)))
        ok = ulp <= bound and nan_bad == 0 and inf_bad == 0 and finite_bad == 0 and zero_bad == 0
        failed |= not ok
        print("%-8s max %d ulp (bound %d) over %d values; specials: %d NaN, %d inf, %d finiteness, %d zero-sign mismatches  %s"
              % (fn, ulp, bound, got.size, nan_bad, inf_bad, finite_bad, zero_bad, "ok" if ok else "FAIL"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
