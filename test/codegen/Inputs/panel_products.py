"""Writes the program and data of test/codegen/library-panels.test.

Usage: panel_products.py DIR -> DIR/panels.nir and, per function F and row
count M, DIR/F.M.x.npy (and F.M.r.npy, a residual) with numpy's result in
float64 as DIR/F.M.y.npy. K = 300 (in BA16a64b padded to 304) and N = 130
(two full panels of 64 columns and one of 2); @longk has K = 1100 (above 8
rows: a block of 1024 k's and one of 76, the second continuing the sums
stored in y) and N = 70 (a last panel of 6 columns).
"""
import math
import sys

import numpy as np
from nir_literal import lit

out = sys.argv[1]
K, N = 300, 130
ROWS = [1, 2, 7, 8, 9, 16, 17, 31, 32, 33, 40, 64, 65]
rng = np.random.default_rng(5)
w = (rng.standard_normal((N, K)) * 0.25).astype(np.float32)   # N x K: read as W^T
wkn = (rng.standard_normal((K, N)) * 0.25).astype(np.float32)  # K x N: read as it is
b = (rng.standard_normal(N) * 0.25).astype(np.float32)
c = (rng.uniform(0.5, 2.0, N) * np.where(np.arange(N) % 2, 1, -1)).astype(np.float32)  # no zeros: a divisor
KL, NL = 1100, 70
wl = (rng.standard_normal((NL, KL)) * 0.1).astype(np.float32)  # NL x KL: read as W^T


with open(f"{out}/panels.nir", "w") as f:
    f.write(f"""func @dense(%x: tensor<?x{K}xf32>) -> tensor<?x{N}xf32> {{
  %w = constant {lit(w)} : tensor<{N}x{K}xf32>
  %b = constant {lit(b)} : tensor<{N}xf32>
  %m = matmul %x, %w, transpose_b=true
  %a = add %m, %b
  ret %a
}}

func @kn(%x: tensor<?x{K}xf32>) -> tensor<?x{N}xf32> {{
  %w = constant {lit(wkn)} : tensor<{K}x{N}xf32>
  %m = matmul %x, %w
  %a = relu %m
  ret %a
}}

func @chain(%x: tensor<?x{K}xf32>, %r: tensor<?x{N}xf32>) -> tensor<?x{N}xf32> {{
  %w = constant {lit(w)} : tensor<{N}x{K}xf32>
  %b = constant {lit(b)} : tensor<{N}xf32>
  %m = matmul %x, %w, transpose_b=true
  %a = add %m, %b
  %g = gelu %a
  %s = add %g, %r
  ret %s
}}

func @longk(%x: tensor<?x{KL}xf32>) -> tensor<?x{NL}xf32> {{
  %w = constant {lit(wl)} : tensor<{NL}x{KL}xf32>
  %m = matmul %x, %w, transpose_b=true
  ret %m
}}

func @ops(%x: tensor<?x{K}xf32>, %r: tensor<?x{N}xf32>, %q: tensor<?x{N}xf32>) -> tensor<?x{N}xf32> {{
  %w = constant {lit(w)} : tensor<{N}x{K}xf32>
  %b = constant {lit(b)} : tensor<{N}xf32>
  %c = constant {lit(c)} : tensor<{N}xf32>
  %m = matmul %x, %w, transpose_b=true
  %a = add %m, %r
  %u = mul %a, %b
  %d = div %u, %c
  %e = maximum %d, %q
  %f = minimum %e, %b
  %s = sub %f, %r
  %t = tanh %s
  %g = mul %t, %q
  ret %g
}}

func @subrow(%x: tensor<?x{K}xf32>) -> tensor<?x{N}xf32> {{
  %w = constant {lit(w)} : tensor<{N}x{K}xf32>
  %b = constant {lit(b.reshape(1, N))} : tensor<1x{N}xf32>
  %m = matmul %x, %w, transpose_b=true
  %d = sub %m, %b
  %a = relu %d
  ret %a
}}

""")

erf = np.vectorize(math.erf)
W, WKN, B = w.astype(np.float64), wkn.astype(np.float64), b.astype(np.float64)
for m in ROWS:
    x = rng.standard_normal((m, K)).astype(np.float32)
    r = rng.standard_normal((m, N)).astype(np.float32)
    X = x.astype(np.float64)
    dense = X @ W.T + B
    results = {
        "dense": dense,
        "kn": np.maximum(X @ WKN, 0),
        "chain": 0.5 * dense * (1 + erf(dense / math.sqrt(2))) + r,
        "subrow": np.maximum(X @ W.T - B, 0),
    }
    # @ops: every binary post-op, full (m x n) and row operands, in the
    # per-panel epilogue (before the first activation) and after it.
    q = rng.standard_normal((m, N)).astype(np.float32)
    R, Q, C = r.astype(np.float64), q.astype(np.float64), c.astype(np.float64)
    f = np.minimum(np.maximum((X @ W.T + R) * B / C, Q), B)
    results["ops"] = np.tanh(f - R) * Q
    np.save(f"{out}/ops.{m}.r.npy", r)
    np.save(f"{out}/ops.{m}.q.npy", q)
    for name, y in results.items():
        np.save(f"{out}/{name}.{m}.x.npy", x)
        np.save(f"{out}/{name}.{m}.y.npy", y.astype(np.float32))
    xl = rng.standard_normal((m, KL)).astype(np.float32)
    np.save(f"{out}/longk.{m}.x.npy", xl)
    np.save(f"{out}/longk.{m}.y.npy", (xl.astype(np.float64) @ wl.T.astype(np.float64)).astype(np.float32))
    np.save(f"{out}/chain.{m}.r.npy", r)
