#!/usr/bin/env python3
"""Writes the LSTM weights (.safetensors next to each .nir), seeded.

    /usr/bin/python3 models/lstm/make_weights.py [VARIANT...] [--force]

Default: every variant (lstm_1l, lstm_2l, lstm_small). A file that already
holds the same tensors with the same generator metadata is left alone (so
models/make_all.sh is cheap to re-run); --force rewrites.

Initialisation as torch.nn.LSTM's: every weight and bias ~ U(-1/sqrt(H),
1/sqrt(H)), from numpy's PCG64 with the variant's seed.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from models.common import nimble_io  # noqa: E402
from models.lstm.variants import VARIANTS, weight_shapes, weights_path  # noqa: E402

GENERATOR = "models/lstm/make_weights.py v1"


def make(name):
    v = VARIANTS[name]
    rng = np.random.default_rng(v["seed"])
    bound = 1.0 / np.sqrt(v["hidden"])
    return {
        key: rng.uniform(-bound, bound, size=shape).astype(np.float32)
        for key, shape in weight_shapes(name).items()
    }


def metadata(name):
    v = VARIANTS[name]
    return {"generator": GENERATOR, "seed": v["seed"], "init": "U(-1/sqrt(H), 1/sqrt(H))"}


def main(argv):
    return nimble_io.make_weights_main(argv, VARIANTS, weights_path, weight_shapes, make, metadata)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
