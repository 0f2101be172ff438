#!/usr/bin/env python3
"""Random CNN chains with and without convert-layout: the same bits.

    /usr/bin/python3 scripts/check_layout.py [--seeds 0:100] [--tools DIR] [--work DIR]

Each seed writes a random chain of 2 to 6 ops over an N x C x D.. input
(1 to 3 spatial axes, `?` batch): conv (strides, pads, dilations, groups
up to depthwise, a bias), relu, ReLU-style clip (maximum, minimum by
scalars), a per-channel C x 1 x 1 multiply, an add, max_pool / avg_pool
(ceil_mode, count_include_pad), with random weights as literals; in 3 of
10 a global average pool last (mean over the spatial axes, with keepdims in
2 of the 3). It is
compiled at -O2 (convert-layout: the convs and pools channels-last) and with
the -O2 pipeline minus convert-layout, and both run on one random input:
with --kernels=reference the two outputs must be the same bytes (the
pass's claim, docs/passes.md), with the default kernels (oneDNN) within
1e-5, and -O2's within 1e-4 of the reference. Chains whose shapes do not
fit (a window larger than its input) are skipped; they are compile errors
either way. Exit 1 on any mismatch, with the seed's directory kept.
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = ("dispatch,inline,type-infer,fuse-attention,canonicalize,cse,dce,licm,loop-distribute,"
        "batch-input-projection,cse,dce,type-infer,fuse,manifest-memory{kills=false},"
        "place-devices{target=cpu},plan-memory,auto-batch")


def ints(a):
    return "[" + ", ".join(map(str, a)) + "]"


def literal(a):
    return np.array2string(a, separator=", ", threshold=10 ** 9, floatmode="unique").replace("\n", "")


def program(seed):
    """(the .nir text, the input array)."""
    r = random.Random(seed)
    rs = np.random.RandomState(seed)
    k = r.choice([1, 2, 2, 2, 3])
    n, c = r.choice([1, 2, 3]), r.choice([1, 3, 4, 8])
    sp = [r.randint(5, 9) for _ in range(k)]
    consts, body, cur, ch = [], [], "%x", c
    for i in range(r.randint(2, 6)):
        kind = r.choice(["conv", "conv", "relu", "clip", "add", "pool", "mul"])
        if kind == "conv":
            g = r.choice([1, 1, ch])
            m = r.choice([2, 4, 8]) * g if g > 1 else r.choice([2, 4, 6])
            taps = [r.choice([1, 2, 3]) for _ in range(k)]
            st, dl = [r.choice([1, 2]) for _ in range(k)], [r.choice([1, 1, 2]) for _ in range(k)]
            pd = [r.choice([0, 1]) for _ in range(2 * k)]
            consts += [("w%d" % i, rs.randn(m, ch // g, *taps).astype(np.float32)),
                       ("b%d" % i, rs.randn(m).astype(np.float32))]
            body.append("  %%c%d = conv %s, @w%d, @b%d, strides=%s, pads=%s, dilations=%s, groups=%d"
                        % (i, cur, i, i, ints(st), ints(pd), ints(dl), g))
            cur, ch = "%%c%d" % i, m
        elif kind == "relu":
            body.append("  %%r%d = relu %s" % (i, cur))
            cur = "%%r%d" % i
        elif kind == "clip":
            body += ["  %%lo%d = constant 0.0 : tensor<f32>" % i, "  %%hi%d = constant 1.5 : tensor<f32>" % i,
                     "  %%m%d = maximum %s, %%lo%d" % (i, cur, i), "  %%n%d = minimum %%m%d, %%hi%d" % (i, i, i)]
            cur = "%%n%d" % i
        elif kind == "add" and cur != "%x":
            body.append("  %%a%d = add %s, %s" % (i, cur, cur))
            cur = "%%a%d" % i
        elif kind == "mul" and cur != "%x":
            consts.append(("s%d" % i, rs.randn(ch, *([1] * k)).astype(np.float32)))
            body.append("  %%s%d = mul %s, @s%d" % (i, cur, i))
            cur = "%%s%d" % i
        elif kind == "pool":
            op = r.choice(["max_pool", "avg_pool"])
            taps, st = [r.choice([1, 2, 3]) for _ in range(k)], [r.choice([1, 2]) for _ in range(k)]
            pd = [r.choice([0, 1]) if t > 1 else 0 for t in taps * 2]
            extra = ", ceil_mode=true" if r.random() < 0.4 else ""
            if op == "avg_pool" and r.random() < 0.5:
                extra += ", count_include_pad=true"
            body.append("  %%p%d = %s %s, kernel=%s, strides=%s, pads=%s%s" % (i, op, cur, ints(taps), ints(st),
                                                                             ints(pd), extra))
            cur = "%%p%d" % i
    # A global average pool last, some of the time (with keepdims or not).
    out_rank = k
    g = r.random()
    if g < 0.3:
        keep = g < 0.2
        body.append("  %%g = mean %s, axes=%s%s" % (cur, ints(list(range(2, k + 2))),
                                                   ", keepdims=true" if keep else ""))
        cur, out_rank = "%g", (k if keep else 0)
    text = ["const @%s : tensor<%sxf32> = %s" % (name, "x".join(map(str, a.shape)), literal(a)) for name, a in consts]
    text.append("func @main(%%x: tensor<?x%dx%sxf32>) -> tensor<?x?%sxf32> {\n^entry:\n%s\n  ret %s\n}"
                % (c, "x".join(map(str, sp)), "x?" * out_rank, "\n".join(body), cur))
    return "\n".join(text) + "\n", rs.randn(n, c, *sp).astype(np.float32)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0:100")
    ap.add_argument("--tools", default=os.path.join(ROOT, "bazel-bin", "tools"))
    ap.add_argument("--work", help="directory for the programs (default: a temporary one)")
    args = ap.parse_args(argv)
    lo, hi = map(int, args.seeds.split(":"))
    work = args.work or tempfile.mkdtemp(prefix="check_layout.")
    tool = lambda name: os.path.join(args.tools, name)
    checked = skipped = bad = converted = 0
    for seed in range(lo, hi):
        d = os.path.join(work, "s%d" % seed)
        os.makedirs(d, exist_ok=True)
        text, x = program(seed)
        with open(os.path.join(d, "p.nir"), "w") as f:
            f.write(text)
        np.save(os.path.join(d, "x.npy"), x)
        nir = os.path.join(d, "p.nir")
        if subprocess.run([tool("nimblec"), nir, "-o", os.path.join(d, "o2.nbc")], capture_output=True).returncode:
            skipped += 1
            continue
        subprocess.run([tool("nimblec"), nir, "--passes=" + BASE, "-o", os.path.join(d, "base.nbc")], check=True)
        emitted = subprocess.run([tool("nimblec"), nir, "--emit=nir"], capture_output=True, text=True).stdout
        converted += "channels_last=true" in emitted
        outs = {}
        for v in ("o2", "base"):
            for kernels in ("reference", "auto"):
                out = os.path.join(d, "%s-%s.npy" % (v, kernels))
                p = subprocess.run([tool("nimble-run"), os.path.join(d, v + ".nbc"), "--kernels=" + kernels,
                                    "--input=@" + os.path.join(d, "x.npy"), "--output=@" + out],
                                   capture_output=True, text=True)
                outs[v, kernels] = np.load(out) if p.returncode == 0 else "error: " + p.stderr.strip()[-200:]
        problems = []
        for kernels in ("reference", "auto"):
            a, b = outs["o2", kernels], outs["base", kernels]
            if isinstance(a, str) or isinstance(b, str):
                if a != b:
                    problems.append("%s: %s | %s" % (kernels, a, b))
            elif a.shape != b.shape:
                problems.append("%s: shapes %s and %s" % (kernels, a.shape, b.shape))
            elif kernels == "reference" and a.tobytes() != b.tobytes():
                problems.append("reference: different bits (largest difference %g)" % np.abs(a - b).max())
            elif kernels == "auto" and not np.allclose(a, b, rtol=1e-5, atol=1e-5, equal_nan=True):
                problems.append("auto: largest difference %g" % np.abs(a - b).max())
        a, ref = outs["o2", "auto"], outs["base", "reference"]
        if not isinstance(a, str) and not isinstance(ref, str) and a.shape == ref.shape and \
                not np.allclose(a, ref, rtol=1e-4, atol=1e-4, equal_nan=True):
            problems.append("-O2 on oneDNN against the reference: %g" % np.abs(a - ref).max())
        checked += 1
        if problems:
            bad += 1
            print("seed %d (%s): %s" % (seed, d, "; ".join(problems)))
    print("check_layout: %d chains checked (%d with channels-last ops), %d skipped (shapes do not fit), %d differ"
          % (checked, converted, skipped, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
