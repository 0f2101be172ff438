#!/usr/bin/env python3
"""Checks the native kernels of every op against numpy, with the cases of the
reference kernels' checks (test/vm/Inputs/check_ops.py: seeded inputs over
many shapes, rank 0, empty and size-1 broadcast dimensions, negative axes,
every admitted dtype).

    check_native_ops.py --nimblec P --nimble-run P --tmp DIR --group GROUP [--seed N] [--mcpu CPU]
                        [--threads N] [--kernels native|library|auto]

`--kernels` is nimble-run's (default native); with `library` the matmul and
batch_matmul cases run on oneDNN (the summary counts the calls that did, from
--profile) and are held to the same tolerances.

Group `tiles` adds matmul / batch_matmul cases at the sizes where the
generated register-blocked tiles have full, partial and scalar edges, and
softmax / layer_norm rows across the vector width (with -inf and NaN).

Each case becomes one function of one .nir module: its inputs as parameters,
the op, its results returned. Even-numbered cases declare every dimension
static, odd ones every dimension `?` (symbolic code: run-time dims, residue
dispatch, speculative no-broadcast versions). The module is compiled once with
`nimblec -O0 --kernels=native` (one kernel per op), each case run by
nimble-run, and the outputs compared with numpy's as check_ops.py does (the
same tolerances). Prints a summary
with how many kernels were native; exits 1 on any mismatch.
"""

import argparse
import os
import re
import subprocess
import sys

import numpy as np

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "vm", "Inputs"))

import check_ops  # noqa: E402
from oplib import attr_text, compare  # noqa: E402

NIR_DTYPE = {"bool": "i1", "int8": "i8", "int32": "i32", "int64": "i64", "float16": "f16",
             "float32": "f32", "float64": "f64", "int16": "i16", "uint8": "u8", "uint16": "u16",
             "uint32": "u32", "uint64": "u64"}


def nir_type(a, dt_name, dynamic):
    dims = ["?" if dynamic else str(d) for d in a.shape]
    return "tensor<%s>" % "x".join(dims + [dt_name])


def tile_cases(seed):
    """matmul / batch_matmul at sizes around the generated kernels' tile
    edges (4 rows, 4 dot-product columns or 2 vectors of 8 / 16 columns, k in
    vector steps): full tiles, partial tiles, scalar edges, every transpose;
    softmax and layer_norm rows shorter and longer than a vector."""
    from oplib import Case
    rng = np.random.default_rng(seed)
    cases = []
    # (6, 2000, 100): K large enough that the columns split into cache blocks.
    # (37, 600, 300) and (16, 257, 160): at least 16 rows, so B's blocks are
    # packed; k in blocks of 256 with a partial last one (and one of a single
    # k); several column blocks of 128 and a partial one, then edge columns.
    # (20, 0, 40): K = 0 (zeros; the k-block loops still run once).
    # (29, 300, 100): AVX-512's 8 x 3 tiles, then a 4-row tile and a row;
    # (21, 64, 64): its 8 x 2 form (a static N of 64).
    sizes = [(1, 17, 33), (3, 16, 16), (4, 15, 32), (5, 40, 17), (9, 1, 65), (8, 33, 64), (13, 70, 50),
             (6, 2000, 100), (37, 600, 300), (16, 257, 160), (20, 0, 40), (29, 300, 100), (21, 64, 64)]
    for m, k, n in sizes:
        for ta, tb in ((False, False), (True, False), (False, True), (True, True)):
            a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
            b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
            want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
            sa = np.ascontiguousarray(a.T) if ta else a
            sb = np.ascontiguousarray(b.T) if tb else b
            cases.append(Case("matmul", "f32", [sa, sb], [want], attrs={"transpose_a": ta, "transpose_b": tb}))
    for (sa_, sb_) in (((2, 5, 19), (2, 19, 33)), ((3, 1, 6, 17), (1, 2, 17, 20)), ((2, 20, 300), (2, 300, 70))):
        for tb in (False, True):
            a = rng.uniform(-1, 1, sa_).astype(np.float64)
            b = rng.uniform(-1, 1, sb_).astype(np.float64)
            want = np.matmul(a, b)
            sb2 = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if tb else b
            cases.append(Case("batch_matmul", "f64", [a, sb2], [want], attrs={"transpose_b": tb}))
    # softmax / layer_norm rows across the vector width (8, 16) with tails.
    for length in (1, 7, 16, 17, 40, 100):
        x = rng.uniform(-6, 6, (3, length)).astype(np.float32)
        e = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
        cases.append(Case("softmax", "f32", [x], [(e / e.sum(axis=-1, keepdims=True)).astype(np.float32)]))
        g = rng.uniform(-1, 1, length).astype(np.float32)
        bt = rng.uniform(-1, 1, length).astype(np.float32)
        x64 = x.astype(np.float64)
        mu = x64.mean(axis=-1, keepdims=True)
        var = ((x64 - mu) ** 2).mean(axis=-1, keepdims=True)
        want = ((x64 - mu) / np.sqrt(var + 1e-5) * g + bt).astype(np.float32)
        cases.append(Case("layer_norm", "f32", [x, g, bt], [want], attrs={"eps": 1e-5}))
    # Rows enough (over 65,536 elements) to run in parts on the thread pool:
    # contiguous rows of a rank-3 softmax and of layer_norm, and softmax over
    # axis 0 (rows across the outer dimension, parts over the inner one).
    for shape, axis in (((4, 5, 3300), -1), ((300, 230), 0)):
        x = rng.uniform(-6, 6, shape).astype(np.float32)
        e = np.exp(x.astype(np.float64) - x.max(axis=axis, keepdims=True))
        cases.append(Case("softmax", "f32", [x], [(e / e.sum(axis=axis, keepdims=True)).astype(np.float32)],
                          attrs={"axis": axis}))
    x = rng.uniform(-6, 6, (70, 1000)).astype(np.float32)
    g = rng.uniform(-1, 1, 1000).astype(np.float32)
    bt = rng.uniform(-1, 1, 1000).astype(np.float32)
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=-1, keepdims=True)
    want = ((x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5) * g + bt).astype(np.float32)
    cases.append(Case("layer_norm", "f32", [x, g, bt], [want], attrs={"eps": 1e-5}))
    # Rows with -inf (its exp is 0) and NaN (the row becomes NaN, as numpy).
    x = rng.uniform(-3, 3, (2, 20)).astype(np.float32)
    x[0, 3] = -np.inf
    x[1, 17] = np.nan
    e = np.exp(x.astype(np.float64) - np.nanmax(x, axis=-1, keepdims=True))
    with np.errstate(invalid="ignore"):
        want = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
    cases.append(Case("softmax", "f32", [x], [want]))
    return cases


