#!/usr/bin/env python3
"""Writes seeded BERT inputs (token ids), and the small variant's fixtures.

    /usr/bin/python3 models/bert/make_inputs.py            # full-size inputs
    /usr/bin/python3 models/bert/make_inputs.py --small    # small/fixtures (committed)

Full size: inputs/ids_NN.npy, int64 [n] with n in 16..128 (16 and 128 always
included, the rest uniform), shaped like tokenized sentences: [CLS]=101,
word pieces uniform in [1000, 30522), [SEP]=102; inputs/index.json lists
{"file", "tokens"}. Idempotent.

--small: small/fixtures/ids_NN.npy (vocab 100) with n = 1, 5, 17, 64 (64 =
the whole position table) and the expected outputs ids_NN.out.npy ([n, 32])
from reference.py.
"""

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

from models.common import nimble_io  # noqa: E402
from models.bert import reference  # noqa: E402
from models.bert.variants import VARIANTS  # noqa: E402

FULL_COUNT = 12
FULL_SEED = 2041
SMALL_SEED = 2042
SMALL_LENGTHS = [1, 5, 17, 64]
CLS, SEP, FIRST_WORDPIECE = 101, 102, 1000


def make_ids(rng, n, variant):
    """n int64 token ids for `variant` (also scripts/make_instances.py): for a
    full-size vocabulary a tokenized sentence ([CLS], word pieces uniform in
    [FIRST_WORDPIECE, vocab), [SEP]); for the small variant's vocabulary of
    100, ids uniform over all of it."""
    vocab = VARIANTS[variant]["vocab"]
    if vocab <= FIRST_WORDPIECE:
        return rng.integers(0, vocab, size=n).astype(np.int64)
    ids = rng.integers(FIRST_WORDPIECE, vocab, size=n).astype(np.int64)
    ids[0], ids[-1] = CLS, SEP
    return ids


def write_full():
    rng = np.random.default_rng(FULL_SEED)
    out_dir = os.path.join(HERE, "inputs")
    os.makedirs(out_dir, exist_ok=True)
    lengths = [16, 128] + [int(n) for n in rng.integers(16, 129, size=FULL_COUNT - 2)]
    index = []
    for k, n in enumerate(lengths):
        ids = make_ids(rng, n, "bert_base")
        name = "ids_%02d.npy" % k
        nimble_io.save_npy_atomic(os.path.join(out_dir, name), ids)
        index.append({"file": name, "tokens": n})
    nimble_io.write_text_atomic(os.path.join(out_dir, "index.json"), json.dumps(index, indent=1) + "\n")
    print("wrote %d inputs to %s (tokens: %s)"
          % (len(index), os.path.relpath(out_dir), " ".join(str(e["tokens"]) for e in index)))


def write_small():
    rng = np.random.default_rng(SMALL_SEED)
    out_dir = os.path.join(HERE, "small", "fixtures")
    os.makedirs(out_dir, exist_ok=True)
    model = reference.load("bert_small")
    for k, n in enumerate(SMALL_LENGTHS):
        ids = make_ids(rng, n, "bert_small")
        base = os.path.join(out_dir, "ids_%02d" % k)
        nimble_io.save_npy_atomic(base + ".npy", ids)
        (out,) = reference.run(model, reference.read_input(base + ".npy"))
        nimble_io.save_npy_atomic(base + ".out.npy", out)
        print("wrote %s.{npy,out.npy} (%d tokens)" % (os.path.relpath(base), n))


def main(argv):
    if "--small" in argv:
        write_small()
    else:
        write_full()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
