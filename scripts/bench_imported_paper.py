#!/usr/bin/env python3
"""The paper's BERT-base imported from ONNX against its hand-written .nir and
ONNX Runtime, alternating: `scripts/bench_imported.py --models bert_base`
(its docstring says what is measured and how).

Why this model: models/bert/bert_base.nir is the hand-written program, and
its PyTorch reference (models/bert/reference.py) with the same weights is
what scripts/bench_worker.py exports for ONNX Runtime. Importing that .onnx
gives a program of the same model and weights, so the two Nimble columns
differ only by what the importer writes (issue 47: "the imported BERT within
5% of the hand-written .nir").
"""

import os
import statistics
import subprocess
import sys

import numpy as np

import benchlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIXED_SEED = 19  # scripts/bench_models.py's fixed-size inputs

ORT_WORKER = r"""
import sys, time, numpy as np, onnxruntime as ort
onnx_path, x_path, T, reps, warmup = sys.argv[1:6]
T, reps, warmup = int(T), int(reps), int(warmup)
x = np.load(x_path)
{ort_session}
version = ort.__version__
np.save(sys.argv[6], run()[0])
{time_run}
""".replace("{ort_session}", benchlib.ORT_SESSION.strip("\n")).replace("{time_run}", benchlib.TIME_RUN.strip("\n"))


def must(cmd, what, T=1):
    p = subprocess.run(cmd, capture_output=True, text=True, env=benchlib.thread_env(T))
    if p.returncode != 0:
        sys.exit("bench_imported.py: %s failed (exit %d): %s\n%s" % (what, p.returncode, " ".join(cmd),
                                                                     p.stderr[-2000:]))
    return p


def rel(a, b):
    if a.shape != b.shape:
        return float("inf")
    return float(np.abs(a - b).max()) / float(np.abs(b).max())


def bert_base(args, work, threads, lengths, tool, peer):
    """Runs the rounds; prints and returns the markdown lines."""
    import torch

    sys.path.insert(0, ROOT)
    sys.path.insert(0, HERE)
    from bench_worker import onnx_file
    from models.common.registry import VARIANTS

    v = VARIANTS["bert_base"]
    if not os.path.exists(v.weights):
        sys.exit("bench_imported.py: %s is missing: /usr/bin/python3 models/bert/make_weights.py bert_base"
                 % v.weights)
    model = v.reference.load("bert_base")
    rng = np.random.default_rng(FIXED_SEED)
    cases = []
    for n in lengths:
        ids = rng.integers(1000, 30522, size=n).astype(np.int64)
        ids[0], ids[-1] = 101, 102
        x = os.path.join(work, "bert_base.ids_%d.npy" % n)
        np.save(x, ids)
        ref = v.reference.run(model, torch.from_numpy(ids))[0]
        cases.append((n, x, ref))
    onnx_path = onnx_file({"model": "bert_base", "work_dir": work}, model, torch.from_numpy(np.load(cases[0][1])))
    del model
    hw_nbc, imp_nir, imp_nbc = (os.path.join(work, f) for f in ("bert_base.hand.nbc", "bert_base.imported.nir",
                                                                 "bert_base.imported.nbc"))
    must([tool("nimblec"), "-O2", v.nir, "-o", hw_nbc], "nimblec of the hand-written .nir")
    must([tool("nimble-import-onnx"), onnx_path, "-o", imp_nir], "nimble-import-onnx")
    p = must([tool("nimblec"), "-O2", "--stats", imp_nir, "-o", imp_nbc], "nimblec of the imported .nir")
    fused = [l.split()[0] for l in p.stderr.splitlines() if "fuse-attention" in l]
    print("bert_base: %s imported; fuse-attention replaced %s chains" % (os.path.basename(onnx_path),
                                                                         fused[0] if fused else "no"))
    res = {}  # (T, n) -> {"hand": [ms per round], "imported": [...], "ort": [...], "load": [...]}
    errs = {"hand": 0.0, "imported": 0.0, "ort": 0.0}
    version = None
    for r in range(args.rounds):
        for T in threads:
            for n, x, ref in cases:
                cell = res.setdefault((T, n), {"hand": [], "imported": [], "ort": [], "load": []})
                cell["load"].append(benchlib.load_avg())
                print("round %d, %d thread%s, %d tokens: load %.2f" % (r + 1, T, "s" if T > 1 else "", n,
                                                                      cell["load"][-1]), file=sys.stderr)
                for system, nbc in (("hand", hw_nbc), ("imported", imp_nbc)):
                    out = os.path.join(work, "bert_base.%s.%d.%d.npy" % (system, T, n))
                    p = must([tool("nimble-run"), nbc, "--input=@" + x, "--output=@" + out, "--threads=%d" % T,
                              "--benchmark=%d" % args.reps, "--kernels=" + args.kernels], "nimble-run", T)
                    cell[system].append(float(p.stdout.split("median ")[1].split(" ms")[0]))
                    errs[system] = max(errs[system], rel(np.load(out), ref))
                if peer:
                    out = os.path.join(work, "bert_base.ort.%d.%d.npy" % (T, n))
                    p = must([peer, "-c", ORT_WORKER, onnx_path, x, str(T), str(args.reps), str(args.warmup), out],
                             "the ONNX Runtime worker", T)
                    ms, version = p.stdout.split()
                    cell["ort"].append(float(ms))
                    errs["ort"] = max(errs["ort"], rel(np.load(out), ref))
    bad = [k for k, e in errs.items() if e > 1e-4]
    if bad:
        sys.exit("bench_imported.py: bert_base: %s differ from the PyTorch module (%s)" % (
            ", ".join(bad), ", ".join("%s %.2g" % kv for kv in errs.items())))
    fmt = lambda xs: ", ".join("%.1f" % t for t in xs)  # noqa: E731
    lines = ["BERT-base (models/bert), %d alternating rounds, ms per round (hand-written .nir / imported "
             "from .onnx / ONNX Runtime %s on that .onnx); ratios of the medians over rounds:" % (
                 args.rounds, version or "(not available)"),
             "",
             "| threads | tokens | load | hand-written | imported | ORT | imported / hand-written | ORT / imported |",
             "|---|---:|---|---|---|---|---:|---:|"]
    for (T, n), c in sorted(res.items()):
        med = {k: statistics.median(c[k]) for k in ("hand", "imported", "ort") if c[k]}
        lines.append("| %d | %d | %s | %s | %s | %s | %.2f | %s |" % (
            T, n, fmt(c["load"]), fmt(c["hand"]), fmt(c["imported"]), fmt(c["ort"]) or "-",
            med["imported"] / med["hand"], "%.2f" % (med["ort"] / med["imported"]) if "ort" in med else "-"))
    lines += ["", "Largest difference from the PyTorch module over largest |y|: hand-written %.1e, imported "
              "%.1e, ORT %.1e." % (errs["hand"], errs["imported"], errs["ort"])]
    print("\n".join(lines))
    return lines
