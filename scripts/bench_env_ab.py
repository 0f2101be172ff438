#!/usr/bin/env python3
"""A/B of a runtime setting: one compiled model run by nimble-run under two
environments, alternating pair by pair, with the ratio of each pair.

    /usr/bin/python3 scripts/bench_env_ab.py NBC INPUT [INPUT...]
        --a NIMBLE_PANEL_PRODUCT=0 --b NIMBLE_PANEL_PRODUCT=1
        [--threads 1,2] [--pairs 5] [--reps 3] [--tolerance 1e-4]

For each input (a .npy given to --input=@) and thread count: --pairs times,
`nimble-run NBC --benchmark=REPS` under A, then under B (the same process
tree and the same minute, so that a change of load hits both alike). Prints
each pair's medians (ms) and, per input and thread count, the median of
the pairs' ratios A / B (above 1: B faster) with their range: by
docs/perf.md's rule, a lead counts when the range stays on one side of 1.
The two settings' outputs must agree within --tolerance (absolute, over
the largest element's magnitude), else exit 1. Settings are VAR=VALUE
(repeat --a / --b for several); a variable named in only one of them is
left as the caller's environment has it in the other. Needs the tools
built (bazel build //tools/...). Not timed tests: figures for docs/perf.md.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "bazel-bin", "tools", "nimble-run")


def settings(pairs):
    env = {}
    for kv in pairs:
        if "=" not in kv:
            sys.exit("bench_env_ab: a setting is VAR=VALUE, not %r" % kv)
        k, v = kv.split("=", 1)
        env[k] = v
    return env


def label(env):
    return " ".join("%s=%s" % kv for kv in sorted(env.items())) or "(as is)"


def run(nbc, inp, threads, reps, env, out):
    p = subprocess.run([RUN, nbc, "--input=@" + inp, "--threads=%d" % threads, "--benchmark=%d" % reps,
                        "--output=@" + out], env=dict(os.environ, **env), capture_output=True, text=True)
    m = re.search(r"median ([0-9.]+) ms", p.stdout + p.stderr)
    if p.returncode or not m:
        sys.exit("bench_env_ab: nimble-run failed (exit %d):\n%s" % (p.returncode, p.stderr[-2000:]))
    return float(m.group(1)), np.load(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("nbc")
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--a", action="append", default=[], help="VAR=VALUE of setting A (repeatable)")
    ap.add_argument("--b", action="append", default=[], help="VAR=VALUE of setting B (repeatable)")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()
    a, b = settings(args.a), settings(args.b)
    print("A: %s\nB: %s\n%s; %d pairs of nimble-run --benchmark=%d each" %
          (label(a), label(b), os.path.basename(args.nbc), args.pairs, args.reps))
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for inp in args.inputs:
            for t in (int(x) for x in args.threads.split(",")):
                ta, tb, ratios = [], [], []
                for _ in range(args.pairs):
                    ma, ya = run(args.nbc, inp, t, args.reps, a, os.path.join(tmp, "a.npy"))
                    mb, yb = run(args.nbc, inp, t, args.reps, b, os.path.join(tmp, "b.npy"))
                    scale = max(float(np.max(np.abs(ya))), 1e-30)
                    worst = max(worst, float(np.max(np.abs(ya - yb))) / scale)
                    ta.append(ma)
                    tb.append(mb)
                    ratios.append(ma / mb)
                print("%s, %d thread%s: A %s ms; B %s ms; A/B median %.3f (range %.3f-%.3f)" %
                      (os.path.basename(inp), t, "" if t == 1 else "s", " ".join("%.4g" % x for x in ta),
                       " ".join("%.4g" % x for x in tb), statistics.median(ratios), min(ratios), max(ratios)),
                      flush=True)
    print("outputs: largest difference %.2e of the largest element" % worst)
    if worst > args.tolerance:
        print("bench_env_ab: the two settings' outputs differ by more than --tolerance %g" % args.tolerance,
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
