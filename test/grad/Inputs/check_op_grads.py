#!/usr/bin/env python3
"""Checks the adjoint of every differentiable op against central finite
differences in float64.

    check_op_grads.py --nimble-opt P --nimblec P --nimble-run P --gradients-def P
                      --ops-def P --tmp DIR [--seed N] [--only OP] [--sample K]

For each case (an op with its attributes, operands of seeded random shapes,
static or `?` dims, values away from kinks) the script writes

    @f(operands) -> results                      the op alone
    @fd(operands, seeds) -> tensor<Kxf64>        for every element j of every
        float operand and s = +1, -1: L(x + s h e_j), L = sum(seed * f(x))

runs `nimble-opt --passes=grad{func=f}` (every float operand), compiles with
nimblec (reference kernels, f64) and runs @f_grad and @fd with the same
inputs and random seeds. The gradient must match (L(x + h e_j) - L(x - h e_j))
/ 2h within 1e-6 relative to the gradient's largest entry (h = 1e-6; the
difference quotient's own error is about 1e-10 here).

It fails, too, when an op whose row in ir/Gradients.def is `Rule` has no
case (--gradients-def, with the mnemonics from --ops-def), so a new rule
cannot go untested.

Cases run os.cpu_count() at a time. `--sample K` checks every K-th case and
the first case of each op (lit's %asan-sample: K = 4 under ASan, where each
case's seven tool processes cost ~0.1 s apiece just to start).
"""

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys

import numpy as np

H = 1e-6
TOL = 1e-6

# Ops with a Rule row that this check does not cover, and why.
EXEMPT = {
    "device_copy": "needs a second device (no GPU here); its rule is a device_copy back to the source",
}


def lit(a):
    """A .nir literal for numpy array a."""
    if a.ndim == 0:
        v = a.item()
        return repr(float(v)) if isinstance(v, float) else str(int(v)).lower()
    return "[" + ", ".join(lit(x) for x in a) + "]"


def ttype(shape, dt, dyn=False):
    dims = "".join(("?" if dyn else str(d)) + "x" for d in shape)
    return "tensor<%s%s>" % (dims, dt)


class Case:
    """op: mnemonic; body: lines using %x0.. and defining %y0..; inputs:
    [(array, differentiable)]; nres: results; dyn: operands typed with `?`."""

    def __init__(self, op, body, inputs, nres=1, dyn=False):
        self.op, self.body, self.inputs, self.nres, self.dyn = op, body, inputs, nres, dyn

    def name(self):
        shapes = ",".join("x".join(map(str, a.shape)) or "scalar" for a, _ in self.inputs)
        return "%s(%s)%s" % (self.op, shapes, " dyn" if self.dyn else "")


