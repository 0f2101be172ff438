#!/usr/bin/env python3
"""Graph dispatch (the `dispatch` pass, docs/passes.md) measured: each model
compiled twice at -O2, as written and with `attributes {dispatch = [sizes]}`
on @main (a copy per size with that dimension static, behind one comparison
chain), and run side by side on the same inputs in one process tree.

    /usr/bin/python3 scripts/bench_dispatch.py [--models bert_base,lstm_1l]
        [--bert-lengths 16,64,128] [--lengths 8,32,128] [--threads 1]
        [--reps 10] [--rounds 3] [--markdown FILE] [--compare dispatch|rotate]

With --compare rotate, the second executable is the model as written
compiled with plan-memory{rotate=false} instead (plan-memory's step 0 off:
loop-carried tensors allocated every iteration), for the LSTM.

Per model and size: one seeded input; `nimble-run --benchmark=REPS` of each
executable in turn, --rounds times (interleaved, so that a change of load
hits both alike); the figure is the median of the rounds' medians. The two
outputs must agree (the copies run the same ops in the same order;
only the shapes the compiler sees differ, so that the native kernels are
compiled for other shapes and may round differently): relative 1e-4 of the
largest element, else exit 1. Needs the full-size
weights (bash models/make_all.sh) and the tools built (bazel build //tools/...).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.path.join(ROOT, "bazel-bin", "tools")
MODELS = {
    "bert_base": ("models/bert/bert_base.nir", "bert-lengths", "ms/sequence"),
    "lstm_1l": ("models/lstm/lstm_1l.nir", "lengths", "us/token"),
}


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), p.stderr))
    return p.stdout + p.stderr


def with_dispatch(src, sizes, dst):
    text = open(src).read()
    attr = "attributes {dispatch = [%s]}" % ", ".join(str(s) for s in sizes)
    new, n = re.subn(r"^(func @main\(.*\)[^{\n]*) \{$", r"\1 " + attr + " {", text, count=1, flags=re.M)
    if n != 1:
        sys.exit("%s: no `func @main(...) {` line to add the attribute to" % src)
    with open(dst, "w") as f:
        f.write(new)


def make_input(model, n, path):
    rng = np.random.RandomState(49 + n)
    if model.startswith("bert"):
        np.save(path, rng.randint(0, 30522, size=n).astype(np.int64))
    else:
        np.save(path, rng.uniform(-1, 1, size=(n, 300)).astype(np.float32))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="bert_base,lstm_1l")
    ap.add_argument("--bert-lengths", default="16,64,128")
    ap.add_argument("--lengths", default="8,32,128")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--markdown")
    ap.add_argument("--compare", choices=("dispatch", "rotate"), default="dispatch",
                    help="dispatch: the attribute against the model as written; rotate: -O2 against -O2 "
                         "with plan-memory{rotate=false} (loop-carried storages allocated per iteration)")
    a = ap.parse_args()
    pipeline = run([os.path.join(BIN, "nimblec"), "--print-pipeline"]).strip()
    if a.compare == "rotate":
        pipeline = pipeline.replace("plan-memory", "plan-memory{rotate=false}")
    elif not pipeline.startswith("dispatch,"):
        pipeline = "dispatch," + pipeline
    other = "with dispatch" if a.compare == "dispatch" else "rotate=false"
    lines = ["| model | size | -O2 as written | %s | ratio |" % other, "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models.split(","):
            src, opt, unit = MODELS[model]
            sizes = [int(s) for s in getattr(a, opt.replace("-", "_")).split(",")]
            src = os.path.join(ROOT, src)
            disp = os.path.join(tmp, model + "_dispatch.nir")
            if a.compare == "dispatch":
                with_dispatch(src, sizes, disp)
            else:
                disp = src
            wdir = os.path.dirname(src)
            exes = {}
            for name, nir in (("written", src), ("dispatch", disp)):
                exes[name] = os.path.join(tmp, "%s_%s.nbc" % (model, name))
                run([os.path.join(BIN, "nimblec"), nir, "--weights-dir=" + wdir, "--passes=" + pipeline,
                     "-o", exes[name]] if name == "dispatch" else
                    [os.path.join(BIN, "nimblec"), nir, "-o", exes[name]])
            for n in sizes:
                inp = os.path.join(tmp, "%s_%d.npy" % (model, n))
                make_input(model, n, inp)
                med = {k: [] for k in exes}
                outs = {}
                for _ in range(a.rounds):
                    for k, exe in exes.items():
                        out = os.path.join(tmp, "%s_%d_%s.npy" % (model, n, k))
                        text = run([os.path.join(BIN, "nimble-run"), exe, "--function=main", "--input=@" + inp,
                                    "--threads=%d" % a.threads, "--benchmark=%d" % a.reps, "--output=@" + out])
                        m = re.search(r"median ([0-9.]+) ms", text)
                        med[k].append(float(m.group(1)))
                        outs[k] = out
                a0, a1 = np.load(outs["written"]), np.load(outs["dispatch"])
                err = float(np.max(np.abs(a0 - a1)) / max(float(np.max(np.abs(a0))), 1e-30))
                if err > 1e-4:
                    sys.exit("%s at %d: the outputs differ (relative %.3g)" % (model, n, err))
                t = {k: statistics.median(v) for k, v in med.items()}
                scale = (1.0, "ms") if unit == "ms/sequence" else (1000.0 / n, "us/token")
                row = "| %s | %d | %.3f %s | %.3f %s | %.2f |" % (  # ratio > 1: the second is faster
                    model, n, t["written"] * scale[0], scale[1], t["dispatch"] * scale[0], scale[1],
                    t["written"] / t["dispatch"])
                print(row, flush=True)
                lines.append(row)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
