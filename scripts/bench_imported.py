#!/usr/bin/env python3
"""Imported CNNs side by side: Nimble (the model's .onnx through
nimble-import-onnx and nimblec) against PyTorch eager and ONNX Runtime on the
same file, in one run, with ratios.

    /usr/bin/python3 scripts/bench_imported.py [--models resnet18,mobilenet_v2,vit_b_16,bert,bert_base,gru]
        [--size 224] [--batch 1[,8..]] [--lengths 16,64,128] [--threads 1,2] [--reps 10] [--warmup 2]
        [--rounds 3] [--kernels auto] [--baseline-passes PIPELINE] [--baseline-tools DIR] [--no-pytorch]
        [--peers-venv DIR] [--tools DIR] [--markdown FILE]

Models: resnet18, mobilenet_v2 (torchvision, --size x --size images, batch
--batch), vit_b_16 (torchvision's ViT-B/16, 224x224, batch --batch) and bert
(BERT-base written as Hugging Face's BertModel, one sequence of each of
--lengths; test/import-onnx/Inputs/transformer_export.py --size=base) are
timed as below. bert_base is the paper's BERT-base of models/bert, whose
hand-written .nir exists: see "Imported against hand-written" at the end.
gru is one nn.GRU with the LSTM's sizes (input 300, hidden 512; Y as its
output, the sequence axis dynamic; test/import-onnx/Inputs/torch_rnn_export.py),
one sequence of each of --lengths tokens: its import is a loop over the
tokens (docs/import-onnx.md, "Recurrent layers"), with no hand-written peer.

The model is torchvision's (Debian's python3-torchvision, random weights from
a fixed seed, eval mode; test/import-onnx/Inputs/torchvision_export.py makes
it), exported by torch.onnx.export (opset 14, batch axis dynamic). Nimble:
imported, compiled once at -O2, then per thread count T one
`nimble-run --threads=T --benchmark=REPS` (one warm-up, the median of REPS
runs), its output checked against torch's and ORT's (1e-4 of the largest |y|).
PyTorch (torch.no_grad, torch.set_num_threads(T)) and ONNX Runtime (the
virtualenv of scripts/setup_peers.sh, --peers-venv, default .peers-venv;
intra-op threads T, sequential execution, all graph optimisations) each run
in their own process, --warmup untimed runs then the median of REPS. Every
process starts with OMP_NUM_THREADS = OPENBLAS_NUM_THREADS =
MKL_NUM_THREADS = T, and its cores used (CPU time / wall time over the
process) are printed beside its figure. Ratios > 1: Nimble is faster. The
1-minute load is printed before each block: on a shared 2-core machine,
compare within one run only.

CNNs and ViT: --batch may list several batch sizes (one export, each its
own rows); with --rounds R > 1 every row is R rounds of the systems one
after the other (alternating, so that the load drifts over all alike), each
figure the median of its rounds' medians. --baseline-passes PIPELINE also
compiles the model with `nimblec --passes=PIPELINE` (e.g. the -O2 pipeline
without one pass) and times it first in each round, in a column of its own
(before / after in one run). --baseline-tools DIR makes that column
another build's instead (DIR's nimble-import-onnx, nimblec -O2, or
--baseline-passes if given, and nimble-run: e.g. main's binaries copied
aside, against this tree's). --no-pytorch leaves PyTorch out.
--omp-wait-policy passive sets OMP_WAIT_POLICY for every process: libgomp's
threads (Nimble's and PyTorch's) then sleep between parallel regions
instead of spinning (docs/perf.md: two threads under contention).
nimble-run does that by default unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is
set (docs/nimble-run.md, "Waiting threads"): GOMP_SPINCOUNT=300000 in the
environment of this script times libgomp's own default.

Imported against hand-written (bert_base): the reference PyTorch module of
models/bert with the seeded weights of models/bert/make_weights.py (run it
first: 440 MB, not committed) is exported as scripts/bench_worker.py exports
it for ONNX Runtime (opset 17, the sequence axis dynamic); that .onnx goes
through nimble-import-onnx and nimblec -O2 ("imported"), models/bert/bert_base.nir
through nimblec -O2 ("hand-written"), and ONNX Runtime runs the same .onnx.
--rounds rounds, each per thread count and length: hand-written, imported,
ORT, each its own process (nimble-run --benchmark=REPS; ORT the median of
REPS runs after --warmup), alternating so that the load drifts over all
three alike. Both Nimble outputs are checked against the PyTorch module
(1e-4 of the largest |y|). Printed: each round's medians and the ratios of
the median over rounds, with the 1-minute load per round.
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

import benchlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXPORT = os.path.join(ROOT, "test", "import-onnx", "Inputs", "torchvision_export.py")
TRANSFORMERS = os.path.join(ROOT, "test", "import-onnx", "Inputs", "transformer_export.py")
RNN_EXPORT = os.path.join(ROOT, "test", "import-onnx", "Inputs", "torch_rnn_export.py")

# One timed process of a Python system: prints "median_ms version".
WORKER = r"""
import os, sys, time, numpy as np
system, onnx_path, x_path, T, reps, warmup = sys.argv[1:7]
T, reps, warmup = int(T), int(reps), int(warmup)
x = np.load(x_path)
if system == "pytorch":
    import torch
    sys.path.insert(0, os.path.dirname(sys.argv[7]))
    torch.set_num_threads(T)
    if sys.argv[8] in ("vit_b_16", "bert"):
        import transformer_export
        m = transformer_export.build(sys.argv[8], "base")
    elif sys.argv[8] == "gru":
        import torch_rnn_export
        m = torch_rnn_export.build("gru")
    else:
        import torchvision_export
        m = torchvision_export.build(sys.argv[8])
    xt = torch.from_numpy(x)
    def run():
        with torch.no_grad():
            return m(xt)
    version = torch.__version__
