#!/usr/bin/env python3
"""Writes the BERT weights (.safetensors next to each .nir), seeded.

    /usr/bin/python3 models/bert/make_weights.py [VARIANT...] [--force]

Default: every variant (bert_base is ~440 MB and is never committed). A file
already holding the same tensors and generator metadata is left alone;
--force rewrites.

Initialisation like BERT's (Hugging Face BertPreTrainedModel._init_weights):
matrices and embeddings ~ N(0, std^2) with std = initializer_range = 0.02 for
bert_base. Instead of exactly 0 biases / LayerNorm beta and 1 gamma, those are
drawn as N(0, bias_std^2) and 1 + N(0, bias_std^2), as in a trained model, so
that a dropped or swapped bias, gamma or beta changes the result and the
checks can see it. bert_small uses larger spreads (std 0.2, bias_std 0.1):
with hidden 32 and std 0.02 attention would be almost uniform and the FFN
almost linear, which would make its test fixtures weak.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from models.common import nimble_io  # noqa: E402
from models.bert.variants import VARIANTS, weight_shapes, weights_path  # noqa: E402

GENERATOR = "models/bert/make_weights.py v1"


def make(name):
    v = VARIANTS[name]
    rng = np.random.default_rng(v["seed"])
    out = {}
    for key, shape in weight_shapes(name).items():
        if len(shape) == 2:  # matrices and embedding tables
            a = rng.standard_normal(size=shape, dtype=np.float32) * np.float32(v["std"])
        elif key.endswith("LayerNorm.weight"):
            a = 1 + rng.standard_normal(size=shape, dtype=np.float32) * np.float32(v["bias_std"])
        else:  # biases and LayerNorm beta
            a = rng.standard_normal(size=shape, dtype=np.float32) * np.float32(v["bias_std"])
        out[key] = a.astype(np.float32)
    return out


def metadata(name):
    v = VARIANTS[name]
    return {"generator": GENERATOR, "seed": v["seed"],
            "init": "N(0, %g^2) matrices; N(0, %g^2) biases/beta; 1 + N(0, %g^2) gamma"
                    % (v["std"], v["bias_std"], v["bias_std"])}


def main(argv):
    return nimble_io.make_weights_main(argv, VARIANTS, weights_path, weight_shapes, make, metadata, show_size=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
