#!/usr/bin/env python3
"""Side-by-side latency of Nimble, PyTorch eager, ONNX Runtime and IREE on the
paper's models, with the thread count of every system held and shown.

    /usr/bin/python3 scripts/bench_models.py [--models lstm_1l,lstm_2l,treelstm,bert_base]
        [--threads 1,2] [--lengths 8,32,128] [--bert-lengths 16,64,128] [--count 12]
        [--reps 10] [--rounds 1] [--warmup 2] [--profile-reps 2] [--systems nimble,imported,pytorch,onnxruntime,iree]
        [--json FILE] [--plot DIR] [--markdown FILE] [--peers-venv DIR]
        [--quiet-load 1.0] [--max-wait 60] [--no-floors]

Each system and thread count T runs in its own process, started with
OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = MKL_NUM_THREADS = T (torch.set_num_threads
alone does not reach Debian's OpenBLAS: issue 19), and its CPU time is taken
beside its wall time. Every figure is printed with the cores it used (CPU / wall);
a system that used more than T + 0.15 cores fails the run (exit 1).

  * Nimble: the .nir compiled once by nimblec; per input one
    `nimble-run --threads=T --benchmark=REPS` (one warm-up, REPS timed runs,
    their median), its outputs checked against PyTorch; cores used over that
    whole process (loading included). A separate `--profile` run per
    fixed-size input gives the time split (kernels / shape functions / other
    VM work), so that profiling does not inflate the latency.
  * Nimble imported (issue 47; LSTM and BERT-base): the .onnx that ONNX
    Runtime runs (written once by scripts/bench_worker.py's exporter, in this
    process, and shared with the ORT worker) through nimble-import-onnx and
    nimblec at the same --opt, then timed as Nimble is. The column
    imported/Nimble compares it with the hand-written .nir (1.00: the same
    speed; above 1 the imported program is slower).
  * PyTorch eager (the papers' baseline), ONNX Runtime and IREE: one
    scripts/bench_worker.py process per system and T (its docstring says how
    each is set up); cores used over the timed runs. ONNX Runtime and IREE run
    with the virtualenv of scripts/setup_peers.sh (--peers-venv, default
    .peers-venv); when absent the benchmark says how to get them and goes on.
    Every peer is checked against the PyTorch reference (<= --tolerance) before
    it is timed.

Two tables. Fixed sizes, as the papers report them: LSTM at T = --lengths
tokens in us/token, BERT-base at n = --bert-lengths in ms/sequence (seeded
inputs generated here), Tree-LSTM over the seeded trees of models/make_all.sh
in us/node (sum of medians / nodes). Then the mixed-length aggregate: the
first --count seeded inputs of LSTM and BERT (8-128 and 16-128 tokens),
sum of medians / total tokens. PyTorch/Nimble > 1: Nimble is faster.

Floors (issues 12 and 13; scripts/floors.py, skipped with --no-floors): before
the first model, the read bandwidth of each model's working set and the GEMM
rates of oneDNN and the generated kernel at M = 128 are measured at each T,
and every fixed-size Nimble row gets a floor (BERT-base's roofline per GEMM
shape: arithmetic at oneDNN's rates or the weights read from DRAM; one read
of each LSTM layer's W_hh per token plus the batched input projections;
Tree-LSTM's per-node roofline) and Nimble / floor. With ONNX Runtime in the
run the table also has ORT / Nimble.

Alternating rounds (issue 52: a lead counts when it holds across them):
--rounds N times every system N times in turn at each model and thread
count (Nimble, the peers, Nimble, the peers, ...), so that a slow spell of
a shared machine falls on all of them. Each table figure is then the median
of the rounds' medians, and a list after the tables gives each fixed
input's ratio of every peer to Nimble round by round (with their median):
a ratio whose rounds straddle 1 is level, not a lead. With --batch, a round
times Nimble one at a time and auto-batched and then PyTorch, and the list
gives auto-batched / one at a time and / PyTorch hand-batched per round.

Before each model block the 1-minute load is read (the benchmark waits up to
--max-wait seconds for it to drop to --quiet-load, then runs anyway) and
printed. Progress lines go to stderr. --json keeps everything (header, one
row per system / model / length / threads with median, runs, cores used;
every input's median for the plots; Nimble's split); --plot DIR writes PNGs
(scripts/bench_plot.py), each stamped with the run's commit and date (in the
image, a PNG tEXt chunk and a sidecar DIR/NAME.json; test/docs checks that
docs/perf.md's plots are not older than its tables); --markdown FILE the
header and tables for docs/perf.md. Exit 1 if a tool fails, an output mismatches or a thread count
was not held.

Auto-batching throughput (issue 17), instead of the latency tables:

    /usr/bin/python3 scripts/bench_models.py --batch 1,8,64 [--models treelstm,lstm_1l,lstm_2l]
        [--pool 64] [--threads 1] [--reps 3] [--warmup 1] [--json FILE] [--keep DIR]

A seeded pool of --pool instances per model (scripts/make_instances.py:
Tree-LSTM 1..40 leaves incl. a single leaf and two 40-leaf chains, LSTM
1..100 tokens) is processed at each batch size B in chunks of B instances, by
  * Nimble auto-batched: one `nimble-run --instances=CHUNK --auto-batch=on
    --threads=T --benchmark=REPS` per chunk; time = sum of the chunks' medians;
  * Nimble one-at-a-time: the same with `--auto-batch=off`, over the same
    chunks (measured like auto-batched, so that their ratio compares like
    with like: on a loaded machine a median of short runs is less often
    preempted than one of long runs, which favours small chunks);
  * PyTorch one-at-a-time: reference.run on each instance in turn (the same
    figure on every batch row); a timed run is a pass over the whole pool;
  * PyTorch hand-batched: each chunk one call of pack_padded_sequence through
    nn.LSTM (LSTM) or level-by-level batching as DGL does (Tree-LSTM), see
    models/<m>/reference.py; checked against the one-at-a-time reference
    within 1e-5 before it is timed; a timed run is a pass over all chunks.
Nimble's figures are sums of per-chunk medians (one process per chunk),
PyTorch's medians of whole-pool passes: on a quiet machine the same thing;
on a loaded one short runs are preempted less often, which favours Nimble at
small batch sizes (compare Nimble with Nimble there).
Each system and T in its own process with the BLAS threads pinned, as above;
every Nimble output is checked against PyTorch (--tolerance). Printed per
model, T and B: instances/s (cores used), the ratios auto-batched / Nimble
one-at-a-time, / PyTorch one-at-a-time, / PyTorch hand-batched (> 1: auto-
batched is faster), and from a separate `--profile` run over the first chunk
the scheduler's share of the batch's time and kernel calls per launch.
--plot and --markdown are not supported with --batch.
"""

