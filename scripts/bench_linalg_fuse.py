#!/usr/bin/env python3
"""Linear-algebra fusion measured (issue 49): an LSTM cell run for T steps,
`x·Wᵀ + h·Uᵀ + b` as two products and a fused epilogue (`nimblec -O2`)
against one product on the concatenations `[x h]·[W U]ᵀ + b` (the same
program forced through `linalg-fuse{max-rows=B,max-cols=2^30}`), side by side.

    bazel build //tools:nimblec //tools:nimble-run //tools:nimble-opt
    /usr/bin/python3 scripts/bench_linalg_fuse.py [--rounds R] [--runs N] [--steps T]
        [--hidden 32,64,...] [--batch 1,4,...] [--kernels K]

The cell feeds its output back as its next input (a decoder's loop), so
batch-input-projection cannot take x·Wᵀ out of the loop and every step runs
both products; input size = hidden size H, gates 4H. For each (batch, H):
`nimble-run --benchmark=N --threads=1` medians of both executables, R rounds
alternating the two, the median of the rounds' medians per step, their
ratio (two products / one) and its spread, the largest relative difference
of the outputs, and the 1-minute load average before each row (the machine
is shared).

Then models/lstm (gen_lstm.py at input = hidden = H, 1 and 2 layers, batch
1, a sequence of --steps tokens, random weights): `nimblec -O2` (the input
projections batched before the loop by batch-input-projection, for 2 layers
after loop-distribute from H = 128, its threshold) against the -O2 --fp-reassociate pipeline with
linalg-fuse forced at every size and moved before licm, loop-distribute and
batch-input-projection (one loop, one product per layer and step): the
order the pipeline does not use, measured to show why. Both tables force the
pass past its default thresholds, to find where it stops paying.
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

CELL = """func @main(%x0: tensor<{B}x{H}xf32>, %w: tensor<{G}x{H}xf32>, %u: tensor<{G}x{H}xf32>, %b: tensor<{G}xf32>, %n: tensor<i64>) -> tensor<{B}x{H}xf32> {{
^entry:
  %zero = constant 0 : tensor<i64>
  %one = constant 1 : tensor<i64>
  %s0 = constant 0.0 : tensor<{B}x{H}xf32>
  br ^loop(%zero, %x0, %s0, %s0)
^loop(%t: tensor<i64>, %x: tensor<{B}x{H}xf32>, %h: tensor<{B}x{H}xf32>, %c: tensor<{B}x{H}xf32>):
  %done = greater_equal %t, %n
  cond_br %done, ^exit, ^body
^body:
  %xw = matmul %x, %w, transpose_b=true
  %hu = matmul %h, %u, transpose_b=true
  %sum = add %xw, %hu
  %gates = add %sum, %b
  %gi, %gf, %gg, %go = split %gates, axis=1, sections=4
  %i = sigmoid %gi
  %f = sigmoid %gf
  %g = tanh %gg
  %o = sigmoid %go
  %keep = mul %f, %c
  %write = mul %i, %g
  %c1 = add %keep, %write
  %ca = tanh %c1
  %h1 = mul %o, %ca
  %t1 = add %t, %one
  br ^loop(%t1, %h1, %h1, %c1)
^exit:
  ret %h
}}
"""


def compile_nir(nimblec, nimble_opt, text, path, fused, rows):
    nir = path + ".nir"
    with open(nir, "w") as f:
        f.write(text)
    if fused:
        # The -O2 --fp-reassociate pipeline fuses one-row products only; the
        # larger batches are forced through the pass at the row count asked.
        pre = path + ".fused.nir"
        subprocess.run([nimble_opt, nir, "--passes=linalg-fuse{max-rows=%d,max-cols=%d},canonicalize,licm" % (rows, 1 << 30),
                        "-o", pre], check=True)
        nir = pre
        with open(pre) as f:
            if "concat" not in f.read():
                sys.exit("bench_linalg_fuse: linalg-fuse did not fire on %s" % nir)
    subprocess.run([nimblec, "-O2", nir, "-o", path], check=True)


def run(nimble_run, nbc, inputs, kernels, extra):
    return subprocess.run([nimble_run, nbc, *["--input=@" + i for i in inputs], "--threads=1",
                           "--kernels=" + kernels, *extra], capture_output=True, text=True, check=True).stdout


def median_ms(nimble_run, nbc, inputs, runs, kernels):
    out = run(nimble_run, nbc, inputs, kernels, ["--benchmark=%d" % runs])
    m = LATENCY.search(out)
    if not m:
        sys.exit("bench_linalg_fuse: no latency line in nimble-run's output:\n" + out)
    return float(m.group(2))


def output(nimble_run, nbc, inputs, kernels, work):
    out = os.path.join(work, "out.npy")
    run(nimble_run, nbc, inputs, kernels, ["--output=@" + out])
    return np.load(out).astype(np.float64)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--hidden", default="32,64,128,256,512,1024")
    ap.add_argument("--batch", default="1")
    ap.add_argument("--kernels", default="auto")
    ap.add_argument("--lstm-hidden", default="16,32,64,128,256")
    ap.add_argument("--lstm-layers", default="1,2")
    ap.add_argument("--bin", default=os.path.join(ROOT, "bazel-bin", "tools"))
    args = ap.parse_args()
    tools = {t: os.path.join(args.bin, t) for t in ("nimblec", "nimble-run", "nimble-opt")}
    with open("/proc/cpuinfo") as f:
        info = benchlib.cpu_info(f.read())
    print("CPU: %s, %s; 1 thread; --kernels=%s; %d steps; %d rounds of %d runs, alternating" %
          (info["model"], benchlib.isa_summary(info["isa"]), args.kernels, args.steps, args.rounds, args.runs))
    print("%5s %5s %6s %14s %14s %8s %12s %10s" % ("batch", "H", "load", "two us/step", "one us/step", "ratio",
                                                   "spread", "max rel"))
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory(prefix="bench_linalg_fuse.") as work:
        for batch in [int(b) for b in args.batch.split(",")]:
            for hidden in [int(h) for h in args.hidden.split(",")]:
                text = CELL.format(B=batch, H=hidden, G=4 * hidden)
                base = os.path.join(work, "b%d_h%d" % (batch, hidden))
                compile_nir(tools["nimblec"], tools["nimble-opt"], text, base + ".two.nbc", False, batch)
                compile_nir(tools["nimblec"], tools["nimble-opt"], text, base + ".one.nbc", True, batch)
                inputs = []
                for i, shape in enumerate([(batch, hidden), (4 * hidden, hidden), (4 * hidden, hidden),
                                           (4 * hidden,)]):
                    p = os.path.join(work, "in%d.npy" % i)
                    np.save(p, (rng.standard_normal(shape) / np.sqrt(hidden)).astype(np.float32))
                    inputs.append(p)
                p = os.path.join(work, "steps.npy")
                np.save(p, np.array(args.steps, dtype=np.int64))
                inputs.append(p)
                with open("/proc/loadavg") as f:
                    load = f.read().split()[0]
                two, one = [], []
                for _ in range(args.rounds):
                    two.append(median_ms(tools["nimble-run"], base + ".two.nbc", inputs, args.runs, args.kernels))
                    one.append(median_ms(tools["nimble-run"], base + ".one.nbc", inputs, args.runs, args.kernels))
                ratios = [a / b for a, b in zip(two, one)]
                a = output(tools["nimble-run"], base + ".two.nbc", inputs, args.kernels, work)
                b = output(tools["nimble-run"], base + ".one.nbc", inputs, args.kernels, work)
                diff = float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), 1e-30))
                per = 1000.0 / args.steps
                t2, t1 = statistics.median(two) * per, statistics.median(one) * per
                print("%5d %5d %6s %14.2f %14.2f %7.2fx %5.2f-%.2fx %10.1e" %
                      (batch, hidden, load, t2, t1, t2 / t1, min(ratios), max(ratios), diff), flush=True)
        if args.lstm_hidden:
            lstm_models(tools, args, rng, work)
    return 0


def make_lstm(work, rng, layers, hidden):
    """models/lstm's generator at input = hidden = H with random weights (in
    WORK): the .nir's path (its weights beside it, where the variant says)."""
    sys.path.insert(0, ROOT)
    from models.common.nimble_io import write_safetensors
    from models.lstm import gen_lstm, variants
    name = "bench_l%d_h%d" % (layers, hidden)
    variants.VARIANTS[name] = dict(input=hidden, hidden=hidden, layers=layers, subdir=work, seed=1)
    nir = variants.nir_path(name)
    with open(nir, "w") as f:
        f.write(gen_lstm.generate(name))
    write_safetensors(variants.weights_path(name), {
        k: (rng.standard_normal(shape) / np.sqrt(hidden)).astype(np.float32)
        for k, shape in variants.weight_shapes(name).items()})
    return nir


