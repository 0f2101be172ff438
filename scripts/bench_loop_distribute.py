#!/usr/bin/env python3
"""Where loop-distribute pays (issue 49; docs/perf.md, "Loop distribution"):
models/lstm at 2 layers (gen_lstm.py at input = hidden = H, batch 1, a
sequence of --steps tokens, random weights), `nimblec -O2` with the pass
forced at every size (`loop-distribute{min-cols=0}`: layer 1 gets its own
loop and its input projection one GEMM over the stacked layer-0 states)
against the same pipeline without `loop-distribute` (one loop, layer 1's
projection a GEMV per token), side by side.

    bazel build //tools:nimblec //tools:nimble-run
    /usr/bin/python3 scripts/bench_loop_distribute.py [--rounds R] [--runs N]
        [--steps T] [--hidden 16,32,...] [--layers 2] [--kernels K]

For each H: `nimble-run --benchmark=N --threads=1` medians of both
executables, R rounds alternating the two, the median of the rounds'
medians per token, their ratio (fused loop / distributed) and its spread,
the largest relative difference of the outputs (not 0: the batched
projection is a GEMM, rounding as another kernel than the GEMV per token), and the 1-minute load average before each row (the machine is
shared).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from bench_linalg_fuse import ROOT, make_lstm, median_ms, output  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--hidden", default="16,32,64,96,128,192,256")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--kernels", default="auto")
    ap.add_argument("--bin", default=os.path.join(ROOT, "bazel-bin", "tools"))
    args = ap.parse_args()
    nimblec, nimble_run = (os.path.join(args.bin, t) for t in ("nimblec", "nimble-run"))
    with open("/proc/cpuinfo") as f:
        info = benchlib.cpu_info(f.read())
    print("CPU: %s, %s; 1 thread; --kernels=%s; %d layers, %d tokens; %d rounds of %d runs, alternating" %
          (info["model"], benchlib.isa_summary(info["isa"]), args.kernels, args.layers, args.steps, args.rounds,
           args.runs))
    print("%5s %6s %18s %18s %8s %12s %10s" % ("H", "load", "one loop us/tok", "distributed us/tok", "ratio",
                                               "spread", "max rel"))
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory(prefix="bench_loop_distribute.") as work:
        for hidden in [int(h) for h in args.hidden.split(",")]:
            nir = make_lstm(work, rng, args.layers, hidden)
            pipe = subprocess.run([nimblec, "-O2", "--print-pipeline", nir], capture_output=True, text=True,
                                  check=True).stdout.strip()
            if "loop-distribute," not in pipe:
                sys.exit("bench_loop_distribute: no loop-distribute in the -O2 pipeline: " + pipe)
            nbcs = {"one": nir + ".one.nbc", "dist": nir + ".dist.nbc"}
            variants = {"one": pipe.replace("loop-distribute,", "", 1),
                        "dist": pipe.replace("loop-distribute,", "loop-distribute{min-cols=0},", 1)}
            for k, passes in variants.items():
                stats = subprocess.run([nimblec, "--passes=" + passes, "--stats", nir, "-o", nbcs[k]],
                                       capture_output=True, text=True, check=True).stderr
                if (k == "dist") != ("loop-distribute" in stats):
                    sys.exit("bench_loop_distribute: loop-distribute %s on %s" % (
                        "did not fire" if k == "dist" else "fired", nir))
            xs = os.path.join(work, "xs.npy")
            np.save(xs, rng.standard_normal((args.steps, hidden)).astype(np.float32))
            load = benchlib.load_avg()
            times = {k: [] for k in nbcs}
            for _ in range(args.rounds):
                for k, nbc in nbcs.items():
                    times[k].append(median_ms(nimble_run, nbc, [xs], args.runs, args.kernels))
            a, b = (output(nimble_run, nbcs[k], [xs], args.kernels, work) for k in ("one", "dist"))
            diff = float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), 1e-30))
            ratios = [x / y for x, y in zip(times["one"], times["dist"])]
            t1, td = (statistics.median(times[k]) * 1000.0 / args.steps for k in ("one", "dist"))
            print("%5d %6.2f %18.2f %18.2f %7.2fx %5.2f-%.2fx %10.1e" % (hidden, load, t1, td, t1 / td,
                                                                        min(ratios), max(ratios), diff),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
