#!/usr/bin/env python3
"""Native kernels, measured side by side in one run (docs/codegen.md, perf.md).

    /usr/bin/python3 scripts/bench_kernels.py [--reps N] [--mcpu CPU] [--nimblec P] [--nimble-run P]
                                              [--sections 1,2,3,4,5,6,7,8] [--baseline-run P]
                                              [--baseline-nimblec P] [--rounds N]

Prints, on this machine (CPU model and features in the header):

1. Memory bandwidth, STREAM-style, with numpy on one thread: copy (2 streams)
   and add (3 streams) over 256 MiB arrays; the best of --reps.
2. Symbolic vs static: the same fused element-wise group (an LSTM-style gate:
   add, sigmoid, tanh, mul) compiled once with a static length and once with
   `?`, run on the same lengths, which are and are not multiples of the vector
   width. Ratio symbolic / static of the median latency (goal: <= 1.05).
3. Native vs reference on the same kernels, and the effective GB/s of the
   large ones (bytes read and written / time) against the measured bandwidth.
4. The GEMV of the LSTM (1x512 . 512x2048, a 4 MiB f32 weight): native,
   oneDNN and reference, GB/s of the weight stream, warm (one weight, in
   cache across calls; against the read bandwidth of a 4 MiB working set,
   scripts/floors.py) and cold (16 weights in turn, 64 MiB: each streams from
   DRAM; against section 1's bandwidth).
5. The GEMMs of BERT-base at sequence 128 (M = 128; 768x768, 768x3072,
   3072x768, bias added in the same kernel; B stored [N, K] as the models do,
   and [K, N]), on the generated
   kernel (--kernels=native) and on oneDNN (--kernels=library), at 1 and 2
   threads: GFLOP/s of the kernel time. Then the cost of a oneDNN primitive
   cache miss: the first call's kernel time minus a later call's.
6. The models' other products at one thread, native against oneDNN: the
   LSTMs' one-token x . W^T (300 and 512 inputs) and BERT-base's attention
   batch_matmuls at sequence 128 (scores q . k^T, context p . v).
7. Two threads on cold constant weights (docs/perf.md, "BERT-base at two
   threads: the column split"): BERT-base's FFN shapes as six 768x3072 /
   3072x768 pairs of constants (113 MB: more than the EPYC's 32 MiB L3, not the
   Xeon's 260 MiB), bias added,
   chained, on the library path (--kernels=library: oneDNN, or from 2 to 32
   rows the runtime's panel kernel where it runs, AVX-512 CPUs by default:
   vm/dispatch/PanelProduct.h) at M = 8,
   16, 32, 64 and 128 rows: ms a run at 1 and 2 threads and their ratio;
   with --baseline-run, that nimble-run's 1- and 2-thread times too,
   alternating with this one (the same .nbc), and baseline / this (a
   baseline of `NIMBLE_PANEL_PRODUCT=0 exec nimble-run "$@"` in a script
   compares the panel kernel with oneDNN). Then cold / hot: the chain's time a pair
   against one pair alone (19 MB, hot in the L3 from call to call).

8. Tree-LSTM's one-row products, hot in L2 (issue 52; docs/perf.md,
   "Tree-LSTM's one-row products"): the leaf's 1x300 . (450x300)^T, the
   node's 1x150 . (450x150)^T and its pair h_l . U_f^T + h_r . U_f^T (one
   kernel: KernelMatMul.cpp's weight pairs), --kernels=native, 1 thread: us
   a call of the kernel time and GB/s of the weight bytes the call must read
   (the pair's U_f once). With --baseline-nimblec, the same kernels compiled
   by that nimblec too (another build: the generated code is what differs),
   run alternating with this one's for --rounds rounds: the medians and
   baseline / this, the median of the rounds' ratios and their range.

--sections runs some of them (2 and 3 are one table; 4 needs 1's bandwidth,
so it runs 1 too).

Kernel times come from nimble-run --profile over --benchmark runs (total
kernel time / runs; 1 microsecond resolution over all runs); the whole call's
median, which adds the VM's work around the kernel, is shown beside it.
Threads: one (--threads=1) except where a section says; numpy's elementwise
loops are single-threaded (OPENBLAS_NUM_THREADS etc. are set to 1 anyway).
"""

