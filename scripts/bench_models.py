#!/usr/bin/env python3
"""Side-by-side latency of Nimble and PyTorch eager on the paper's models.

    /usr/bin/python3 scripts/bench_models.py [--models lstm_1l,lstm_2l,treelstm,bert_base]
        [--threads 1,2] [--reps 20] [--warmup 3] [--count N] [--opt -O2]
        [--profile-reps 5] [--pytorch-only] [--json FILE]
        [--nimblec PATH] [--nimble-run PATH]

Both systems run the same inputs (models/make_all.sh generates them: 12 per
model) with the same weights:

  * Nimble: the .nir compiled once by nimblec; per input one
    `nimble-run --threads=T --benchmark=REPS` (it warms up once, then times
    REPS runs in-process and prints their median), and one more run with
    `--profile` for the time split (kernels / shape functions / other VM work,
    from its `Time split:` line; separate so that profiling does not inflate
    the latency). Each input's outputs are also checked against the PyTorch
    reference (relative error <= --tolerance) - timing a wrong answer means
    nothing.
  * PyTorch eager (the paper's baseline): models/<m>/reference.py under
    torch.inference_mode() with torch.set_num_threads(T): LSTM one loop
    iteration per token (nn.LSTMCell per layer), Tree-LSTM Python recursion,
    BERT plain modules. WARMUP untimed runs, then REPS timed runs; median.
  * onnxruntime, when importable: the same weights exported with
    torch.onnx.export (LSTM as nn.LSTM -> ONNX LSTM, BERT with a dynamic
    sequence axis; Tree-LSTM has no ONNX form). Otherwise the script says it
    is absent.

Per model and thread count the table shows time per unit of work: the sum of
the per-input medians divided by the total tokens (LSTM, BERT) or tree nodes
(Tree-LSTM: leaves + internal nodes, one cell each); ratio = PyTorch / Nimble
(> 1: Nimble is faster); and Nimble's split as % of its profiled total.
Exit status 1 if a tool fails or an output mismatches.
"""

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from models.common import tools  # noqa: E402
from models.common.registry import FULL, VARIANTS  # noqa: E402


def rel_err(got, want):
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        return float("inf")
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    diff = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
    return diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))


