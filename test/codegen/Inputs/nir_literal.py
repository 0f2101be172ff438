"""The text of a tensor constant in .nir, for the test inputs beside this
file that write programs with their weights inline."""

import numpy as np


def lit(a):
    """A nested literal, each float32 by its shortest round-tripping text."""
    a = np.asarray(a, np.float32)
    if a.ndim == 0:
        return repr(float(a))
    return "[" + ", ".join(lit(v) for v in a) + "]"
