"""The Tree-LSTM variants: sizes, files and seeds, shared by every script here.

Paper §5: child-sum Tree-LSTM (Tai et al. 2015), input 300 / hidden 150, over
binary trees whose leaves carry word vectors. `treelstm_small` (8 / 6) is the
test variant committed under small/.
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))

VARIANTS = {
    "treelstm": dict(input=300, hidden=150, subdir="", seed=201),
    "treelstm_small": dict(input=8, hidden=6, subdir="small", seed=203),
}

FULL = ["treelstm"]


def nir_path(name):
    return os.path.join(HERE, VARIANTS[name]["subdir"], name + ".nir")


def weights_file(name):
    return name + ".safetensors"


def weights_path(name):
    return os.path.join(HERE, VARIANTS[name]["subdir"], weights_file(name))


def weight_shapes(name):
    """{key: shape}; rows of w_iou / u_iou / b_iou are the gates i, o, u (H each).

    w_iou [3H, I]  input (leaf word vector) -> i, o, u
    u_iou [3H, H]  sum of the children's h  -> i, o, u
    b_iou [3H]     bias of i, o, u (leaves and internal nodes alike)
    u_f   [H, H]   a child's h -> that child's forget gate
    b_f   [H]      forget gate bias
    """
    v = VARIANTS[name]
    I, H = v["input"], v["hidden"]
    return {
        "w_iou": (3 * H, I),
        "u_iou": (3 * H, H),
        "b_iou": (3 * H,),
        "u_f": (H, H),
        "b_f": (H,),
    }
