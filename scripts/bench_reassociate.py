#!/usr/bin/env python3
"""Matrix-chain reordering measured (issue 49): `nimblec -O2` against
`nimblec -O2 --fp-reassociate` on chains of products, side by side.

    bazel build //tools:nimblec //tools:nimble-run
    /usr/bin/python3 scripts/bench_reassociate.py [--rounds R] [--runs N] [--kernels K]

Programs (written in the order a user would write them, left to right):
  static  A(512x512)·B(512x512)·v(512x1)      reordered at compile time to A·(B·v)
  dynamic X(m x 256)·W1(256x256)·W2(256x16)   both orders, chosen at run time:
          (X·W1)·W2 costs m·256·272, X·(W1·W2) 256·16·(m+256): left for small
          m, right from m = 17 on; measured at m = 4, 64, 1024
For each row: `nimble-run --benchmark=N --threads=1` medians of both
executables, R rounds alternating the two, the median of the rounds'
medians, their ratio (written order / reordered) and the spread of the
per-round ratios, and the largest relative difference of the outputs (the
rounding the reordering changes). Prints the CPU model first.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
LATENCY = re.compile(r"latency: min ([0-9.]+) ms, median ([0-9.]+) ms")

STATIC = """func @main(%a: tensor<512x512xf32>, %b: tensor<512x512xf32>, %v: tensor<512x1xf32>) -> tensor<512x1xf32> {
^entry:
  %ab = matmul %a, %b
  %r = matmul %ab, %v
  ret %r
}
"""

DYNAMIC = """func @main(%x: tensor<?x256xf32>, %w1: tensor<256x256xf32>, %w2: tensor<256x16xf32>) -> tensor<?x16xf32> {
^entry:
  %xw = matmul %x, %w1
  %y = matmul %xw, %w2
  ret %y
}
"""


def cpu_model():
    """The model name, family/model numbers and ISA (benchlib's summary)."""
    with open("/proc/cpuinfo") as f:
        text = f.read()
    info = benchlib.cpu_info(text)
    fam = re.search(r"^cpu family\s*:\s*(\d+)", text, re.M)
    mod = re.search(r"^model\s*:\s*(\d+)", text, re.M)
    nums = " (family %s, model %s)" % (fam.group(1), mod.group(1)) if fam and mod else ""
    return "%s%s, %s" % (info["model"], nums, benchlib.isa_summary(info["isa"]))


def compile_nir(nimblec, text, path, extra):
    nir = path + ".nir"
    with open(nir, "w") as f:
        f.write(text)
    subprocess.run([nimblec, "-O2", *extra, nir, "-o", path], check=True)


def median_ms(nimble_run, nbc, inputs, runs, kernels):
    out = subprocess.run([nimble_run, nbc, *["--input=@" + i for i in inputs], "--threads=1",
                          "--kernels=" + kernels, "--benchmark=%d" % runs],
                         capture_output=True, text=True, check=True).stdout
    m = LATENCY.search(out)
    if not m:
        sys.exit("bench_reassociate: no latency line in nimble-run's output:\n" + out)
    return float(m.group(2))


def output(nimble_run, nbc, inputs, kernels, work):
    out = os.path.join(work, "out.npy")
    subprocess.run([nimble_run, nbc, *["--input=@" + i for i in inputs], "--threads=1",
                    "--kernels=" + kernels, "--output=@" + out], check=True, capture_output=True)
    return np.load(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--kernels", default="native")
    ap.add_argument("--bin", default=os.path.join(ROOT, "bazel-bin", "tools"))
    args = ap.parse_args()
    nimblec, nimble_run = os.path.join(args.bin, "nimblec"), os.path.join(args.bin, "nimble-run")
    rng = np.random.default_rng(7)
    print("CPU: %s; 1 thread; --kernels=%s; %d rounds of %d runs, alternating" %
          (cpu_model(), args.kernels, args.rounds, args.runs))
    print("%-28s %12s %12s %8s %14s %10s" % ("program", "written ms", "reordered ms", "ratio", "ratio spread",
                                            "max rel diff"))
    with tempfile.TemporaryDirectory(prefix="bench_reassociate.") as work:
        for name, text, shapes in [
            ("static A·B·v 512", STATIC, [(512, 512), (512, 512), (512, 1)]),
            ("dynamic X·W1·W2 m=4", DYNAMIC, [(4, 256), (256, 256), (256, 16)]),
            ("dynamic X·W1·W2 m=64", DYNAMIC, [(64, 256), (256, 256), (256, 16)]),
            ("dynamic X·W1·W2 m=1024", DYNAMIC, [(1024, 256), (256, 256), (256, 16)]),
        ]:
            base = os.path.join(work, name.split()[0])
            if not os.path.exists(base + ".written.nbc"):
                compile_nir(nimblec, text, base + ".written.nbc", [])
                compile_nir(nimblec, text, base + ".reordered.nbc", ["--fp-reassociate"])
            inputs = []
            for i, shape in enumerate(shapes):
                p = os.path.join(work, "in%d.npy" % i)
                np.save(p, (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32))
                inputs.append(p)
            written, reordered = [], []
            for _ in range(args.rounds):
                written.append(median_ms(nimble_run, base + ".written.nbc", inputs, args.runs, args.kernels))
                reordered.append(median_ms(nimble_run, base + ".reordered.nbc", inputs, args.runs, args.kernels))
            ratios = [w / r for w, r in zip(written, reordered)]
            a = output(nimble_run, base + ".written.nbc", inputs, args.kernels, work).astype(np.float64)
            b = output(nimble_run, base + ".reordered.nbc", inputs, args.kernels, work).astype(np.float64)
            diff = float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), 1e-30))
            w, r = statistics.median(written), statistics.median(reordered)
            print("%-28s %12.3f %12.3f %7.2fx %6.2f-%.2fx %10.1e" % (name, w, r, w / r, min(ratios), max(ratios), diff))
    return 0


if __name__ == "__main__":
    sys.exit(main())
