#!/usr/bin/env python3
"""Checks the outputs of `nimble-run --instances=FILE --output-dir=DIR`
(DIR/<instance>.<result>.npy) against a second run or against the PyTorch
reference (issue 17's evidence; test/models/autobatch/ runs it).

    compare_instances.py outputs DIR_A DIR_B --count N --results R
            [--tolerance 1e-5] [--failed I,J,...]
        DIR_A and DIR_B (e.g. --auto-batch=on and =off) each hold exactly the
        files <i>.<j>.npy for i < N, j < R, except for the instances listed in
        --failed, which must have none; every pair is within the tolerance.
    compare_instances.py reference VARIANT INSTANCES DIR [--tolerance 1e-4]
            [--failed I,J,...]
        every instance of the instances file (its lines in nimble-run's
        syntax: `@file` relative to the file's directory, or an inline tree /
        tensor literal) run through models/<m>/reference.py and compared with
        DIR/<i>.<j>.npy.

Error measure: models/common/compare.py's rel_err, max|a - b| / max|b| (b:
DIR_B, or the reference). Prints every pair above the tolerance and every
missing or unexpected file, then one summary line
    "<what>: N instances x R results, worst relative error E (instance i result j) <= T: ok"
or "...: MISMATCH"; exit 0 when ok, 1 otherwise, 2 on bad arguments.
"""

import argparse
import importlib
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from models.common import nimble_io  # noqa: E402
from models.common.compare import rel_err  # noqa: E402

_NAME = re.compile(r"^(\d+)\.(\d+)\.npy$")


def output_files(d):
    """{(i, j): path} of DIR's <i>.<j>.npy files; other files are returned as a list."""
    found, other = {}, []
    for name in sorted(os.listdir(d)):
        m = _NAME.match(name)
        if m:
            found[(int(m.group(1)), int(m.group(2)))] = os.path.join(d, name)
        else:
            other.append(name)
    return found, other


def int_set(s):
    try:
        return {int(t) for t in s.split(",") if t}
    except ValueError:
        raise argparse.ArgumentTypeError("want comma-separated instance indices, got %r" % s)


class Tally:
    def __init__(self, tolerance):
        self.tolerance, self.worst, self.where, self.bad, self.pairs = tolerance, 0.0, None, 0, 0

    def add(self, i, j, err):
        self.pairs += 1
        if not err <= self.tolerance:  # NaN counts as a mismatch
            self.bad += 1
            print("instance %d result %d: relative error %.3e > %.0e" % (i, j, err, self.tolerance))
        if self.where is None or err > self.worst or err != err:
            self.worst, self.where = err, (i, j)

    def problem(self, msg):
        self.bad += 1
        print(msg)

    def summary(self, what, n, r):
        where = " (instance %d result %d)" % self.where if self.where else ""
        ok = self.bad == 0 and self.pairs > 0
        print("%s: %d instances x %d results, %d pairs compared, worst relative error %.3e%s <= %.0e: %s" % (
            what, n, r, self.pairs, self.worst, where, self.tolerance, "ok" if ok else "MISMATCH"))
        return 0 if ok else 1


def compare_outputs(args):
    a, other_a = output_files(args.dir_a)
    b, other_b = output_files(args.dir_b)
    t = Tally(args.tolerance)
    for d, other in ((args.dir_a, other_a), (args.dir_b, other_b)):
        for name in other:
            t.problem("%s: unexpected file %s" % (d, name))
    want = {(i, j) for i in range(args.count) if i not in args.failed for j in range(args.results)}
    for d, files in ((args.dir_a, a), (args.dir_b, b)):
        for key in sorted(want - set(files)):
            t.problem("%s: %d.%d.npy is missing" % (d, *key))
        for key in sorted(set(files) - want):
            t.problem("%s: %d.%d.npy is unexpected%s" % (d, key[0], key[1], " (instance %d failed)" % key[0]
                                                          if key[0] in args.failed else ""))
    for key in sorted(want & set(a) & set(b)):
        t.add(key[0], key[1], rel_err(np.load(a[key]), np.load(b[key])))
    return t.summary("%s vs %s" % (os.path.basename(os.path.normpath(args.dir_a)),
                                   os.path.basename(os.path.normpath(args.dir_b))), args.count, args.results)


def read_instance(ref, text, base_dir):
    """One input in nimble-run's --input syntax, as the reference module takes it."""
    if text.startswith("@"):
        return ref.read_input(os.path.join(base_dir, text[1:]))
    if text[0].isalpha() and "(" in text:  # an inline constructor expression: a tree
        return ref.to_torch(nimble_io.parse_tree(text, base_dir))
    import torch

    return torch.from_numpy(nimble_io.parse_tensor(text))


def compare_reference(args):
    from models.common.registry import VARIANTS

    if args.variant not in VARIANTS:
        print("compare_instances: unknown variant %r (have %s)" % (args.variant, ", ".join(VARIANTS)),
              file=sys.stderr)
        return 2
    ref = importlib.import_module("models.%s.reference" % VARIANTS[args.variant].family)
    model = ref.load(args.variant)
    base_dir = os.path.dirname(os.path.abspath(args.instances))
    with open(args.instances) as f:
        lines = [ln.strip() for ln in f if ln.strip() and not ln.strip().startswith("#")]
    files, other = output_files(args.dir)
    t = Tally(args.tolerance)
    for name in other:
        t.problem("%s: unexpected file %s" % (args.dir, name))
    r = len(ref.OUTPUTS)
    for i, line in enumerate(lines):
        if i in args.failed:
            continue
        want = ref.run(model, read_instance(ref, line, base_dir))
        for j, w in enumerate(want):
            if (i, j) not in files:
                t.problem("%s: %d.%d.npy is missing" % (args.dir, i, j))
                continue
            t.add(i, j, rel_err(np.load(files[(i, j)]), w))
    for key in sorted(k for k in files if k[0] >= len(lines) or k[1] >= r or k[0] in args.failed):
        t.problem("%s: %d.%d.npy is unexpected" % (args.dir, *key))
    return t.summary("%s vs PyTorch" % os.path.basename(os.path.normpath(args.dir)), len(lines), r)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    o = sub.add_parser("outputs", help="two output directories")
    o.add_argument("dir_a")
    o.add_argument("dir_b")
    o.add_argument("--count", type=int, required=True, help="instances")
    o.add_argument("--results", type=int, required=True, help="results per instance")
    o.add_argument("--tolerance", type=float, default=1e-5)
    o.add_argument("--failed", type=int_set, default=set(), help="instances that must have no outputs")
    r = sub.add_parser("reference", help="an output directory against the PyTorch reference")
    r.add_argument("variant")
    r.add_argument("instances")
    r.add_argument("dir")
    r.add_argument("--tolerance", type=float, default=1e-4)
    r.add_argument("--failed", type=int_set, default=set(), help="instances that must have no outputs")
    args = ap.parse_args(argv)
    for d in (args.dir_a, args.dir_b) if args.mode == "outputs" else (args.dir,):
        if not os.path.isdir(d):
            print("compare_instances.py: error: %s: no such directory" % d, file=sys.stderr)
            return 2
    return compare_outputs(args) if args.mode == "outputs" else compare_reference(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
