#!/usr/bin/env python3
"""Writes the Tree-LSTM weights (.safetensors next to each .nir), seeded.

    /usr/bin/python3 models/treelstm/make_weights.py [VARIANT...] [--force]

Default: every variant. A file already holding the same tensors and generator
metadata is left alone; --force rewrites.

Initialisation as torch.nn.Linear's default: each matrix and its bias
~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (fan_in = I for w_iou and b_iou, H for
u_iou, u_f and b_f), numpy PCG64 with the variant's seed.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from models.common import nimble_io  # noqa: E402
from models.treelstm.variants import VARIANTS, weight_shapes, weights_path  # noqa: E402

GENERATOR = "models/treelstm/make_weights.py v1"


def make(name):
    v = VARIANTS[name]
    rng = np.random.default_rng(v["seed"])
    fan_in = {"w_iou": v["input"], "b_iou": v["input"], "u_iou": v["hidden"],
              "u_f": v["hidden"], "b_f": v["hidden"]}
    out = {}
    for key, shape in weight_shapes(name).items():
        bound = 1.0 / np.sqrt(fan_in[key])
        out[key] = rng.uniform(-bound, bound, size=shape).astype(np.float32)
    return out


def metadata(name):
    return {"generator": GENERATOR, "seed": VARIANTS[name]["seed"],
            "init": "U(-1/sqrt(fan_in), 1/sqrt(fan_in))"}


def main(argv):
    return nimble_io.make_weights_main(argv, VARIANTS, weights_path, weight_shapes, make, metadata)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
