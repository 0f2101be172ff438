#!/usr/bin/env python3
"""Writes seeded LSTM inputs, and the small variant's test fixtures.

    /usr/bin/python3 models/lstm/make_inputs.py            # full-size inputs
    /usr/bin/python3 models/lstm/make_inputs.py --small    # small/fixtures (committed)

Full size (shared by lstm_1l and lstm_2l, input 300): inputs/seq_NN.npy,
float32 [len, 300] with len in 8..128 (8 and 128 always included, the rest
uniform), entries ~ N(0, 0.4^2) (the spread of GloVe-300 components), and
inputs/index.json listing {"file", "tokens"}. Idempotent: same seed, same files.

--small: small/fixtures/seq_NN.npy ([len, 8]; lengths 0, 1, 7, 33) with the
expected outputs seq_NN.h.npy / seq_NN.c.npy computed by reference.py
(PyTorch) from small/lstm_small.safetensors. test/models/ runs nimble-run
on them.
"""

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

from models.common import nimble_io  # noqa: E402
from models.lstm import reference  # noqa: E402
from models.lstm.variants import VARIANTS  # noqa: E402

FULL_COUNT = 12
FULL_SEED = 2021
SMALL_SEED = 2022
SMALL_LENGTHS = [0, 1, 7, 33]


def make_sequence(rng, n, dim):
    """A [n, dim] float32 sequence with N(0, 0.4^2) entries (also scripts/make_instances.py)."""
    return rng.normal(0.0, 0.4, size=(n, dim)).astype(np.float32)


def full_lengths(rng):
    return [8, 128] + [int(n) for n in rng.integers(8, 129, size=FULL_COUNT - 2)]


def write_full():
    rng = np.random.default_rng(FULL_SEED)
    out_dir = os.path.join(HERE, "inputs")
    os.makedirs(out_dir, exist_ok=True)
    index = []
    for k, n in enumerate(full_lengths(rng)):
        xs = make_sequence(rng, n, VARIANTS["lstm_1l"]["input"])
        name = "seq_%02d.npy" % k
        nimble_io.save_npy_atomic(os.path.join(out_dir, name), xs)
        index.append({"file": name, "tokens": n})
    nimble_io.write_text_atomic(os.path.join(out_dir, "index.json"), json.dumps(index, indent=1) + "\n")
    print("wrote %d inputs to %s (tokens: %s)"
          % (len(index), os.path.relpath(out_dir), " ".join(str(e["tokens"]) for e in index)))


def write_small():
    rng = np.random.default_rng(SMALL_SEED)
    out_dir = os.path.join(HERE, "small", "fixtures")
    os.makedirs(out_dir, exist_ok=True)
    model = reference.load("lstm_small")
    for k, n in enumerate(SMALL_LENGTHS):
        xs = make_sequence(rng, n, VARIANTS["lstm_small"]["input"])
        base = os.path.join(out_dir, "seq_%02d" % k)
        nimble_io.save_npy_atomic(base + ".npy", xs)
        h, c = reference.run(model, reference.read_input(base + ".npy"))
        nimble_io.save_npy_atomic(base + ".h.npy", h)
        nimble_io.save_npy_atomic(base + ".c.npy", c)
        print("wrote %s.{npy,h.npy,c.npy} (%d tokens)" % (os.path.relpath(base), n))


def main(argv):
    if "--small" in argv:
        write_small()
    else:
        write_full()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