import argparse
import importlib.util
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import benchlib  # noqa: E402
import floors  # noqa: E402
from bench_worker import rel_err  # noqa: E402
from models.common import tools  # noqa: E402
from models.common.registry import FULL, REPO_ROOT, VARIANTS  # noqa: E402

PEERS = ("onnxruntime", "iree")
BATCH_MODELS = ("treelstm", "lstm_1l", "lstm_2l")
PEER_MODULES = {"onnxruntime": "onnxruntime", "iree": "iree.runtime"}
PEER_DISTS = {"onnxruntime": "onnxruntime", "iree": "iree-base-runtime"}
FIXED_SEED = 19  # the issue's number: the fixed-size inputs are not the models' seeded set


def progress(msg):
    print("[bench %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


# ---- the machine header -----------------------------------------------------------------------


def check_blas_core(doc):
    """Asks the OpenBLAS PyTorch loads (in a process of its own) which core it runs, sets
    OPENBLAS_CORETYPE for every peer when that is below this CPU, and records it in the header."""
    env = dict(os.environ)
    with open("/proc/cpuinfo") as f:
        c = benchlib.settle_openblas_core("/usr/bin/python3", env, f.read())
    if c["set"]:
        BLAS_ENV["OPENBLAS_CORETYPE"] = c["set"]
    if c.get("final_config"):
        doc["header"]["blas"] = "%s (%s)" % (c["final_config"], c["path"])
    doc["header"]["blas_core"] = c
    progress(c["line"])


def note_worker_core(doc, res, what):
    """A PyTorch worker's own report of its OpenBLAS core: a core below the CPU's withdraws the
    PyTorch ratios (the header says so)."""
    c = doc["header"].get("blas_core")
    if not c or not res.get("blas_core"):
        return
    if benchlib.openblas_core_verdict(res["blas_core"], c["fitting"]) is False and c.get("fair") is not False:
        c["fair"] = False
        c["final"] = res["blas_core"]
        c["line"] = benchlib.openblas_core_line(c) + " (%s reported %s)" % (what, res["blas_core"])


def blas_description():
    """The BLAS library PyTorch has loaded in this process, with OpenBLAS's own config line."""
    a = torch.ones(8, 8)
    a @ a  # noqa: B018  (loads the BLAS)
    libs = []
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        base = os.path.basename(path).lower()
        if path.startswith("/") and ("blas" in base or "mkl" in base) and path not in libs:
            libs.append(path)
    import ctypes

    for path in libs:
        try:
            f = ctypes.CDLL(path).openblas_get_config
            f.restype = ctypes.c_char_p
            return "%s (%s)" % (f().decode(), os.path.realpath(path))
        except (OSError, AttributeError):
            continue
    return ", ".join(os.path.realpath(p) for p in libs) or "none found in the process (reference BLAS?)"


def peer_python(venv):
    py = os.path.join(venv, "bin", "python")
    return py if os.path.isfile(py) and os.access(py, os.X_OK) else None


def peer_versions(python):
    """{'onnxruntime': version or None, 'iree': ...} as the peers' interpreter sees them."""
    code = ("import importlib.metadata as m, importlib.util as u, json\n"
            "def v(mod, dist):\n"
            "    try:\n"
            "        return m.version(dist) if u.find_spec(mod.split('.')[0]) else None\n"
            "    except Exception:\n"
            "        return None\n"
            "print(json.dumps({%s}))" % ", ".join("%r: v(%r, %r)" % (p, PEER_MODULES[p], PEER_DISTS[p]) for p in PEERS))
    try:
        p = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
        return json.loads(p.stdout) if p.returncode == 0 else {}
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}


# ---- inputs -------------------------------------------------------------------------------------


class Case:
    """One input: where it is, its size, the table it belongs to, the reference outputs."""

    def __init__(self, name, path, length, table):
        self.name, self.path, self.length, self.table = name, path, length, table
        self.refs = []


def fixed_cases(v, args, work_dir):
    if v.family == "treelstm":
        return [Case(i.name, i.path, i.work, "fixed") for i in v.inputs()]
    rng = np.random.default_rng(FIXED_SEED)
    out = []
    lengths = args.lengths if v.family == "lstm" else args.bert_lengths
    for n in lengths:
        if v.family == "lstm":
            x = rng.normal(0.0, 0.4, size=(n, v._variants.VARIANTS[v.name]["input"])).astype(np.float32)
        else:
            vocab = v._variants.VARIANTS[v.name]["vocab"]
            if vocab > 2000:  # word pieces between [CLS] and [SEP], like models/bert/make_inputs.py
                x = rng.integers(1000, vocab, size=n).astype(np.int64)
                x[0], x[-1] = 101, 102
            else:  # bert_small
                x = rng.integers(0, vocab, size=n).astype(np.int64)
        path = os.path.join(work_dir, "%s.fixed_%d.npy" % (v.name, n))
        np.save(path, x)
        out.append(Case("fixed_%d" % n, path, n, "fixed"))
    return out


def mixed_cases(v, args):
    n = pick(args.count, v.name)
    if v.family == "treelstm" or n == 0:
        return []
    return [Case(i.name, i.path, i.work, "mixed") for i in v.inputs()[:n]]


def write_references(v, model, cases, work_dir):
    for c in cases:
        outs = v.reference.run(model, v.reference.read_input(c.path))
        for name, o in zip(v.reference.OUTPUTS, outs):
            path = os.path.join(work_dir, "%s.%s.ref.%s.npy" % (v.name, c.name, name))
            np.save(path, o)
            c.refs.append(path)


# ---- running the systems ----------------------------------------------------------------------


# Set by check_blas_core() before any peer runs: OPENBLAS_CORETYPE when OpenBLAS misdetects
# this CPU (benchlib.settle_openblas_core).
BLAS_ENV = {}


def thread_env(T):
    return benchlib.thread_env(T, BLAS_ENV)


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def compile_nimble(args, nir, nbc, what):
    """nimblec --opt NIR -o NBC with native kernels (reference ones when --kernels=reference)."""
    kernels = "reference" if args.kernels == "reference" else "native"
    progress("%s: nimblec %s --kernels=%s" % (what, args.opt, kernels))
    tools.compile_model(args.nimblec, nir, nbc, opt=args.opt, extra=["--kernels=" + kernels])
    return nbc