def cases(rng):
    def r(*shape, lo=-2.0, hi=2.0, away=0.0):
        a = rng.uniform(lo, hi, size=shape)
        if away:
            a = np.where(np.abs(a) < away, np.sign(a + 1e-9) * away + a, a)
        return a.astype(np.float64)

    def pos(*shape):
        return rng.uniform(0.3, 2.0, size=shape)

    out = []
    for dyn in (False, True):
        for op, gen in (("neg", r), ("abs", lambda *s: r(*s, away=0.05)), ("exp", r), ("log", pos),
                        ("sqrt", pos), ("rsqrt", pos), ("tanh", r), ("sigmoid", r),
                        ("relu", lambda *s: r(*s, away=0.05)), ("gelu", r), ("erf", r)):
            out.append(Case(op, ["%%y0 = %s %%x0" % op], [(gen(2, 3), True)], dyn=dyn))
        # Trigonometric and hyperbolic functions, inside their domains and
        # away from their singular points (asin/acos/atanh at +-1, acosh at 1).
        inside = lambda *s: rng.uniform(-0.8, 0.8, size=s)  # noqa: E731
        for op, gen in (("sin", r), ("cos", r), ("tan", lambda *s: rng.uniform(-1.2, 1.2, size=s)),
                        ("asin", inside), ("acos", inside), ("atan", r), ("sinh", r), ("cosh", r),
                        ("asinh", r), ("acosh", lambda *s: rng.uniform(1.2, 3.0, size=s)), ("atanh", inside)):
            out.append(Case(op, ["%%y0 = %s %%x0" % op], [(gen(2, 3), True)], dyn=dyn))
        # fmod: away from the jumps at multiples of the divisor.
        for sa, sb in (((2, 3), (2, 3)), ((2, 3), (3,)), ((3,), ())):
            b = r(*sb, away=0.5)
            # a = q b with q's fraction in [0.2, 0.8]: trunc(a / b) stays put.
            a = (rng.integers(-3, 4, size=sa) + rng.uniform(0.2, 0.8, size=sa)) * b
            out.append(Case("fmod", ["%y0 = fmod %x0, %x1"], [(a, True), (b, True)], dyn=dyn))
        for flags in ("", ", exclusive=true", ", reverse=true", ", exclusive=true, reverse=true"):
            out.append(Case("cumsum", ["%%y0 = cumsum %%x0, %%x1%s" % flags],
                            [(r(3, 4), True), (np.array(1 if flags else -2, np.int64), False)], dyn=dyn))
        for op in ("add", "sub", "mul", "div", "pow", "maximum", "minimum"):
            for sa, sb in (((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 4)), ((3,), ())):
                a, b = r(*sa), r(*sb, away=0.3)
                if op == "pow":
                    a = pos(*sa)
                if op in ("maximum", "minimum"):  # away from ties (the kink)
                    while np.min(np.abs(a - b)) < 0.05:
                        b = r(*sb)
                out.append(Case(op, ["%%y0 = %s %%x0, %%x1" % op], [(a, True), (b, True)], dyn=dyn))
        c = rng.uniform(size=(2, 3)) < 0.5
        out.append(Case("select", ["%y0 = select %x0, %x1, %x2"],
                        [(c, False), (r(2, 3), True), (r(3), True)], dyn=dyn))
        for ta in (False, True):
            for tb in (False, True):
                a = r(*((4, 3) if ta else (3, 4)))
                b = r(*((5, 4) if tb else (4, 5)))
                out.append(Case("matmul", ["%%y0 = matmul %%x0, %%x1, transpose_a=%s, transpose_b=%s"
                                           % (str(ta).lower(), str(tb).lower())], [(a, True), (b, True)], dyn=dyn))
        out.append(Case("batch_matmul", ["%y0 = batch_matmul %x0, %x1, transpose_b=true"],
                        [(r(2, 3, 4), True), (r(2, 5, 4), True)], dyn=dyn))
        out.append(Case("batch_matmul", ["%y0 = batch_matmul %x0, %x1"],
                        [(r(2, 3, 4), True), (r(1, 4, 2), True)], dyn=dyn))
        for op in ("sum", "mean", "max", "min"):
            for attrs in ("", ", axes=[1]", ", axes=[0], keepdims=true", ", axes=[-1, 0]"):
                out.append(Case(op, ["%%y0 = %s %%x0%s" % (op, attrs)], [(r(3, 4), True)], dyn=dyn))
        out.append(Case("softmax", ["%y0 = softmax %x0"], [(r(3, 4), True)], dyn=dyn))
        out.append(Case("softmax", ["%y0 = softmax %x0, axis=0"], [(r(3, 4), True)], dyn=dyn))
        out.append(Case("layer_norm", ["%y0 = layer_norm %x0, %x1, %x2"],
                        [(r(3, 5), True), (r(5), True), (r(5), True)], dyn=dyn))
        out.append(Case("reshape", ["%y0 = reshape %x0, shape=[4, -1]"], [(r(2, 6), True)], dyn=dyn))
        out.append(Case("dyn_reshape", ["%y0 = dyn_reshape %x0, %x1"],
                        [(r(2, 6), True), (np.array([3, 4], np.int64), False)], dyn=dyn))
        out.append(Case("transpose", ["%y0 = transpose %x0, perm=[1, 2, 0]"], [(r(2, 3, 4), True)], dyn=dyn))
        out.append(Case("transpose", ["%y0 = transpose %x0"], [(r(2, 3), True)], dyn=dyn))
        out.append(Case("concat", ["%y0 = concat %x0, %x1, %x2, axis=1"],
                        [(r(2, 1), True), (r(2, 3), True), (r(2, 2), True)], dyn=dyn))
        out.append(Case("split", ["%y0, %y1, %y2 = split %x0, axis=1, sections=3"], [(r(2, 6), True)],
                        nres=3, dyn=dyn))
        out.append(Case("split", ["%y0, %y1 = split %x0, axis=0, sections=2"], [(r(4, 3), True)],
                        nres=2, dyn=dyn))
        out.append(Case("slice", ["%y0 = slice %x0, axes=[0, 1], starts=[1, 0], ends=[3, 100]"],
                        [(r(4, 5), True)], dyn=dyn))
        if not dyn:  # negative bounds need static dims (an error otherwise, see grad-invalid.nir)
            out.append(Case("slice", ["%y0 = slice %x0, axes=[1], starts=[-3], ends=[-1]"], [(r(4, 5), True)]))
        out.append(Case("dynamic_slice", ["%y0 = dynamic_slice %x0, %x1, axis=0, size=2"],
                        [(r(5, 3), True), (np.array(2, np.int64), False)], dyn=dyn))
        out.append(Case("dynamic_update_slice", ["%y0 = dynamic_update_slice %x0, %x1, %x2, axis=0"],
                        [(r(5, 3), True), (r(2, 3), True), (np.array(1, np.int64), False)], dyn=dyn))
        out.append(Case("dynamic_update_slice", ["%y0 = dynamic_update_slice %x0, %x1, %x2, axis=-1"],
                        [(r(2, 4), True), (r(2, 1), True), (np.array(3, np.int32), False)], dyn=dyn))
        out.append(Case("take", ["%y0 = take %x0, %x1, axis=0"],
                        [(r(5, 3), True), (np.array([4, 0, 4, 2], np.int64), False)], dyn=dyn))
        out.append(Case("take", ["%y0 = take %x0, %x1"],
                        [(r(6), True), (np.array([1, 1, 5], np.int64), False)], dyn=dyn))
        # Any axis, rank and index shape (scalar, 2-D, i32 indices, repeats).
        out.append(Case("take", ["%y0 = take %x0, %x1, axis=1"],
                        [(r(2, 4, 3), True), (np.array([[3, 0], [3, 1], [2, 3]], np.int64), False)], dyn=dyn))
        out.append(Case("take", ["%y0 = take %x0, %x1, axis=-1"],
                        [(r(3, 4), True), (np.array([2, 2, 0], np.int32), False)], dyn=dyn))
        out.append(Case("take", ["%y0 = take %x0, %x1, axis=0"],
                        [(r(4, 2, 3), True), (np.array(3, np.int64), False)], dyn=dyn))
        out.append(Case("take", ["%y0 = take %x0, %x1, axis=2"],
                        [(r(2, 3, 5), True), (np.array([[4, 1, 4]], np.int64), False)], dyn=dyn))
        out.append(Case("expand_dims", ["%y0 = expand_dims %x0, axis=1"], [(r(3, 2), True)], dyn=dyn))
        out.append(Case("expand_dims", ["%y0 = expand_dims %x0, axis=-1"], [(r(3, 2), True)], dyn=dyn))
        out.append(Case("squeeze", ["%y0 = squeeze %x0, axes=[1]"], [(r(3, 1, 2), True)], dyn=dyn))
        out.append(Case("broadcast_to", ["%y0 = broadcast_to %x0, shape=[2, 3, 4]"], [(r(3, 1), True)], dyn=dyn))
        out.append(Case("full", ["%y0 = full %x0, %x1"],
                        [(np.array([2, 3], np.int64), False), (r(), True)], dyn=dyn))
        out.append(Case("cast", ["%y0 = cast %x0, dtype=f64"], [(r(2, 3), True)], dyn=dyn))
    return out


