"""The LSTM variants: sizes, files and seeds, shared by every script here.

Paper §5 uses input 300 / hidden 512, 1 and 2 layers. `lstm_small` is the test
variant whose weights and fixtures are committed under small/.
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))

VARIANTS = {
    "lstm_1l": dict(input=300, hidden=512, layers=1, subdir="", seed=101),
    "lstm_2l": dict(input=300, hidden=512, layers=2, subdir="", seed=102),
    "lstm_small": dict(input=8, hidden=16, layers=2, subdir="small", seed=103),
}

FULL = ["lstm_1l", "lstm_2l"]


def nir_path(name):
    return os.path.join(HERE, VARIANTS[name]["subdir"], name + ".nir")


def weights_file(name):
    """The file name as written in the .nir (relative to the .nir)."""
    return name + ".safetensors"


def weights_path(name):
    return os.path.join(HERE, VARIANTS[name]["subdir"], weights_file(name))


def weight_shapes(name):
    """{key: shape} in torch.nn.LSTM's state_dict names and layout (gates i, f, g, o)."""
    v = VARIANTS[name]
    I, H = v["input"], v["hidden"]
    shapes = {}
    for k in range(v["layers"]):
        shapes["weight_ih_l%d" % k] = (4 * H, I if k == 0 else H)
        shapes["weight_hh_l%d" % k] = (4 * H, H)
        shapes["bias_ih_l%d" % k] = (4 * H,)
        shapes["bias_hh_l%d" % k] = (4 * H,)
    return shapes
