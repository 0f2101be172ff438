"""The --check of torchvision_export.py and transformer_export.py: each
GOT:WANT pair of DIR/GOT.npy and DIR/WANT.npy has equal shapes and a largest
difference at most 1e-4 of the largest |WANT| (and 1e-5 absolute), relative
to the output's scale rather than per element, because deep models' outputs
near zero carry absolute, not relative, rounding.
"""
import os

import numpy as np


def check(d, pairs):
    bad = 0
    for pair in pairs:
        got, want = pair.split(":")
        a, b = np.load(os.path.join(d, got + ".npy")), np.load(os.path.join(d, want + ".npy"))
        if a.shape != b.shape:
            print("%s differs from %s: shape %s vs %s" % (got, want, a.shape, b.shape))
            bad += 1
            continue
        err, scale = float(np.abs(a - b).max()), float(np.abs(b).max())
        if err <= max(1e-4 * scale, 1e-5):
            print("%s matches %s (max difference %.2g, %.2g of max |y|)" % (got, want, err, err / scale))
        else:
            print("%s differs from %s: max difference %.3g, max |y| %.3g" % (got, want, err, scale))
            bad += 1
    return 1 if bad else 0
