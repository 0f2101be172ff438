"""Runs test/codegen/library-one-row.test's cases (vm/dispatch/
LibraryKernels.h, "The rule"; PanelProduct.h, "One row"): one row by a
constant weight of 2^18 elements or more goes to the panel path under
--kernels=auto, a smaller one stays native, each output within 1e-5 of
numpy's float64 product; and the one-row sums have the bits of the same
row in an 8-row call, whichever direction a call walks the panels.

    one_row.py DIR
"""
import re
import subprocess
import sys

import numpy as np
from nir_literal import lit

d = sys.argv[1]
rng = np.random.default_rng(5)
shapes = {"big": (512, 640), "small": (256, 600)}  # K x N: 327,680 and 153,600 elements
weights = {f: rng.uniform(-1, 1, s).astype(np.float32) for f, s in shapes.items()}
with open(f"{d}/one_row.nir", "w") as out:
    for f, (k, n) in shapes.items():
        out.write(f"func @{f}(%x: tensor<?x{k}xf32>) -> tensor<?x{n}xf32> {{\n"
                  f"  %w = constant {lit(weights[f])} : tensor<{k}x{n}xf32>\n"
                  f"  %y = matmul %x, %w\n  ret %y\n}}\n\n")
subprocess.run(["nimblec", f"{d}/one_row.nir", "-o", f"{d}/r.nbc"], check=True)


def run(f, x, threads, kernels="auto", reps=2):
    np.save(f"{d}/x.npy", x)
    p = subprocess.run(["nimble-run", f"{d}/r.nbc", f"--function={f}", f"--kernels={kernels}", f"--threads={threads}",
                        f"--input=@{d}/x.npy", f"--output=@{d}/y.npy", "--profile"]
                       + ([f"--benchmark={reps}"] if reps else []),
                       capture_output=True, text=True, check=True)
    impl = re.search(r"^\s+matmul_\d+\s+(\w+)\s", p.stdout + p.stderr, re.M)
    calls = re.search(r"Library panels: (\d+) calls", p.stdout + p.stderr)
    return np.load(f"{d}/y.npy"), impl.group(1) if impl else "?", calls.group(1) if calls else "0"


for f, (k, n) in shapes.items():
    x = rng.uniform(-1, 1, (1, k)).astype(np.float32)
    want = x.astype(np.float64) @ weights[f].astype(np.float64)
    for t in (1, 2):
        y, impl, calls = run(f, x, t)
        err = np.max(np.abs(y - want)) / np.max(np.abs(want))
        print(f"{f} 1 row threads={t}: {impl}, panel calls {calls}, {'ok' if err <= 1e-5 else 'WRONG %.3g' % err}")

# Bits: row 0 of an 8-row call (the 8-row tile) against that row alone, on
# 1 and 2 threads, after 1 call (forwards) and after 2 (the second walks
# each thread's panels backwards; the output is the last call's).
x8 = rng.uniform(-1, 1, (8, 512)).astype(np.float32)
y8, _, _ = run("big", x8, 1, "library", 0)
for t in (1, 2):
    for reps in (0, 1):
        y1, impl, _ = run("big", x8[:1], t, "auto", reps)
        same = np.array_equal(y1[0], y8[0])
        print(f"row 0 of 8 alone, threads={t}, calls={reps + 1} ({impl}): {'identical' if same else 'DIFFERENT'}")