def imported_nbc(v, args, work_dir, example):
    """The model's .onnx (the file ONNX Runtime runs: bench_worker.onnx_file writes it once into
    work_dir and the ORT worker finds it there) through nimble-import-onnx and nimblec --opt."""
    import bench_worker

    model = v.reference.load(v.name)
    x = torch.from_numpy(np.load(example.path))
    onnx = bench_worker.onnx_file({"model": v.name, "work_dir": work_dir}, model, x)
    del model
    nir, nbc = os.path.join(work_dir, v.name + ".imported.nir"), os.path.join(work_dir, v.name + ".imported.nbc")
    progress("%s: nimble-import-onnx" % v.name)
    p = subprocess.run([args.nimble_import_onnx, onnx, "-o", nir], capture_output=True, text=True)
    if p.returncode != 0:
        raise tools.ToolError("nimble-import-onnx failed (exit %d): %s" % (p.returncode, p.stderr[-3000:]))
    return compile_nimble(args, nir, nbc, v.name + " imported")


def run_nimble(v, nbc, cases, T, args, work_dir, problems, profile=True):
    """[(case, median_ms, runs, cpu_s, wall_s)] and the summed time split of the fixed inputs."""
    out, split = [], {"kernels": 0.0, "shape": 0.0, "other": 0.0, "total": 0.0}
    for c in cases:
        tag = os.path.splitext(os.path.basename(nbc))[0]  # lstm_1l or lstm_1l.imported
        outs = [os.path.join(work_dir, "%s.%s.nimble.%s.npy" % (tag, c.name, o)) for o in v.reference.OUTPUTS]
        cmd = [args.nimble_run, nbc] + ["--input=" + s for s in v.reference.nimble_inputs(c.path)]
        cmd += ["--output=@" + o for o in outs] + ["--threads=%d" % T, "--benchmark=%d" % pick(args.reps, v.name),
                                                   "--kernels=" + args.kernels]
        c0, w0 = children_cpu(), time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=thread_env(T))
        wall, cpu = time.perf_counter() - w0, children_cpu() - c0
        if p.returncode != 0:
            raise tools.ToolError("nimble-run failed (exit %d): %s\n%s" % (p.returncode, " ".join(cmd),
                                                                          p.stderr[-3000:]))
        lat = tools.parse_latency(p.stdout)
        for o, ref in zip(outs, c.refs):
            e = rel_err(np.load(o), np.load(ref))
            if not e <= args.tolerance:
                problems.append("Nimble %s %s (threads %d): output differs from PyTorch, relative error %.3e"
                                % (v.name, c.name, T, e))
        out.append((c, lat["median"], lat["runs"], cpu, wall))
        if profile and pick(args.profile_reps, v.name) and c.table == "fixed":
            p = tools.run_model(args.nimble_run, nbc, v.reference.nimble_inputs(c.path), outs, threads=T,
                                benchmark=pick(args.profile_reps, v.name), profile=True,
                                extra=["--kernels=" + args.kernels])
            for k, val in tools.parse_time_split(p.stderr).items():
                split[k] += val
    return out, split


def run_worker(system, v, cases, T, args, work_dir):
    python = "/usr/bin/python3" if system in ("pytorch", "pytorch-nnlstm") else args.peer_python
    spec = {"system": system, "model": v.name, "family": v.family, "threads": T, "reps": pick(args.reps, v.name),
            "warmup": args.warmup, "tolerance": args.tolerance, "work_dir": work_dir,
            "inputs": [{"name": c.name, "path": c.path, "refs": c.refs} for c in cases]}
    spec_path = os.path.join(work_dir, "spec.%s.%s.%d.json" % (system, v.name, T))
    out_path = spec_path.replace("spec.", "result.")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    p = subprocess.run([python, os.path.join(HERE, "bench_worker.py"), spec_path, out_path],
                       capture_output=True, text=True, env=thread_env(T))
    if p.returncode != 0 or not os.path.exists(out_path):
        return {"error": "bench_worker.py (%s) failed (exit %d): %s" % (system, p.returncode, p.stderr[-3000:]),
                "inputs": [], "note": None}
    with open(out_path) as f:
        return json.load(f)


def rows_of(system, v, T, timed, cases):
    """Table rows from [(case, median_ms, runs, cpu_s, wall_s)]: one fixed row per LSTM/BERT length,
    one over all trees, one mixed aggregate."""
    rows = []
    fixed = [t for t in timed if t[0].table == "fixed"]
    mixed = [t for t in timed if t[0].table == "mixed"]
    groups = [[t] for t in fixed] if v.family != "treelstm" else ([fixed] if fixed else [])
    groups = [("fixed", g) for g in groups] + ([("mixed", mixed)] if mixed else [])
    for table, g in groups:
        rows.append(benchlib.make_row(system, v.name, v.family, table, sum(t[0].length for t in g), len(g), T,
                                      sum(t[1] for t in g), g[0][2], sum(t[3] for t in g), sum(t[4] for t in g)))
    return rows


def bench_model(v, args, work_dir, doc):
    problems = []
    load, waited, quiet = benchlib.wait_for_quiet(args.quiet_load, args.max_wait)
    doc["header"]["loads"].append({"model": v.name, "load_1min": load, "waited_s": round(waited, 1), "quiet": quiet})
    print("\n== %s: 1-minute load %.2f before the block%s" % (
        v.name, load, "" if quiet else " (not below %.2f after waiting %.0f s: figures may be noisy)"
        % (args.quiet_load, waited)), flush=True)
    cases = fixed_cases(v, args, work_dir) + mixed_cases(v, args)
    model = v.reference.load(v.name)
    write_references(v, model, cases, work_dir)
    del model
    nbc = None
    if "nimble" in args.systems:
        nbc = compile_nimble(args, v.nir, os.path.join(work_dir, v.name + ".nbc"), v.name)
    imported = None
    if "imported" in args.systems and v.family != "treelstm":
        imported = imported_nbc(v, args, work_dir, cases[0])
    elif "imported" in args.systems:
        doc["notes"].setdefault("imported", {})[v.name] = "no ONNX form (recursion over a tree)"
    for T in args.threads:
        # --rounds: every system timed once a round, in turn, so that a slow spell of a shared
        # machine falls on all of them; each figure is the median over the rounds.
        per_round, loads = {}, {}
        for rnd in range(args.rounds):
            for system in args.systems:
                timed = time_system(v, system, T, rnd, args, work_dir, doc, cases, nbc, imported, problems, loads)
                if timed is None:
                    continue
                per_round.setdefault(system, []).append(timed)
                for c, med, _runs, _cpu, _wall in timed:
                    doc["round_points"].append({"system": system, "model": v.name, "table": c.table,
                                                "input": c.name, "length": c.length, "threads": T,
                                                "round": rnd, "median_ms": med})
        for system in args.systems:
            if system not in per_round:
                continue
            timed = benchlib.combine_rounds(per_round[system])
            for c, med, runs, cpu, wall in timed:
                doc["points"].append({"system": system, "model": v.name, "table": c.table, "input": c.name,
                                      "length": c.length, "threads": T, "median_ms": med, "runs": runs,
                                      "cores_used": round(benchlib.cores_used(cpu, wall), 3)})
            for row in rows_of(system, v, T, timed, cases):
                row["load_1min"] = loads[system]
                doc["rows"].append(row)
                bad = benchlib.cores_violation(row)
                if bad:
                    problems.append(bad)
    return problems


