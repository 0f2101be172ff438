"""Writes the inputs and numpy's results of test/codegen/native-gemv.nir.

Usage: gemv_inputs.py DIR -> DIR/*.npy (results in float64, stored as f32):

  steps{1,2,3,4}  h <- tanh(h . W^T) from x[1,1030], W[1030,1030], 1-4 times
                  (1030 columns: 128 units of 8 and 6 edge columns)
  wide            x2[1,2000] . W2[600,2000]^T (k in blocks of 768)
  small           x3[1,17] . W3[33,17]^T (under 2^18 weights: the tiles, not this stage)
"""
import sys
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(52)


def mat(*shape, scale=1.0):
    return (rng.uniform(-1, 1, shape) * scale).astype(np.float32)


x, w = mat(1, 1030), mat(1030, 1030, scale=2 / np.sqrt(1030))
h = x.astype(np.float64)
for n in range(1, 5):
    h = np.tanh(h @ w.astype(np.float64).T)
    np.save(f"{out}/steps{n}.npy", h.astype(np.float32))
x2, w2 = mat(1, 2000), mat(600, 2000, scale=1 / np.sqrt(2000))
x3, w3 = mat(1, 17), mat(33, 17)
for name, a in (("x", x), ("w", w), ("x2", x2), ("w2", w2), ("x3", x3), ("w3", w3)):
    np.save(f"{out}/{name}.npy", a)
np.save(f"{out}/wide.npy", (x2.astype(np.float64) @ w2.astype(np.float64).T).astype(np.float32))
np.save(f"{out}/small.npy", (x3.astype(np.float64) @ w3.astype(np.float64).T).astype(np.float32))