import argparse
import atexit
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"

import numpy as np  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floors  # noqa: E402

GATE = """func @main(%x: tensor<{n}xf32>, %h: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %s = add %x, %h
  %i = sigmoid %s
  %t = tanh %h
  %c = mul %i, %t
  ret %c
}}
"""

BMM_T = """func @main(%q: tensor<12x?x64xf32>, %k: tensor<12x?x64xf32>) -> tensor<12x?x?xf32> {
  %s = batch_matmul %q, %k, transpose_b=true
  ret %s
}
"""

BMM = """func @main(%p: tensor<12x?x?xf32>, %v: tensor<12x?x64xf32>) -> tensor<12x?x64xf32> {
  %c = batch_matmul %p, %v
  ret %c
}
"""

# x . W^T + bias, W stored [N, K] as the models store it; W and b are
# parameters here (the cold runs pass a different W each call), unlike
# floors.GEMM's constants.
GEMM = """func @main(%x: tensor<?x{k}xf32>, %w: tensor<{n}x{k}xf32>, %b: tensor<{n}xf32>) -> tensor<?x{n}xf32> {{
  %m = matmul %x, %w, transpose_b=true
  %y = add %m, %b
  ret %y
}}
"""

GEMM_KN = """func @main(%x: tensor<?x{k}xf32>, %w: tensor<{k}x{n}xf32>, %b: tensor<{n}xf32>) -> tensor<?x{n}xf32> {{
  %m = matmul %x, %w
  %y = add %m, %b
  ret %y
}}
"""

# Tree-LSTM's node: the forget gates' two products of U_f, one kernel.
PAIR = """func @main(%hl: tensor<1x150xf32>, %hr: tensor<1x150xf32>, %uf: tensor<150x150xf32>) -> tensor<1x150xf32> {
  %gl = matmul %hl, %uf, transpose_b=true
  %gr = matmul %hr, %uf, transpose_b=true
  %g = add %gl, %gr
  ret %g
}
"""

ONE_ROW = """func @main(%x: tensor<1x{k}xf32>, %w: tensor<{n}x{k}xf32>) -> tensor<1x{n}xf32> {{
  %y = matmul %x, %w, transpose_b=true
  ret %y
}}
"""

GEMV = """func @main(%x: tensor<1x512xf32>, %w: tensor<2048x512xf32>) -> tensor<1x2048xf32> {
  %y = matmul %x, %w, transpose_b=true
  ret %y
}
"""


def cpu_header():
    model = "unknown"
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = [f for f in ("avx2", "fma", "avx512f", "amx_tile") if f in flags]
    return "%s; %s; %d cores; %s" % (model, " ".join(isa) or "no AVX2", os.cpu_count(), platform.machine())


def bandwidth(reps):
    n = 256 * 1024 * 1024 // 4
    a = np.ones(n, np.float32)
    b = np.ones(n, np.float32)
    c = np.ones(n, np.float32)
    copy = add = 0.0
    for _ in range(reps):
        t = time.perf_counter()
        np.copyto(a, b)
        copy = max(copy, 2 * a.nbytes / (time.perf_counter() - t) / 1e9)
        t = time.perf_counter()
        np.add(b, c, out=a)
        add = max(add, 3 * a.nbytes / (time.perf_counter() - t) / 1e9)
    return copy, add


def compile_nir(nimblec, text, path, kernels, mcpu):
    nir = path + ".nir"
    with open(nir, "w") as f:
        f.write(text)
    cmd = [nimblec, nir, "-o", path, "--kernels=" + kernels]
    if mcpu and kernels == "native":
        cmd.append("--mcpu=" + mcpu)
    subprocess.run(cmd, check=True)
    return path