def time_system(v, system, T, rnd, args, work_dir, doc, cases, nbc, imported, problems, loads):
    """[(case, median_ms, runs, cpu_s, wall_s)] of one system at T threads in round `rnd`, or None
    when it does not run here (or failed: the problem is recorded). loads[system]: the 1-minute
    load when its first round started."""
    if system in PEERS and (not args.peer_python or system in doc["missing"]):
        return None
    if system == "imported" and imported is None:
        return None
    if system in PEERS and v.family == "treelstm":
        doc["notes"].setdefault(system, {})[v.name] = "no ONNX form (recursion over a tree)"
        return None
    if system == "pytorch-nnlstm" and v.family != "lstm":
        return None  # nn.LSTM is the LSTM's second PyTorch peer only
    t0 = time.time()
    loads.setdefault(system, benchlib.load_avg())
    progress("%s %s, %d thread%s%s: %d inputs x %d runs" % (
        v.name, benchlib.SYSTEM_LABEL[system], T, "" if T == 1 else "s",
        ", round %d of %d" % (rnd + 1, args.rounds) if args.rounds > 1 else "", len(cases),
        pick(args.reps, v.name)))
    if system == "imported":
        timed, _ = run_nimble(v, imported, cases, T, args, work_dir, problems, profile=False)
    elif system == "nimble":
        timed, split = run_nimble(v, nbc, cases, T, args, work_dir, problems, profile=rnd == 0)
        if split["total"] > 0:
            doc["splits"]["%s/%d" % (v.name, T)] = {
                k: 100 * split[k] / split["total"] for k in ("kernels", "shape", "other")}
    else:
        res = run_worker(system, v, cases, T, args, work_dir)
        if res.get("note"):
            doc["notes"].setdefault(system, {})[v.name] = res["note"]
            progress("%s %s: not run: %s" % (v.name, benchlib.SYSTEM_LABEL[system], res["note"]))
            return None
        if res.get("error"):
            problems.append(res["error"])
            return None
        if system in ("pytorch", "pytorch-nnlstm"):
            note_worker_core(doc, res, "PyTorch %s at %d threads" % (v.name, T))
        if system == "pytorch" and res.get("blas_threads") not in (None, T):
            problems.append("PyTorch %s at %d threads: OpenBLAS reports %s threads"
                            % (v.name, T, res["blas_threads"]))
        byname = {c.name: c for c in cases}
        timed = [(byname[r["name"]], r["median_ms"], r["runs"], r["cpu_s"], r["wall_s"])
                 for r in res["inputs"]]
    progress("%s %s, %d thread%s: done in %.0f s" % (
        v.name, benchlib.SYSTEM_LABEL[system], T, "" if T == 1 else "s", time.time() - t0))
    return timed


# ---- main -----------------------------------------------------------------------------------------


# ---- --batch: auto-batching throughput (issue 17) -----------------------------------------------

BATCH_SYSTEMS = ("nimble-on", "nimble-off", "pytorch", "pytorch-batched")
BATCH_LABEL = {"nimble-on": "Nimble auto-batched", "nimble-off": "Nimble one-at-a-time",
               "pytorch": "PyTorch one-at-a-time", "pytorch-batched": "PyTorch hand-batched"}
BATCH_SEED = 17


