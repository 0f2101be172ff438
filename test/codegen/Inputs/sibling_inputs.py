"""Writes the inputs and numpy's results of test/codegen/native-sibling-products.nir.

Usage: sibling_inputs.py DIR -> DIR/*.npy (results in float64, stored as f32):

  pair   h1[1,16] . W[4,16]^T + h2[1,16] . W^T
  long   g1[1,1000] . V[38,1000]^T - g2[1,1000] . V^T (k in two blocks of 768;
         9 tiles of 4 and 2 edge columns)
  node   Tree-LSTM's node at its sizes: (h_l + h_r) . U[450,150]^T, and
         sigmoid(h_l . U_f[150,150]^T) * c_l + sigmoid(h_r . U_f^T) * c_r
         (150 columns: 37 tiles of 4 and 2 edge columns; k: 9 vector steps
         and a masked step of 6)
"""
import sys
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(5252)


def mat(*shape, scale=1.0):
    return (rng.uniform(-1, 1, shape) * scale).astype(np.float32)


def f64(a):
    return a.astype(np.float64)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


h1, h2, w = mat(1, 16), mat(1, 16), mat(4, 16)
g1, g2, v = mat(1, 1000), mat(1, 1000), mat(38, 1000, scale=1 / np.sqrt(1000))
hl, hr, cl, cr = mat(1, 150), mat(1, 150), mat(1, 150), mat(1, 150)
u, uf = mat(450, 150, scale=1 / np.sqrt(150)), mat(150, 150, scale=1 / np.sqrt(150))
for name, a in (("h1", h1), ("h2", h2), ("w", w), ("g1", g1), ("g2", g2), ("v", v), ("hl", hl), ("hr", hr), ("cl", cl), ("cr", cr), ("u", u),
                ("uf", uf)):
    np.save(f"{out}/{name}.npy", a)
# Special values through the pair (compared with -O0, not numpy): +-0,
# subnormals and the largest finite in h; W's rows: one with +-inf, one
# with NaN, one of ones (the sums of h: +-max cancel), one of subnormals.
h = np.array([[0.0, -0.0, 1e-45, -1e-40, 3.4028235e38, -3.4028235e38, 1.0, -2.0, 0.5, 1e-38, -1e-45, 7.0,
               -0.0, 2.5, -1.5, 1e-44]], dtype=np.float32)
np.save(f"{out}/s1.npy", h)
np.save(f"{out}/s2.npy", h[:, ::-1].copy())
ws = np.ones((4, 16), np.float32)
ws[0, 3], ws[0, 7] = np.inf, -np.inf
ws[1, 5] = np.nan
ws[3] = np.float32(1e-45) * np.arange(16, dtype=np.float32)
np.save(f"{out}/ws.npy", ws)
np.save(f"{out}/pair.npy", (f64(h1) @ f64(w).T + f64(h2) @ f64(w).T).astype(np.float32))
np.save(f"{out}/long.npy", (f64(g1) @ f64(v).T - f64(g2) @ f64(v).T).astype(np.float32))
np.save(f"{out}/iou.npy", ((f64(hl) + f64(hr)) @ f64(u).T).astype(np.float32))
keep = sigmoid(f64(hl) @ f64(uf).T) * f64(cl) + sigmoid(f64(hr) @ f64(uf).T) * f64(cr)
np.save(f"{out}/keep.npy", keep.astype(np.float32))
