#!/usr/bin/env python3
"""Checks Nimble's reference kernels against numpy.

    check_ops.py --runner PATH --ops-def PATH --tmp DIR --group GROUP [--seed N] [-j N]

Groups: elementwise (unary, binary, compare, logical, select, cast), linalg
(matmul, batch_matmul, reductions, argmax, softmax, layer_norm), shape (data
movement), create (constant ... device_copy), window (conv, max_pool,
avg_pool), sampling (resize, grid_sample), pool-last (channels-last f32
max_pool, compared bit for bit), coverage.

For each case the script writes seeded random inputs (many shapes: rank 0,
empty dimensions, size-1 broadcasting, negative axes, keepdims) as .npy
files, runs `kernel-runner` on them (`-j` batches of cases, one process each:
kernel-runner --batch), and compares its outputs with numpy's
answer: exactly for integers and booleans, rtol 1e-5 / atol 1e-6 for f32,
looser for f16 and bf16. Error cases expect exit status 1 and a message. A
mismatch is reported with the op, the input shapes and dtypes, the attributes,
the largest error and the first differing element.

The coverage group fails unless every op of ir/Ops.def with a non-Structural
relation (parsed from the file itself) is exercised by some group for every
element type its DTypes rule admits, and unless that set is exactly what
`kernel-runner --list-ops` reports.
"""

import argparse
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cases_elementwise  # noqa: E402
import cases_linalg  # noqa: E402
import cases_shape  # noqa: E402
import cases_sampling  # noqa: E402
import cases_window  # noqa: E402
from oplib import RULE_DTYPES, Rng, run_cases  # noqa: E402

GROUPS = {
    "elementwise": (1, cases_elementwise.cases),
    "linalg": (2, cases_linalg.cases),
    "shape": (3, lambda rng: cases_shape.movement_cases(rng)),
    "create": (4, lambda rng: cases_shape.create_cases(rng)),
    "window": (5, cases_window.cases),
    "sampling": (6, cases_sampling.cases),
    "pool-last": (7, cases_window.pool_last_cases),
}


def build(group, seed):
    salt, make = GROUPS[group]
    return make(Rng(seed * 1000 + salt))


def parse_ops_def(path):
    """{mnemonic: dtype rule} of the ops whose relation is not Structural."""
    text = open(path).read()
    row = re.compile(
        r'^NIMBLE_OP\(\s*(\w+)\s*,\s*"(\w+)"\s*,\s*-?\d+\s*,\s*-?\d+\s*,\s*-?\d+\s*,\s*'
        r'"(?:[^"\\]|\\.)*"\s*,\s*(\w+)\s*,\s*\w+\s*,\s*\w+\s*,\s*(\w+)\s*,', re.M)
    ops = {}
    for _, mnemonic, relation, dtypes in row.findall(text):
        if relation != "Structural":
            ops[mnemonic] = dtypes
    rows = len(re.findall(r"^NIMBLE_OP\(", text, re.M))
    if rows != len(row.findall(text)):
        sys.exit("check_ops.py: could not parse every NIMBLE_OP row of %s" % path)
    return ops


def coverage(args):
    ops = parse_ops_def(args.ops_def)
    listed = subprocess.run([args.runner, "--list-ops"], capture_output=True, text=True,
                            check=True).stdout.split()
    problems = []
    if sorted(listed) != sorted(ops):
        problems.append("kernel-runner --list-ops %s differs from Ops.def's compute ops %s" % (
            sorted(set(listed) ^ set(ops)), sorted(ops)))
    seen = {}
    for group in GROUPS:
        for case in build(group, args.seed):
            seen.setdefault(case.op, set()).add(case.dt)
    for op, rule in sorted(ops.items()):
        if op not in seen:
            problems.append("op %s has a kernel but no case" % op)
            continue
        missing = [dt for dt in RULE_DTYPES[rule] if dt not in seen[op]]
        if missing:
            problems.append("op %s (dtypes %s) has no case for %s" % (op, rule, ", ".join(missing)))
    for op in sorted(set(seen) - set(ops)):
        problems.append("cases exercise %s, which is not a compute op of Ops.def" % op)
    for p in problems:
        print("FAIL coverage: " + p)
    print("coverage: %d ops of Ops.def with kernels, %d exercised, %d problems" % (
        len(ops), len(seen), len(problems)))
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--runner", required=True)
    ap.add_argument("--ops-def", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--group", required=True, choices=sorted(GROUPS) + ["coverage"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--op", help="only cases of this op")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    os.makedirs(args.tmp, exist_ok=True)
    if args.group == "coverage":
        return coverage(args)

    cases = [c for c in build(args.group, args.seed) if not args.op or c.op == args.op]
    results = run_cases(args.runner, cases, args.tmp, args.j)
    failures = [(c, r) for c, r in zip(cases, results) if r]
    for case, msg in failures[:50]:
        print("FAIL %s\n  %s" % (case.describe(), msg))
    ops = sorted({c.op for c in cases})
    print("%s: %d cases over %d ops (%s): %d failed" % (
        args.group, len(cases), len(ops), " ".join(ops), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
