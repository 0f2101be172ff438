#!/usr/bin/env python3
"""Checks Nimble against the PyTorch references on the paper's models.

    /usr/bin/python3 scripts/check_models.py [--models lstm_1l,lstm_2l,treelstm,bert_base]
        [--count N] [--tolerance 1e-4] [--opt -O2] [--threads 1]
        [--nimblec PATH] [--nimble-run PATH] [--keep DIR] [--differential LEVEL]

For each model: compile the .nir with nimblec (weights from the .safetensors
next to it), run nimble-run on every generated input (>= 10 per full-size
model; models/make_all.sh makes weights and inputs), run the PyTorch reference
(models/<m>/reference.py) on the same input and weights, and compare every
output. Prints one line per model with the worst error over its inputs and
outputs, and exits 1 if any model's worst relative error exceeds the
tolerance, a tool fails, or an output has the wrong shape or a NaN.

Relative error of an output a against the reference b: max|a - b| / max|b|
(norm-wise, so entries near zero do not make it meaningless). The max
absolute error is printed too.

Differential testing (--differential -O0, the default): every input also
runs through the model compiled at that level, and its outputs must equal
the --opt outputs bit for bit (the pipelines differ in fusion, memory
planning and simplification, not in arithmetic); the `-O0 bits` column says
how many outputs were identical. --differential none skips it.

Small variants (lstm_small, treelstm_small, bert_small) also work with
--models; their inputs are the committed fixtures.
Tools default to bazel-bin/tools/ ($NIMBLEC / $NIMBLE_RUN override).
"""

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from models.common import tools  # noqa: E402
from models.common.compare import rel_err  # noqa: E402
from models.common.registry import FULL, VARIANTS  # noqa: E402

MIN_INPUTS_FULL = 10


def compare(got, want):
    """(relative error, max abs error, problem or None)."""
    if got.shape != want.shape:
        return float("inf"), float("inf"), "shape %s, expected %s" % (got.shape, want.shape)
    if not np.all(np.isfinite(got)):
        return float("inf"), float("inf"), "non-finite values"
    if got.size == 0:
        return 0.0, 0.0, None
    diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
    return rel_err(got, want), diff, None


