#!/usr/bin/env python3
"""Instances and numpy-computed expected outputs for branch.nir (issue 17:
tensor-dependent control flow under nimble-run --instances).

    branch_instances.py BRANCH.nir OUT_DIR [--count N] [--fail K]

OUT_DIR/choose/instances.txt   N instances of @choose: x [rows 1..5, 4], half of
                               them with sum(x) > 0 (the tanh(x W) branch), half
                               not (sigmoid(x W^T) - x), in a seeded order
OUT_DIR/choose/expected/i.0.npy
OUT_DIR/halve/instances.txt    N instances of @halve (x, y of length 1..6, x
                               scaled so that 0..8 halvings are needed);
                               instance K (--fail, default 5) has y one element
                               longer than x: a run-time shape error in `add`
OUT_DIR/halve/expected/i.{0,1}.npy   for every instance but K

W is read from BRANCH.nir's `const @w` line, so the two cannot disagree.
Prints how many instances take each branch and the spread of trip counts;
exit 1 if a branch or a trip count of 0 and > 2 is missing (the set would
not test divergence).
"""

import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", ".."))

from models.common import nimble_io  # noqa: E402


def read_w(nir):
    with open(nir) as f:
        m = re.search(r"^const @w : tensor<4x4xf32> = (\[.*\])$", f.read(), re.M)
    return np.array(eval(m.group(1)), dtype=np.float32)  # a list literal of numbers


def write(out_dir, lines, expected):
    os.makedirs(os.path.join(out_dir, "expected"), exist_ok=True)
    nimble_io.write_text_atomic(os.path.join(out_dir, "instances.txt"), "\n".join(lines) + "\n")
    for i, outs in expected.items():
        for j, o in enumerate(outs):
            np.save(os.path.join(out_dir, "expected", "%d.%d.npy" % (i, j)), o)


def main(argv):
    nir, out = argv[0], argv[1]
    count = int(argv[argv.index("--count") + 1]) if "--count" in argv else 16
    fail = int(argv[argv.index("--fail") + 1]) if "--fail" in argv else 5
    w = read_w(nir).astype(np.float64)
    rng = np.random.default_rng(1717)

    lines, expected, branches = ["# @choose(x: ?x4): branch on sum(x) > 0"], {}, [0, 0]
    signs = rng.permutation([1.0, -1.0] * ((count + 1) // 2))[:count]
    for i, sign in enumerate(signs):
        x = rng.normal(0.0, 1.0, size=(int(rng.integers(1, 6)), 4))
        x = (x + sign * (abs(x.sum()) / x.size + 0.1)).astype(np.float32)  # sum(x) has the chosen sign
        x64 = x.astype(np.float64)
        if x64.sum() > 0:
            y, branches[0] = np.tanh(x64 @ w), branches[0] + 1
        else:
            y, branches[1] = 1 / (1 + np.exp(-(x64 @ w.T))) - x64, branches[1] + 1
        lines.append(nimble_io.format_tensor(x))
        expected[i] = [y.astype(np.float32)]
    write(os.path.join(out, "choose"), lines, expected)

    lines, expected, trips = ["# @halve(x, y): halve x until max|x| <= 1, then x + y"], {}, []
    for i in range(count):
        n = int(rng.integers(1, 7))
        x = (rng.uniform(-1, 1, size=n) * 2.0 ** int(rng.integers(0, 9))).astype(np.float32)
        y = rng.normal(0, 1, size=n + (1 if i == fail else 0)).astype(np.float32)
        lines.append(nimble_io.format_tensor(x) + " " + nimble_io.format_tensor(y))
        if i == fail:
            continue
        h, k = x.copy(), 0
        while np.max(np.abs(h)) > 1:
            h, k = (h * np.float32(0.5)).astype(np.float32), k + 1
        trips.append(k)
        expected[i] = [(h + y).astype(np.float32), np.array(k, dtype=np.int64)]
    write(os.path.join(out, "halve"), lines, expected)

    print("choose: %d instances, %d with sum(x) > 0, %d not" % (count, branches[0], branches[1]))
    print("halve: %d instances, trip counts %s, instance %d has mismatched lengths"
          % (count, " ".join(str(t) for t in sorted(set(trips))), fail))
    if min(branches) == 0 or 0 not in trips or max(trips) <= 2:
        print("error: the set does not make instances diverge", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
