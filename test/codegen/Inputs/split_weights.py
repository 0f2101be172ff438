"""Writes the program and data of test/codegen/library-split.test.

Usage: split_weights.py DIR -> DIR/split.nir and, for each function, its
inputs and numpy's result (computed in float64, stored as f32):

  @bias      x[37,96] @ W[200,96]^T + b        (200 columns: blocks of 112 and 88)
  @gelu      gelu(x @ W2[256,96]^T + b2)
  @residual  x @ W3[160,96]^T + b3 + r[37,160] (r read into the output first)
  @residual2 x @ W3^T + r (a residual and no bias)
  @batch     x3[2,37,96] batch_matmul W4[1,96,144] + r3 (weights broadcast
             over the batch, read as they are: columns strided, copied once)
  @scale     (x @ W[200,96]^T) * s, s a scalar (no strided form: not split)
  @chain     s1 = xc @ W5[160,160]^T + b5 + xc, then s1 @ W6^T + b6 + s1: one
             kernel called twice a run with other weights, inputs and
             outputs (the arguments kept from its first call must follow them)

x has 37 rows: below LibraryKernels::kBlockedSliceRows (64), each slice
writes a dense block of its own; x3 (74 rows in all) and xl, rl (80 rows,
for @bias and @residual) are above it: the slices write in place.
"""
import math, sys, numpy as np
from nir_literal import lit
out = sys.argv[1]
K, M = 96, 37
rng = np.random.default_rng(11)
def mat(*shape, scale=0.25):
    return (rng.standard_normal(shape) * scale).astype(np.float32)
w, b = mat(200, K), mat(200)
w2, b2 = mat(256, K), mat(256)
w3, b3 = mat(160, K), mat(160)
w4 = mat(1, K, 144)
x, r, x3, r3 = mat(M, K, scale=1), mat(M, 160, scale=1), mat(2, M, K, scale=1), mat(2, M, 144, scale=1)
w5, b5, w6, b6 = mat(160, 160), mat(160), mat(160, 160), mat(160)
with open(f"{out}/split.nir", "w") as f:
    f.write(f"""func @bias(%x: tensor<?x{K}xf32>) -> tensor<?x200xf32> {{
  %w = constant {lit(w)} : tensor<200x{K}xf32>
  %b = constant {lit(b)} : tensor<200xf32>
  %m = matmul %x, %w, transpose_b=true
  %a = add %m, %b
  ret %a
}}

func @gelu(%x: tensor<?x{K}xf32>) -> tensor<?x256xf32> {{
  %w = constant {lit(w2)} : tensor<256x{K}xf32>
  %b = constant {lit(b2)} : tensor<256xf32>
  %m = matmul %x, %w, transpose_b=true
  %a = add %m, %b
  %g = gelu %a
  ret %g
}}

func @residual(%x: tensor<?x{K}xf32>, %r: tensor<?x160xf32>) -> tensor<?x160xf32> {{
  %w = constant {lit(w3)} : tensor<160x{K}xf32>
  %b = constant {lit(b3)} : tensor<160xf32>
  %m = matmul %x, %w, transpose_b=true
  %a = add %m, %b
  %s = add %a, %r
  ret %s
}}

func @residual2(%x: tensor<?x{K}xf32>, %r: tensor<?x160xf32>) -> tensor<?x160xf32> {{
  %w = constant {lit(w3)} : tensor<160x{K}xf32>
  %m = matmul %x, %w, transpose_b=true
  %s = add %r, %m
  ret %s
}}

func @batch(%x: tensor<2x?x{K}xf32>, %r: tensor<2x?x144xf32>) -> tensor<2x?x144xf32> {{
  %w = constant {lit(w4)} : tensor<1x{K}x144xf32>
  %m = batch_matmul %x, %w
  %s = add %m, %r
  ret %s
}}

func @scale(%x: tensor<?x{K}xf32>) -> tensor<?x200xf32> {{
  %w = constant {lit(w)} : tensor<200x{K}xf32>
  %s = constant 0.5 : tensor<f32>
  %m = matmul %x, %w, transpose_b=true
  %a = mul %m, %s
  ret %a
}}

func @chain(%x: tensor<?x160xf32>) -> tensor<?x160xf32> {{
  %w5 = constant {lit(w5)} : tensor<160x160xf32>
  %b5 = constant {lit(b5)} : tensor<160xf32>
  %w6 = constant {lit(w6)} : tensor<160x160xf32>
  %b6 = constant {lit(b6)} : tensor<160xf32>
  %m1 = matmul %x, %w5, transpose_b=true
  %a1 = add %m1, %b5
  %s1 = add %a1, %x
  %m2 = matmul %s1, %w6, transpose_b=true
  %a2 = add %m2, %b6
  %s2 = add %a2, %s1
  ret %s2
}}
""")
d = lambda a: a.astype(np.float64)
erfc = np.vectorize(math.erfc)
def save(name, a): np.save(f"{out}/{name}.npy", np.asarray(a, dtype=np.float32))
xl, rl = mat(80, K, scale=1), mat(80, 160, scale=1)
save("x", x); save("r", r); save("x3", x3); save("r3", r3); save("xl", xl); save("rl", rl)
save("bias_l", d(xl) @ d(w).T + d(b))
save("residual_l", d(xl) @ d(w3).T + d(b3) + d(rl))
save("bias", d(x) @ d(w).T + d(b))
h = d(x) @ d(w2).T + d(b2)
save("gelu", 0.5 * h * erfc(-h / math.sqrt(2)))
save("residual", d(x) @ d(w3).T + d(b3) + d(r))
save("residual2", d(x) @ d(w3).T + d(r))
save("batch", d(x3) @ d(w4) + d(r3))
save("scale", (d(x) @ d(w).T) * 0.5)
for name, rows in (("chain", M), ("chain_l", 80)):
    xc = mat(rows, 160, scale=1)
    save("x" + name, xc)
    s1 = d(xc) @ d(w5).T + d(b5) + d(xc)
    save(name, s1 @ d(w6).T + d(b6) + s1)