def dtype_name(a):
    return {np.dtype(np.float64): "f64", np.dtype(np.int64): "i64", np.dtype(np.int32): "i32",
            np.dtype(bool): "i1"}[a.dtype]


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s failed (exit %d):\n%s%s" % (os.path.basename(cmd[0]), p.returncode,
                                                           p.stdout[-1500:], p.stderr[-3000:]))
    return p


def check(case, args, d, idx):
    tag = os.path.join(d, "c%03d" % idx)
    params = ", ".join("%%x%d: %s" % (i, ttype(a.shape, dtype_name(a), case.dyn and a.dtype == np.float64))
                       for i, (a, _) in enumerate(case.inputs))
    inputs = []
    for i, (a, _) in enumerate(case.inputs):
        np.save("%s.in%d.npy" % (tag, i), a)
        inputs.append("--input=@%s.in%d.npy" % (tag, i))
    # Pass 1: the result types (the printer writes what inference gives the
    # op, e.g. `%y0 = add %x0, %x1 : tensor<2x3xf64>`) and the result shapes.
    body = "\n  ".join(case.body)
    ys = ", ".join("%%y%d" % k for k in range(case.nres))
    probe = "module @probe\n\nfunc @f(%s) -> () {\n^entry:\n  %s\n  ret\n}\n" % (params, body)
    with open(tag + ".probe.nir", "w") as f:
        f.write(probe)
    printed = run([args.nimble_opt, tag + ".probe.nir"]).stdout
    m = re.search(r"%y0[^\n]*? : ([^\n]*)$", printed, re.M)
    tys = [t.strip() for t in split_types(m.group(1))]
    assert len(tys) == case.nres, (tys, printed)
    fwd = "module @fd\n\nfunc @f(%s) -> (%s) {\n^entry:\n  %s\n  ret %s\n}\n" % (
        params, ", ".join(tys), body, ys)
    with open(tag + ".f.nir", "w") as f:
        f.write(fwd)
    run([args.nimblec, tag + ".f.nir", "-o", tag + ".f.nbc"])
    outs = ["%s.y%d.npy" % (tag, k) for k in range(case.nres)]
    run([args.nimble_run, tag + ".f.nbc", "--function=f"] + inputs + ["--output=@" + o for o in outs])
    ys_val = [np.load(o) for o in outs]
    rng = np.random.default_rng(idx + 7)
    seeds = [rng.standard_normal(y.shape) for y in ys_val]
    # Pass 2: @f and @fd, then grad.
    lines = []
    n = 0
    static_params = ", ".join("%%x%d: %s" % (i, ttype(a.shape, dtype_name(a))) for i, (a, _) in enumerate(case.inputs))
    seed_params = ", ".join("%%s%d: %s" % (k, ttype(y.shape, "f64")) for k, y in enumerate(ys_val))
    for i, (a, diff) in enumerate(case.inputs):
        if not diff:
            continue
        for j in range(a.size):
            for s in (1.0, -1.0):
                e = np.zeros(a.shape)
                e.flat[j] = s * H
                sub = {"%%x%d" % i: "%%p%d" % n}
                lines.append("%%e%d = constant %s : %s" % (n, lit(e), ttype(a.shape, "f64")))
                lines.append("%%p%d = add %%x%d, %%e%d" % (n, i, n))
                for ln in case.body:
                    ln2 = re.sub(r"%x(\d+)\b", lambda m: sub.get(m.group(0), m.group(0)), ln)
                    ln2 = re.sub(r"%y(\d+)\b", lambda m: "%%q%d_%s" % (n, m.group(1)), ln2)
                    lines.append(ln2)
                terms = []
                for k in range(case.nres):
                    lines.append("%%m%d_%d = mul %%q%d_%d, %%s%d" % (n, k, n, k, k))
                    lines.append("%%l%d_%d = sum %%m%d_%d" % (n, k, n, k))
                    terms.append("%%l%d_%d" % (n, k))
                acc = terms[0]
                for k, t in enumerate(terms[1:]):
                    lines.append("%%a%d_%d = add %s, %s" % (n, k, acc, t))
                    acc = "%%a%d_%d" % (n, k)
                lines.append("%%r%d = reshape %s, shape=[1]" % (n, acc))
                n += 1
    lines.append("%%all = concat %s, axis=0" % ", ".join("%%r%d" % k for k in range(n)))
    fd = "func @fd(%s, %s) -> tensor<%dxf64> {\n^entry:\n  %s\n  ret %%all\n}\n" % (
        static_params, seed_params, n, "\n  ".join(lines))
    with open(tag + ".nir", "w") as f:
        f.write(fwd + "\n" + fd)
    run([args.nimble_opt, tag + ".nir", "--passes=grad{func=f}", "-o", tag + ".grad.nir"])
    run([args.nimblec, tag + ".grad.nir", "-o", tag + ".nbc"])
    seed_in = []
    for k, s in enumerate(seeds):
        np.save("%s.seed%d.npy" % (tag, k), s)
        seed_in.append("--input=@%s.seed%d.npy" % (tag, k))
    diffs = [i for i, (_, dflag) in enumerate(case.inputs) if dflag]
    gouts = ["%s.o%d.npy" % (tag, k) for k in range(case.nres + len(diffs))]
    run([args.nimble_run, tag + ".nbc", "--function=f_grad"] + inputs + seed_in + ["--output=@" + o for o in gouts])
    run([args.nimble_run, tag + ".nbc", "--function=fd"] + inputs + seed_in + ["--output=@%s.fd.npy" % tag])
    fdv = np.load(tag + ".fd.npy")
    pos = 0
    worst = 0.0
    for slot, i in enumerate(diffs):
        a = case.inputs[i][0]
        got = np.load(gouts[case.nres + slot])
        if got.shape != a.shape:
            return "gradient of operand %d has shape %s, expected %s" % (i, got.shape, a.shape), worst
        want = (fdv[pos:pos + 2 * a.size:2] - fdv[pos + 1:pos + 2 * a.size:2]) / (2 * H)
        pos += 2 * a.size
        want = want.reshape(a.shape)
        scale = max(float(np.max(np.abs(want), initial=0.0)), 1e-3)
        err = float(np.max(np.abs(got - want), initial=0.0)) / scale
        worst = max(worst, err)
        if err > TOL:
            return ("operand %d: relative error %.3e (gradient %s, finite differences %s)"
                    % (i, err, np.array2string(got.ravel()[:6], precision=6),
                       np.array2string(want.ravel()[:6], precision=6))), worst
    return None, worst


