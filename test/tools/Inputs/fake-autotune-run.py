#!/usr/bin/env python3
"""A stand-in for `nimble-run --kernels=tune` for test/tools/fail-alloc-tuning.test:
what test/fail_alloc.py sees of a program whose dispatch is measured.

  fake-autotune-run.py --measured=STATE [--tuning=FILE] [--nondeterministic]

Without a tuning file to load, it "measures": the first run ever (no STATE
file yet) finds native faster, every later one library, as when the two
kernels are within the timing noise. With --tuning=FILE it writes its
decision there after a measuring run, and loads it (measuring nothing) when
FILE exists, like nimble-run. The native path makes 10 allocations and prints
`native`; the library path makes 8 and prints `library`. NIMBLE_FAIL_ALLOC=k
makes the k-th fail (`error: out of memory`, exit 1) and =0 prints the count
at exit. --nondeterministic prints a different line on every run.
"""
import os
import sys

state = tuning = None
nondeterministic = False
for a in sys.argv[1:]:
    if a.startswith("--measured="):
        state = a[len("--measured="):]
    elif a.startswith("--tuning="):
        tuning = a[len("--tuning="):]
    elif a == "--nondeterministic":
        nondeterministic = True

if tuning and os.path.exists(tuning):
    with open(tuning) as f:
        impl = f.read().strip()
    measured = False
else:
    impl = "library" if os.path.exists(state) else "native"
    measured = True
runs = 0
if os.path.exists(state):
    with open(state) as f:
        runs = int(f.read())
with open(state, "w") as f:
    f.write(str(runs + 1))

allocations = 10 if impl == "native" else 8
k = os.environ.get("NIMBLE_FAIL_ALLOC")
if k is not None and 1 <= int(k) <= allocations:
    sys.stderr.write("fake-autotune-run: error: out of memory\n")
    sys.exit(1)
print(impl + (" run %d" % runs if nondeterministic else ""))
if tuning and measured:
    with open(tuning, "w") as f:
        f.write(impl + "\n")
if k == "0":
    sys.stderr.write("NIMBLE_FAIL_ALLOC: %d allocations\n" % allocations)