def nimble_instances(args, nbc, inst_file, T, auto, out_dir, profile=False, reps=None):
    """One nimble-run --instances process: (CompletedProcess, cpu_s, wall_s)."""
    cmd = [args.nimble_run, nbc, "--instances=" + inst_file, "--auto-batch=" + ("on" if auto else "off"),
           "--threads=%d" % T, "--benchmark=%d" % (reps or pick(args.reps, "")), "--kernels=" + args.kernels]
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        cmd.append("--output-dir=" + out_dir)
    if profile:
        cmd.append("--profile")
    c0, w0 = children_cpu(), time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=thread_env(T))
    wall, cpu = time.perf_counter() - w0, children_cpu() - c0
    if p.returncode != 0:
        raise tools.ToolError("nimble-run failed (exit %d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr[-3000:]))
    return p, cpu, wall


def check_outputs(out_dir, refs, first, count, what, args, problems):
    """Every <i>.<j>.npy of out_dir (the `count` instances of one chunk,
    starting at instance `first` of the pool) against refs[first + i][j]; a
    missing file is a problem too."""
    for i in range(count):
        for j, ref in enumerate(refs[first + i]):
            path = os.path.join(out_dir, "%d.%d.npy" % (i, j))
            if not os.path.exists(path):
                problems.append("%s: instance %d result %d: %s is missing" % (what, first + i, j, path))
                continue
            e = rel_err(np.load(path), np.load(ref))
            if not e <= args.tolerance:
                problems.append("%s: instance %d result %d differs from PyTorch, relative error %.3e"
                                % (what, first + i, j, e))


_SCHED = re.compile(r"Auto-batching time: scheduling ([\d.]+) ms \(([\d.]+)%\)")
_PER_LAUNCH = re.compile(r"\(([\d.]+) calls per launch, largest group (\d+)\)")


def parse_batch_profile(stderr):
    """{'sched_pct', 'calls_per_launch', 'largest'} from nimble-run --profile's Auto-batching lines."""
    m, k = _SCHED.search(stderr), _PER_LAUNCH.search(stderr)
    if not (m and k):
        raise tools.ToolError("no 'Auto-batching' lines in nimble-run --profile's stderr:\n" + stderr[-2000:])
    return {"sched_pct": float(m.group(2)), "calls_per_launch": float(k.group(1)), "largest": int(k.group(2))}


def time_batch_round(v, args, work_dir, nbc, chunks, refs, n, T, reps, rnd, inst_file, problems, doc):
    """One round of bench_batch_model at T threads: every batch size of Nimble one at a time and
    auto-batched (outputs checked against PyTorch's), then PyTorch one at a time and hand-batched.
    {(system, B): (instances/s, cpu_s, wall_s)}."""
    cells = {}
    tag = ", round %d of %d" % (rnd + 1, args.rounds) if args.rounds > 1 else ""
    for B in args.batch:
        for auto, key, label in ((False, "nimble-off", "one-at-a-time"), (True, "nimble-on", "auto-batched")):
            progress("%s Nimble %s, %d thread(s), batch %d%s: %d chunk(s) x %d runs" % (
                v.name, label, T, B, tag, len(chunks[B]), reps))
            total_ms, cpu_s, wall_s = 0.0, 0.0, 0.0
            for k, (first, path) in enumerate(chunks[B]):
                out_dir = os.path.join(work_dir, "%s.%s.%d.b%d.%03d" % (v.name, key, T, B, k))
                p, cpu, wall = nimble_instances(args, nbc, path, T, auto, out_dir, reps=reps)
                check_outputs(out_dir, refs, first, min(B, n - first),
                              "Nimble %s %s batch %d (threads %d)" % (label, v.name, B, T), args, problems)
                total_ms += tools.parse_latency(p.stdout)["median"]
                cpu_s, wall_s = cpu_s + cpu, wall_s + wall
            cells[(key, B)] = (n / (total_ms / 1e3), cpu_s, wall_s)
    progress("%s PyTorch one-at-a-time and hand-batched, %d thread(s)%s" % (v.name, T, tag))
    spec = {"mode": "batch", "model": v.name, "threads": T, "reps": reps, "warmup": args.warmup,
            "tolerance": args.tolerance, "batched_tolerance": 1e-5, "instances": inst_file, "refs": refs,
            "batches": args.batch}
    spec_path = os.path.join(work_dir, "spec.batch.%s.%d.json" % (v.name, T))
    out_path = spec_path.replace("spec.", "result.")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    p = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "bench_worker.py"), spec_path, out_path],
                       capture_output=True, text=True, env=thread_env(T))
    res = json.load(open(out_path)) if p.returncode == 0 and os.path.exists(out_path) else {
        "error": "bench_worker.py failed (exit %d): %s" % (p.returncode, p.stderr[-3000:])}
    if res.get("error"):
        problems.append("%s: %s" % (v.name, res["error"]))
    note_worker_core(doc, res, "PyTorch %s at %d threads" % (v.name, T))
    if res.get("blas_threads") not in (None, T):
        problems.append("PyTorch %s at %d threads: OpenBLAS reports %s threads" % (v.name, T, res["blas_threads"]))
    for B in args.batch:
        if res.get("one"):
            r = res["one"]
            cells[("pytorch", B)] = (n / (r["median_ms"] / 1e3), r["cpu_s"], r["wall_s"])
        r = (res.get("batched") or {}).get(str(B))
        if r:
            cells[("pytorch-batched", B)] = (n / (r["median_ms"] / 1e3), r["cpu_s"], r["wall_s"])
    return cells


def bench_batch_model(v, args, work_dir, doc):
    import make_instances
    from compare_instances import read_instance

    problems = []
    load, waited, quiet = benchlib.wait_for_quiet(args.quiet_load, args.max_wait)
    doc["header"]["loads"].append({"model": v.name, "load_1min": load, "waited_s": round(waited, 1), "quiet": quiet})
    print("\n== %s: 1-minute load %.2f before the block%s" % (
        v.name, load, "" if quiet else " (not below %.2f after waiting %.0f s: figures may be noisy)"
        % (args.quiet_load, waited)), flush=True)
    pool = os.path.join(work_dir, v.name + ".pool")
    index = make_instances.write_set(v.name, pool, args.pool, BATCH_SEED)
    inst_file = os.path.join(pool, "instances.txt")
    with open(inst_file) as f:
        lines = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    progress("%s: pool of %d instances, %d %ss; PyTorch references" % (
        v.name, len(lines), sum(e["work"] for e in index["instances"]), index["unit"]))
    model = v.reference.load(v.name)
    refs = []
    for i, line in enumerate(lines):
        outs = v.reference.run(model, read_instance(v.reference, line, pool))
        refs.append([])
        for j, o in enumerate(outs):
            path = os.path.join(pool, "ref.%d.%d.npy" % (i, j))
            np.save(path, o)
            refs[-1].append(path)
    del model
    chunks = {}  # B -> [(first instance, chunk file)]
    for B in args.batch:
        chunks[B] = []
        for k, first in enumerate(range(0, len(lines), B)):
            path = os.path.join(pool, "chunk_b%d_%03d.txt" % (B, k))
            with open(path, "w") as f:
                f.write("\n".join(lines[first : first + B]) + "\n")
            chunks[B].append((first, path))
    nbc = compile_nimble(args, v.nir, os.path.join(work_dir, v.name + ".nbc"), v.name)
    n = len(lines)
    reps = pick(args.reps, v.name)
    for T in args.threads:
        # --rounds: Nimble (one at a time, auto-batched) and PyTorch timed once a round, in turn,
        # so that a slow spell of a shared machine falls on all of them; each figure is the
        # median over the rounds, and every round's ratios are listed after the table.
        per_round = []  # one {(system, B): (instances/s, cpu_s, wall_s)} a round
        profiles = {}
        for rnd in range(args.rounds):
            per_round.append(time_batch_round(v, args, work_dir, nbc, chunks, refs, n, T, reps, rnd, inst_file,
                                              problems, doc))
        for B in args.batch:
            p, _, _ = nimble_instances(args, nbc, chunks[B][0][1], T, True, None, profile=True, reps=2)
            profiles[B] = parse_batch_profile(p.stderr)
        rows = {k: (ips, benchlib.cores_used(cpu, wall))
                for k, (ips, cpu, wall) in benchlib.combine_batch_rounds(per_round).items()}
        if args.rounds > 1:
            labels = {s: BATCH_LABEL[s] for s in ("nimble-off", "pytorch-batched")}
            doc.setdefault("batch_rounds", []).extend(benchlib.batch_round_lines(v.name, T, per_round, labels))
        for B in args.batch:
            row = {"model": v.name, "threads": T, "batch": B, "instances": n, "profile": profiles.get(B),
                   "load_1min": benchlib.load_avg()}
            for sys_ in BATCH_SYSTEMS:
                if (sys_, B) in rows:
                    row[sys_] = {"instances_per_s": rows[(sys_, B)][0], "cores_used": round(rows[(sys_, B)][1], 3)}
                    if rows[(sys_, B)][1] > T + benchlib.CORES_SLACK:
                        problems.append("%s %s batch %d at %d thread(s) used %.2f cores: the thread count was not held"
                                        % (BATCH_LABEL[sys_], v.name, B, T, rows[(sys_, B)][1]))
            doc["batch"].append(row)
    return problems


