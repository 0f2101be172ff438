"""The masked tail's lanes against scalar points, bit for bit.

    masked_tail.py NIMBLEC NIMBLE_RUN MASKED_TAIL_NIR WORK_DIR

With 8 or 16 lanes (AVX2, AVX-512) a vectorized stage ends each row in one
masked vector step; with 4 (SSE) in scalar points, one per
residue (codegen/llvm/KernelGen.cpp, emitStage). Each lane of the masked
step must compute exactly what a scalar point does. Compiles
MASKED_TAIL_NIR for --mcpu=x86-64-v2 (4 lanes: SSE4.2) and --mcpu=znver3 (8 lanes:
runs on every AVX2 CPU), runs @ops on rows of every residue of 8 and 16
(and 150) over every special f32 value, exp's thresholds, a sweep and
random bit patterns, and @cell (rows of a static 150: 144 + 6 at 8 lanes,
148 + 2 at 4), also for --mcpu=znver4 (16 lanes) where the CPU has
AVX-512, and prints per row length whether the outputs are equal bit
for bit (NaN equal to NaN). Exits 1 on any difference.
"""
import os
import subprocess
import sys

import numpy as np


def values():
    f = np.float32
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, -1.1754942e-38,
               3.4028235e38, -3.4028235e38, 88.72283, 88.72284, 89.0, -87.33654, -103.97207,
               -103.9721, -104.0, -150.0, 1e-30, -1e-30, 0.625, -0.625, 0.62499994, 9.0, -9.0,
               0.5, 1.0, -1.0, 2.0]
    sweep = np.linspace(-100, 100, 20001, dtype=np.float64).astype(f)
    rng = np.random.default_rng(11)
    rand = rng.integers(0, 2**32, size=20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([np.array(special, dtype=f), sweep, rand])


def avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return any(l.startswith("flags") and " avx512f" in l for l in f)
    except OSError:
        return False


def same(a, b):
    return a.shape == b.shape and bool(np.all((a.view(np.uint32) == b.view(np.uint32)) |
                                              (np.isnan(a) & np.isnan(b))))


def run(nimble_run, nbc, fn, inputs, outs):
    cmd = [nimble_run, nbc, "--kernels=native", "--threads=1", "--function=" + fn]
    cmd += ["--input=@" + p for p in inputs] + ["--output=@" + p for p in outs]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return [np.load(p) for p in outs]


def main():
    nimblec, nimble_run, nir, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    cpus = ["x86-64-v2", "znver3"]
    if avx512():
        cpus.append("znver4")  # 16 lanes, where this CPU runs them
    for cpu in cpus:
        subprocess.run([nimblec, nir, "--kernels=native", "--mcpu=" + cpu, "-o", os.path.join(work, cpu + ".nbc")],
                       check=True)
    x = values()
    y = np.abs(np.random.default_rng(12).permutation(x))
    failed = False
    for k in (1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 150):
        rows = len(x) // k
        xi, yi = os.path.join(work, "x%d.npy" % k), os.path.join(work, "y%d.npy" % k)
        np.save(xi, x[:rows * k].reshape(rows, k))
        np.save(yi, y[:rows * k].reshape(rows, k))
        got = {cpu: run(nimble_run, os.path.join(work, cpu + ".nbc"), "ops", [xi, yi],
                        [os.path.join(work, "%s.ops%d.%d.npy" % (cpu, k, j)) for j in range(8)])
               for cpu in cpus}
        ok = all(same(a, b) for cpu in cpus[1:] for a, b in zip(got[cpus[0]], got[cpu]))
        failed |= not ok
        print("ops  rows of %3d: %d x %d points, 8 results: %s" % (k, rows, k, "same bits" if ok else "DIFFER"))
    g = np.random.default_rng(13).permutation(x)
    rows = len(g) // 450
    ins = []
    for j in range(3):
        ins.append(os.path.join(work, "g%d.npy" % j))
        np.save(ins[-1], np.clip(g[j * rows * 150:(j + 1) * rows * 150], -30, 30).reshape(rows, 150))
    got = {cpu: run(nimble_run, os.path.join(work, cpu + ".nbc"), "cell", ins,
                    [os.path.join(work, "%s.cell.%d.npy" % (cpu, j)) for j in range(2)])
           for cpu in cpus}
    ok = all(same(a, b) for cpu in cpus[1:] for a, b in zip(got[cpus[0]], got[cpu]))
    failed |= not ok
    print("cell rows of 150: %d x 150 points, 2 results: %s" % (rows, "same bits" if ok else "DIFFER"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
