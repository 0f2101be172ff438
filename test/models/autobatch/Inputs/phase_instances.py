#!/usr/bin/env python3
"""Seeded instance sets for the program-phase tests (seed 001 §4.1, §A.3):
tree2seq.nir (a Tree-LSTM encoder, then an LSTM decoder) and early_exit.nir
(a loop of up to 12 layers with a per-instance, data-dependent exit, then a
head).

    phase_instances.py OUT_DIR [--count N] [--seed S]

OUT_DIR/tree2seq/instances.txt    N instances `TREE i64=STEPS`: instance 0 is
                                  a single leaf, 1 a left-deep chain of 24
                                  leaves (height 23), the rest random binary
                                  trees (models/common/nimble_io.random_tree)
                                  of 2..24 leaves; decoder steps 4..12
OUT_DIR/early_exit/instances.txt  N instances `1x8xf32=X f32=THRESHOLD`: x ~
                                  N(0, 1), thresholds 0.40..0.95, so that the
                                  instances leave the loop after 1..12 layers
OUT_DIR/branch/instances.txt      N instances `1x4xf32=X` for phase_branch.nir:
                                  sum(x) > 0 (the longer arm) for 3 in 8

Prints the spread of tree heights and steps. Deterministic: the same
arguments write the same files.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", ".."))

from models.common import nimble_io  # noqa: E402


def height(t):
    return 0 if t[0] == "Leaf" else 1 + max(height(t[1]), height(t[2]))


def main(argv):
    out = argv[0]
    count = int(argv[argv.index("--count") + 1]) if "--count" in argv else 64
    seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 49
    rng = np.random.default_rng(seed)
    leaf = lambda: rng.normal(0.0, 0.5, size=(1, 4)).astype(np.float32)  # noqa: E731

    lines, heights, steps = ["# tree2seq: tree, decoder steps (seed %d)" % seed], [], []
    for i in range(count):
        if i == 0:
            tree = ("Leaf", leaf())
        elif i == 1:
            tree = nimble_io.chain_tree(24, leaf)
        else:
            tree = nimble_io.random_tree(rng, int(rng.integers(2, 25)), leaf)
        s = int(rng.integers(4, 13))
        heights.append(height(tree))
        steps.append(s)
        lines.append(nimble_io.format_tree(tree) + " i64=%d" % s)
    os.makedirs(os.path.join(out, "tree2seq"), exist_ok=True)
    nimble_io.write_text_atomic(os.path.join(out, "tree2seq", "instances.txt"), "\n".join(lines) + "\n")
    print("tree2seq: %d instances, tree heights %d..%d, decoder steps %d..%d"
          % (count, min(heights), max(heights), min(steps), max(steps)))

    lines = ["# early_exit: x, exit threshold (seed %d)" % seed]
    for i in range(count):
        x = rng.normal(0.0, 1.0, size=(1, 8)).astype(np.float32)
        thr = np.float32(rng.uniform(0.40, 0.95))
        lines.append(nimble_io.format_tensor(x) + " " + nimble_io.format_tensor(thr))
    os.makedirs(os.path.join(out, "early_exit"), exist_ok=True)
    nimble_io.write_text_atomic(os.path.join(out, "early_exit", "instances.txt"), "\n".join(lines) + "\n")
    print("early_exit: %d instances" % count)

    lines, longer = ["# phase_branch: x, sum(x) > 0 for 3 in 8 (seed %d)" % seed], 0
    for i in range(count):
        x = rng.normal(0.0, 1.0, size=(1, 4)).astype(np.float32)
        if (x.sum() > 0) != (i % 8 < 3):
            x = -x
        longer += int(x.sum() > 0)
        lines.append(nimble_io.format_tensor(x))
    os.makedirs(os.path.join(out, "branch"), exist_ok=True)
    nimble_io.write_text_atomic(os.path.join(out, "branch", "instances.txt"), "\n".join(lines) + "\n")
    print("branch: %d instances, %d take the longer arm" % (count, longer))


if __name__ == "__main__":
    main(sys.argv[1:])
