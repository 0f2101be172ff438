#!/usr/bin/env python3
"""The cost of a call from Python (issue 48: at most 20 us more than the same
run inside `nimble-run --benchmark`), measured on the small LSTM.

    bazel build //python:nimble //tools:nimblec //tools:nimble-run
    /usr/bin/python3 scripts/bench_python.py [--runs N] [--rounds R] [--kernels K] [--tokens T...]

For each sequence length: `nimble-run --benchmark=N` times N runs of the VM
on one input (the median of its line); Python times N calls of
`Executable.run` on the same input, kernels and one thread (argument checks,
leasing the VM, releasing and taking back the GIL, wrapping the two results
included). Each side runs R rounds, alternating; the table gives the medians
of the rounds' medians and the difference. Exit 1 when a difference exceeds
--limit-us (default 20).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bazel-bin", "python"))

import numpy as np  # noqa: E402

import nimble  # noqa: E402

LATENCY = re.compile(r"latency: min ([0-9.]+) ms, median ([0-9.]+) ms")


def cli_median_us(nimble_run, nbc, npy, runs, kernels):
    out = subprocess.run([nimble_run, nbc, "--input=@" + npy, "--threads=1", "--kernels=" + kernels,
                          "--benchmark=%d" % runs], capture_output=True, text=True, check=True).stdout
    m = LATENCY.search(out)
    if not m:
        raise SystemExit("bench_python: no latency line from nimble-run:\n" + out)
    return float(m.group(2)) * 1e3


def python_median_us(exe, xs, runs, kernels):
    exe.run("main", xs, kernels=kernels, threads=1)  # warm-up, as nimble-run's
    times = []
    run = exe.run
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        run("main", xs, kernels=kernels, threads=1)
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1e3


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=2000, help="calls per round (default 2000)")
    p.add_argument("--rounds", type=int, default=5, help="rounds per side (default 5)")
    p.add_argument("--kernels", default="native", choices=["native", "reference", "auto", "library"])
    p.add_argument("--tokens", type=int, nargs="+", default=[1, 8, 64], help="sequence lengths (default 1 8 64)")
    p.add_argument("--limit-us", type=float, default=20.0)
    args = p.parse_args(argv)
    tools = os.path.join(ROOT, "bazel-bin", "tools")
    nir = os.path.join(ROOT, "models", "lstm", "small", "lstm_small.nir")
    tmp = tempfile.mkdtemp(prefix="bench-python-")
    nbc = os.path.join(tmp, "lstm_small.nbc")
    subprocess.run([os.path.join(tools, "nimblec"), nir, "-o", nbc], check=True)
    exe = nimble.load(nbc)
    rng = np.random.default_rng(0)
    print("Python call vs nimble-run --benchmark: small LSTM (models/lstm/small), --kernels=%s, 1 thread, "
          "%d runs x %d rounds per side, medians" % (args.kernels, args.runs, args.rounds))
    print("%8s %14s %14s %12s" % ("tokens", "nimble-run us", "Python us", "overhead us"))
    worst = 0.0
    for n in args.tokens:
        xs = rng.normal(0, 0.4, (n, 8)).astype(np.float32)
        npy = os.path.join(tmp, "xs_%d.npy" % n)
        np.save(npy, xs)
        cli, py = [], []
        for _ in range(args.rounds):
            cli.append(cli_median_us(os.path.join(tools, "nimble-run"), nbc, npy, args.runs, args.kernels))
            py.append(python_median_us(exe, xs, args.runs, args.kernels))
        c, q = statistics.median(cli), statistics.median(py)
        worst = max(worst, q - c)
        print("%8d %14.2f %14.2f %12.2f" % (n, c, q, q - c))
    print("worst overhead: %.2f us (limit %.0f us)" % (worst, args.limit_us))
    return 0 if worst <= args.limit_us else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