def pytorch_fair(doc):
    """False when PyTorch's OpenBLAS ran below this CPU's core (no PyTorch ratio then)."""
    return (doc["header"].get("blas_core") or {}).get("fair")


def batch_table(rows, fair=True):
    """Text table of the --batch rows: instances/s (cores used) per system, then the ratios."""
    cols = ["model", "threads", "batch"] + ["%s (cores)" % BATCH_LABEL[s] for s in BATCH_SYSTEMS]
    cols += ["auto/one", "auto/PyTorch one", "auto/PyTorch batched", "scheduling", "calls/launch"]
    out = []
    for r in rows:
        cells = [r["model"], str(r["threads"]), str(r["batch"])]
        for s in BATCH_SYSTEMS:
            cells.append("%.1f (%.2f)" % (r[s]["instances_per_s"], r[s]["cores_used"]) if s in r else "-")
        on = r.get("nimble-on", {}).get("instances_per_s")
        for s in ("nimble-off", "pytorch", "pytorch-batched"):
            ok = on and s in r and (s == "nimble-off" or fair is not False)
            cells.append("%.2fx" % (on / r[s]["instances_per_s"]) if ok else "-")
        pr = r.get("profile")
        cells += ["%.1f%%" % pr["sched_pct"], "%.1f" % pr["calls_per_launch"]] if pr else ["-", "-"]
        out.append(cells)
    widths = [max(len(c), *(len(x[i]) for x in out)) if out else len(c) for i, c in enumerate(cols)]
    fmt = lambda cells: "  ".join(c.rjust(w) if i >= 1 else c.ljust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    return [fmt(cols)] + [fmt(c) for c in out]


def batch_report(doc, args, out=sys.stdout):
    print("\n" + "\n".join(benchlib.header_lines(doc["header"])), file=out)
    print("1-minute load before each block: %s" % ", ".join(
        "%s %.2f" % (x["model"], x["load_1min"]) for x in doc["header"]["loads"]), file=out)
    print("\nAuto-batching throughput, instances/s (cores used); a pool of %d seeded instances per model "
          "(scripts/make_instances.py, seed %d) in chunks of `batch`; PyTorch one-at-a-time does not depend on "
          "batch; ratios > 1: auto-batched is faster; scheduling: the scheduler's share of the first chunk's "
          "time (nimble-run --profile)" % (args.pool, BATCH_SEED), file=out)
    print("\n".join(batch_table(doc["batch"], pytorch_fair(doc))), file=out)
    lines = [ln for ln in doc.get("batch_rounds", []) if pytorch_fair(doc) is not False or "PyTorch" not in ln]
    if lines:
        print("\nAlternating rounds (%d): each round's auto-batched throughput over the others'" % args.rounds,
              file=out)
        print("\n".join(lines), file=out)
    for f in doc["failures"]:
        print("FAILED: " + f, file=out)


def int_list(s):
    try:
        out = [int(t) for t in s.split(",") if t]
    except ValueError:
        raise argparse.ArgumentTypeError("want comma-separated positive integers, got %r" % s)
    if not out or any(t <= 0 for t in out):
        raise argparse.ArgumentTypeError("want comma-separated positive integers, got %r" % s)
    return out


def per_model(minimum):
    """'N' or 'N,model=M,...': a default and per-model overrides (e.g. --reps 10,bert_base=2)."""

    def parse(s):
        out = {}
        for part in s.split(","):
            key, _, val = part.rpartition("=")
            try:
                n = int(val)
            except ValueError:
                n = -1
            if n < minimum or (key and key not in VARIANTS):
                raise argparse.ArgumentTypeError("want N or N,MODEL=N,... with N >= %d and known models, got %r"
                                                 % (minimum, s))
            out[key] = n
        if "" not in out:
            raise argparse.ArgumentTypeError("no default in %r (want N or N,MODEL=N,...)" % s)
        out["text"] = s
        return out

    return parse


def pick(setting, model):
    return setting.get(model, setting[""])


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", help="comma-separated variants (default: %s; with --batch: %s)"
                    % (",".join(FULL), ",".join(BATCH_MODELS)))
    ap.add_argument("--threads", type=int_list, help="thread counts (default: 1,2; with --batch: 1)")
    ap.add_argument("--batch", type=int_list,
                    help="auto-batching throughput at these batch sizes (e.g. 1,8,64) instead of the latency tables")
    ap.add_argument("--pool", type=int, default=64, help="with --batch: seeded instances per model (default 64)")
    ap.add_argument("--lengths", type=int_list, default=[8, 32, 128], help="LSTM fixed lengths (default 8,32,128)")
    ap.add_argument("--bert-lengths", type=int_list, default=[16, 64, 128],
                    help="BERT fixed lengths (default 16,64,128)")
    ap.add_argument("--count", type=per_model(0), default="12",
                    help="seeded mixed-length inputs per model (0: no mixed table; N,MODEL=N,... per model)")
    ap.add_argument("--reps", type=per_model(1), default=None,
                    help="timed runs per input (default 10; N,MODEL=N,... per model, e.g. 10,bert_base=2)")
    ap.add_argument("--warmup", type=int, help="untimed runs first (Python systems; nimble-run: 1); default 2,"
                    " with --batch 1")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time the systems this many times in turn (Nimble, the peers, Nimble, ...): each figure"
                         " the median over the rounds, and every round's ratio to Nimble printed (default 1)")
    ap.add_argument("--profile-reps", type=per_model(0), default="2",
                    help="runs of nimble-run --profile per fixed input (0: no split; N,MODEL=N,... per model)")
    ap.add_argument("--systems", default="nimble,imported,pytorch,pytorch-nnlstm,onnxruntime,iree",
                    help="which systems to time")
    ap.add_argument("--opt", default="-O2", help="nimblec optimisation level (default %(default)s)")
    ap.add_argument("--kernels", default="auto", choices=["auto", "native", "library", "reference"],
                    help="nimble-run --kernels (default %(default)s); the .nbc has native kernels"
                         " (nimblec --kernels=native) unless this is `reference`")
    ap.add_argument("--tolerance", type=float, default=1e-4, help="every system's check against PyTorch")
    ap.add_argument("--quiet-load", type=float, default=1.0, help="wait for this 1-minute load before a block")
    ap.add_argument("--max-wait", type=float, default=60, help="wait at most this many seconds (default 60)")
    ap.add_argument("--peers-venv", default=os.environ.get("NIMBLE_PEERS_VENV", os.path.join(REPO_ROOT, ".peers-venv")),
                    help="virtualenv of scripts/setup_peers.sh (default .peers-venv)")
    ap.add_argument("--json", metavar="FILE", help="write every measurement as JSON")
    ap.add_argument("--plot", metavar="DIR", help="write PNG plots into DIR")
    ap.add_argument("--markdown", metavar="FILE",
                    help="write the header and tables as markdown (into FILE's generated section when it has one)")
    ap.add_argument("--nimblec", default=tools.default_tool("nimblec"))
    ap.add_argument("--nimble-import-onnx", default=tools.default_tool("nimble-import-onnx"))
    ap.add_argument("--nimble-run", dest="nimble_run", default=tools.default_tool("nimble-run"))
    ap.add_argument("--no-floors", dest="floors", action="store_false",
                    help="do not measure the floors (scripts/floors.py: bandwidth by working set, GEMM rates)")
    ap.add_argument("--keep", metavar="DIR", help="keep inputs, .nbc, .onnx, .vmfb and outputs in DIR")
    args = ap.parse_args(argv)
    batch = args.batch is not None
    if args.models is None:
        args.models = ",".join(BATCH_MODELS if batch else FULL)
    if args.threads is None:
        args.threads = [1] if batch else [1, 2]
    if args.reps is None:
        args.reps = per_model(1)("3" if batch else "10")
    if args.warmup is None:
        args.warmup = 1 if batch else 2
    if args.rounds < 1:
        ap.error("--rounds wants a positive count, got %d" % args.rounds)
    if batch:
        if args.plot or args.markdown:
            ap.error("--plot and --markdown are not supported with --batch")
        args.systems = "nimble,pytorch"  # the four columns of the batch table; no ONNX Runtime / IREE
        if args.pool < 1:
            ap.error("--pool wants a positive count, got %d" % args.pool)
        for n in args.models.split(","):
            if n and n in VARIANTS and VARIANTS[n].family not in ("lstm", "treelstm"):
                ap.error("--batch: %s is not an LSTM or Tree-LSTM variant" % n)
    args.systems = [s for s in args.systems.split(",") if s]
    for s in args.systems:
        if s not in benchlib.SYSTEMS:
            ap.error("unknown system %r (have %s)" % (s, ", ".join(benchlib.SYSTEMS)))
    if "pytorch" not in args.systems:
        args.systems.insert(0, "pytorch")  # the reference every ratio and check is against
    args.models = [n for n in args.models.split(",") if n]
    for n in args.models:
        if n not in VARIANTS:
            ap.error("unknown model %r (have %s)" % (n, ", ".join(VARIANTS)))
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        ap.error("--plot needs matplotlib (Debian: python3-matplotlib; bash scripts/setup.sh)")
    return args