def time_median_ms(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


# ---- onnxruntime (optional) ------------------------------------------------------------------


def have_onnxruntime():
    return importlib.util.find_spec("onnxruntime") is not None


class _LSTMForOnnx(torch.nn.Module):
    """nn.LSTM with the reference's weights: xs [T, I] -> (h, c) of the last layer."""

    def __init__(self, ref):
        super().__init__()
        cells = ref.cells
        self.lstm = torch.nn.LSTM(cells[0].input_size, cells[0].hidden_size, len(cells))
        with torch.no_grad():
            for k, cell in enumerate(cells):
                for p in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    getattr(self.lstm, "%s_l%d" % (p, k)).copy_(getattr(cell, p))

    def forward(self, xs):
        _, (h, c) = self.lstm(xs[:, None, :])
        return h[-1], c[-1]


def onnx_session(v, model, example, threads, work_dir):
    """An onnxruntime session for the model, or (None, reason)."""
    import onnxruntime as ort  # noqa: F401  (checked by have_onnxruntime)

    path = os.path.join(work_dir, "%s.onnx" % v.name)
    if not os.path.exists(path):
        if v.family == "lstm":
            module, names, outs = _LSTMForOnnx(model).eval(), ["xs"], ["h", "c"]
        elif v.family == "bert":
            module, names, outs = model, ["ids"], ["hidden"]
        else:
            return None, "no ONNX form (recursion over a tree)"
        dyn = {names[0]: {0: "n"}}
        if v.family == "bert":
            dyn["hidden"] = {0: "n"}
        with torch.inference_mode():
            torch.onnx.export(module, (example,), path, input_names=names, output_names=outs,
                              dynamic_axes=dyn, opset_version=14)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"]), None


# ---- one model -----------------------------------------------------------------------------


def bench_model(v, args, work_dir, use_ort):
    inputs = v.inputs()
    if args.count:
        inputs = inputs[: args.count]
    model = v.reference.load(v.name)
    xs = [v.reference.read_input(i.path) for i in inputs]
    refs = [v.reference.run(model, x) for x in xs]
    total_work = sum(i.work for i in inputs)
    nbc = None
    if not args.pytorch_only:
        nbc = os.path.join(work_dir, v.name + ".nbc")
        tools.compile_model(args.nimblec, v.nir, nbc, opt=args.opt)
    rows = []
    problems = []
    for T in args.threads:
        torch.set_num_threads(T)
        row = {"model": v.name, "threads": T, "unit": v.unit, "inputs": len(inputs), "work": total_work}
        # PyTorch eager.
        pt = [time_median_ms(lambda x=x: v.reference.run(model, x), args.warmup, args.reps) for x in xs]
        row["pytorch_ms"] = pt
        row["pytorch_us_per_unit"] = sum(pt) * 1e3 / total_work
        # Nimble.
        if nbc:
            med, split = [], {"kernels": 0.0, "shape": 0.0, "other": 0.0, "total": 0.0}
            for inp, ref in zip(inputs, refs):
                outs = [os.path.join(work_dir, "%s.%s.%s.npy" % (v.name, inp.name, o))
                        for o in v.reference.OUTPUTS]
                nimble_in = v.reference.nimble_inputs(inp.path)
                p = tools.run_model(args.nimble_run, nbc, nimble_in, outs, threads=T, benchmark=args.reps)
                med.append(tools.parse_latency(p.stdout)["median"])
                for name, path, want in zip(v.reference.OUTPUTS, outs, ref):
                    e = rel_err(np.load(path), want)
                    if not e <= args.tolerance:
                        problems.append("%s %s:%s (threads %d): Nimble's output differs from PyTorch, "
                                        "relative error %.3e" % (v.name, inp.name, name, T, e))
                if args.profile_reps:
                    p = tools.run_model(args.nimble_run, nbc, nimble_in, outs, threads=T,
                                        benchmark=args.profile_reps, profile=True)
                    for k, val in tools.parse_time_split(p.stderr).items():
                        split[k] += val
            row["nimble_ms"] = med
            row["nimble_us_per_unit"] = sum(med) * 1e3 / total_work
            row["ratio"] = row["pytorch_us_per_unit"] / row["nimble_us_per_unit"]
            if args.profile_reps and split["total"] > 0:
                row["split_pct"] = {k: 100 * split[k] / split["total"] for k in ("kernels", "shape", "other")}
        # onnxruntime.
        if use_ort:
            sess, why = onnx_session(v, model, xs[0], T, work_dir)
            if sess is None:
                row["ort_note"] = why
            else:
                name = sess.get_inputs()[0].name
                feeds = [{name: x.numpy()} for x in xs]
                ort_ms = []
                for f, ref in zip(feeds, refs):
                    got = sess.run(None, f)
                    for g, want in zip(got, ref):
                        e = rel_err(np.asarray(g).reshape(want.shape), want)
                        if not e <= args.tolerance:
                            problems.append("%s (threads %d): onnxruntime differs from PyTorch, "
                                            "relative error %.3e" % (v.name, T, e))
                    ort_ms.append(time_median_ms(lambda f=f: sess.run(None, f), args.warmup, args.reps))
                row["ort_ms"] = ort_ms
                row["ort_us_per_unit"] = sum(ort_ms) * 1e3 / total_work
        rows.append(row)
        print_row(row, use_ort)
        sys.stdout.flush()
    return rows, problems


# ---- output -------------------------------------------------------------------------------

HEADER = "%-14s %7s %5s %15s %15s %10s  %-24s" % (
    "model", "threads", "unit", "Nimble us/unit", "PyTorch us/unit", "PT/Nimble", "Nimble kern/shape/other")


def print_row(r, use_ort):
    fmt = lambda x: "%15.2f" % x if x is not None else "%15s" % "-"  # noqa: E731
    split = r.get("split_pct")
    split_s = "%5.1f%% /%5.1f%% /%5.1f%%" % (split["kernels"], split["shape"], split["other"]) if split else "-"
    line = "%-14s %7d %5s %s %s %10s  %-24s" % (
        r["model"], r["threads"], r["unit"], fmt(r.get("nimble_us_per_unit")), fmt(r["pytorch_us_per_unit"]),
        "%.2fx" % r["ratio"] if "ratio" in r else "-", split_s)
    if use_ort:
        line += " %14s" % ("%.2f" % r["ort_us_per_unit"] if "ort_us_per_unit" in r else r.get("ort_note", "-"))
    print(line)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(FULL), help="comma-separated variants (default: %(default)s)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default: %(default)s)")
    ap.add_argument("--reps", type=int, default=20, help="timed runs per input (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed PyTorch/onnxruntime runs first")
    ap.add_argument("--profile-reps", type=int, default=5,
                    help="runs of the separate `nimble-run --profile` (0: no split)")
    ap.add_argument("--count", type=int, default=0, help="use only the first N inputs of each model")
    ap.add_argument("--opt", default="-O2", help="nimblec optimisation level (default %(default)s)")
    ap.add_argument("--tolerance", type=float, default=1e-4, help="output check against PyTorch")
    ap.add_argument("--pytorch-only", action="store_true", help="skip Nimble (no tools needed)")
    ap.add_argument("--no-ort", action="store_true", help="skip onnxruntime even if importable")
    ap.add_argument("--json", metavar="FILE", help="also write every measurement as JSON")
    ap.add_argument("--nimblec", default=tools.default_tool("nimblec"))
    ap.add_argument("--nimble-run", dest="nimble_run", default=tools.default_tool("nimble-run"))
    ap.add_argument("--keep", metavar="DIR", help="keep the .nbc, .onnx and outputs in DIR")
    args = ap.parse_args(argv)
    args.threads = [int(t) for t in args.threads.split(",") if t]
    names = [n for n in args.models.split(",") if n]
    for n in names:
        if n not in VARIANTS:
            ap.error("unknown model %r (have %s)" % (n, ", ".join(VARIANTS)))
    if not args.pytorch_only:
        try:
            tools.require_tool(args.nimblec)
            tools.require_tool(args.nimble_run)
        except tools.ToolError as e:
            print("bench_models: error: %s (or use --pytorch-only)" % e, file=sys.stderr)
            return 1
    use_ort = not args.no_ort and have_onnxruntime()

    print("CPU: %s; %d logical CPUs; PyTorch %s; %d timed runs per input after warm-up"
          % (cpu_name(), os.cpu_count() or 0, torch.__version__, args.reps))
    if not use_ort:
        print("onnxruntime: %s; no onnxruntime column"
              % ("skipped (--no-ort)" if args.no_ort else "absent (not importable by %s)" % sys.executable))
    print("unit: us per token (LSTM, BERT) or per tree node (Tree-LSTM); PT/Nimble > 1: Nimble faster;"
          " split: % of Nimble's profiled time")
    print(HEADER + (" %14s" % "ORT us/unit" if use_ort else ""))

    work_dir = args.keep or tempfile.mkdtemp(prefix="bench_models.")
    os.makedirs(work_dir, exist_ok=True)
    all_rows, failed = [], False
    try:
        for n in names:
            try:
                rows, problems = bench_model(VARIANTS[n], args, work_dir, use_ort)
            except (tools.ToolError, FileNotFoundError) as e:
                failed = True
                print("%-14s FAILED" % n)
                print("  " + str(e).replace("\n", "\n  "), file=sys.stderr)
                continue
            all_rows += rows
            for p in problems:
                failed = True
                print("  MISMATCH: " + p, file=sys.stderr)
    finally:
        if not args.keep:
            shutil.rmtree(work_dir, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu_name(), "torch": torch.__version__, "reps": args.reps,
                       "rows": all_rows}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