def compare_magnitude(want, got, tol=1e-5):
    """The tiles' sums run to K = 2000 in f32 (numpy's expected values are
    float64 rounded once): compared relative to the output's magnitude, the
    project's measure (models/common/compare.py), with NaN where numpy has
    NaN."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return "got %s %s, expected %s %s" % (got.dtype, got.shape, want.dtype, want.shape)
    nan = np.isnan(want)
    if not np.array_equal(nan, np.isnan(got)):
        return "NaN where numpy has none, or the reverse"
    w, g = want[~nan].astype(np.float64), got[~nan].astype(np.float64)
    if w.size == 0:
        return None
    err = float(np.max(np.abs(g - w))) / max(float(np.max(np.abs(w))), 1e-30)
    return None if err <= tol else "max |diff| / max |want| = %.3g > %g" % (err, tol)


def usable(case):
    # Error cases need no native check of their own: native code hands every
    # error to the reference kernel (the e2e error tests run natively too).
    return (case.error is None and not case.bf16 and all(not isinstance(x, str) for x in case.inputs)
            and all(not isinstance(v, np.ndarray) for v in case.attrs.values())
            and case.attrs.get("dtype") not in ("bf16", "f16")
            # storage_size in a program is the VM's StorageSize instruction,
            # not a kernel (and it takes i64 shapes only).
            and case.op not in ("constant", "device_copy", "storage_size"))


# Operands that are shapes: their length fixes the result's rank, so it stays
# static even in the symbolic cases.
SHAPE_OPERAND = {"dyn_reshape": 1, "zeros": 0, "full": 0,
                 # index tuples: their length (the last dim) fixes the rank
                 "gather_nd": 1, "scatter_nd": 1}
# Ops whose result shape comes from values (or a bound): `?` result dims.
DATA_DEPENDENT = {"arange", "zeros", "full", "dyn_reshape", "unique", "nonzero", "tile", "pad", "one_hot", "top_k",
                  "non_max_suppression"}


def function_text(name, case, dynamic):
    params = []
    for k, x in enumerate(case.inputs):
        a = np.asarray(x)
        dyn = dynamic and SHAPE_OPERAND.get(case.op) != k
        if case.op == "squeeze" and not case.attrs.get("axes"):
            dyn = False  # squeeze without axes needs the static shape
        params.append("%%in%d: %s" % (k, nir_type(a, NIR_DTYPE[a.dtype.name], dyn)))
    nres = len(case.expected)
    results = ", ".join("%%r%d" % i for i in range(nres))
    rtypes = ", ".join(nir_type(np.asarray(e), NIR_DTYPE[np.asarray(e).dtype.name],
                                dynamic or case.op in DATA_DEPENDENT)
                       for e in case.expected)
    operands = ", ".join("%%in%d" % k for k in range(len(case.inputs)))
    # String attributes (pad's mode) are quoted in .nir; dtype names are not.
    attrs = "".join(", %s=%s" % (k, '"%s"' % v if isinstance(v, str) and k != "dtype" else attr_text(v))
                    for k, v in case.attrs.items())
    if attrs and not operands:
        attrs = attrs[2:]
    return "func @%s(%s) -> (%s) {\n  %s = %s %s%s\n  ret %s\n}\n" % (
        name, ", ".join(params), rtypes, results, case.op, operands, attrs, results)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nimblec", required=True)
    ap.add_argument("--nimble-run", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--group", required=True, choices=sorted(check_ops.GROUPS) + ["tiles"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mcpu", default="")
    ap.add_argument("--threads", type=int, default=1, help="nimble-run --threads")
    ap.add_argument("--kernels", default="native", choices=["native", "library", "auto"],
                    help="nimble-run --kernels")
    ap.add_argument("--sample", type=int, default=1,
                    help="check every Nth case, plus each op's first static and first `?` case")
    args = ap.parse_args()
    os.makedirs(args.tmp, exist_ok=True)
    made = tile_cases(args.seed) if args.group == "tiles" else check_ops.build(args.group, args.seed)
    usable_cases = [c for c in made if usable(c)]
    # Even positions run with static dims, odd ones with `?` dims; a sample
    # keeps each case's position, so it keeps its form.
    seen = set()
    cases, dynamic = [], []
    for i, c in enumerate(usable_cases):
        key = (c.op, i % 2)
        if i % args.sample == 0 or key not in seen:
            cases.append(c)
            dynamic.append(i % 2 == 1)
        seen.add(key)
    if args.sample > 1:
        print("sampled %d of %d cases (--sample=%d)" % (len(cases), len(usable_cases), args.sample))
    text = []
    for i, c in enumerate(cases):
        text.append(function_text("c%d" % i, c, dynamic[i]))
    nir = os.path.join(args.tmp, "cases.nir")
    with open(nir, "w") as f:
        f.write("\n".join(text))
    nbc = os.path.join(args.tmp, "cases.nbc")
    cmd = [args.nimblec, "-O0", "--kernels=native", "--stats", nir, "-o", nbc]
    if args.mcpu:
        cmd.append("--mcpu=" + args.mcpu)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("error: nimblec failed:\n" + p.stderr[-4000:])
    m = re.search(r"native kernels: (\d+), reference kernels: (\d+)", p.stderr)
    failures = 0
    library_calls = 0
    for i, c in enumerate(cases):
        prefix = os.path.join(args.tmp, "c%d" % i)
        run = [args.nimble_run, nbc, "--function=c%d" % i, "--threads=%d" % args.threads,
               "--kernels=" + args.kernels]
        if args.kernels != "native":
            run.append("--profile")
        for k, x in enumerate(c.inputs):
            path = "%s_in%d.npy" % (prefix, k)
            np.save(path, np.array(x, order="C"))
            run.append("--input=@" + path)
        outs = ["%s_out%d.npy" % (prefix, k) for k in range(len(c.expected or []))]
        run += ["--output=@" + o for o in outs]
        r = subprocess.run(run, capture_output=True, text=True)
        if args.kernels != "native" and r.returncode == 0:
            library_calls += len(re.findall(r"^  \S+\s+library\s", r.stderr, re.M))
        msg = None
        if r.returncode != 0:
            msg = "exit %d: %s" % (r.returncode, r.stderr.strip())
        else:
            for k, (want, path) in enumerate(zip(c.expected, outs)):
                got = np.load(path)
                # oneDNN sums in its own order (blocked, FMA): its matrix
                # products are held to the error relative to the output's
                # magnitude, as the tiles' are (docs/codegen.md).
                if args.group == "tiles" or (args.kernels != "native" and c.op in ("matmul", "batch_matmul")):
                    msg = compare_magnitude(np.asarray(want), got)
                else:
                    msg = compare(np.asarray(want), got, False)
                if msg:
                    msg = "output %d: %s" % (k, msg)
                    break
        if msg:
            failures += 1
            print("error: c%d %s (%s): %s\n  %s" % (i, c.describe(), "dynamic" if dynamic[i] else "static",
                                                  msg, " ".join(run)))
    print("%s: %d cases, %d failed; native kernels %s, reference kernels %s%s"
          % (args.group, len(cases), failures, m.group(1) if m else "?", m.group(2) if m else "?",
             "; cases on the library %d" % library_calls if args.kernels != "native" else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
