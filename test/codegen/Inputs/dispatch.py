#!/usr/bin/env python3
"""Kernel dispatch (nimble-run --kernels, --tuning; vm/dispatch/Dispatch.h).

    dispatch.py NIMBLEC NIMBLE_RUN NIR WORK

Compiles NIR (dispatch.nir) at -O2 with native kernels, then for each function
and each path (reference, native, library, auto, tune) runs it on seeded inputs,
compares the outputs with numpy (relative to the output's magnitude, 1e-5)
and prints which implementation --profile says ran each kernel:

    dense library: ok fused_matmul_0=library

Then the tuning file: a forced decision is obeyed by auto, auto writes no
table, tune writes a table of its measured decisions, and a malformed table
is an error. Prints `error: ...` for anything wrong.
"""

import os
import re
import subprocess
import sys

import numpy as np
from math import erf

sys.dont_write_bytecode = True


def gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(erf)(x / np.sqrt(2.0)))


def cases(rng):
    x = rng.standard_normal((5, 24)).astype(np.float32)
    w = rng.standard_normal((7, 24)).astype(np.float32)
    b = rng.standard_normal((7,)).astype(np.float32)
    q = rng.standard_normal((3, 4, 8)).astype(np.float32)
    k = rng.standard_normal((1, 6, 8)).astype(np.float32)
    s = np.array(0.125, dtype=np.float32)
    a = rng.standard_normal((9, 4)).astype(np.float32)
    bb = rng.standard_normal((9, 5)).astype(np.float32)
    c = rng.standard_normal((4, 5)).astype(np.float32)
    ia = rng.integers(-5, 5, (3, 4)).astype(np.int32)
    ib = rng.integers(-5, 5, (4, 2)).astype(np.int32)
    x0 = np.zeros((0, 24), dtype=np.float32)
    f64 = np.float64
    return [
        ("dense", [x, w, b], gelu(x.astype(f64) @ w.astype(f64).T + b)),
        ("scores", [q, k, s], (q.astype(f64) @ k.astype(f64).transpose(0, 2, 1)) * f64(s)),
        ("residual", [a, bb, c], a.astype(f64).T @ bb.astype(f64) - c),
        ("imat", [ia, ib], ia.astype(np.int64) @ ib.astype(np.int64)),
        # Zero rows: oneDNN declines the call, the next implementation runs it.
        ("dense", [x0, w, b], np.zeros((0, 7))),
    ]


def profile_impls(stderr):
    """{kernel: impl} from nimble-run --profile's kernel table."""
    rows = re.findall(r"^  (\S+)\s+(\S+)\s+\d+\s+[\d.]+\s+[\d.]+%", stderr, re.M)
    return {k: i for k, i in rows if k != "kernel"}


def main():
    nimblec, nimble_run, nir, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    nbc = os.path.join(work, "dispatch.nbc")
    subprocess.run([nimblec, "-O2", "--kernels=native", nir, "-o", nbc], check=True)
    rng = np.random.default_rng(7)
    ok = True

    def run(fn, inputs, extra, tag):
        args = [nimble_run, nbc, "--function=" + fn, "--profile"] + extra
        for i, v in enumerate(inputs):
            path = os.path.join(work, "%s.%s.in%d.npy" % (fn, tag, i))
            np.save(path, v)
            args.append("--input=@" + path)
        out = os.path.join(work, "%s.%s.out.npy" % (fn, tag))
        args.append("--output=@" + out)
        p = subprocess.run(args, capture_output=True, text=True)
        return p, out

    for n, (fn, inputs, want) in enumerate(cases(rng)):
        for mode in ("reference", "native", "library", "auto", "tune"):
            p, out = run(fn, inputs, ["--kernels=" + mode], "%d.%s" % (n, mode))
            if p.returncode != 0:
                print("error: %s %s: exit %d: %s" % (fn, mode, p.returncode, p.stderr.strip()))
                ok = False
                continue
            got = np.load(out)
            if got.shape != want.shape:
                print("error: %s %s: shape %s, expected %s" % (fn, mode, got.shape, want.shape))
                ok = False
                continue
            scale = float(np.max(np.abs(want))) if want.size else 0.0
            err = float(np.max(np.abs(got - want))) / scale if want.size and scale else 0.0
            impls = profile_impls(p.stderr)
            status = "ok" if err <= 1e-5 else "error: relative error %.3g" % err
            if status != "ok":
                ok = False
            shape = "x".join(str(d) for d in inputs[0].shape)
            print("%s %s %s: %s %s" % (fn, shape, mode, status,
                                        " ".join("%s=%s" % kv for kv in sorted(impls.items()))))

    # Tuning: a stored decision is used as is.
    x, w, b = cases(np.random.default_rng(7))[0][1]
    table = os.path.join(work, "forced.tuning")
    for impl in ("native", "library", "reference"):
        with open(table, "w") as f:
            f.write("# forced\nfused_matmul_0 8x32,8x32,8 %s\n" % impl)
        p, _ = run("dense", [x, w, b], ["--tuning=" + table], "forced-" + impl)
        print("forced %s: %s" % (impl, profile_impls(p.stderr).get("fused_matmul_0")))
    # Tune measures a new bucket and writes its decision back; auto measures
    # nothing and writes nothing.
    fresh = os.path.join(work, "fresh.tuning")
    if os.path.exists(fresh):
        os.remove(fresh)
    p, _ = run("dense", [x, w, b], ["--tuning=" + fresh], "fresh-auto")
    print("auto wrote a table: %s" % os.path.exists(fresh))
    p, _ = run("dense", [x, w, b], ["--kernels=tune", "--tuning=" + fresh], "fresh")
    with open(fresh) as f:
        lines = [l for l in f.read().splitlines() if not l.startswith("#")]
    print("measured: " + " ".join(l.rsplit(" ", 1)[0] for l in lines))
    decided = [l.rsplit(" ", 1)[1] for l in lines]
    if not decided or any(d not in ("native", "library") for d in decided):
        print("error: measured decisions %r" % decided)
        ok = False
    # Malformed tables.
    for name, text in (("short", "fused_matmul_0 8x32\n"), ("impl", "k 1x1 fastest\n")):
        bad = os.path.join(work, name + ".tuning")
        with open(bad, "w") as f:
            f.write("# a comment\n" + text)
        p, _ = run("dense", [x, w, b], ["--tuning=" + bad], "bad-" + name)
        print("exit %d: %s" % (p.returncode, p.stderr.strip().replace(work + "/", "")))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