def floor_rows(doc, measured, threads):
    """The floors of the fixed-size rows Nimble ran, and what they came from (JSON-ready)."""
    rows = {}
    for r in doc["rows"]:
        if r["system"] != "nimble" or r["table"] != "fixed":
            continue
        f = floors.floor_for(r["model"], r["length"], r["threads"], measured, trees=r["inputs"])
        if f:
            rows["%s/%d/%d" % (r["model"], r["length"], r["threads"])] = round(f, 4)
    return {"rows": rows, "describe": floors.describe(measured, threads),
            "bandwidth_gbs": {str(T): {k: round(v, 2) for k, v in bw.items()} for T, bw in measured["bandwidth"].items()},
            "gemm_gflops": {"%dx%d" % kn: {"%s/%d" % it: round(v, 1) for it, v in r.items()}
                            for kn, r in measured["gemm"].items()}}


def make_doc(args):
    with open("/proc/cpuinfo") as f:
        cpu = benchlib.cpu_info(f.read())
    args.peer_python = peer_python(args.peers_venv)
    versions = {"pytorch": torch.__version__}
    versions.update(peer_versions(args.peer_python) if args.peer_python else {})
    missing = {}
    for p in PEERS:
        if p not in args.systems:
            continue
        if not args.peer_python:
            missing[p] = "no virtualenv at %s: bash scripts/setup_peers.sh" % args.peers_venv
        elif not versions.get(p):
            missing[p] = "%s not in %s: bash scripts/setup_peers.sh" % (PEER_DISTS[p], args.peers_venv)
    header = {"cpu": cpu, "blas": blas_description(), "versions": versions, "commit": benchlib.git_commit(REPO_ROOT),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "opt": "%s --kernels=%s; nimble-run --kernels=%s" % (
                  args.opt, "reference" if args.kernels == "reference" else "native", args.kernels),
              "reps": args.reps["text"] + (", batch sizes %s, pool %d" % (
                  ",".join(map(str, args.batch)), args.pool) if args.batch else ""),
              "warmup": args.warmup, "threads": args.threads, "loads": [],
              "command": "scripts/bench_models.py " + " ".join(sys.argv[1:])}
    if args.rounds > 1:
        header["rounds"] = args.rounds
    return {"schema": benchlib.SCHEMA_VERSION, "header": header, "rows": [], "points": [], "round_points": [],
            "splits": {}, "missing": missing, "notes": {}, "failures": [], "batch": []}


def round_lines(doc):
    """With --rounds: a title and each fixed input's per-round ratios to Nimble (benchlib)."""
    rounds = doc["header"].get("rounds", 1)
    if rounds < 2:
        return []
    systems = [s for s in benchlib.SYSTEMS if any(p["system"] == s for p in doc["round_points"])]
    return (["Alternating rounds (%d): each round's median of each system over Nimble's, fixed inputs:" % rounds]
            + benchlib.round_ratio_lines(doc["round_points"], systems))


