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

# Max ulp allowed per function (docs/codegen.md). log, gelu and rsqrt call
# libm / IEEE operations exactly like the reference: 0 ulp.
BOUNDS = {"exp": 2, "tanh": 4, "sigmoid": 4, "gelu": 0, "log": 0, "rsqrt": 0}


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


def ordered(a):
    i = a.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def main():
    nimblec, nimble_run, nir, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    x = inputs()
    xin = os.path.join(work, "x.npy")
    np.save(xin, x)
    exes = {}
    for kind in ("native", "reference"):
        exes[kind] = os.path.join(work, kind + ".nbc")
        subprocess.run([nimblec, nir, "--kernels=" + kind, "-o", exes[kind]], check=True)
    failed = False
    for fn, bound in BOUNDS.items():
        out = {}
        for kind, exe in exes.items():
            path = os.path.join(work, "%s.%s.npy" % (fn, kind))
            subprocess.run([nimble_run, exe, "--kernels=" + kind, "--function=" + fn, "--input=@" + xin, "--output=@" + path],
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
              % (fn, ulp, bound, x.size, nan_bad, inf_bad, finite_bad, zero_bad, "ok" if ok else "FAIL"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
