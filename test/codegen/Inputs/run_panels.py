"""Runs test/codegen/library-panels.test's cases: every function of
panels.nir (panel_products.py) at every row count, on 1 and 2 threads,
with --kernels=library, against numpy's result (1e-5), and prints one
line per case: whether nimble-run accepted the result and how many calls
the panel path ran (--profile's "Library panels" line; 0 without it).

    run_panels.py DIR [ENV=VALUE ...] [--cross-isa]

--cross-isa (an AVX-512 CPU): instead, runs some cases with
NIMBLE_KERNEL_ISA=avx2 and =avx512 and prints whether the two panel
kernels (PanelProduct.h, "AVX2") gave the same bits.
"""
import os
import re
import subprocess
import sys

d = sys.argv[1]
env = dict(os.environ)
cross_isa = "--cross-isa" in sys.argv
for kv in (a for a in sys.argv[2:] if a != "--cross-isa"):
    k, v = kv.split("=", 1)
    env[k] = v
for f in () if cross_isa else ("dense", "kn", "subrow", "chain", "longk", "ops"):
    for m in (1, 2, 7, 8, 9, 16, 17, 31, 32, 33, 40, 64, 65):
        for t in (1, 2):
            args = ["nimble-run", f"{d}/p.nbc", f"--function={f}", "--kernels=library", f"--threads={t}",
                    f"--input=@{d}/{f}.{m}.x.npy", f"--expected-output=@{d}/{f}.{m}.y.npy", "--tolerance=1e-5",
                    "--benchmark=2", "--profile"]
            if f == "chain":
                args.insert(6, f"--input=@{d}/chain.{m}.r.npy")
            if f == "ops":
                args[6:6] = [f"--input=@{d}/ops.{m}.r.npy", f"--input=@{d}/ops.{m}.q.npy"]
            p = subprocess.run(args, env=env, capture_output=True, text=True)
            calls = re.search(r"Library panels: (\d+) calls", p.stderr + p.stdout)
            print(f"{f} rows={m} threads={t}: exit {p.returncode}, panel calls {calls.group(1) if calls else 0}")
            if p.returncode:
                print(p.stderr[-2000:])

# The sums do not depend on which rows share a tile, on the k blocks past
# 8 rows, or on the thread count: rows 0-7 of the 17-row call alone, and rows
# 8-9 alone on 2 threads, give the same bits (K = 1100: two k blocks in the
# 17-row call, one in the 8-row call).
import numpy as np  # noqa: E402

# Past 32 rows on 2 threads, two blocks of rows (the 40-row call: rows 0-23
# and 24-39): rows 24-31 alone on 1 thread give the same bits too.
for rows, name, t, pt in () if cross_isa else ((17, "0-7", 1, 1), (17, "8-9", 2, 2), (40, "24-31", 2, 1)):
    x = np.load(f"{d}/longk.{rows}.x.npy")
    lo, hi = (int(v) for v in name.split("-"))
    part = x[lo:hi + 1]
    np.save(f"{d}/part.x.npy", part)
    for src, out, threads in ((f"{d}/longk.{rows}.x.npy", "all", t), (f"{d}/part.x.npy", "part", pt)):
        subprocess.run(["nimble-run", f"{d}/p.nbc", "--function=longk", "--kernels=library", f"--threads={threads}",
                        f"--input=@{src}", f"--output=@{d}/{out}.y.npy"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
    same = np.array_equal(np.load(f"{d}/all.y.npy")[lo:lo + len(part)], np.load(f"{d}/part.y.npy"))
    print(f"rows {name} of {rows} (threads={t}) alone, threads={pt}: {'identical' if same else 'DIFFERENT'}")

# Prefetching the next block (PanelProduct.h, "Ahead") moves no arithmetic:
# with NIMBLE_PANEL_AHEAD=0 and =1 every output is the same bits, one and
# several tiles, one and two k blocks (K = 1100), one panel after another on
# one thread and claimed one ahead on two, and in two blocks of rows.
for f in () if cross_isa else ("longk", "dense"):
    for m, t in ((2, 1), (9, 1), (17, 1), (17, 2), (32, 2), (40, 2)):
        outs = []
        for ahead in ("0", "1"):
            e = dict(env, NIMBLE_PANEL_AHEAD=ahead)
            out = f"{d}/ahead{ahead}.y.npy"
            subprocess.run(["nimble-run", f"{d}/p.nbc", f"--function={f}", "--kernels=library", f"--threads={t}",
                            f"--input=@{d}/{f}.{m}.x.npy", f"--output=@{out}"], env=e, check=True,
                           stdout=subprocess.DEVNULL)
            outs.append(np.load(out))
        same = np.array_equal(outs[0], outs[1])
        print(f"{f} rows={m} threads={t} ahead off and on: {'identical' if same else 'DIFFERENT'}")

# The AVX2 kernel sums each output as the AVX-512 one does (one fma a k, in
# increasing order; the epilogue's operations one IEEE operation each), so
# the two give the same bits: 16-column panels against 64, tiles of 6 rows
# against 8, k blocks of 512 against 1024 (K = 1100: three blocks against
# two). Row counts both kernels take (<= 32 on one thread).
if cross_isa:
    for f in ("longk", "dense", "kn", "ops", "chain"):
        for m, t in ((1, 1), (7, 1), (9, 2), (17, 1), (32, 2)):
            outs = []
            for isa in ("avx2", "avx512"):
                e = dict(env, NIMBLE_KERNEL_ISA=isa)
                out = f"{d}/{isa}.y.npy"
                args = ["nimble-run", f"{d}/p.nbc", f"--function={f}", "--kernels=library", f"--threads={t}",
                        f"--input=@{d}/{f}.{m}.x.npy", f"--output=@{out}"]
                if f == "chain":
                    args.insert(6, f"--input=@{d}/chain.{m}.r.npy")
                if f == "ops":
                    args[6:6] = [f"--input=@{d}/ops.{m}.r.npy", f"--input=@{d}/ops.{m}.q.npy"]
                subprocess.run(args, env=e, check=True, stdout=subprocess.DEVNULL)
                outs.append(np.load(out))
            same = np.array_equal(outs[0], outs[1])
            print(f"{f} rows={m} threads={t} avx2 and avx512: {'identical' if same else 'DIFFERENT'}")
