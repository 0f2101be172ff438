"""Writes the program and data of test/codegen/library-narrow.test.

Usage: narrow_weights.py DIR -> DIR/narrow.nir and, for each function, its
inputs and numpy's result (computed in float64, stored as f32):

  @gelu      gelu(x @ W[1600,64]^T + b)         (1600 columns: 544 + 544 + 512)
  @residual  x @ W2[800,64]^T + b2 + r[?,800]   (800 columns: 400 + 400)
  @narrow    x @ W3[768,64]^T                   (768 columns: one slice, not split)

x has 37 rows (below LibraryKernels::kBlockedSliceRows) and xl 80 (above
it): narrow slices write dense blocks of their own at every row count.
"""
import sys, numpy as np
from nir_literal import lit
out = sys.argv[1]
K = 64
rng = np.random.default_rng(23)
def mat(*shape, scale=0.25):
    return (rng.standard_normal(shape) * scale).astype(np.float32)
w, b = mat(1600, K), mat(1600)
w2, b2 = mat(800, K), mat(800)
w3 = mat(768, K)
x, xl = mat(37, K, scale=1), mat(80, K, scale=1)
r, rl = mat(37, 800, scale=1), mat(80, 800, scale=1)
with open(f"{out}/narrow.nir", "w") as f:
    f.write(f"""func @gelu(%x: tensor<?x{K}xf32>) -> tensor<?x1600xf32> {{
  %w = constant {lit(w)} : tensor<1600x{K}xf32>
  %b = constant {lit(b)} : tensor<1600xf32>
  %m = matmul %x, %w, transpose_b=true
  %a = add %m, %b
  %g = gelu %a
  ret %g
}}

func @residual(%x: tensor<?x{K}xf32>, %r: tensor<?x800xf32>) -> tensor<?x800xf32> {{
  %w = constant {lit(w2)} : tensor<800x{K}xf32>
  %b = constant {lit(b2)} : tensor<800xf32>
  %m = matmul %x, %w, transpose_b=true
  %a = add %m, %b
  %s = add %a, %r
  ret %s
}}

func @narrow(%x: tensor<?x{K}xf32>) -> tensor<?x768xf32> {{
  %w = constant {lit(w3)} : tensor<768x{K}xf32>
  %m = matmul %x, %w, transpose_b=true
  ret %m
}}
""")
def f64(a):
    return a.astype(np.float64)
def gelu(v):
    from math import erf, sqrt
    return 0.5 * v * (1.0 + np.vectorize(erf)(v / sqrt(2.0)))
for name, xs in (("", x), ("_l", xl)):
    np.save(f"{out}/x{name}.npy", xs)
    np.save(f"{out}/gelu{name}.npy", gelu(f64(xs) @ f64(w).T + f64(b)).astype(np.float32))
    rr = r if name == "" else rl
    np.save(f"{out}/r{name}.npy", rr)
    np.save(f"{out}/residual{name}.npy", (f64(xs) @ f64(w2).T + f64(b2) + f64(rr)).astype(np.float32))
    np.save(f"{out}/narrow{name}.npy", (f64(xs) @ f64(w3).T).astype(np.float32))
