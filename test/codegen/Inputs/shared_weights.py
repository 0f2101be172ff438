"""test/codegen/library-shared-weights.test: one weight multiplied by 16, 40,
128 and again 16 rows in one process (--instances, one after another), on
the panel path (16) and oneDNN's (40, 128), must keep one packed copy where
oneDNN's layout is the panels' (BA16a64b), and every result must match
numpy.

    shared_weights.py make DIR        DIR/shared.nir, inputs, numpy's results, instances file
    shared_weights.py run DIR T [ENV=VALUE ...]
                                      nimble-run on T threads; prints the
                                      --profile packing line's counts and
                                      whether every instance matched (1e-5)
    shared_weights.py same DIR A B I,J
                                      whether DIR/A/i.0.npy equal DIR/B/i.0.npy
                                      bit for bit for instances I, J
"""
import os
import re
import subprocess
import sys

import numpy as np
from nir_literal import lit

K, N = 300, 256  # 4 panels; 300 rows padded to 304 in BA16a64b
ROWS = [16, 40, 128, 16]


def make(d):
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((N, K)) * 0.25).astype(np.float32)
    b = (rng.standard_normal(N) * 0.25).astype(np.float32)
    with open(f"{d}/shared.nir", "w") as f:
        f.write(f"""func @main(%x: tensor<?x{K}xf32>) -> tensor<?x{N}xf32> {{
  %w = constant {lit(w)} : tensor<{N}x{K}xf32>
  %b = constant {lit(b)} : tensor<{N}xf32>
  %m = matmul %x, %w, transpose_b=true
  %a = add %m, %b
  ret %a
}}
""")
    with open(f"{d}/instances.txt", "w") as f:
        for i, m in enumerate(ROWS):
            x = rng.standard_normal((m, K)).astype(np.float32)
            np.save(f"{d}/x{i}.npy", x)
            np.save(f"{d}/y{i}.npy", x.astype(np.float64) @ w.T.astype(np.float64) + b)
            f.write(f"@x{i}.npy\n")


def run(d, threads, env_kv):
    env = dict(os.environ)
    for kv in env_kv:
        k, v = kv.split("=", 1)
        env[k] = v
    out = f"{d}/out.{threads}" + "".join("." + kv.replace("=", "") for kv in env_kv)
    os.makedirs(out, exist_ok=True)
    p = subprocess.run(["nimble-run", f"{d}/shared.nbc", "--kernels=library", f"--threads={threads}",
                        f"--instances={d}/instances.txt", "--auto-batch=off", f"--output-dir={out}", "--profile"],
                       env=env, capture_output=True, text=True)
    text = p.stdout + p.stderr
    packed = re.search(r"Library weights: (\d+) constants packed \(all runs\) into (\d+) bytes", text)
    panels = re.search(r"Library panels: (\d+) calls", text)
    ok = p.returncode == 0
    for i in range(len(ROWS)):
        if not ok:
            break
        got, want = np.load(f"{out}/{i}.0.npy"), np.load(f"{d}/y{i}.npy")
        ok = got.shape == want.shape and bool(np.all(np.abs(got - want) <= 1e-5 + 1e-5 * np.abs(want)))
    print(f"threads={threads}{' ' + ' '.join(env_kv) if env_kv else ''}: "
          f"{'all match' if ok else 'MISMATCH'}, packed {packed.group(1) if packed else 0} "
          f"into {packed.group(2) if packed else 0} bytes, panel calls {panels.group(1) if panels else 0}")
    if not ok:
        print(text[-3000:])


def same(d, a, b, which):
    """Instances `which` (oneDNN's rows in both runs) bit for bit."""
    eq = all(np.array_equal(np.load(f"{d}/{a}/{i}.0.npy"), np.load(f"{d}/{b}/{i}.0.npy")) for i in which)
    rows = " and ".join(str(ROWS[i]) for i in which)
    print(f"{a} and {b} at {rows} rows: {'identical' if eq else 'DIFFERENT'}")


if __name__ == "__main__":
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "make":
        make(d)
    elif cmd == "run":
        run(d, int(sys.argv[3]), sys.argv[4:])
    else:
        same(d, sys.argv[3], sys.argv[4], [int(i) for i in sys.argv[5].split(",")])
