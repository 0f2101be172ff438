"""Writes and checks test/codegen/library-maxmin.test's cases.

    maxmin_special.py make DIR   -> DIR/maxmin.nir and DIR/{x,q}.{8,40}.npy
    maxmin_special.py same A B   -> whether two .npy files hold the same bits

A matmul by a 132 x 4 weight of stacked identities (y[:, j] = x[:, j % 4],
exact: one product of 1 and three of 0 a column) followed by maximum or
minimum with q, in both operand orders. Row i of x is one special value
(+0, -0, NaN, +inf, -inf, +-1e-40 subnormals, 1, the largest f32); q's
columns run through the same values, so every pair meets in both orders.
(An infinite x gives NaN products: inf * 0.)
"""
import sys

import numpy as np
from nir_literal import lit

if sys.argv[1] == "same":
    a, b = (np.load(p).view(np.uint32) for p in sys.argv[2:4])
    diff = int((a != b).sum()) if a.shape == b.shape else -1
    print("same bits" if diff == 0 else "DIFFERENT: %d elements" % diff)
    sys.exit(0)

out = sys.argv[2]
w = np.tile(np.eye(4, dtype=np.float32), (33, 1))  # 132 columns: 3 panels
fns = {"max_chain_first": "maximum %m, %q", "max_chain_second": "maximum %q, %m",
       "min_chain_first": "minimum %m, %q", "min_chain_second": "minimum %q, %m"}
with open(f"{out}/maxmin.nir", "w") as f:
    for name, op in fns.items():
        f.write(f"""func @{name}(%x: tensor<?x4xf32>, %q: tensor<?x132xf32>) -> tensor<?x132xf32> {{
  %w = constant {lit(w)} : tensor<132x4xf32>
  %m = matmul %x, %w, transpose_b=true
  %a = {op}
  ret %a
}}

""")
vals = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-40, -1e-40, 1.0, np.finfo(np.float32).max],
                dtype=np.float32)
for rows in (8, 40):
    x = np.repeat(np.resize(vals, rows)[:, None], 4, axis=1).astype(np.float32)
    q = np.resize(vals, (rows, 132)).astype(np.float32)
    q[1::2] = np.roll(q[1::2], 3, axis=1)  # other pairings in the odd rows
    np.save(f"{out}/x.{rows}.npy", x)
    np.save(f"{out}/q.{rows}.npy", q)
