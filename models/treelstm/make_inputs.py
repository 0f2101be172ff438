#!/usr/bin/env python3
"""Writes seeded Tree-LSTM input trees, and the small variant's test fixtures.

    /usr/bin/python3 models/treelstm/make_inputs.py            # full-size inputs
    /usr/bin/python3 models/treelstm/make_inputs.py --small    # small/fixtures (committed)

Trees are nimble-run value text (vm/io/ValueText.h): `Node(Leaf(1x300xf32=...), ...)`,
one file per tree, read by `nimble-run --input=@tree_NN.txt` and by
reference.py alike. Shapes: the leaf count is split at a uniformly random
point, recursively (so chains and balanced trees both occur); leaf word
vectors ~ N(0, 0.4^2).

Full size: inputs/tree_NN.txt, 12 trees with 5..40 leaves (5 and 40 always
included), leaves as inline literals; inputs/index.json lists {"file",
"leaves", "nodes"} (nodes = leaves + internal nodes). Idempotent.

--small: small/fixtures/tree_NN.txt with 1, 2, 5 and 12 leaves (inline
literals) and one with 6 leaves given as `@tree_04.leaf_K.npy` files, plus
the expected outputs tree_NN.h.npy / tree_NN.c.npy from reference.py.
"""

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

from models.common import nimble_io  # noqa: E402
from models.treelstm import reference  # noqa: E402
from models.treelstm.variants import VARIANTS  # noqa: E402

FULL_COUNT = 12
FULL_SEED = 2031
SMALL_SEED = 2032
SMALL_LEAVES = [1, 2, 5, 12]
SMALL_NPY_LEAVES = 6


def make_tree(rng, leaves, dim):
    return nimble_io.random_tree(
        rng, leaves, lambda: rng.normal(0.0, 0.4, size=(1, dim)).astype(np.float32))


def write_full():
    rng = np.random.default_rng(FULL_SEED)
    out_dir = os.path.join(HERE, "inputs")
    os.makedirs(out_dir, exist_ok=True)
    dim = VARIANTS["treelstm"]["input"]
    counts = [5, 40] + [int(n) for n in rng.integers(5, 41, size=FULL_COUNT - 2)]
    index = []
    for k, leaves in enumerate(counts):
        tree = make_tree(rng, leaves, dim)
        name = "tree_%02d.txt" % k
        nimble_io.write_text_atomic(os.path.join(out_dir, name), nimble_io.format_tree(tree) + "\n")
        _, internal = nimble_io.tree_counts(tree)
        index.append({"file": name, "leaves": leaves, "nodes": leaves + internal})
    nimble_io.write_text_atomic(os.path.join(out_dir, "index.json"), json.dumps(index, indent=1) + "\n")
    print("wrote %d trees to %s (leaves: %s)"
          % (len(index), os.path.relpath(out_dir), " ".join(str(e["leaves"]) for e in index)))


def write_small():
    rng = np.random.default_rng(SMALL_SEED)
    out_dir = os.path.join(HERE, "small", "fixtures")
    os.makedirs(out_dir, exist_ok=True)
    dim = VARIANTS["treelstm_small"]["input"]
    model = reference.load("treelstm_small")
    for k, leaves in enumerate(SMALL_LEAVES + [SMALL_NPY_LEAVES]):
        tree = make_tree(rng, leaves, dim)
        base = "tree_%02d" % k
        leaf_file = None
        if k == len(SMALL_LEAVES):  # leaves as .npy files, relative to the tree file
            counter = iter(range(leaves))

            def leaf_file(x, base=base, counter=counter):
                name = "%s.leaf_%d.npy" % (base, next(counter))
                nimble_io.save_npy_atomic(os.path.join(out_dir, name), x)
                return name

        path = os.path.join(out_dir, base + ".txt")
        nimble_io.write_text_atomic(path, nimble_io.format_tree(tree, leaf_file) + "\n")
        h, c = reference.run(model, reference.read_input(path))
        nimble_io.save_npy_atomic(os.path.join(out_dir, base + ".h.npy"), h)
        nimble_io.save_npy_atomic(os.path.join(out_dir, base + ".c.npy"), c)
        print("wrote %s.{txt,h.npy,c.npy} (%d leaves%s)"
              % (os.path.relpath(os.path.join(out_dir, base)), leaves,
                 ", leaves in .npy files" if leaf_file else ""))


def main(argv):
    if "--small" in argv:
        write_small()
    else:
        write_full()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
