"""Writes the inputs and numpy's products for test/cuda/Inputs/gemm.nir.

Usage: gemm_check.py DIR  -> DIR/<fn>.a.npy, DIR/<fn>.b.npy, DIR/<fn>.out.npy
"""
import sys

import numpy as np

rng = np.random.default_rng(7)
out = sys.argv[1]


def save(name, a, b, c):
    np.save(f"{out}/{name}.a.npy", a.astype(np.float32))
    np.save(f"{out}/{name}.b.npy", b.astype(np.float32))
    np.save(f"{out}/{name}.out.npy", c.astype(np.float32))


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


a, b = r(5, 3), r(3, 4)
save("mm", a, b, a @ b)
a, b = r(3, 5), r(3, 4)
save("mm_ta", a, b, a.T @ b)
a, b = r(5, 3), r(4, 3)
save("mm_tb", a, b, a @ b.T)
a, b = r(3, 5), r(4, 3)
save("mm_tab", a, b, a.T @ b.T)
a, b = r(6, 2, 3), r(6, 3, 4)
save("bmm", a, b, a @ b)
a, b = r(6, 2, 3), r(1, 4, 3)
save("bmm_shared", a, b, a @ np.swapaxes(b, -1, -2))
a, b = r(2, 1, 2, 3), r(1, 3, 3, 4)
save("bmm_mixed", a, b, a @ b)