timings = floors.timings


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--mcpu", default="")
    ap.add_argument("--nimblec", default=os.path.join(REPO, "bazel-bin", "tools", "nimblec"))
    ap.add_argument("--nimble-run", default=os.path.join(REPO, "bazel-bin", "tools", "nimble-run"))
    ap.add_argument("--sections", default="1,2,3,4,5,6,7,8", help="which sections to run (default: all)")
    ap.add_argument("--baseline-run", help="section 7: a second nimble-run to time beside --nimble-run")
    ap.add_argument("--baseline-nimblec", help="section 8: a second nimblec whose kernels run beside --nimblec's")
    ap.add_argument("--rounds", type=int, default=5, help="section 8: alternating rounds (default 5)")
    args = ap.parse_args()
    sections = {int(x) for x in args.sections.split(",") if x}
    if sections - set(range(1, 9)):
        ap.error("--sections takes numbers from 1 to 8")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if 4 in sections:
        sections.add(1)
    if sections & {2, 3}:
        sections |= {2, 3}
    work = tempfile.mkdtemp(prefix="nimble-bench-kernels-")
    # Removed at exit: section 7 alone leaves 130 MB of weights behind.
    atexit.register(shutil.rmtree, work, True)
    print("CPU: " + cpu_header())
    print("load average before: %.2f" % os.getloadavg()[0])
    rng = np.random.default_rng(0)
    if 1 in sections:
        copy, add = bandwidth(max(3, args.reps // 4))
        print("bandwidth (numpy, 1 thread, 256 MiB): copy %.1f GB/s, add %.1f GB/s" % (copy, add))
    if 2 in sections:
        gate_table(args, work, rng)
    if 4 in sections:
        gemv_section(args, work, rng, copy)
    if 5 in sections:
        gemm_section(args, work, rng)
    if 6 in sections:
        others_section(args, work, rng)
    if 7 in sections:
        chain_section(args, work, rng)
    if 8 in sections:
        tree_section(args, work, rng)
    print("load average after: %.2f" % os.getloadavg()[0])
    return 0


def gate_table(args, work, rng):
    print("\ngate group (add, sigmoid, tanh, mul): kernel time per call in microseconds (whole call in"
          " parentheses), symbolic/static and reference/native ratios of the kernel time:")
    print("%9s %19s %19s %9s %19s %9s %8s" % ("n", "static", "symbolic", "sym/stat", "reference", "ref/sym", "GB/s"))
    dyn = compile_nir(args.nimblec, GATE.format(n="?"), os.path.join(work, "gate_dyn.nbc"), "native", args.mcpu)
    ref = compile_nir(args.nimblec, GATE.format(n="?"), os.path.join(work, "gate_ref.nbc"), "reference", "")
    for n in (1, 15, 16, 17, 127, 128, 1000, 4096, 1 << 20, 1 << 24):
        x = os.path.join(work, "x%d.npy" % n)
        h = os.path.join(work, "h%d.npy" % n)
        np.save(x, rng.standard_normal(n).astype(np.float32))
        np.save(h, rng.standard_normal(n).astype(np.float32))
        st = compile_nir(args.nimblec, GATE.format(n=n), os.path.join(work, "gate%d.nbc" % n), "native", args.mcpu)
        reps = args.reps if n < (1 << 22) else max(3, args.reps // 5)
        c_st, k_st = timings(args.nimble_run, st, [x, h], reps)
        c_dyn, k_dyn = timings(args.nimble_run, dyn, [x, h], reps)
        c_ref, k_ref = timings(args.nimble_run, ref, [x, h], max(3, reps // 2))
        gbs = 3 * 4 * n / (k_dyn * 1e-3) / 1e9 if k_dyn > 0 else float("nan")
        cell = lambda k, c: "%8.2f (%8.2f)" % (k * 1e3, c * 1e3)  # noqa: E731
        ratio = lambda a, b: a / b if b > 0 else float("nan")  # noqa: E731
        print("%9d %19s %19s %9.3f %19s %9.1f %8.2f" % (n, cell(k_st, c_st), cell(k_dyn, c_dyn),
                                                      ratio(k_dyn, k_st), cell(k_ref, c_ref),
                                                      ratio(k_ref, k_dyn), gbs))


def gemv_section(args, work, rng, copy):
    # Warm: one 4 MiB weight, in this CPU's L2 / L3 across calls, against the
    # read bandwidth of a 4 MiB working set (scripts/floors.py). Cold: 16
    # different 4 MiB weights one after another (64 MiB, more than any L3 of
    # these machines), so every product streams its weight from DRAM, against
    # the 256 MiB bandwidth (issue 12: at least 80% of it).
    wbytes = 4 * 2048 * 512
    print("\nGEMV 1x512 . (2048x512)^T, a 4 MiB weight, kernel time per product:")
    x = os.path.join(work, "gx.npy")
    w = os.path.join(work, "gw.npy")
    np.save(x, rng.standard_normal((1, 512)).astype(np.float32))
    np.save(w, rng.standard_normal((2048, 512)).astype(np.float32))
    nat = compile_nir(args.nimblec, GEMV, os.path.join(work, "gemv_nat.nbc"), "native", args.mcpu)
    ref = compile_nir(args.nimblec, GEMV, os.path.join(work, "gemv_ref.nbc"), "reference", "")
    _, t_nat = timings(args.nimble_run, nat, [x, w], args.reps)
    _, t_ref = timings(args.nimble_run, ref, [x, w], max(3, args.reps // 4), ("--threads=1", "--kernels=reference"))
    _, t_lib = timings(args.nimble_run, nat, [x, w], args.reps, ("--threads=1", "--kernels=library"))
    warm_copy, warm_dot = floors.read_bandwidth(wbytes, 1, max(5, args.reps // 2))
    warm_bw = warm_dot  # read-only, as the GEMV's weight (scripts/floors.py)
    gbs = lambda t: wbytes / (t * 1e-3) / 1e9  # noqa: E731
    print("warm: read bandwidth of a 4 MiB working set %.1f GB/s (numpy copy %.1f, dot %.1f)" % (
        warm_bw, warm_copy, warm_dot))
    print("warm: native %.4f ms (%.1f GB/s, %.0f%% of it), oneDNN %.4f ms (%.1f GB/s), reference %.4f ms "
          "(native %.1fx faster)" % (t_nat, gbs(t_nat), 100 * gbs(t_nat) / warm_bw, t_lib, gbs(t_lib), t_ref,
                                     t_ref / t_nat))
    copies = 16
    params = ", ".join("%%w%d: tensor<2048x512xf32>" % i for i in range(copies))
    body = "\n".join("  %%y%d = matmul %%x, %%w%d, transpose_b=true" % (i, i) for i in range(copies))
    text = "func @main(%%x: tensor<1x512xf32>, %s) -> (%s) {\n%s\n  ret %s\n}\n" % (
        params, ", ".join(["tensor<1x2048xf32>"] * copies), body, ", ".join("%%y%d" % i for i in range(copies)))
    cold = compile_nir(args.nimblec, text, os.path.join(work, "gemv_cold.nbc"), "native", args.mcpu)
    ws = []
    for i in range(copies):
        ws.append(os.path.join(work, "gw%d.npy" % i))
        np.save(ws[-1], rng.standard_normal((2048, 512)).astype(np.float32))
    _, c_nat = timings(args.nimble_run, cold, [x] + ws, max(5, args.reps // 2))
    _, c_lib = timings(args.nimble_run, cold, [x] + ws, max(5, args.reps // 2), ("--threads=1", "--kernels=library"))
    c_nat, c_lib = c_nat / copies, c_lib / copies
    print("cold (%d weights in turn, %d MiB): native %.4f ms (%.1f GB/s, %.0f%% of the DRAM copy bandwidth %.1f), "
          "oneDNN %.4f ms (%.1f GB/s)" % (copies, copies * wbytes >> 20, c_nat, gbs(c_nat), 100 * gbs(c_nat) / copy,
                                          copy, c_lib, gbs(c_lib)))


def gemm_section(args, work, rng):
    print("\nGEMM + bias, M = 128 (BERT-base at sequence 128), GFLOP/s of the kernel time; B as the models"
          " store it ([N, K], transpose_b) and as [K, N]:")
    print("%16s %12s %12s %12s %12s %10s" % ("K x N", "native 1t", "oneDNN 1t", "native 2t", "oneDNN 2t",
                                              "lib/nat 1t"))
    for k, n, layout in ((768, 768, "NK"), (768, 3072, "NK"), (3072, 768, "NK"),
                         (768, 768, "KN"), (768, 3072, "KN"), (3072, 768, "KN")):
        text = (GEMM if layout == "NK" else GEMM_KN).format(k=k, n=n)
        nbc = compile_nir(args.nimblec, text, os.path.join(work, "gemm%s%dx%d.nbc" % (layout, k, n)),
                          "native", args.mcpu)
        xs = os.path.join(work, "gemm_x%d.npy" % k)
        ws = os.path.join(work, "gemm_w%s%dx%d.npy" % (layout, n, k))
        bs = os.path.join(work, "gemm_b%d.npy" % n)
        np.save(xs, rng.standard_normal((128, k)).astype(np.float32))
        np.save(ws, rng.standard_normal((n, k) if layout == "NK" else (k, n)).astype(np.float32))
        np.save(bs, rng.standard_normal(n).astype(np.float32))
        flop = 2.0 * 128 * k * n
        rates = {}
        for threads in (1, 2):
            for impl in ("native", "library"):
                _, t = timings(args.nimble_run, nbc, [xs, ws, bs], max(5, args.reps // 2),
                               ("--threads=%d" % threads, "--kernels=" + impl))
                rates[impl, threads] = flop / (t * 1e-3) / 1e9
        print("%16s %12.1f %12.1f %12.1f %12.1f %10.2f" % (
            "%dx%d %s" % (k, n, layout), rates["native", 1], rates["library", 1], rates["native", 2],
            rates["library", 2], rates["library", 1] / rates["native", 1]))
        if (k, n, layout) == (768, 768, "NK"):
            # A cache miss: the time oneDNN took to create the primitive
            # (nimble-run --profile reports it), against a cached call.
            cmd = [args.nimble_run, nbc, "--profile", "--threads=1", "--kernels=library",
                   "--input=@" + xs, "--input=@" + ws, "--input=@" + bs]
            misses = []
            for _ in range(5):
                p = subprocess.run(cmd, capture_output=True, text=True, check=True)
                misses.append(float(re.search(r"primitives created .* in ([0-9.]+) ms", p.stderr).group(1)))
            miss = sorted(misses)[len(misses) // 2]
            _, cached = timings(args.nimble_run, nbc, [xs, ws, bs], args.reps, ("--threads=1", "--kernels=library"))
    print("oneDNN primitive cache miss (768x768 + bias, median of 5): %.3f ms to create the primitive;"
          " a cached call takes %.3f ms" % (miss, cached))


def others_section(args, work, rng):
    # The issue's other shapes (docs/perf.md, "Library kernels"): the LSTMs'
    # one-token products and BERT-base's attention batch_matmuls at 128.
    print("\nThe models' other products, 1 thread, GFLOP/s of the kernel time:")
    print("%-44s %10s %10s %10s" % ("product", "native", "oneDNN", "lib/nat"))
    others = [
        ("1x300 . (2048x300)^T (LSTM input, 1 token)", GEMM.format(k=300, n=2048),
         [(1, 300), (2048, 300), (2048,)], 2.0 * 300 * 2048),
        ("1x512 . (2048x512)^T (LSTM recurrence)", GEMM.format(k=512, n=2048),
         [(1, 512), (2048, 512), (2048,)], 2.0 * 512 * 2048),
        ("12x128x64 . (12x128x64)^T (BERT scores)", BMM_T, [(12, 128, 64), (12, 128, 64)],
         2.0 * 12 * 128 * 128 * 64),
        ("12x128x128 . 12x128x64 (BERT context)", BMM, [(12, 128, 128), (12, 128, 64)],
         2.0 * 12 * 128 * 128 * 64),
    ]
    for i, (name, text, shapes, flop) in enumerate(others):
        nbc = compile_nir(args.nimblec, text, os.path.join(work, "other%d.nbc" % i), "native", args.mcpu)
        ins = []
        for j, shp in enumerate(shapes):
            path = os.path.join(work, "other%d_%d.npy" % (i, j))
            np.save(path, rng.standard_normal(shp).astype(np.float32))
            ins.append(path)
        rate = {}
        for impl in ("native", "library"):
            _, t = timings(args.nimble_run, nbc, ins, max(5, args.reps // 2), ("--threads=1", "--kernels=" + impl))
            rate[impl] = flop / (t * 1e-3) / 1e9
        print("%-44s %10.1f %10.1f %10.2f" % (name, rate["native"], rate["library"], rate["library"] / rate["native"]))


def chain_nbc(args, work, rng, pairs, tag):
    """A chain of `pairs` BERT-base FFN pairs of constants, compiled; (path, MB)."""
    sys.path.insert(0, REPO)
    from models.common.nimble_io import write_safetensors
    tensors, consts, body = {}, [], []
    for i in range(pairs):
        for name, shape in (("a%d" % i, (3072, 768)), ("b%d" % i, (768, 3072))):
            tensors[name] = (rng.standard_normal(shape) * 0.03).astype(np.float32)
            tensors["bias_" + name] = rng.standard_normal(shape[0]).astype(np.float32)
            consts.append('const @%s : tensor<%dx%dxf32> = external("%s.safetensors", "%s")'
                          % ((name,) + shape + (tag, name)))
            consts.append('const @bias_%s : tensor<%dxf32> = external("%s.safetensors", "bias_%s")'
                          % (name, shape[0], tag, name))
        body.append("  %%m%d = matmul %%x%d, @a%d, transpose_b=true\n  %%h%d = add %%m%d, @bias_a%d" % ((i,) * 6))
        body.append("  %%n%d = matmul %%h%d, @b%d, transpose_b=true\n  %%x%d = add %%n%d, @bias_b%d" % (i, i, i, i + 1, i, i))
    write_safetensors(os.path.join(work, tag + ".safetensors"), tensors)
    text = "\n".join(consts) + "\n\nfunc @main(%%x0: tensor<?x768xf32>) -> tensor<?x768xf32> {\n%s\n  ret %%x%d\n}\n" % (
        "\n".join(body), pairs)
    nbc = compile_nir(args.nimblec, text, os.path.join(work, tag + ".nbc"), "native", args.mcpu)
    return nbc, sum(t.nbytes for t in tensors.values()) / 1e6


def chain_section(args, work, rng):
    pairs = 6
    nbc, mb = chain_nbc(args, work, rng, pairs, "chain")
    # One pair alone (19 MB) stays in the L3 from call to call: the same
    # products with hot weights, per pair, beside the cold chain's per pair.
    hot_nbc, _ = chain_nbc(args, work, rng, 1, "chain_hot")
    print("\nTwo threads on cold constant weights: %d BERT-base FFN pairs (%.0f MB), library path, ms a run (median):"
          % (pairs, mb))
    cols = ["1t", "2t", "1t/2t"]
    if args.baseline_run:
        cols += ["baseline 1t", "baseline/this", "baseline 2t", "baseline/this"]
    cols += ["1t cold/hot", "2t cold/hot"]
    print("%6s" % "rows" + "".join("%14s" % c for c in cols))
    ratio_cols = {2, 4, 6} if args.baseline_run else {2}
    median = lambda v: sorted(v)[len(v) // 2]
    for m in (8, 16, 32, 64, 128):
        x = os.path.join(work, "chain_x%d.npy" % m)
        np.save(x, (rng.standard_normal((m, 768)) * 0.1).astype(np.float32))
        run = lambda binary, t, exe=nbc: timings(binary, exe, [x], args.reps, ("--threads=%d" % t, "--kernels=library"))[0]
        this = {t: [run(args.nimble_run, t)] for t in (1, 2)}
        base = {1: [], 2: []}
        if args.baseline_run:
            for _ in range(2):   # alternating: base, this, base, this (medians of each)
                for t in (1, 2):
                    base[t].append(run(args.baseline_run, t))
                    this[t].append(run(args.nimble_run, t))
        one, two_ms = median(this[1]), median(this[2])
        row = [one, two_ms, one / two_ms]
        if args.baseline_run:
            for t, ms in ((1, one), (2, two_ms)):
                row += [median(base[t]), median(base[t]) / ms]
        hot = [run(args.nimble_run, t, hot_nbc) for t in (1, 2)]
        row += [one / pairs / hot[0], two_ms / pairs / hot[1]]
        ratio_cols |= {len(row) - 2, len(row) - 1}
        print("%6d" % m + "".join("%14.3f" % v if j not in ratio_cols else "%13.2fx" % v for j, v in enumerate(row)))

def tree_section(args, work, rng):
    products = [
        ("leaf 1x300 . (450x300)^T", ONE_ROW.format(k=300, n=450), [(1, 300), (450, 300)], 4 * 450 * 300),
        ("node 1x150 . (450x150)^T", ONE_ROW.format(k=150, n=450), [(1, 150), (450, 150)], 4 * 450 * 150),
        ("node pair 2 x 1x150 . (150x150)^T", PAIR, [(1, 150), (1, 150), (150, 150)], 4 * 150 * 150),
    ]
    base = args.baseline_nimblec
    print("\nTree-LSTM's one-row products, native, 1 thread, hot in L2: us a call (kernel time), GB/s of the"
          " weight%s:" % (", %d alternating rounds against --baseline-nimblec" % args.rounds if base else ""))
    cols = ["this us", "GB/s"] + (["baseline us", "GB/s", "base/this", "rounds' ratios"] if base else [])
    print("%-36s" % "product" + "".join("%14s" % c for c in cols[:5]) + ("  %s" % cols[5] if base else ""))
    reps = max(500, 100 * args.reps)
    median = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
    for i, (name, text, shapes, wbytes) in enumerate(products):
        ins = []
        for j, shp in enumerate(shapes):
            path = os.path.join(work, "tree%d_%d.npy" % (i, j))
            np.save(path, (rng.standard_normal(shp) / np.sqrt(shp[-1])).astype(np.float32))
            ins.append(path)
        this = compile_nir(args.nimblec, text, os.path.join(work, "tree%d.nbc" % i), "native", args.mcpu)
        old = compile_nir(base, text, os.path.join(work, "tree%d_base.nbc" % i), "native", args.mcpu) if base else None
        t_this, t_old = [], []
        for _ in range(args.rounds if base else 1):
            if old:
                t_old.append(timings(args.nimble_run, old, ins, reps)[1] * 1e3)
            t_this.append(timings(args.nimble_run, this, ins, reps)[1] * 1e3)
        gbs = lambda us: wbytes / (us * 1e-6) / 1e9 if us > 0 else float("nan")  # noqa: E731
        row = "%-36s%14.2f%14.1f" % (name, median(t_this), gbs(median(t_this)))
        if old:
            ratios = sorted(o / t for o, t in zip(t_old, t_this) if t > 0)
            row += "%14.2f%14.1f%13.2fx  median %.2fx [%.2f-%.2f]" % (
                median(t_old), gbs(median(t_old)), median(t_old) / median(t_this), median(ratios), ratios[0],
                ratios[-1])
        print(row)


if __name__ == "__main__":
    sys.exit(main())