def report(doc, args, out=sys.stdout):
    systems = [s for s in benchlib.SYSTEMS if any(r["system"] == s for r in doc["rows"])]
    print("\n" + "\n".join(benchlib.header_lines(doc["header"])), file=out)
    print("1-minute load before each block: %s" % ", ".join(
        "%s %.2f" % (x["model"], x["load_1min"]) for x in doc["header"]["loads"]), file=out)
    for p, why in doc["missing"].items():
        print("%s: missing (%s)" % (benchlib.SYSTEM_LABEL[p], why), file=out)
    for p, per in doc["notes"].items():
        for m, why in per.items():
            print("%s on %s: not run (%s)" % (benchlib.SYSTEM_LABEL[p], m, why), file=out)
    print("\nFixed sizes: figure (cores used); LSTM us/token, BERT ms/sequence, Tree-LSTM us/node over the seeded "
          "trees", file=out)
    for line in doc.get("floors", {}).get("describe", []):
        print(line, file=out)
    print("\n".join(benchlib.table(doc["rows"], "fixed", systems, doc["splits"],
                                   floors=doc.get("floors", {}).get("rows"), pytorch_fair=pytorch_fair(doc))), file=out)
    if any(r["table"] == "mixed" for r in doc["rows"]):
        print("\nMixed-length aggregate (seeded inputs; sum of medians / total tokens): figure (cores used)", file=out)
        print("\n".join(benchlib.table(doc["rows"], "mixed", systems, pytorch_fair=pytorch_fair(doc))), file=out)
    ratios = round_lines(doc)
    if ratios:
        print("\n" + "\n".join(ratios), file=out)
    for f in doc["failures"]:
        print("FAILED: " + f, file=out)


def write_markdown(doc, path, plots):
    h = doc["header"]
    systems = [s for s in benchlib.SYSTEMS if any(r["system"] == s for r in doc["rows"])]
    lines = ["Measured %s at commit `%s`: `%s`." % (h["date"], h["commit"], h["command"]), "", "```"]
    lines += benchlib.header_lines(h)
    lines += ["1-minute load before each block: " + ", ".join(
        "%s %.2f" % (x["model"], x["load_1min"]) for x in h["loads"])]
    lines += ["%s: missing (%s)" % (benchlib.SYSTEM_LABEL[p], why) for p, why in doc["missing"].items()]
    lines += ["%s on %s: not run (%s)" % (benchlib.SYSTEM_LABEL[p], m, why)
              for p, per in doc["notes"].items() for m, why in per.items()]
    lines += ["```", "", "Fixed sizes (figure (cores used)):", ""]
    lines += benchlib.table(doc["rows"], "fixed", systems, doc["splits"], markdown=True,
                            floors=doc.get("floors", {}).get("rows"), pytorch_fair=pytorch_fair(doc))
    if doc.get("floors"):
        lines += ["", "Floors (scripts/floors.py, measured in this run before the models):", "", "```"]
        lines += doc["floors"]["describe"] + ["```"]
    if any(r["table"] == "mixed" for r in doc["rows"]):
        lines += ["", "Mixed-length aggregate (the seeded inputs; sum of medians / total tokens):", ""]
        lines += benchlib.table(doc["rows"], "mixed", systems, markdown=True, pytorch_fair=pytorch_fair(doc))
    ratios = round_lines(doc)
    if ratios:
        lines += ["", "```"] + ratios + ["```"]
    if plots:
        lines += [""] + ["![%s](%s)" % (os.path.splitext(os.path.basename(p))[0],
                                         benchlib.relpath_or(p, os.path.dirname(os.path.abspath(path))))
                         for p in plots]
    body = "\n".join(lines) + "\n"
    # A file with the generated-section markers (docs/perf.md) keeps everything outside them;
    # any other existing file is left alone.
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
        try:
            body = benchlib.replace_section(text, body)
        except ValueError as e:
            return "%s exists and has no generated section (%s); not overwritten" % (path, e)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(body)
    os.replace(tmp, path)
    return None


def main(argv):
    args = parse_args(argv)
    if "nimble" in args.systems or args.batch:
        try:
            tools.require_tool(args.nimblec)
            tools.require_tool(args.nimble_run)
            if "imported" in args.systems:
                tools.require_tool(args.nimble_import_onnx)
        except tools.ToolError as e:
            print("bench_models: error: %s (or --systems without nimble)" % e, file=sys.stderr)
            return 1
    doc = make_doc(args)
    if "pytorch" in args.systems or "pytorch-nnlstm" in args.systems:
        check_blas_core(doc)
    print("\n".join(benchlib.header_lines(doc["header"])), flush=True)
    for p, why in doc["missing"].items():
        print("%s: missing (%s)" % (benchlib.SYSTEM_LABEL[p], why), flush=True)
    work_dir = args.keep or tempfile.mkdtemp(prefix="bench_models.")
    os.makedirs(work_dir, exist_ok=True)
    measured = None
    try:
        if args.floors and not args.batch and "nimble" in args.systems:
            try:
                measured = floors.measure(args.nimblec, args.nimble_run, args.threads, work=work_dir,
                                          progress=progress)
            except (RuntimeError, subprocess.CalledProcessError, AttributeError) as e:
                doc["failures"].append("floors: %s" % e)
        for n in args.models:
            before = len(doc["failures"])
            try:
                bench = bench_batch_model if args.batch else bench_model
                doc["failures"] += bench(VARIANTS[n], args, work_dir, doc)
            except (tools.ToolError, FileNotFoundError) as e:
                doc["failures"].append("%s: %s" % (n, e))
            for f in doc["failures"][before:]:
                print("FAILED: " + f, file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work_dir, ignore_errors=True)
    if measured:
        doc["floors"] = floor_rows(doc, measured, args.threads)
    if args.batch:
        batch_report(doc, args)
    else:
        report(doc, args)
    plots = []
    if args.plot:
        import bench_plot

        plots = bench_plot.plot_all(doc, args.plot)
        for path in plots:
            progress("wrote " + path)
    if args.markdown:
        why = write_markdown(doc, args.markdown, [os.path.abspath(p) for p in plots])
        if why:
            print("bench_models: error: " + why, file=sys.stderr)
            doc["failures"].append(why)
    for p in benchlib.validate(doc):  # what --json promises its readers (bench_plot.py, test/scripts)
        doc["failures"].append("internal: the JSON document breaks its schema: " + p)
        print("bench_models: error: " + doc["failures"][-1], file=sys.stderr)
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, args.json)
    return 1 if doc["failures"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