else:
    import onnxruntime as ort
{ort_session}
    version = ort.__version__
    np.save(sys.argv[9], run()[0])  # checked against Nimble's by the caller
{time_run}
""".replace("{ort_session}", textwrap.indent(benchlib.ORT_SESSION.strip("\n"), "    ")).replace(
    "{time_run}", benchlib.TIME_RUN.strip("\n"))


OMP_WAIT_POLICY = None  # --omp-wait-policy


def thread_env(T):
    """benchlib.thread_env, with --omp-wait-policy's OMP_WAIT_POLICY."""
    return benchlib.thread_env(T, {"OMP_WAIT_POLICY": OMP_WAIT_POLICY} if OMP_WAIT_POLICY else None)


def timed(cmd, T):
    """(CompletedProcess, cores used)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=thread_env(T))
    wall = time.perf_counter() - w0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return p, cpu / wall if wall > 0 else 0.0


def run(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("bench_imported.py: %s failed (exit %d): %s\n%s" % (what, p.returncode, " ".join(cmd),
                                                                     p.stderr[-2000:]))
    return p


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="resnet18")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", default="1", help="CNNs, ViT: batch sizes, comma-separated")
    ap.add_argument("--lengths", default="16,64,128", help="bert, bert_base and gru: sequence lengths")
    ap.add_argument("--rounds", type=int, default=3, help="bert_base: alternating rounds")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--kernels", default="auto", help="nimble-run --kernels (default auto)")
    ap.add_argument("--baseline-passes", help="also time the model compiled with nimblec --passes=PIPELINE")
    ap.add_argument("--baseline-tools", help="also time the model through DIR's nimble-import-onnx, nimblec and "
                    "nimble-run (another build)")
    ap.add_argument("--no-pytorch", action="store_true", help="leave PyTorch out")
    ap.add_argument("--omp-wait-policy", help="OMP_WAIT_POLICY of every process (libgomp: Nimble and PyTorch)")
    ap.add_argument("--peers-venv", default=os.path.join(ROOT, ".peers-venv"))
    ap.add_argument("--tools", default=os.path.join(ROOT, "bazel-bin", "tools"))
    ap.add_argument("--markdown", help="also write the table as markdown to FILE")
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    global OMP_WAIT_POLICY
    OMP_WAIT_POLICY = args.omp_wait_policy
    batches = [int(b) for b in args.batch.split(",")]
    tool = lambda n: os.path.join(args.tools, n)
    base_tool = lambda n: os.path.join(args.baseline_tools, n)
    peer = os.path.join(args.peers_venv, "bin", "python")
    has_ort = os.path.exists(peer) and subprocess.run([peer, "-c", "import onnxruntime"],
                                                      capture_output=True).returncode == 0
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    header = ["bench_imported.py: commit %s%s, %s, %d CPUs, %s" % (commit, "+dirty" if dirty else "", cpu,
                                                                   os.cpu_count(), time.strftime("%Y-%m-%d")),
              "command: /usr/bin/python3 scripts/bench_imported.py " + " ".join(argv),
              "images %sx3x%dx%d (CNNs; ViT 224x224); lengths %s (BERT); nimble-run --kernels=%s; "
              "ONNX Runtime: %s" % (args.batch.replace(",", "|"), args.size, args.size, args.lengths, args.kernels,
                  "from " + args.peers_venv if has_ort else "not available (bash scripts/setup_peers.sh)")]
    for h in header:
        print(h)
    rows = []
    work = tempfile.mkdtemp(prefix="bench_imported.")
    lengths = [int(n) for n in args.lengths.split(",")]
    paper = [m for m in args.models.split(",") if m == "bert_base"]
    for model in [m for m in args.models.split(",") if m and m != "bert_base"]:
        if model == "gru":
            shapes = lengths
            run(["/usr/bin/python3", RNN_EXPORT, work, model, "--lengths=" + ",".join(map(str, shapes))],
                "the export of " + model)
        elif model in ("vit_b_16", "bert"):
            shapes = lengths if model == "bert" else batches
            run(["/usr/bin/python3", TRANSFORMERS, work, model, "--size=base",
                 "--shapes=" + ",".join(map(str, shapes))], "the export of " + model)
        else:
            shapes = batches
            run(["/usr/bin/python3", EXPORT, work, model, "--size=%d" % args.size,
                 "--batches=" + ",".join(map(str, batches))],
                "the export of " + model)
        onnx_path = os.path.join(work, model + ".onnx")
        nir, nbc = os.path.join(work, model + ".nir"), os.path.join(work, model + ".nbc")
        run([tool("nimble-import-onnx"), onnx_path, "-o", nir], "nimble-import-onnx")
        run([tool("nimblec"), "-O2", nir, "-o", nbc], "nimblec")
        base_nbc = os.path.join(work, model + ".base.nbc")
        if args.baseline_tools:
            base_nir = os.path.join(work, model + ".base.nir")
            run([base_tool("nimble-import-onnx"), onnx_path, "-o", base_nir], "nimble-import-onnx (baseline)")
            run([base_tool("nimblec")] + (["--passes=" + args.baseline_passes] if args.baseline_passes else ["-O2"]) +
                [base_nir, "-o", base_nbc], "nimblec (baseline)")
        elif args.baseline_passes:
            run([tool("nimblec"), "--passes=" + args.baseline_passes, nir, "-o", base_nbc], "nimblec (baseline)")
        for T, shape in [(T, n) for T in threads for n in shapes]:
            x = os.path.join(work, "%s-x%d.npy" % (model, shape))
            y = os.path.join(work, "%s-y%d.npy" % (model, shape))
            before = benchlib.load_avg()
            print("load %.2f before %s %d, %d thread%s" % (before, model, shape, T, "s" if T > 1 else ""),
                  file=sys.stderr)
            rounds = max(1, args.rounds)
            label = ("%s n=%d" % (model, shape) if model in ("bert", "gru") else
                     "%s %dx%d b%d" % (model, 224 if model == "vit_b_16" else args.size,
                                       224 if model == "vit_b_16" else args.size, shape))
            row = {"model": label, "T": T, "load": before, "err": 0.0}
            times = {}

            def nimble_run(which, path):
                got = os.path.join(work, "%s-%s%d-%d.npy" % (model, which, T, shape))
                runner = base_tool("nimble-run") if which == "baseline" and args.baseline_tools else tool("nimble-run")
                p, cores = timed([runner, path, "--input=@" + x, "--output=@" + got,
                                  "--threads=%d" % T, "--benchmark=%d" % args.reps,
                                  "--kernels=" + args.kernels], T)
                if p.returncode != 0:
                    sys.exit("bench_imported.py: nimble-run failed: " + p.stderr[-2000:])
                a, b = np.load(got), np.load(y)
                err = float(np.abs(a - b).max()) / float(np.abs(b).max())
                if a.shape != b.shape or err > 1e-4:
                    sys.exit("bench_imported.py: Nimble's %s output differs from torch's (%.3g of max |y|)"
                             % (model, err))
                row["err"] = max(row["err"], err)
                times.setdefault(which, []).append((float(p.stdout.split("median ")[1].split(" ms")[0]), cores))
                return a

            systems = ([] if args.no_pytorch else [("pytorch", "/usr/bin/python3")]) + \
                ([("onnxruntime", peer)] if has_ort else [])
            for rnd in range(rounds):
                if args.baseline_passes or args.baseline_tools:
                    nimble_run("baseline", base_nbc)
                a = nimble_run("nimble", nbc)
                for system, python in systems:
                    ort_out = os.path.join(work, "%s-ort%d-%d.npy" % (model, T, shape))
                    p, cores = timed([python, "-c", WORKER, system, onnx_path, x, str(T), str(args.reps),
                                      str(args.warmup), EXPORT, model, ort_out], T)
                    if p.returncode != 0:
                        sys.exit("bench_imported.py: the %s worker failed: %s" % (system, p.stderr[-2000:]))
                    ms, version = p.stdout.split()
                    if system == "onnxruntime":
                        o = np.load(ort_out)
                        err_ort = float(np.abs(a - o).max()) / float(np.abs(o).max()) if a.shape == o.shape \
                            else float("inf")
                        row["err_ort"] = max(row.get("err_ort", 0.0), err_ort)
                        if err_ort > 1e-4:
                            sys.exit("bench_imported.py: Nimble's %s output differs from ORT's (%.3g of max |y|)"
                                     % (model, err_ort))
                    times.setdefault(system, []).append((float(ms), cores))
                    row[system + "_version"] = version
                print("  round %d: %s (load %.2f)" % (rnd + 1, ", ".join(
                    "%s %.1f" % (k, v[-1][0]) for k, v in times.items()), benchlib.load_avg()), file=sys.stderr)
            for k, v in times.items():
                ms = sorted(t for t, _ in v)
                row[k] = ms[len(ms) // 2] if len(ms) % 2 else 0.5 * (ms[len(ms) // 2 - 1] + ms[len(ms) // 2])
                row[k + "_cores"] = sum(c for _, c in v) / len(v)
                row[k + "_rounds"] = [t for t, _ in v]
            rows.append(row)
    pt = not args.no_pytorch
    base = bool(args.baseline_passes or args.baseline_tools)
    lines = ["| model | threads | load |" + (" baseline ms (cores) |" if base else "") + " Nimble ms (cores) |" +
             (" baseline / Nimble |" if base else "") +
             (" PyTorch ms (cores) | PyTorch / Nimble |" if pt else "") +
             (" ORT ms (cores) | ORT / Nimble |" if has_ort else ""),
             "|---|---|---|" + ("---|" if base else "") + "---|" + ("---|" if base else "") +
             ("---|---|" if pt else "") + ("---|---|" if has_ort else "")]
    for r in rows:
        line = "| %s | %d | %.1f |" % (r["model"], r["T"], r["load"])
        if base:
            line += " %.1f (%.2f) |" % (r["baseline"], r["baseline_cores"])
        line += " %.1f (%.2f) |" % (r["nimble"], r["nimble_cores"])
        if base:
            line += " %.2f |" % (r["baseline"] / r["nimble"])
        for system in (["pytorch"] if pt else []) + (["onnxruntime"] if has_ort else []):
            line += " %.1f (%.2f) | %.2f |" % (r[system], r[system + "_cores"], r[system] / r["nimble"])
        lines.append(line)
    versions = "PyTorch %s" % rows[0]["pytorch_version"] if rows and pt else ""
    if has_ort and rows:
        versions += (", " if versions else "") + "ONNX Runtime %s" % rows[0]["onnxruntime_version"]
    if rows:
        print("\n".join(lines))
        versions += "; Nimble's output within %.1e of torch's%s (largest difference / largest |y|)" % (
            max(r["err"] for r in rows),
            ", %.1e of ORT's" % max(r["err_ort"] for r in rows) if has_ort else "")
        if len(rows[0]["nimble_rounds"]) > 1:
            versions += "; medians of %d alternating rounds" % len(rows[0]["nimble_rounds"])
        print(versions)
    else:
        lines, versions = [], ""
    if paper:
        import bench_imported_paper

        more = bench_imported_paper.bert_base(args, work, threads, lengths, tool, peer if has_ort else None)
        lines += [""] + more
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(["```text"] + header + ["```", ""] + lines + ["", versions, ""]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