def check_model(v, args, work_dir):
    inputs = v.inputs()
    if args.count:
        inputs = inputs[: args.count]
    if v.full and len(inputs) < MIN_INPUTS_FULL:
        raise tools.ToolError("%s: only %d inputs (need >= %d); run models/make_all.sh"
                              % (v.name, len(inputs), MIN_INPUTS_FULL))
    if not os.path.exists(v.weights):
        raise tools.ToolError("%s missing: run models/make_all.sh" % v.weights)
    nbc = os.path.join(work_dir, v.name + ".nbc")
    extra = ["--kernels=" + ("reference" if args.kernels == "reference" else "native")]
    run_extra = ["--kernels=" + args.kernels]
    # oneDNN (library, auto) picks its GEMM kernel per shape and fused
    # post-ops, so -O0 and -O2 agree within float rounding there, not bit for
    # bit: those paths compare the differential builds with rel_err <= 1e-5.
    exact = args.kernels in ("reference", "native")
    tools.compile_model(args.nimblec, v.nir, nbc, opt=args.opt, extra=extra)
    diff_nbc = None
    if args.differential != "none":
        diff_nbc = os.path.join(work_dir, v.name + args.differential + ".nbc")
        tools.compile_model(args.nimblec, v.nir, diff_nbc, opt=args.differential, extra=extra)
    model = v.reference.load(v.name)
    worst = {"rel": 0.0, "abs": 0.0, "where": "-", "same": 0, "outputs": 0}
    problems = []
    for inp in inputs:
        outs = [os.path.join(work_dir, "%s.%s.%s.npy" % (v.name, inp.name, o)) for o in v.reference.OUTPUTS]
        tools.run_model(args.nimble_run, nbc, v.reference.nimble_inputs(inp.path), outs, threads=args.threads,
                        extra=run_extra)
        want = v.reference.run(model, v.reference.read_input(inp.path))
        if diff_nbc:
            douts = [o[:-4] + args.differential + ".npy" for o in outs]
            tools.run_model(args.nimble_run, diff_nbc, v.reference.nimble_inputs(inp.path), douts,
                            threads=args.threads, extra=run_extra)
            for name, a, b in zip(v.reference.OUTPUTS, outs, douts):
                x, y = np.load(a), np.load(b)
                worst["outputs"] += 1
                if x.dtype == y.dtype and x.shape == y.shape and (
                        x.tobytes() == y.tobytes() if exact else compare(x, y)[0] <= 1e-5):
                    worst["same"] += 1
                else:
                    problems.append("%s:%s: %s and %s outputs differ (max abs %.3e)" % (
                        inp.name, name, args.opt, args.differential,
                        float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))))
                        if x.shape == y.shape else float("inf")))
        for name, path, ref in zip(v.reference.OUTPUTS, outs, want):
            rel, diff, problem = compare(np.load(path), ref)
            where = "%s:%s" % (inp.name, name)
            if problem:
                problems.append("%s: %s" % (where, problem))
            if args.verbose:
                print("  %-28s rel %.3e  abs %.3e%s" % (where, rel, diff, "  " + problem if problem else ""))
            if rel > worst["rel"] or worst["where"] == "-":
                worst["rel"], worst["where"] = rel, where
            worst["abs"] = max(worst["abs"], diff)
    return len(inputs), worst, problems


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(FULL),
                    help="comma-separated variants (default: %(default)s; also: lstm_small, "
                         "treelstm_small, bert_small)")
    ap.add_argument("--count", type=int, default=0, help="use only the first N inputs of each model")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--opt", default="-O2", help="nimblec optimisation level (default %(default)s)")
    ap.add_argument("--threads", type=int, default=1, help="nimble-run --threads")
    ap.add_argument("--kernels", default="reference", choices=["reference", "native", "library", "auto"],
                    help="the kernel path (default %(default)s): nimble-run --kernels, with native"
                         " kernels compiled in (nimblec --kernels=native) unless reference")
    ap.add_argument("--differential", default="-O0",
                    help="also compile at this level and require bit-identical outputs (within"
                         " rel_err 1e-5 on the library and auto paths; default %(default)s; 'none' to skip)")
    ap.add_argument("--nimblec", default=tools.default_tool("nimblec"))
    ap.add_argument("--nimble-run", dest="nimble_run", default=tools.default_tool("nimble-run"))
    ap.add_argument("--keep", metavar="DIR", help="keep the .nbc and outputs in DIR")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every input's error")
    args = ap.parse_args(argv)

    names = [n for n in args.models.split(",") if n]
    for n in names:
        if n not in VARIANTS:
            ap.error("unknown model %r (have %s)" % (n, ", ".join(VARIANTS)))
    try:
        tools.require_tool(args.nimblec)
        tools.require_tool(args.nimble_run)
    except tools.ToolError as e:
        print("check_models: error: %s" % e, file=sys.stderr)
        return 1

    work_dir = args.keep or tempfile.mkdtemp(prefix="check_models.")
    os.makedirs(work_dir, exist_ok=True)
    failed = False
    print("%-15s %7s %14s %14s  %-28s %-9s %s" % ("model", "inputs", "worst rel err", "max abs err", "worst at",
                                               "-O0 bits" if args.differential == "-O0" else "diff bits", "status"))
    try:
        for n in names:
            v = VARIANTS[n]
            try:
                count, worst, problems = check_model(v, args, work_dir)
            except (tools.ToolError, FileNotFoundError) as e:
                failed = True
                print("%-15s %7s %14s %14s  %-28s %-9s FAIL" % (n, "-", "-", "-", "-", "-"))
                print("  " + str(e).replace("\n", "\n  "), file=sys.stderr)
                continue
            bad = problems or not worst["rel"] <= args.tolerance
            failed |= bool(bad)
            same = "%d/%d" % (worst["same"], worst["outputs"]) if worst["outputs"] else "-"
            print("%-15s %7d %14.3e %14.3e  %-28s %-9s %s" % (
                n, count, worst["rel"], worst["abs"], worst["where"], same,
                "FAIL" if bad else "ok (<= %g)" % args.tolerance))
            for p in problems:
                print("  " + p, file=sys.stderr)
    finally:
        if not args.keep:
            shutil.rmtree(work_dir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
