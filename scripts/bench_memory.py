#!/usr/bin/env python3
"""Allocation counts, allocation time and peak memory of Nimble on the paper's
models, with and without memory planning (docs/perf.md, "Memory").

    /usr/bin/python3 scripts/bench_memory.py [--models lstm_1l,lstm_2l,treelstm,bert_base]
        [--count N] [--reps R] [--nimblec PATH] [--nimble-run PATH] [--json FILE]

Each model is compiled twice from the same .nir:

  unplanned  the -O2 pipeline without plan-memory (`nimblec --print-pipeline`
             minus that pass): every kernel output gets its own alloc_storage,
             freed by manifest-memory's block-local kills (the paper's
             "without memory planning");
  planned    nimblec -O2 (plan-memory: kills on every path, static storages
             coalesced into arenas with NNC's algorithm, dynamic reuse).

and run on the first N inputs (models/make_all.sh) with `nimble-run --profile`
in three configurations: unplanned + system allocator (the baseline: one
malloc per tensor), planned + system allocator (what the compiler alone
saves), planned + pool allocator (the default: the pool recycles what the
compiler could not plan). Each configuration runs R times after one warm-up
(`--benchmark=R`, figures per run, the pool warm) and once cold (a fresh
process: the pool starts empty). Counts and times are compared on the warm
runs, peaks on the cold ones (in a --benchmark process the previous run's
outputs are still alive during the next run).

Reported per model and configuration, summed over the inputs, per run:
requests (allocations), system allocations, time inside the allocator, and
the peak bytes reserved from the system (the memory footprint of storages;
constants are mapped from the executable and not counted). "ideal" is the cold
peak of requested bytes live with `plan-memory{coalesce=false,reuse=false}`
and the system allocator: every tensor in its own storage of its exact size,
freed at its last use on every path (plan-memory's kills), never two live
tensors in the same bytes - what a perfect static planner of that run would
need (the paper compares with TVM's static planner: within 8%).

Resident memory against ONNX Runtime (issue 52), instead of the above:

    /usr/bin/python3 scripts/bench_memory.py --rss [--rss-models bert_base,resnet18,mobilenet_v2]
        [--rss-lengths 16,128] [--rss-batches 1,8] [--threads 1,2] [--rounds 3] [--peers-venv DIR]

BERT-base compiled once (-O2); per length and thread count, in rounds that
alternate the systems, the peak resident set (`/usr/bin/time -f %M`, the
kernel's VmHWM: weights, packed copies, activations, code) of one
`nimble-run --threads=T` on a seeded input of that length, of one ONNX
Runtime process (the peers' virtualenv, scripts/setup_peers.sh) running the
same weights exported by torch.onnx.export (scripts/bench_worker.py) on the
same ids, and of that Python process with onnxruntime and numpy imported
but no session (its baseline); with several lengths, a last row runs
them all one after another in one process of each system (Nimble's
--instances, one ORT session), shortest first, as a server would. Both
systems' outputs are checked against
each other (relative error <= 1e-4) first. The weights' size (the .nbc's
constants) is printed beside, and Nimble's peak over it. resnet18 and
mobilenet_v2 are torchvision's (test/import-onnx/Inputs/torchvision_export.py:
random weights, 224x224 images, one input per --rss-batches batch size),
the same .onnx run by ONNX Runtime and by nimble-import-onnx | nimblec -O2
(the importer beside --nimblec).

Paper (§5, BERT on Intel CPU): memory planning gives 47% fewer buffer
allocations and 75% less allocation time; peak memory within 8% of static
planning.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, REPO)

from models.common import tools  # noqa: E402
from models.common.registry import FULL, VARIANTS  # noqa: E402

MEMORY = re.compile(r"Memory \((\w+) allocator, per run\): (\d+) allocations \((\d+) pool hits, "
                    r"(\d+) from the system\), (\d+) bytes requested, peak (\d+) bytes live, "
                    r"peak (\d+) bytes reserved, ([0-9.]+) ms allocating")
FIELDS = ["allocations", "hits", "system", "requested", "peak_live", "peak_reserved", "alloc_ms"]


def parse_memory(stderr):
    m = MEMORY.search(stderr)
    if not m:
        raise tools.ToolError("no 'Memory (...)' line in nimble-run --profile's output:\n" + stderr[-2000:])
    vals = [int(x) for x in m.groups()[1:7]] + [float(m.group(8))]
    return dict(zip(FIELDS, vals))


def pipeline_replacing(nimblec, name, replacement):
    """The -O2 pipeline with pass `name` replaced (None: removed)."""
    p = subprocess.run([nimblec, "--print-pipeline", "-O2"], capture_output=True, text=True)
    if p.returncode != 0:
        raise tools.ToolError("nimblec --print-pipeline failed: " + p.stderr)
    passes = p.stdout.strip().split(",")
    if name not in passes:
        raise tools.ToolError("no %s in the -O2 pipeline: %s" % (name, p.stdout.strip()))
    out = []
    for x in passes:
        if x == name:
            if replacement:
                out.append(replacement)
        else:
            out.append(x)
    return ",".join(out)


def measure(args, nbc, v, inputs, allocator, reps):
    total = dict.fromkeys(FIELDS, 0)
    peaks = {"peak_live": 0, "peak_reserved": 0}
    for inp in inputs:
        extra = ["--profile", "--allocator=" + allocator]
        if reps:
            extra.append("--benchmark=%d" % reps)
        with tempfile.TemporaryDirectory() as d:
            outs = [os.path.join(d, "%s.npy" % o) for o in v.reference.OUTPUTS]
            p = tools.run_model(args.nimble_run, nbc, v.reference.nimble_inputs(inp.path), outs, extra=extra)
        m = parse_memory(p.stderr)
        for k in ("allocations", "hits", "system", "requested", "alloc_ms"):
            total[k] += m[k]
        for k in peaks:
            peaks[k] = max(peaks[k], m[k])
    total.update(peaks)
    return total


ORT_RSS = r"""
import sys
import numpy as np
import onnxruntime as ort
path, ids, threads, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if path != "-":
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    for f in ids.split(","):  # several: one after another in this session; the last output kept
        got = sess.run(None, {sess.get_inputs()[0].name: np.load(f)})[0]
    np.save(out, got)
