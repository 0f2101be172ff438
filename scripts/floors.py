#!/usr/bin/env python3
"""The floors the performance issues measure Nimble against (issues 12 and 13),
measured on this machine in the same run as the figures they bound.

    /usr/bin/python3 scripts/floors.py [--threads 1,2] [--reps 20]

prints what bench_models.py uses (it imports this module):

* read bandwidth by working set: for each size, T processes (T = threads) each
  stream their share of the working set, warm, over and over: numpy dot
  (bytes read, the access of a GEMV's weight) and, where a C compiler is
  found, a C reader built here for this CPU (-march=native; T threads, each
  reading its share as four streams with software prefetches 4 KiB ahead):
  the floors use the better of the two; numpy copy (bytes read + written)
  is printed beside them. Summed over the processes, best repetition kept.
  (Copy was used too, the better of the two; at 0.9 MiB, inside L2, it
  measured 87 to 205 GB/s in three runs of one hour, dot 117 to 130.) The
  C reader since issue 52: on the Intel Xeon one stream a core gets 11 to
  14 GB/s from DRAM and numpy's dot 13.7, four prefetched streams 17.4, and
  from a 4 MiB working set numpy's dot 29 GB/s where the runtime's one-row
  product read the LSTM's W_hh faster (the LSTM rows were 0.53-0.90x of
  their floor): a floor below what code reaches is no floor.
  256 MiB is DRAM; the models' weights (0.9 MB for Tree-LSTM, 4 MiB per LSTM
  layer) sit in this CPU's L2 / L3 across calls, and their floors use the
  bandwidth at their own working set.
* GEMM rate of oneDNN and of the generated kernel at M = 128 (BERT-base's
  768x768, 768x3072 and 3072x768 with bias, and the LSTMs' input
  projections), from `nimble-run --profile` kernel time at T threads, the
  best of three runs. Weight and bias are constants, as in the models, so
  the rate is that of the path the models take (oneDNN: weights packed
  once, and on two threads a block of columns per thread; until
  2026-11-26 they were parameters, which measured oneDNN's own two-thread
  split).

and the floors, per model (docs/perf.md, "Floors"):

* BERT-base at n tokens: per GEMM shape, a roofline: the larger of its
  arithmetic (12 layers: Q, K, V and output projections n x 768 x 768
  each, FFN n x 768 x 3072 and back, attention 2 x n x n x 768) at oneDNN's
  rate for the matching shape at M = 128 (issue 12: "22.4 GFLOP at the GEMM
  rate the same script measures for oneDNN"; attention at the 768x768
  rate; 22.35 GFLOP at n = 128) and its weights (340 MB in all, far over
  any cache) read once from DRAM at the 256 MiB bandwidth. At 128 tokens
  the arithmetic decides; at 16 tokens on two threads the weights do (each
  weight is read for 16 rows: about 8 FLOP a byte).
* LSTM, L layers, hidden 512, per token: every layer's W_hh (4 MiB) read
  once, plus the input projections (batched over the sequence: 2 x in x
  2048 FLOP per token and layer) at the better of oneDNN's and the
  generated kernel's rate for that shape at M = 128 (issue 13). Of the
  L x 4 MiB, what the T cores' L2s can hold (sysfs's L2 size a core; the
  runtime keeps the part a core read last there, reading it first the next
  token) is read at the L2 rate (the "l2" working set: half of each core's
  L2), the rest at the bandwidth of L x 4 MiB (since issue 52: with the
  whole weight at the L3 rate the Xeon's LSTM rows were 0.53-0.90x of
  their floor).
* Tree-LSTM (300 -> 150, child-sum, binary trees): a leaf reads W_iou
  (450 x 300), an internal node U_iou (450 x 150) and U_f (150 x 150, used
  for both children); per node the larger of bytes / bandwidth and FLOP /
  GEMM rate (a roofline: tighter than issue 13's sum of the two), at the
  bandwidth of the weights' 0.9 MB working set.
"""

import argparse
import atexit
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1024 * 1024

# A linear layer as the models have them: weight and bias are constants (from
# a safetensors file beside the .nir), so the library path runs it as it runs
# BERT-base's (weights packed once; on more than one thread, a block of
# columns per thread).
GEMM = """const @w : tensor<{n}x{k}xf32> = external("{st}", "w")
const @b : tensor<{n}xf32> = external("{st}", "b")

func @main(%x: tensor<?x{k}xf32>) -> tensor<?x{n}xf32> {{
  %m = matmul %x, @w, transpose_b=true
  %y = add %m, @b
  ret %y
}}
"""