def split_types(s):
    """Splits 'tensor<2x3xf64>, tensor<3xf64>' at top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nimble-opt", dest="nimble_opt", required=True)
    ap.add_argument("--nimblec", required=True)
    ap.add_argument("--nimble-run", dest="nimble_run", required=True)
    ap.add_argument("--gradients-def", dest="gradients_def", required=True)
    ap.add_argument("--ops-def", dest="ops_def", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", help="check only this op")
    ap.add_argument("--sample", type=int, default=1,
                    help="check every K-th case and each op's first (default 1: all)")
    ap.add_argument("--kink", action="store_true",
                    help="put a 0 into relu's operand (not differentiable there): the check must fail")
    args = ap.parse_args(argv)
    os.makedirs(args.tmp, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    all_cases = cases(rng)
    if args.kink:
        for c in all_cases:
            if c.op == "relu":
                c.inputs[0][0].flat[0] = 0.0
    with open(args.gradients_def) as f:
        rows = re.findall(r"^NIMBLE_GRAD\((\w+),\s*Rule,", f.read(), re.M)
    with open(args.ops_def) as f:
        names = dict(re.findall(r'^NIMBLE_OP\((\w+),\s*"([\w.]+)"', f.read(), re.M))
    mnemonic = names.__getitem__
    covered = {c.op for c in all_cases}
    missing = [mnemonic(r) for r in rows if mnemonic(r) not in covered and mnemonic(r) not in EXEMPT]
    if args.sample < 1:
        ap.error("--sample expects a positive count")
    chosen, seen = [], set()
    for idx, c in enumerate(all_cases):
        if args.only and c.op != args.only:
            continue
        if c.op not in seen or idx % args.sample == 0:
            chosen.append((idx, c))
        seen.add(c.op)

    def check_one(item):
        idx, c = item
        try:
            return check(c, args, args.tmp, idx)
        except RuntimeError as e:
            return str(e), 0.0

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        outcomes = list(pool.map(check_one, chosen))
    failed = 0
    count = len(chosen)
    worst = (0.0, "-")
    for (idx, c), (problem, err) in zip(chosen, outcomes):
        if err > worst[0]:
            worst = (err, c.name())
        if problem:
            failed += 1
            print("error: %s: %s" % (c.name(), problem))
    for m in missing:
        print("error: op '%s' has an adjoint rule in Gradients.def but no finite-difference case" % m)
    print("grad ops: %d cases over %d ops, %d failed; worst relative error %.2e (%s)%s"
          % (count, len({c.op for c in all_cases if not args.only or c.op == args.only}), failed + len(missing),
             worst[0], worst[1],
             "" if args.sample == 1 else "; every %dth case and each op's first (--sample=%d)" % (
                 args.sample, args.sample)))
    return 1 if failed or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