"""

EXPORT = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import bench_worker
from models.common.registry import VARIANTS
v = VARIANTS["bert_base"]
ids = v.reference.read_input(sys.argv[3])
bench_worker.onnx_file({"model": "bert_base", "work_dir": sys.argv[2]}, v.reference.load("bert_base"), ids)
"""


def peak_rss_kb(cmd, env=None):
    """Peak resident set of `cmd` in KiB (/usr/bin/time -f %M), or raises."""
    p = subprocess.run(["/usr/bin/time", "-f", "RSS_KB %M"] + cmd, capture_output=True, text=True, env=env)
    m = re.search(r"^RSS_KB (\d+)$", p.stderr, re.M)
    if p.returncode != 0 or not m:
        raise RuntimeError("%s failed (exit %d): %s" % (cmd[0], p.returncode, p.stderr.strip()[-500:]))
    return int(m.group(1))


CNN_EXPORT = os.path.join(REPO, "test", "import-onnx", "Inputs", "torchvision_export.py")


def rss_rows(args, label, nbc, onnx, inputs, shape_name, peer_py, work, reshape=None):
    """Per input (shape -> .npy) and thread count, rounds alternating Nimble,
    ONNX Runtime and ORT's baseline: peak RSS rows. None if the outputs differ."""
    weights = os.path.getsize(nbc)
    print("%s: .nbc %.1f MB (its weights); peak resident MiB over %d rounds (median [min-max])" % (
        label, weights / 1e6, args.rounds))
    hdr = "%7s %7s %22s %22s %22s %12s %12s" % (shape_name, "threads", "Nimble", "ONNX Runtime",
                                                "ORT baseline", "ORT - base", "Nimble/.nbc")
    print(hdr)
    print("-" * len(hdr))
    import numpy as np

    results = []
    for n, x in inputs.items():
        for T in [int(t) for t in args.threads.split(",")]:
            env = dict(os.environ, OMP_NUM_THREADS=str(T), OPENBLAS_NUM_THREADS=str(T), MKL_NUM_THREADS=str(T))
            got = {"nimble": [], "ort": [], "base": []}
            nim_out, ort_out = os.path.join(work, "nimble.npy"), os.path.join(work, "ort.npy")
            for r in range(args.rounds):
                order = ["nimble", "ort", "base"] if r % 2 == 0 else ["base", "ort", "nimble"]
                for s in order:
                    if s == "nimble" and isinstance(x, list):
                        # Several inputs, one after another in one process
                        # (a server's mix): every weight used at every length.
                        listing = os.path.join(work, "mixed.txt")
                        with open(listing, "w") as f:
                            f.write("".join("@%s\n" % os.path.abspath(p) for p in x))
                        outs = os.path.join(work, "mixed.out")
                        os.makedirs(outs, exist_ok=True)
                        cmd = [args.nimble_run, nbc, "--threads=%d" % T, "--instances=" + listing, "--auto-batch=off",
                               "--output-dir=" + outs]
                    elif s == "nimble":
                        cmd = [args.nimble_run, nbc, "--threads=%d" % T, "--input=@" + x, "--output=@" + nim_out]
                    else:
                        xs = ",".join(x) if isinstance(x, list) else x
                        cmd = [peer_py, "-c", ORT_RSS, onnx if s == "ort" else "-", xs, str(T), ort_out]
                    got[s].append(peak_rss_kb(cmd, env) / 1024.0)
            if isinstance(x, list):
                nim_out = os.path.join(work, "mixed.out", "%d.0.npy" % (len(x) - 1))
            a, b = np.load(nim_out), np.load(ort_out)
            if reshape:
                b = b.reshape(reshape)
            err = float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))
            if err > 1e-4:
                print("bench_memory: error: Nimble and ONNX Runtime differ (relative %.2e)" % err, file=sys.stderr)
                return None
            med = {k: statistics.median(x) for k, x in got.items()}
            cell = lambda k: "%.0f [%.0f-%.0f]" % (med[k], min(got[k]), max(got[k]))  # noqa: E731
            print("%7s %7d %22s %22s %22s %12.0f %11.2fx" % (n, T, cell("nimble"), cell("ort"), cell("base"),
                                                           med["ort"] - med["base"], med["nimble"] * 2**20 / weights))
            results.append({"model": label, shape_name: n, "threads": T, "nbc_bytes": weights, "rel_err": err,
                            **{k + "_mib": x for k, x in got.items()}})
    return results