# (K, N) of the GEMMs whose rates the floors use; M = 128.
GEMM_SHAPES = ((768, 768), (768, 3072), (3072, 768), (300, 2048), (512, 2048))

TREE_IN, TREE_HIDDEN = 300, 150
LSTM_HIDDEN = 512


# ---- bandwidth ------------------------------------------------------------------------------------


def _stream(nbytes, reps, barrier, out):
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    n = max(16, nbytes // 8)  # two arrays of half the share each
    a = np.ones(n, np.float32)
    b = np.ones(n, np.float32)
    inner = max(1, int(64 * MiB // max(nbytes, 1)))  # enough work per timing for small sets
    for _ in range(3):
        np.copyto(a, b)
        float(np.dot(a, b))
    barrier.wait()
    best_copy = best_dot = 0.0
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(inner):
            np.copyto(a, b)
        dt = time.perf_counter() - t
        best_copy = max(best_copy, inner * 2 * a.nbytes / dt)
        t = time.perf_counter()
        for _ in range(inner):
            float(np.dot(a, b))
        dt = time.perf_counter() - t
        best_dot = max(best_dot, inner * 2 * a.nbytes / dt)
    out.put((best_copy, best_dot))


def read_bandwidth(nbytes, threads=1, reps=10):
    """(copy GB/s, dot GB/s) over a warm working set of nbytes, split over `threads` processes."""
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(threads), ctx.Queue()
    procs = [ctx.Process(target=_stream, args=(nbytes // threads, reps, barrier, out)) for _ in range(threads)]
    for p in procs:
        p.start()
    res = [out.get() for _ in procs]
    for p in procs:
        p.join()
    return sum(r[0] for r in res) / 1e9, sum(r[1] for r in res) / 1e9


# The C reader: `reader BYTES THREADS REPS` prints the best GB/s of THREADS threads each reading
# its BYTES / THREADS share (warm, over and over, so that each timing reads at least 64 MiB a
# thread), as four streams a quarter of the share apart, 64 bytes of each a step, with a prefetch
# 4 KiB ahead in each.
READER_C = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef float v16 __attribute__((vector_size(64)));
static size_t share, inner;
static int threads, reps;
static pthread_barrier_t barrier;
static double best, t0;
static volatile float sink;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static __attribute__((noinline)) float pass(const v16 *a, size_t n) { /* n vectors, 4 streams */
  const size_t q = n / 4;
  v16 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
  for (size_t i = 0; i < q; ++i) {
    __builtin_prefetch(a + i + 64, 0, 3);
    __builtin_prefetch(a + q + i + 64, 0, 3);
    __builtin_prefetch(a + 2 * q + i + 64, 0, 3);
    __builtin_prefetch(a + 3 * q + i + 64, 0, 3);
    s0 += a[i];
    s1 += a[q + i];
    s2 += a[2 * q + i];
    s3 += a[3 * q + i];
  }
  v16 s = s0 + s1 + s2 + s3;
  float r = 0;
  for (int l = 0; l < 16; ++l) r += s[l];
  return r;
}

static void *run(void *arg) {
  const size_t n = share / 64 / 4 * 4;
  v16 *a = aligned_alloc(64, n * 64 + 64);
  if (!a) abort();
  memset(a, 0, n * 64);
  float acc = pass(a, n);
  for (int r = 0; r < reps; ++r) {
    pthread_barrier_wait(&barrier);
    if (arg == NULL) t0 = now();
    for (size_t i = 0; i < inner; ++i) {
      acc += pass(a, n);
      __asm__ volatile("" ::: "memory"); /* each pass reads the memory again */
    }
    pthread_barrier_wait(&barrier);
    if (arg == NULL) {
      const double gbs = (double)n * 64 * threads * inner / (now() - t0) / 1e9;
      if (gbs > best) best = gbs;
    }
  }
  sink = acc;
  free(a);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 4) return 2;
  const double bytes = atof(argv[1]);
  threads = atoi(argv[2]);
  reps = atoi(argv[3]);
  if (threads < 1 || threads > 64 || reps < 1 || bytes < 4096) return 2;
  share = (size_t)(bytes / threads);
  inner = share >= (64u << 20) ? 1 : (64u << 20) / share;
  pthread_barrier_init(&barrier, NULL, threads);
  pthread_t tid[64];
  for (int t = 1; t < threads; ++t) pthread_create(&tid[t], NULL, run, (void *)1);
  run(NULL);
  for (int t = 1; t < threads; ++t) pthread_join(tid[t], NULL);
  printf("%.3f\n", best);
  return 0;
}
"""

_reader = {}


def reader_path(work=None):
    """The C reader built for this CPU (cached in the process), or None without a C compiler (or when
    it does not build)."""
    if "path" in _reader:
        return _reader["path"]
    _reader["path"] = None
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if cc:
        d = work
        if d is None:
            d = tempfile.mkdtemp(prefix="nimble-reader-")
            atexit.register(shutil.rmtree, d, True)
        src, exe = os.path.join(d, "reader.c"), os.path.join(d, "reader")
        with open(src, "w") as f:
            f.write(READER_C)
        p = subprocess.run([cc, "-O2", "-march=native", "-pthread", "-o", exe, src], capture_output=True, text=True)
        if p.returncode == 0:
            _reader["path"] = exe
    return _reader["path"]


def stream_bandwidth(nbytes, threads=1, reps=10, work=None):
    """Read GB/s of the C reader over a warm working set of nbytes split over `threads` threads, or
    None when it cannot be built or run."""
    exe = reader_path(work)
    if not exe:
        return None
    p = subprocess.run([exe, str(int(nbytes)), str(threads), str(reps)], capture_output=True, text=True)
    try:
        return float(p.stdout.strip()) if p.returncode == 0 else None
    except ValueError:
        return None


# ---- GEMM rates -----------------------------------------------------------------------------------


def timings(nimble_run, nbc, inputs, reps, extra=("--threads=1", "--kernels=native")):
    """(median ms per call, kernel ms per call) from `nimble-run --benchmark=reps --profile`: the
    first includes the VM's work around the kernels (allocation, shape functions, dispatch), the
    second is the kernels' time alone. Inputs are .npy paths."""
    cmd = [nimble_run, nbc, "--benchmark=%d" % reps, "--profile", *extra] + ["--input=@" + i for i in inputs]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s failed (exit %d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    median = float(re.search(r"median ([0-9.]+) ms", p.stdout).group(1))
    runs = int(re.search(r"Kernel profile \((\d+) runs?\)", p.stderr).group(1))
    kernels_ms = float(re.search(r"Time split: kernels ([0-9.]+) ms", p.stderr).group(1))
    return median, kernels_ms / runs


def gemm_rates(nimblec, nimble_run, threads, reps=20, work=None, shapes=GEMM_SHAPES, m=128):
    """{(K, N): {(impl, T): GFLOP/s}} for impl in native, library at each T in threads."""
    # Imported here, not at the top: the pure logic of this module (the
    # floors from given rates) is used where the repository's models
    # package is not on the path (test/scripts/bench-logic.test).
    sys.path.insert(0, os.path.dirname(HERE))
    from models.common.nimble_io import write_safetensors
    own = work is None  # a directory of its own is removed at the end
    work = work or tempfile.mkdtemp(prefix="nimble-floors-")
    try:
        rng = np.random.default_rng(0)
        rates = {}
        for k, n in shapes:
            base = os.path.join(work, "floor_gemm_%dx%d" % (k, n))
            write_safetensors(base + ".safetensors", {"w": rng.standard_normal((n, k)).astype(np.float32),
                                                      "b": rng.standard_normal((n,)).astype(np.float32)})
            with open(base + ".nir", "w") as f:
                f.write(GEMM.format(k=k, n=n, st=os.path.basename(base) + ".safetensors"))
            subprocess.run([nimblec, base + ".nir", "-o", base + ".nbc"], check=True)
            ins = ["%s.x.npy" % base]
            np.save(ins[0], rng.standard_normal((m, k)).astype(np.float32))
            flop = 2.0 * m * k * n
            rates[k, n] = {}
            for T in threads:
                for impl in ("native", "library"):
                    # The best of three runs: a rate is a capability, and one slow
                    # run on a shared machine would lower every floor built on it.
                    ms = min(timings(nimble_run, base + ".nbc", ins, reps, ("--threads=%d" % T, "--kernels=" + impl))[1]
                             for _ in range(3))
                    rates[k, n][impl, T] = flop / (ms * 1e-3) / 1e9 if ms > 0 else float("nan")
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)
    return rates


# ---- the floors -----------------------------------------------------------------------------------


def bert_gemm_flops(n, layers=12, hidden=768, ffn=3072):
    """{(K, N) rate key: FLOP} of BERT-base's GEMMs at n tokens."""
    return {(768, 768): layers * (4 * 2.0 * n * hidden * hidden + 2 * 2.0 * n * n * hidden),
            (768, 3072): layers * 2.0 * n * hidden * ffn,
            (3072, 768): layers * 2.0 * n * ffn * hidden}


def bert_weight_bytes(layers=12, hidden=768, ffn=3072):
    """{(K, N) rate key: bytes of f32 weights read once a run} of BERT-base's GEMMs."""
    return {(768, 768): layers * 4 * hidden * hidden * 4.0,
            (768, 3072): layers * hidden * ffn * 4.0,
            (3072, 768): layers * ffn * hidden * 4.0}


def bert_floor_ms(n, rates, T, dram_bw):
    """Per GEMM shape the larger of FLOP / oneDNN's rate and weight bytes / DRAM bandwidth (GB/s)."""
    weights = bert_weight_bytes()
    return sum(max(f / (rates[key]["library", T] * 1e9), weights[key] / (dram_bw * 1e9))
               for key, f in bert_gemm_flops(n).items()) * 1e3


def lstm_floor_us(layers, inp, rates, bw, T, l2=None):
    """Per token: each layer's W_hh read once, plus the batched input projections. l2: None, or
    (bytes of L2 a core, GB/s of T threads reading from their L2s): what of the weights the T cores'
    L2s can keep from one token to the next (at most their capacity) is read at the L2 rate, the
    rest at bw (GB/s, the bandwidth of the weights' working set)."""
    w_hh = 4 * LSTM_HIDDEN * LSTM_HIDDEN * 4
    w = layers * w_hh
    kept = min(w, T * l2[0]) if l2 else 0
    t = (w - kept) / (bw * 1e9) + (kept / (l2[1] * 1e9) if kept else 0.0)
    for i in range(layers):
        k = inp if i == 0 else LSTM_HIDDEN
        r = rates[k, 4 * LSTM_HIDDEN]
        t += 2.0 * k * 4 * LSTM_HIDDEN / (max(r["library", T], r["native", T]) * 1e9)
    return t * 1e6


def tree_weight_bytes():
    return 4 * (3 * TREE_HIDDEN * TREE_IN + 3 * TREE_HIDDEN * TREE_HIDDEN + TREE_HIDDEN * TREE_HIDDEN)


def treelstm_floor_us(nodes, trees, gemv_rate, bw):
    """Per node over `trees` full binary trees of `nodes` nodes in all (leaves = (nodes + trees) / 2);
    gemv_rate: the GFLOP/s a one-row product reaches (the larger of the generated kernel's and oneDNN's)."""
    leaves = (nodes + trees) / 2
    inner = nodes - leaves
    leaf_bytes, leaf_flop = 4 * 3 * TREE_HIDDEN * TREE_IN, 2.0 * 3 * TREE_HIDDEN * TREE_IN
    node_bytes = 4 * (3 * TREE_HIDDEN * TREE_HIDDEN + TREE_HIDDEN * TREE_HIDDEN)
    node_flop = 2.0 * 3 * TREE_HIDDEN * TREE_HIDDEN + 2 * 2.0 * TREE_HIDDEN * TREE_HIDDEN
    leaf = max(leaf_bytes / (bw * 1e9), leaf_flop / (gemv_rate * 1e9))
    node = max(node_bytes / (bw * 1e9), node_flop / (gemv_rate * 1e9))
    return (leaves * leaf + inner * node) / nodes * 1e6


def measure(nimblec, nimble_run, threads, reps=10, work=None, progress=lambda s: None):
    """Everything the floors need, at each thread count: {"bandwidth": {T: {bytes: GB/s}},
    "bandwidth_detail": ..., "gemm": {(K, N): {(impl, T): GFLOP/s}}}."""
    l2 = l2_bytes()
    bw, detail = {}, {}
    for T in threads:
        bw[T], detail[T] = {}, {}
        sizes = {"treelstm": tree_weight_bytes(), "lstm_1l": 4 * MiB, "lstm_2l": 8 * MiB, "dram": 256 * MiB}
        if l2:
            sizes["l2"] = T * l2 // 2  # half of each core's L2
        for name, size in sizes.items():
            progress("floors: read bandwidth over %.1f MiB at %d thread%s" % (size / MiB, T, "" if T == 1 else "s"))
            r = reps if size < 64 * MiB else max(3, reps // 3)
            copy, dot = read_bandwidth(size, T, r)
            streams = stream_bandwidth(size, T, r, work)
            bw[T][name], detail[T][name] = max(dot, streams or 0.0), (copy, dot, size, streams)
    progress("floors: GEMM rates at M = 128 (%s)" % ", ".join("%dx%d" % s for s in GEMM_SHAPES))
    gemm = gemm_rates(nimblec, nimble_run, threads, reps=max(5, reps), work=work)
    return {"bandwidth": bw, "bandwidth_detail": detail, "gemm": gemm, "l2_bytes": l2}


def l2_bytes(sysfs="/sys/devices/system/cpu/cpu0/cache"):
    """Bytes of the first CPU's level-2 data or unified cache (sysfs), or None when not reported."""
    try:
        for index in sorted(os.listdir(sysfs)):
            d = os.path.join(sysfs, index)
            with open(os.path.join(d, "level")) as f:
                level = f.read().strip()
            with open(os.path.join(d, "type")) as f:
                kind = f.read().strip()
            if level == "2" and kind in ("Unified", "Data"):
                with open(os.path.join(d, "size")) as f:
                    size = f.read().strip()
                units = {"K": 1024, "M": MiB}
                return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
    except (OSError, ValueError):
        pass
    return None


def capability(m, T):
    """(bandwidth {name: GB/s}, gemm {(K, N): {(impl, T): GFLOP/s}}) at T threads, each figure the
    best measured at T or fewer threads: more threads can always leave one idle, so a T-thread
    figure below a smaller count's is a run disturbed by other work (the machine is shared), and
    a floor must not rise with the threads."""
    fewer = [t for t in m["bandwidth"] if t <= T]
    bw = {name: max(m["bandwidth"][t][name] for t in fewer) for name in m["bandwidth"][T]}
    gemm = {}
    for key, r in m["gemm"].items():
        gemm[key] = dict(r)
        for impl in {i for i, _ in r}:
            have = [r[impl, t] for t in fewer if (impl, t) in r]
            if have:
                gemm[key][impl, T] = max(have)
    return bw, gemm


def floor_for(model, length, T, m, trees=None):
    """The floor of one table row (same unit as the row: us/token, ms/sequence, us/node)."""
    bw, gemm = capability(m, T)
    if model == "bert_base":
        return bert_floor_ms(length, gemm, T, bw["dram"])
    if model in ("lstm_1l", "lstm_2l"):
        l2 = (m["l2_bytes"], bw["l2"]) if m.get("l2_bytes") and "l2" in bw else None
        return lstm_floor_us(1 if model == "lstm_1l" else 2, 300, gemm, bw[model], T, l2)
    if model == "treelstm":
        # The one-row product's rate: the 512-input LSTM GEMV shape is the nearest measured; a roofline
        # with the GEMM rate at M = 128 would be far lower than any one-row product reaches.
        return treelstm_floor_us(length, trees, max(gemm[512, 2048]["library", T], gemm[512, 2048]["native", T]),
                                 bw["treelstm"])
    return None


def describe(m, threads):
    lines = []
    for T in threads:
        parts = ["%s %.1f MiB: %.1f GB/s (copy %.1f, dot %.1f, streams %s)" % (
            name, d[2] / MiB, m["bandwidth"][T][name], d[0], d[1], "%.1f" % d[3] if len(d) > 3 and d[3] else "-")
                 for name, d in m["bandwidth_detail"][T].items()]
        lines.append("read bandwidth, %d thread%s: %s" % (T, "" if T == 1 else "s", "; ".join(parts)))
    if m.get("l2_bytes"):
        lines.append("L2: %.1f MiB a core (the LSTM floors read what of W_hh the cores' L2s hold at the l2 rate)"
                     % (m["l2_bytes"] / MiB))
    for (k, n), r in m["gemm"].items():
        lines.append("GEMM M=128 K=%d N=%d GFLOP/s: %s" % (k, n, ", ".join(
            "%s %dt %.1f" % ("oneDNN" if impl == "library" else impl, T, v) for (impl, T), v in sorted(r.items()))))
    return lines


def main():
    sys.path.insert(0, os.path.join(HERE, ".."))
    from models.common import tools

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--nimblec", default=tools.default_tool("nimblec"))
    ap.add_argument("--nimble-run", default=tools.default_tool("nimble-run"))
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    m = measure(args.nimblec, args.nimble_run, threads, args.reps,
                progress=lambda s: print(s, file=sys.stderr, flush=True))
    print("\n".join(describe(m, threads)))
    for T in threads:
        print("floors at %d thread%s: BERT-base 128 tokens %.2f ms (16: %.2f, 64: %.2f); LSTM-1L %.1f us/token; "
              "LSTM-2L %.1f us/token; Tree-LSTM %.2f us/node (trees of 5-40 leaves)" % (
                  T, "" if T == 1 else "s", floor_for("bert_base", 128, T, m), floor_for("bert_base", 16, T, m),
                  floor_for("bert_base", 64, T, m), floor_for("lstm_1l", 0, T, m), floor_for("lstm_2l", 0, T, m),
                  floor_for("treelstm", 554, T, m, trees=12)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