def lstm_models(tools, args, rng, work):
    """models/lstm's generator at hidden = input = H: -O2 against -O2
    --fp-reassociate with linalg-fuse forced at every size."""
    force = "linalg-fuse{max-rows=1,max-cols=%d}" % (1 << 30)
    print("%6s %5s %6s %16s %16s %8s %12s" % ("layers", "H", "load", "-O2 us/token", "fused us/token", "ratio",
                                              "spread"))
    for layers in [int(l) for l in args.lstm_layers.split(",")]:
        for hidden in [int(h) for h in args.lstm_hidden.split(",")]:
            nir = make_lstm(work, rng, layers, hidden)
            pipe = subprocess.run([tools["nimblec"], "-O2", "--fp-reassociate", "--print-pipeline", nir],
                                  capture_output=True, text=True, check=True).stdout.strip()
            nbcs = {"two": nir + ".two.nbc", "one": nir + ".one.nbc"}
            subprocess.run([tools["nimblec"], "-O2", nir, "-o", nbcs["two"]], check=True)
            # linalg-fuse moved before licm, loop-distribute and
            # batch-input-projection (in the pipeline it runs after them and
            # finds nothing here: they take the input projections first).
            early = pipe.replace("linalg-fuse,canonicalize,licm,", "")
            early = early.replace("licm,loop-distribute,", force + ",canonicalize,licm,loop-distribute,", 1)
            stats = subprocess.run([tools["nimblec"], "--passes=" + early, nir,
                                    "--stats", "-o", nbcs["one"]], capture_output=True, text=True, check=True).stderr
            m = re.search(r"(\d+) linalg-fuse", stats)
            if not m or int(m.group(1)) != layers:
                sys.exit("bench_linalg_fuse: linalg-fuse fused %s sums of %s, not %d" % (m and m.group(1), nir, layers))
            xs = os.path.join(work, "xs.npy")
            np.save(xs, rng.standard_normal((args.steps, hidden)).astype(np.float32))
            with open("/proc/loadavg") as f:
                load = f.read().split()[0]
            times = {k: [] for k in nbcs}
            for _ in range(args.rounds):
                for k, nbc in nbcs.items():
                    times[k].append(median_ms(tools["nimble-run"], nbc, [xs], args.runs, args.kernels))
            ratios = [a / b for a, b in zip(times["two"], times["one"])]
            t2, t1 = (statistics.median(times[k]) * 1000.0 / args.steps for k in ("two", "one"))
            print("%6d %5d %6s %16.2f %16.2f %7.2fx %5.2f-%.2fx" % (layers, hidden, load, t2, t1, t2 / t1,
                                                                   min(ratios), max(ratios)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