def rss_main(args):
    import numpy as np

    venv = args.peers_venv or os.path.join(REPO, ".peers-venv")
    peer_py = os.path.join(venv, "bin", "python")
    if not os.access(peer_py, os.X_OK):
        print("bench_memory: error: no virtualenv at %s: bash scripts/setup_peers.sh" % venv, file=sys.stderr)
        return 1
    work = tempfile.mkdtemp(prefix="bench_memory_rss.")
    results = []
    for model in [m for m in args.rss_models.split(",") if m]:
        if model == "bert_base":
            v = VARIANTS["bert_base"]
            nbc = os.path.join(work, "bert_base.nbc")
            tools.compile_model(args.nimblec, v.nir, nbc)
            lengths = [int(x) for x in args.rss_lengths.split(",")]
            rng = np.random.default_rng(52)
            ids = {}
            for n in lengths:
                ids[n] = os.path.join(work, "ids_%d.npy" % n)
                np.save(ids[n], rng.integers(0, 30522, n).astype(np.int64))
            if len(lengths) > 1:
                # Every length in one process (shortest first): a weight
                # used with few rows and with many (docs/perf.md, "One
                # packed copy a weight").
                ids["+".join(map(str, lengths))] = [ids[n] for n in lengths]
            subprocess.run([peer_py, "-c", EXPORT, os.path.join(REPO, "scripts"), work, ids[lengths[0]]],
                           check=True, capture_output=True)
            rows = rss_rows(args, "BERT-base", nbc, os.path.join(work, "bert_base.onnx"), ids, "tokens", peer_py,
                            work, reshape=(-1, 768))
        elif model in ("resnet18", "mobilenet_v2"):
            # torchvision's, exported as scripts/bench_imported.py does
            # (224x224, the batch axis dynamic), through nimble-import-onnx.
            batches = [int(x) for x in args.rss_batches.split(",")]
            subprocess.run(["/usr/bin/python3", CNN_EXPORT, work, model, "--size=224",
                            "--batches=" + ",".join(map(str, batches))], check=True, capture_output=True)
            onnx, nir = os.path.join(work, model + ".onnx"), os.path.join(work, model + ".nir")
            nbc = os.path.join(work, model + ".nbc")
            importer = os.path.join(os.path.dirname(args.nimblec), "nimble-import-onnx")
            subprocess.run([importer, onnx, "-o", nir], check=True, capture_output=True)
            tools.compile_model(args.nimblec, nir, nbc)
            xs = {b: os.path.join(work, "%s-x%d.npy" % (model, b)) for b in batches}
            rows = rss_rows(args, model, nbc, onnx, xs, "batch", peer_py, work)
        else:
            print("bench_memory: error: --rss-models: unknown model '%s' (bert_base, resnet18, mobilenet_v2)"
                  % model, file=sys.stderr)
            return 1
        if rows is None:
            return 1
        results += rows
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rss": results}, f, indent=2)
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(FULL))
    ap.add_argument("--count", type=int, default=3, help="inputs per model (default %(default)s)")
    ap.add_argument("--reps", type=int, default=3, help="warm runs per input (default %(default)s)")
    ap.add_argument("--nimblec", default=tools.default_tool("nimblec"))
    ap.add_argument("--nimble-run", dest="nimble_run", default=tools.default_tool("nimble-run"))
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--rss", action="store_true", help="peak resident memory against ONNX Runtime")
    ap.add_argument("--rss-models", default="bert_base",
                    help="--rss: bert_base, resnet18, mobilenet_v2, comma-separated (default %(default)s)")
    ap.add_argument("--rss-lengths", default="16,128", help="--rss: BERT-base's sequence lengths (default %(default)s)")
    ap.add_argument("--rss-batches", default="1,8", help="--rss: the CNNs' batch sizes (default %(default)s)")
    ap.add_argument("--threads", default="1,2", help="--rss: thread counts (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=3, help="--rss: alternating rounds (default %(default)s)")
    ap.add_argument("--peers-venv", help="--rss: the peers' virtualenv (default .peers-venv)")
    args = ap.parse_args(argv)
    if args.rss:
        tools.require_tool(args.nimblec)
        tools.require_tool(args.nimble_run)
        return rss_main(args)
    try:
        tools.require_tool(args.nimblec)
        tools.require_tool(args.nimble_run)
        unplanned_pipeline = pipeline_replacing(args.nimblec, "plan-memory", None)
        ideal_pipeline = pipeline_replacing(args.nimblec, "plan-memory", "plan-memory{coalesce=false,reuse=false}")
    except tools.ToolError as e:
        print("bench_memory: error: %s" % e, file=sys.stderr)
        return 1

    results = {}
    work = tempfile.mkdtemp(prefix="bench_memory.")
    hdr = "%-14s %-22s %9s %9s %9s %10s %11s %11s %11s" % (
        "model", "config", "allocs", "pool hit", "sys alloc", "alloc ms", "live MB", "reserved MB", "ideal MB")
    print(hdr)
    print("-" * len(hdr))
    for name in [n for n in args.models.split(",") if n]:
        v = VARIANTS[name]
        inputs = v.inputs()[: args.count]
        planned = os.path.join(work, name + ".nbc")
        unplanned = os.path.join(work, name + ".unplanned.nbc")
        killed = os.path.join(work, name + ".killed.nbc")
        try:
            tools.compile_model(args.nimblec, v.nir, planned)
            tools.compile_model(args.nimblec, v.nir, unplanned, extra=["--passes=" + unplanned_pipeline])
            tools.compile_model(args.nimblec, v.nir, killed, extra=["--passes=" + ideal_pipeline])
        except tools.ToolError as e:
            print("bench_memory: error: %s" % e, file=sys.stderr)
            return 1
        configs = [("unplanned+system", unplanned, "system"), ("planned+system", planned, "system"),
                   ("planned+pool", planned, "pool")]
        res = {}
        for label, nbc, alloc in configs:
            for state, reps in (("warm", args.reps), ("cold", 0)):
                res[label + "/" + state] = measure(args, nbc, v, inputs, alloc, reps)
        ideal = measure(args, killed, v, inputs, "system", 0)["peak_live"]
        for key, r in res.items():
            print("%-14s %-22s %9d %9d %9d %10.3f %11.3f %11.3f %11.3f" % (
                name, key, r["allocations"], r["hits"], r["system"], r["alloc_ms"],
                r["peak_live"] / 2**20, r["peak_reserved"] / 2**20, ideal / 2**20))
        base, plan, pool = (res["unplanned+system/warm"], res["planned+system/warm"], res["planned+pool/warm"])
        # Peaks from the cold runs: in --benchmark runs the previous run's
        # outputs are still alive while the next one runs.
        plan_c, pool_c = res["planned+system/cold"], res["planned+pool/cold"]
        print("%-14s vs unplanned+system: allocations %+.0f%% (planned), system allocations %+.1f%% (planned+pool); "
              "allocation time %+.0f%% (planned+system), %+.0f%% (planned+pool); "
              "peak vs ideal: live %.2fx, reserved %.2fx (planned+system), %.2fx (planned+pool)" % (
                  name, 100.0 * (plan["allocations"] - base["allocations"]) / max(base["allocations"], 1),
                  100.0 * (pool["system"] - base["system"]) / max(base["system"], 1),
                  100.0 * (plan["alloc_ms"] - base["alloc_ms"]) / max(base["alloc_ms"], 1e-9),
                  100.0 * (pool["alloc_ms"] - base["alloc_ms"]) / max(base["alloc_ms"], 1e-9),
                  plan_c["peak_live"] / max(ideal, 1), plan_c["peak_reserved"] / max(ideal, 1),
                  pool_c["peak_reserved"] / max(ideal, 1)))
        results[name] = {"inputs": len(inputs), "ideal_bytes": ideal, **res}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
