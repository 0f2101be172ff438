#!/usr/bin/env python3
"""%fail-alloc [options] -- NIMBLE-RUN-ARGS...: the out-of-memory test of
nimble-run (issue 23), the way SQLite tests its own allocation failures.

It runs `nimble-run NIMBLE-RUN-ARGS` once with NIMBLE_FAIL_ALLOC=0 to get
the right answer and to count the allocations (vm/support/FailAlloc.h), then once
with NIMBLE_FAIL_ALLOC=k for every k from 1 to that count (or, when there are
more than --samples of them, for a seeded random sample of --samples k, always
including the first and the last), and requires each run to end either

  * correctly: exit 0, the same standard output as the reference run, and
    any --output=@file written with the reference bytes; or
  * with the out-of-memory error: exit 1, exactly one `error:` line on
    stderr, which says `out of memory`, and no partial --output=@file
    (outputs are written to a temporary and renamed: a file left behind is
    complete, one written before the allocation of a later output failed).

Anything else fails the test: a crash or abort (a signal), a hang (past
--timeout seconds), another exit status, another error, several errors, a
wrong answer. The first failures are printed with the k that reproduces them:

  NIMBLE_FAIL_ALLOC=k nimble-run ARGS... --tuning=FILE

"The k-th allocation" only means something if every run makes the same
allocations in the same order, and "the same standard output" only if every
run computes with the same kernels. nimble-run's default --kernels=auto
decides by a fixed rule (issue 52), but under --kernels=tune neither holds
by itself: each run times the native and the oneDNN
kernel of a shape and keeps the faster (vm/dispatch/Dispatch.cpp), so two runs can
pick differently when the two are close -- other allocations after that
point, and results that differ in the last bits. (Tree-LSTM under ASan:
reference runs of 2359 or 2373 allocations, outputs differing in the 8th
digit; the run for the last k took the path with fewer allocations, never
failed, and printed the other kernel's digits.) So unless ARGS already
give --tuning, a first run with --tuning=FILE (nothing failing) settles the
decisions into a temporary FILE, and the reference run and every run for a k
load it: dispatch is then deterministic (docs/nimble-run.md, --tuning) and
measures nothing. The reference run is made twice, and the two must agree
(output, --output files, allocation count): a program or a runtime that is
not deterministic is reported as such, not as a failure at some k.

Options: --nimble-run PATH (default: nimble-run on PATH), --samples N
(default 200), --seed S (default 1), --timeout S (default 30), --label TEXT
(names the program in the summary line).
"""
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

args = sys.argv[1:]
tool, samples, seed, timeout, label = "nimble-run", 200, 1, 30.0, None
while args and args[0] != "--":
    opt = args.pop(0)
    if opt == "--nimble-run":
        tool = args.pop(0)
    elif opt == "--samples":
        samples = int(args.pop(0))
    elif opt == "--seed":
        seed = int(args.pop(0))
    elif opt == "--timeout":
        timeout = float(args.pop(0))
    elif opt == "--label":
        label = args.pop(0)
    else:
        sys.exit("fail_alloc: unknown option " + opt)
if not args:
    sys.exit("usage: fail_alloc.py [options] -- NIMBLE-RUN-ARGS...")
run_args = args[1:]
label = label or os.path.basename(run_args[0])
outputs = [a[len("--output=@"):] for a in run_args if a.startswith("--output=@")]

# Deterministic dispatch (see above): the decisions of one run, settled into
# a tuning file that every other run loads.
tuning_dir = None
if not any(a.startswith("--tuning=") for a in run_args):
    tuning_dir = tempfile.mkdtemp(prefix="fail_alloc.")
    run_args = run_args + ["--tuning=" + os.path.join(tuning_dir, "tuning.txt")]


def run(k):
    for path in outputs:
        if os.path.exists(path):
            os.remove(path)
    env = dict(os.environ)
    if k is None:
        env.pop("NIMBLE_FAIL_ALLOC", None)
    else:
        env["NIMBLE_FAIL_ALLOC"] = str(k)
    try:
        p = subprocess.run([tool] + run_args, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, b"", "", {}
    files = {}
    for path in outputs:
        if os.path.exists(path):
            with open(path, "rb") as f:
                files[path] = f.read()
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace"), files


def finish(status):
    if tuning_dir and status == 0:
        shutil.rmtree(tuning_dir, ignore_errors=True)
    sys.exit(status)


def reference():
    rc, out, err, files = run(0)
    m = re.search(r"^NIMBLE_FAIL_ALLOC: (\d+) allocations$", err, re.M)
    if rc != 0 or not m:
        sys.stderr.write("fail_alloc: the reference run of %s failed (exit %s):\n%s"
                         % (label, rc, err))
        finish(1)
    return int(m.group(1)), out, files


if tuning_dir:
    rc, _, err, _ = run(None)  # settles the dispatch decisions
    if rc != 0:
        sys.stderr.write("fail_alloc: the tuning run of %s failed (exit %s):\n%s" % (label, rc, err))
        finish(1)
count, ref_out, ref_files = reference()
count2, ref_out2, ref_files2 = reference()
if (count2, ref_out2, ref_files2) != (count, ref_out, ref_files):
    what = []
    if count2 != count:
        what.append("%d and %d allocations" % (count, count2))
    if ref_out2 != ref_out:
        what.append("different standard output")
    if ref_files2 != ref_files:
        what.append("different --output files")
    print("fail_alloc: %s: two runs without a failing allocation differ (%s): not deterministic, "
          "so no k can be tested; reproduce: NIMBLE_FAIL_ALLOC=0 %s %s"
          % (label, ", ".join(what), tool, " ".join(shlex.quote(a) for a in run_args)))
    finish(1)
if count <= samples:
    ks = list(range(1, count + 1))
else:
    ks = sorted(set([1, count] + random.Random(seed).sample(range(2, count), samples - 2)))

correct = oom = 0
failures = []
for k in ks:
    rc, out, err, files = run(k)
    why = None
    if rc is None:
        why = "no answer within %g s (a hang?)" % timeout
    elif rc < 0:
        why = "killed by signal %d" % -rc
    elif rc == 0:
        if out != ref_out:
            why = "exit 0 with a different output"
        elif files != ref_files:
            why = "exit 0 with different --output files"
        else:
            correct += 1
    elif rc == 1:
        errors = [l for l in err.splitlines() if "error:" in l]
        if len(errors) != 1 or "out of memory" not in errors[0]:
            why = "exit 1 without exactly one out-of-memory error"
        elif any(files[f] != ref_files.get(f) for f in files):
            why = "a failed run left a partial output file: " + ", ".join(files)
        else:
            oom += 1
    else:
        why = "exit status %d" % rc
    if why:
        failures.append((k, why, err))

print("fail_alloc: %s: %d allocations, %d runs: %d correct, %d out of memory, %d failed"
      % (label, count, len(ks), correct, oom, len(failures)))
for k, why, err in failures[:5]:
    print("  k=%d: %s; reproduce: NIMBLE_FAIL_ALLOC=%d %s %s"
          % (k, why, k, tool, " ".join(shlex.quote(a) for a in run_args)))
    for line in err.splitlines()[:6]:
        print("    | " + line)
finish(1 if failures else 0)
