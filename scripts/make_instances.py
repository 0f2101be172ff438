#!/usr/bin/env python3
"""Writes a seeded instance set for `nimble-run --instances=FILE` (issue 17,
auto-batching): the instances file plus the .npy / tree .txt files its lines
name, for one model variant.

    /usr/bin/python3 scripts/make_instances.py VARIANT OUT_DIR [--count N] [--seed S]
        [--min-size A] [--max-size B]

VARIANT is one of models/common/registry.py's (lstm_small, lstm_1l, lstm_2l,
treelstm_small, treelstm, bert_small, bert_base). OUT_DIR gets:

  instances.txt  one line per instance: its one input in nimble-run's --input
                 syntax (`@seq_003.npy`, `@tree_005.txt`, `@ids_002.npy`, paths
                 relative to OUT_DIR; a single-leaf tree is written inline,
                 `Leaf(1xIxf32=...)`, so that the inline syntax is covered too),
                 after a `#` comment line saying how the set was made
  index.json     {"variant", "seed", "count", "unit", "instances": [{"line", "input",
                 "work", "shape"}]}: work in tokens (LSTM, BERT) or tree nodes
                 (leaves + internal nodes); shape says what kind of instance it is

Sizes (A..B, inclusive; defaults per model):
  LSTM       sequence lengths 1..100: the first two instances have A and B tokens,
             the rest uniform in A..B. Entries ~ N(0, 0.4^2)
             (models/lstm/make_inputs.py's make_sequence).
  Tree-LSTM  leaf counts 1..40: instance 0 is a single leaf, 1 a left-deep chain
             and 2 a right-deep chain of B leaves (degenerate trees: depth B-1),
             the rest random binary trees (models/treelstm/make_inputs.py's
             make_tree: the leaf count split at a uniform point, recursively)
             with uniform leaf counts in max(A, 2)..B. Leaves ~ N(0, 0.4^2).
  BERT       sentence lengths 1..64 (the small variant's position table): the
             first two instances have A and B tokens, the rest uniform; ids from
             models/bert/make_inputs.py's make_ids (within the variant's vocab).
             B above the variant's position table is refused.

Deterministic: the same arguments write the same files (numpy's default_rng
seeded with --seed, default 17). Exit 2 on bad arguments.
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from models.common import nimble_io  # noqa: E402
from models.common.registry import VARIANTS  # noqa: E402

DEFAULT_SEED = 17  # the number
DEFAULT_SIZES = {"lstm": (1, 100), "treelstm": (1, 40), "bert": (1, 64)}
UNITS = {"lstm": "token", "treelstm": "node", "bert": "token"}


def lstm_instances(variant, rng, count, lo, hi):
    from models.lstm.make_inputs import make_sequence

    dim = variant._variants.VARIANTS[variant.name]["input"]
    lengths = ([lo, hi] + [int(n) for n in rng.integers(lo, hi + 1, size=max(0, count - 2))])[:count]
    for k, n in enumerate(lengths):
        name = "seq_%03d.npy" % k
        yield name, make_sequence(rng, n, dim), n, "%d tokens" % n


def treelstm_instances(variant, rng, count, lo, hi):
    from models.treelstm.make_inputs import make_tree

    dim = variant._variants.VARIANTS[variant.name]["input"]
    leaf = lambda: rng.normal(0.0, 0.4, size=(1, dim)).astype(np.float32)  # noqa: E731  as make_tree's leaves
    special = [("single leaf", lambda: ("Leaf", leaf())),
               ("left-deep chain", lambda: nimble_io.chain_tree(hi, leaf, left_deep=True)),
               ("right-deep chain", lambda: nimble_io.chain_tree(hi, leaf, left_deep=False))]
    for k in range(count):
        if k < len(special):
            shape, tree = special[k][0], special[k][1]()
        else:
            leaves = int(rng.integers(max(lo, 2), hi + 1)) if hi >= 2 else 1
            shape, tree = "random", make_tree(rng, leaves, dim)
        leaves, internal = nimble_io.tree_counts(tree)
        yield "tree_%03d.txt" % k, tree, leaves + internal, "%s, %d leaves" % (shape, leaves)


def bert_instances(variant, rng, count, lo, hi):
    from models.bert.make_inputs import make_ids

    lengths = ([lo, hi] + [int(n) for n in rng.integers(lo, hi + 1, size=max(0, count - 2))])[:count]
    for k, n in enumerate(lengths):
        yield "ids_%03d.npy" % k, make_ids(rng, n, variant.name), n, "%d tokens" % n


GENERATORS = {"lstm": lstm_instances, "treelstm": treelstm_instances, "bert": bert_instances}


def write_set(variant_name, out_dir, count, seed, lo=None, hi=None):
    """Writes the set; returns the index dict (also written as index.json)."""
    variant = VARIANTS[variant_name]
    family = variant.family
    dlo, dhi = DEFAULT_SIZES[family]
    lo = dlo if lo is None else lo
    hi = dhi if hi is None else hi
    if not 1 <= lo <= hi:
        raise ValueError("want 1 <= --min-size <= --max-size, got %d..%d" % (lo, hi))
    if family == "bert":
        max_pos = variant._variants.VARIANTS[variant_name]["max_pos"]
        if hi > max_pos:
            raise ValueError("--max-size %d exceeds %s's position table (%d)" % (hi, variant_name, max_pos))
    if count < 1:
        raise ValueError("want --count >= 1, got %d" % count)
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    lines = ["# %s: %d instances, seed %d, sizes %d..%d (scripts/make_instances.py)" % (
        variant_name, count, seed, lo, hi)]
    entries = []
    for k, (name, value, work, shape) in enumerate(GENERATORS[family](variant, rng, count, lo, hi)):
        if family == "treelstm":
            text = nimble_io.format_tree(value)
            if value[0] == "Leaf":
                arg = text  # inline on the instance line
            else:
                nimble_io.write_text_atomic(os.path.join(out_dir, name), text + "\n")
                arg = "@" + name
        else:
            nimble_io.save_npy_atomic(os.path.join(out_dir, name), value)
            arg = "@" + name
        lines.append(arg)
        entries.append({"line": k, "input": arg if arg.startswith("@") else "inline", "work": int(work),
                        "shape": shape})
    nimble_io.write_text_atomic(os.path.join(out_dir, "instances.txt"), "\n".join(lines) + "\n")
    index = {"variant": variant_name, "seed": seed, "count": count, "unit": UNITS[family], "sizes": [lo, hi],
             "instances": entries}
    nimble_io.write_text_atomic(os.path.join(out_dir, "index.json"), json.dumps(index, indent=1) + "\n")
    return index


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variant", choices=sorted(VARIANTS))
    ap.add_argument("out_dir")
    ap.add_argument("--count", type=int, default=32, help="instances (default %(default)s)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED, help="default %(default)s")
    ap.add_argument("--min-size", type=int, help="smallest tokens / leaves (default per model, see above)")
    ap.add_argument("--max-size", type=int, help="largest tokens / leaves (default per model, see above)")
    args = ap.parse_args(argv)
    try:
        index = write_set(args.variant, args.out_dir, args.count, args.seed, args.min_size, args.max_size)
    except ValueError as e:
        ap.error(str(e))
    works = [e["work"] for e in index["instances"]]
    print("wrote %d %s instances to %s: %d..%d %ss, %d in all" % (
        len(works), args.variant, os.path.join(args.out_dir, "instances.txt"), min(works), max(works),
        index["unit"], sum(works)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
