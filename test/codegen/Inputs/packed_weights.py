"""Writes the program and data of test/codegen/library-packed.test.

Usage: packed_weights.py DIR -> DIR/packed.nir (a dense layer whose weight
and bias are constants, and the same layer taking them as parameters),
DIR/x.npy (128 rows), DIR/y.npy (numpy's x @ w^T + b in float64, as f32),
DIR/w.npy, DIR/b.npy, and the first 8 rows as x8.npy / y8.npy.
"""
import sys, numpy as np
from nir_literal import lit
out = sys.argv[1]
N, K, M = 48, 64, 128
rng = np.random.default_rng(3)
w = (rng.standard_normal((N, K)) * 0.25).astype(np.float32)
b = (rng.standard_normal(N) * 0.25).astype(np.float32)
x = rng.standard_normal((M, K)).astype(np.float32)
sq = (rng.standard_normal((K, K)) * 0.25).astype(np.float32)
with open(f"{out}/packed.nir", "w") as f:
    f.write(f"""func @dense(%x: tensor<?x{K}xf32>) -> tensor<?x{N}xf32> {{
  %w = constant {lit(w)} : tensor<{N}x{K}xf32>
  %b = constant {lit(b)} : tensor<{N}xf32>
  %m = matmul %x, %w, transpose_b=true
  %a = add %m, %b
  ret %a
}}

func @dense_param(%x: tensor<?x{K}xf32>, %w: tensor<{N}x{K}xf32>, %b: tensor<{N}xf32>) -> tensor<?x{N}xf32> {{
  %m = matmul %x, %w, transpose_b=true
  %a = add %m, %b
  ret %a
}}
""")
    # A square constant read transposed by one kernel and as it is by
    # another; and a weight a loop halves on each trip (the first trip reads
    # the constant, later ones values in reused memory), returning the last
    # product: 0.125 x W^T after four trips.
    f.write(f"""
func @both(%x: tensor<?x{K}xf32>) -> tensor<?x{K}xf32> {{
  %s = constant {lit(sq)} : tensor<{K}x{K}xf32>
  %a = matmul %x, %s
  %bt = matmul %x, %s, transpose_b=true
  %r = add %a, %bt
  ret %r
}}

func @halving(%x: tensor<?x{K}xf32>) -> tensor<?x{N}xf32> {{
^entry:
  %w0 = constant {lit(w)} : tensor<{N}x{K}xf32>
  %zero = constant 0 : tensor<i64>
  %m0 = matmul %x, %w0, transpose_b=true
  br ^loop(%zero, %w0, %m0)
^loop(%i: tensor<i64>, %w: tensor<{N}x{K}xf32>, %last: tensor<?x{N}xf32>):
  %four = constant 4 : tensor<i64>
  %done = greater_equal %i, %four
  cond_br %done, ^exit, ^body
^body:
  %m = matmul %x, %w, transpose_b=true
  %half = constant 0.5 : tensor<f32>
  %w2 = mul %w, %half
  %one = constant 1 : tensor<i64>
  %i2 = add %i, %one
  br ^loop(%i2, %w2, %m)
^exit:
  ret %last
}}
""")
np.save(f"{out}/w.npy", w)
np.save(f"{out}/b.npy", b)
np.save(f"{out}/x.npy", x)
np.save(f"{out}/y.npy", (x.astype(np.float64) @ w.T.astype(np.float64) + b).astype(np.float32))
np.save(f"{out}/x8.npy", x[:8])
np.save(f"{out}/y8.npy", (x[:8].astype(np.float64) @ w.T.astype(np.float64) + b).astype(np.float32))
x64, sq64, w64 = x.astype(np.float64), sq.astype(np.float64), w.astype(np.float64)
np.save(f"{out}/both.npy", (x64 @ sq64 + x64 @ sq64.T).astype(np.float32))
np.save(f"{out}/halving.npy", (x64 @ (w64 * 0.125).T).astype(np.float32))
