"""Writes and runs test/codegen/library-nan.test's cases: NaN, +-0, +-inf,
subnormals and the largest f32 through the activations the library kernels
fuse after a matmul or a convolution, each output against
--kernels=reference.

    nan_special.py make DIR     -> DIR/nan.nir, DIR/m.{8,40,200}.npy, DIR/c.{1,4}.npy
    nan_special.py run DIR      -> one line a function, rows (images) and threads

Matmul functions (x by a 132 x 4 weight of stacked identities: y[:, j] =
x[:, j % 4] exactly, inf * 0 giving NaN) apply relu, exp, gelu, tanh or
sigmoid; at 8 rows the few-row product runs them, at 40 rows on 2 threads
too, otherwise oneDNN or native code. relu must give the reference's bits;
the others the reference's NaNs and values within 1e-5 (libraries round
differently). Conv functions (a depthwise 1x1 conv by ones: y = x exactly;
a dense 1x1 conv by the identity, whose NaN channels spread to every
channel of the pixel) apply relu or a ReLU6 clip in both operand orders;
the line gives the elements that differ from the reference's bits, by
kind. The documented exception (docs/VM.md,
"Not exact"): oneDNN's fused relu and clip turn a NaN into 0.
"""
import re
import subprocess
import sys

import numpy as np
from nir_literal import lit

VALS = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-40, -1e-40, 1.0, 7.0, -3.0, 100.0, -100.0, 6.0,
                 np.finfo(np.float32).max, -np.finfo(np.float32).max], np.float32)
UNARY = ("relu", "exp", "gelu", "tanh", "sigmoid")
C = 16
CONV = {"dw": f"  %w = constant {lit(np.ones((C, 1, 1, 1), np.float32))} : tensor<{C}x1x1x1xf32>\n"
              f"  %y = conv %x, %w, groups={C}\n",
        "dense": f"  %w = constant {lit(np.eye(C, dtype=np.float32).reshape(C, C, 1, 1))} : tensor<{C}x{C}x1x1xf32>\n"
                 "  %y = conv %x, %w\n"}
CHAINS = {"relu": "  %o = relu %y\n",
          "clip_first": "  %a = maximum %y, %z\n  %o = minimum %a, %s\n",
          "clip_second": "  %a = maximum %z, %y\n  %o = minimum %s, %a\n",
          "exp": "  %o = exp %y\n"}
CONV_FUNCS = [f"{c}_{k}" for c in CONV for k in CHAINS if c == "dw" or k in ("relu", "clip_first")]


def make(d):
    w = np.tile(np.eye(4, dtype=np.float32), (33, 1))
    with open(f"{d}/nan.nir", "w") as f:
        for u in UNARY:
            f.write(f"func @mm_{u}(%x: tensor<?x4xf32>) -> tensor<?x132xf32> {{\n"
                    f"  %w = constant {lit(w)} : tensor<132x4xf32>\n"
                    f"  %m = matmul %x, %w, transpose_b=true\n  %a = {u} %m\n  ret %a\n}}\n\n")
        for name in CONV_FUNCS:
            c, k = name.split("_", 1)
            f.write(f"func @{name}(%x: tensor<?x{C}x?x?xf32>) -> tensor<?x{C}x?x?xf32> {{\n"
                    f"{CONV[c]}  %z = constant 0.0 : tensor<f32>\n  %s = constant 6.0 : tensor<f32>\n"
                    f"{CHAINS[k]}  ret %o\n}}\n\n")
    for rows in (8, 40, 200):
        np.save(f"{d}/m.{rows}.npy", np.repeat(np.resize(VALS, rows)[:, None], 4, axis=1).astype(np.float32))
    for n in (1, 4):
        np.save(f"{d}/c.{n}.npy", np.resize(VALS, (n, C, 5, 5)).astype(np.float32))


def name(v):
    return "nan" if np.isnan(v) else repr(float(v))


def compare(ref, got, exact):
    """exact: the elements whose bits differ; else those not within 1e-5
    (a NaN only matching a NaN), listed by kind."""
    if exact:
        d = ref.view(np.uint32) != got.view(np.uint32)
    else:
        d = ~np.isclose(ref, got, rtol=1e-5, atol=1e-6, equal_nan=True)
    if not d.any():
        return "same bits" if exact else "same NaNs, within 1e-5"
    kinds = {}
    for a, b in zip(ref[d], got[d]):
        special = not (np.isfinite(a) and np.isfinite(b))
        k = f"{name(a)} -> {name(b)}" if special or exact else "values"
        kinds[k] = kinds.get(k, 0) + 1
    return "differs: " + ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items()))


def run(d):
    def go(fn, kernels, ins, out, threads=1):
        p = subprocess.run(["nimble-run", f"{d}/n.nbc", f"--function={fn}", f"--kernels={kernels}",
                            f"--threads={threads}", "--profile", *ins, f"--output=@{out}"],
                           check=True, capture_output=True, text=True)
        m = re.search(r"Library panels: (\d+) calls", p.stdout + p.stderr)
        return m.group(1) if m else "0"

    for u in UNARY:
        for rows in (8, 40, 200):
            ins = [f"--input=@{d}/m.{rows}.npy"]
            go(f"mm_{u}", "reference", ins, f"{d}/ref.npy")
            for t in (1, 2):
                calls = go(f"mm_{u}", "library", ins, f"{d}/got.npy", t)
                print(f"mm_{u} rows={rows} threads={t} (panel calls {calls}): "
                      + compare(np.load(f"{d}/ref.npy"), np.load(f"{d}/got.npy"), u == "relu"))
    for fn in CONV_FUNCS:
        for n in (1, 4):
            ins = [f"--input=@{d}/c.{n}.npy"]
            go(fn, "reference", ins, f"{d}/ref.npy")
            for t in (1, 2):
                go(fn, "library", ins, f"{d}/got.npy", t)
                print(f"{fn} images={n} threads={t}: "
                      + compare(np.load(f"{d}/ref.npy"), np.load(f"{d}/got.npy"), not fn.endswith("exp")))


if __name__ == "__main__":
    {"make": make, "run": run}[sys.argv[1]](sys.argv[2])
