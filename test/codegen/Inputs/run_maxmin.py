"""Runs test/codegen/library-maxmin.test's cases: every function of
maxmin.nir at 8 and 40 rows, with --kernels=reference and then
--kernels=library on 1 and 2 threads, and prints whether the library
output has the reference's bits and how many panel calls ran
(--profile's "Library panels" line; one run, no warm-up).

    run_maxmin.py DIR
"""
import re
import subprocess
import sys

import numpy as np

d = sys.argv[1]
for f in ("max_chain_first", "max_chain_second", "min_chain_first", "min_chain_second"):
    for m in (8, 40):
        ins = [f"--input=@{d}/x.{m}.npy", f"--input=@{d}/q.{m}.npy"]
        ref = f"{d}/{f}.{m}.reference.npy"
        subprocess.run(["nimble-run", f"{d}/m.nbc", f"--function={f}", "--kernels=reference", *ins,
                        f"--output=@{ref}"], check=True, stdout=subprocess.DEVNULL)
        for t in (1, 2):
            got = f"{d}/{f}.{m}.{t}.npy"
            p = subprocess.run(["nimble-run", f"{d}/m.nbc", f"--function={f}", "--kernels=library",
                                f"--threads={t}", "--profile", *ins, f"--output=@{got}"],
                               check=True, capture_output=True, text=True)
            calls = re.search(r"Library panels: (\d+) calls", p.stdout + p.stderr)
            a, b = np.load(ref).view(np.uint32), np.load(got).view(np.uint32)
            diff = int((a != b).sum())
            print(f"{f} rows={m} threads={t} library (panel calls {calls.group(1) if calls else 0}): "
                  + ("same bits" if diff == 0 else f"DIFFERENT in {diff} elements"))
