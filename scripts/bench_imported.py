#!/usr/bin/env python3
"""Imported CNNs side by side: Nimble (the model's .onnx through
nimble-import-onnx and nimblec) against PyTorch eager and ONNX Runtime on the
same file, in one run, with ratios.

    /usr/bin/python3 scripts/bench_imported.py [--models resnet18,mobilenet_v2,vit_b_16,bert,bert_base]
        [--size 224] [--batch 1] [--lengths 16,64,128] [--threads 1,2] [--reps 10] [--warmup 2]
        [--rounds 3] [--kernels auto] [--peers-venv DIR] [--tools DIR] [--markdown FILE]

Models: resnet18, mobilenet_v2 (torchvision, --size x --size images, batch
--batch), vit_b_16 (torchvision's ViT-B/16, 224x224, batch --batch) and bert
(BERT-base written as Hugging Face's BertModel, one sequence of each of
--lengths; test/import-onnx/Inputs/transformer_export.py --size=base) are
timed as below. bert_base is the paper's BERT-base of models/bert, whose
hand-written .nir exists: see "Imported against hand-written" at the end.

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


def timed(cmd, T):
    """(CompletedProcess, cores used)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=benchlib.thread_env(T))
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
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--lengths", default="16,64,128", help="bert and bert_base: sequence lengths")
    ap.add_argument("--rounds", type=int, default=3, help="bert_base: alternating rounds")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--kernels", default="auto", help="nimble-run --kernels (default auto)")
    ap.add_argument("--peers-venv", default=os.path.join(ROOT, ".peers-venv"))
    ap.add_argument("--tools", default=os.path.join(ROOT, "bazel-bin", "tools"))
    ap.add_argument("--markdown", help="also write the table as markdown to FILE")
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    tool = lambda n: os.path.join(args.tools, n)
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
              "images %dx3x%dx%d (CNNs; ViT 224x224); lengths %s (BERT); nimble-run --kernels=%s; "
              "ONNX Runtime: %s" % (args.batch, args.size, args.size, args.lengths, args.kernels,
                  "from " + args.peers_venv if has_ort else "not available (bash scripts/setup_peers.sh)")]
    for h in header:
        print(h)
    rows = []
    work = tempfile.mkdtemp(prefix="bench_imported.")
    lengths = [int(n) for n in args.lengths.split(",")]
    paper = [m for m in args.models.split(",") if m == "bert_base"]
    for model in [m for m in args.models.split(",") if m and m != "bert_base"]:
        if model in ("vit_b_16", "bert"):
            shapes = lengths if model == "bert" else [args.batch]
            run(["/usr/bin/python3", TRANSFORMERS, work, model, "--size=base",
                 "--shapes=" + ",".join(map(str, shapes))], "the export of " + model)
        else:
            shapes = [args.batch]
            run(["/usr/bin/python3", EXPORT, work, model, "--size=%d" % args.size, "--batches=%d" % args.batch],
                "the export of " + model)
        onnx_path = os.path.join(work, model + ".onnx")
        nir, nbc = os.path.join(work, model + ".nir"), os.path.join(work, model + ".nbc")
        run([tool("nimble-import-onnx"), onnx_path, "-o", nir], "nimble-import-onnx")
        run([tool("nimblec"), "-O2", nir, "-o", nbc], "nimblec")
        for T, shape in [(T, n) for T in threads for n in shapes]:
            x = os.path.join(work, "%s-x%d.npy" % (model, shape))
            y = os.path.join(work, "%s-y%d.npy" % (model, shape))
            before = benchlib.load_avg()
            print("load %.2f before %s %d, %d thread%s" % (before, model, shape, T, "s" if T > 1 else ""),
                  file=sys.stderr)
            got = os.path.join(work, "%s-nimble%d-%d.npy" % (model, T, shape))
            p, nimble_cores = timed([tool("nimble-run"), nbc, "--input=@" + x, "--output=@" + got,
                                     "--threads=%d" % T, "--benchmark=%d" % args.reps,
                                     "--kernels=" + args.kernels], T)
            if p.returncode != 0:
                sys.exit("bench_imported.py: nimble-run failed: " + p.stderr[-2000:])
            nimble = float(p.stdout.split("median ")[1].split(" ms")[0])
            a, b = np.load(got), np.load(y)
            err = float(np.abs(a - b).max()) / float(np.abs(b).max())
            if a.shape != b.shape or err > 1e-4:
                sys.exit("bench_imported.py: Nimble's %s output differs from torch's (%.3g of max |y|)" % (model, err))
            label = ("%s n=%d" % (model, shape) if model == "bert" else
                     "%s %dx%d b%d" % (model, 224 if model == "vit_b_16" else args.size,
                                       224 if model == "vit_b_16" else args.size, shape))
            row = {"model": label, "T": T, "nimble": nimble, "nimble_cores": nimble_cores, "err": err,
                   "load": before}
            systems = [("pytorch", "/usr/bin/python3")] + ([("onnxruntime", peer)] if has_ort else [])
            for system, python in systems:
                ort_out = os.path.join(work, "%s-ort%d-%d.npy" % (model, T, shape))
                p, cores = timed([python, "-c", WORKER, system, onnx_path, x, str(T), str(args.reps),
                                  str(args.warmup), EXPORT, model, ort_out], T)
                if p.returncode != 0:
                    sys.exit("bench_imported.py: the %s worker failed: %s" % (system, p.stderr[-2000:]))
                ms, version = p.stdout.split()
                if system == "onnxruntime":
                    o = np.load(ort_out)
                    row["err_ort"] = float(np.abs(a - o).max()) / float(np.abs(o).max()) if a.shape == o.shape \
                        else float("inf")
                    if row["err_ort"] > 1e-4:
                        sys.exit("bench_imported.py: Nimble's %s output differs from ORT's (%.3g of max |y|)"
                                 % (model, row["err_ort"]))
                row[system], row[system + "_cores"], row[system + "_version"] = float(ms), cores, version
            rows.append(row)
    lines = ["| model | threads | load | Nimble ms (cores) | PyTorch ms (cores) | PyTorch / Nimble |" +
             (" ORT ms (cores) | ORT / Nimble |" if has_ort else ""),
             "|---|---|---|---|---|---|" + ("---|---|" if has_ort else "")]
    for r in rows:
        line = "| %s | %d | %.1f | %.1f (%.2f) | %.1f (%.2f) | %.2f |" % (
            r["model"], r["T"], r["load"], r["nimble"], r["nimble_cores"], r["pytorch"],
            r["pytorch_cores"], r["pytorch"] / r["nimble"])
        if has_ort:
            line += " %.1f (%.2f) | %.2f |" % (r["onnxruntime"], r["onnxruntime_cores"],
                                              r["onnxruntime"] / r["nimble"])
        lines.append(line)
    versions = "PyTorch %s" % rows[0]["pytorch_version"] if rows else ""
    if has_ort and rows:
        versions += ", ONNX Runtime %s" % rows[0]["onnxruntime_version"]
    if rows:
        print("\n".join(lines))
        versions += "; Nimble's output within %.1e of torch's%s (largest difference / largest |y|)" % (
            max(r["err"] for r in rows),
            ", %.1e of ORT's" % max(r["err_ort"] for r in rows) if has_ort else "")
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
