#!/usr/bin/env python3
"""Checks adjoints of tuples and ADT values against central finite differences.

    check_aggregate_grads.py --nimble-opt P --nimblec P --nimble-run P
                             --module aggregates.nir --tmp DIR [--opt -O0]
                             [--checkpoint store|recompute] [--tolerance 1e-6]

For each case (a function of aggregates.nir and its inputs: lists, trees,
tuples, tensors, as nimble-run value text) the script runs
`nimble-opt --passes=grad{func=F}` (every parameter that holds a float),
compiles it (reference kernels, float64) and runs @F_grad with random seeds
shaped like F's results (a list result takes a list of seeds). Then, for every
float scalar inside every differentiated parameter, it runs @F at x + h e_j
and x - h e_j: L = sum(seed * F(x)) over every float in the results, and
(L+ - L-) / 2h must match the adjoint's entry at the same place in the same
structure within 1e-6 relative to the largest entry (h = 1e-6). The
adjoint's structure (constructors, tuple arity, the i64 fields, which keep
their forward values) must equal the input's.

Prints one line per case and a summary; exits 1 on any mismatch.
"""

import argparse
import os
import re
import subprocess
import sys

import numpy as np

H = 1e-6
TOL = 1e-6


class Adt:
    def __init__(self, name, fields=()):
        self.name, self.fields = name, list(fields)


class Tup:
    def __init__(self, items):
        self.items = list(items)


def fmt(v):
    """nimble-run value text."""
    if isinstance(v, Adt):
        return v.name + ("(" + ", ".join(fmt(f) for f in v.fields) + ")" if v.fields else "")
    if isinstance(v, Tup):
        return "(" + ", ".join(fmt(x) for x in v.items) + ")"
    dt = {np.dtype("float64"): "f64", np.dtype("int64"): "i64", np.dtype("bool"): "i1"}[v.dtype]
    head = "".join("%dx" % d for d in v.shape) + dt
    vals = [repr(float(x)) if v.dtype.kind == "f" else str(int(x)) for x in v.reshape(-1)]
    return head + "=" + " ".join(vals)


_TOKEN = re.compile(r"\s*(\[|\]|\(|\)|,|=|[^\s\[\]\(\),=]+)")
_HEAD = re.compile(r"^(?:\d+x)*(f16|f32|f64|i1|i8|i32|i64)$")
_NP = {"f64": np.float64, "f32": np.float32, "i64": np.int64, "i32": np.int32, "i8": np.int8, "i1": np.bool_}


def parse(text):
    """Parses nimble-run's printed value (tensors as 2xf64=[1 2])."""
    toks = _TOKEN.findall(text)
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else None

    def take(expect=None):
        nonlocal pos
        t = toks[pos]
        if expect is not None and t != expect:
            raise ValueError("expected %r, got %r" % (expect, t))
        pos += 1
        return t

    def value():
        t = take()
        if t == "(":
            items = [value()]
            while peek() == ",":
                take()
                items.append(value())
            take(")")
            return Tup(items)
        m = _HEAD.match(t)
        if m and peek() == "=":
            take("=")
            dims = [int(d) for d in t.split("x")[:-1]]
            nums = []
            if peek() != "[":
                nums.append(take())  # a scalar
            depth = 0
            while peek() == "[" or depth:
                x = take()
                depth += {"[": 1, "]": -1}.get(x, 0)
                if x not in ("[", "]"):
                    nums.append(x)
            dt = _NP[m.group(1)]
            conv = (lambda s: s not in ("0", "false")) if dt is np.bool_ else (float if dt in (np.float64, np.float32) else int)
            return np.array([conv(x) for x in nums], dtype=dt).reshape(dims)
        fields = []
        if peek() == "(":
            take()
            fields.append(value())
            while peek() == ",":
                take()
                fields.append(value())
            take(")")
        return Adt(t, fields)

    vals = [value()]
    while pos < len(toks):
        vals.append(value())
    return vals


def leaves(v, path=""):
    """[(path, array)] of the float tensors inside v, in a fixed order."""
    if isinstance(v, Adt):
        out = []
        for i, f in enumerate(v.fields):
            out += leaves(f, "%s/%s.%d" % (path, v.name, i))
        return out
    if isinstance(v, Tup):
        out = []
        for i, x in enumerate(v.items):
            out += leaves(x, "%s/%d" % (path, i))
        return out
    return [(path, v)] if v.dtype.kind == "f" else []


def shape_of(v):
    """The structure without float values (constructors, arities, shapes, ints)."""
    if isinstance(v, Adt):
        return (v.name, tuple(shape_of(f) for f in v.fields))
    if isinstance(v, Tup):
        return ("tuple", tuple(shape_of(x) for x in v.items))
    return (str(v.dtype), v.shape) if v.dtype.kind == "f" else (str(v.dtype), v.shape, v.tolist())


def copy(v):
    if isinstance(v, Adt):
        return Adt(v.name, [copy(f) for f in v.fields])
    if isinstance(v, Tup):
        return Tup([copy(x) for x in v.items])
    return v.copy()


def holds_float(v):
    """Whether v's type carries an adjoint (every ADT of aggregates.nir has
    a float field, so an ADT value does even when it is Nil)."""
    return isinstance(v, Adt) or bool(leaves(v))


def cases(rng):
    f = lambda *s: rng.uniform(-1.0, 1.0, s)  # noqa: E731

    def lst(n):
        out = Adt("Nil")
        for _ in range(n):
            out = Adt("Cons", [f(2), out])
        return out

    def tree(shape):
        if shape == "L":
            return Adt("Leaf", [f(1, 3)])
        return Adt("Node", [tree(shape[0]), tree(shape[1])])

    return [
        ("build", [f(2)]),
        ("twice", [lst(3), np.array(True)]),
        ("twice", [lst(2), np.array(False)]),
        ("scale", [lst(3), f(2)]),
        ("scale", [lst(0), f(2)]),
        ("pairs", [Tup([f(3), np.array(7, dtype=np.int64)]), f(3)]),
        ("tree", [tree("L")]),
        ("tree", [tree(("L", ("L", "L")))]),
        ("tree", [tree((("L", "L"), ("L", "L")))]),
    ]


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (os.path.basename(cmd[0]), p.returncode, p.stderr[-2000:]))
    return p.stdout


def seed_like(v, rng):
    """Seeds shaped like result v (ints kept: they take none)."""
    if isinstance(v, Adt):
        return Adt(v.name, [seed_like(x, rng) for x in v.fields])
    if isinstance(v, Tup):
        return Tup([seed_like(x, rng) for x in v.items])
    return rng.standard_normal(v.shape) if v.dtype.kind == "f" else v.copy()


def loss(results, seeds):
    return sum(float(np.sum(a * s)) for r, sd in zip(results, seeds)
               for (_, a), (_, s) in zip(leaves(r), leaves(sd)))


def check(name, inputs, k, args, rng):
    d = os.path.join(args.tmp, "%s.%d" % (name, k))
    os.makedirs(d, exist_ok=True)
    nir, nbc = os.path.join(d, "g.nir"), os.path.join(d, "g.nbc")
    run([args.nimble_opt, args.module, "--passes=grad{func=%s,checkpoint=%s}" % (name, args.checkpoint), "-o", nir])
    run([args.nimblec, args.opt, "--kernels=reference", nir, "-o", nbc])
    base = ["--input=" + fmt(v) for v in inputs]
    outs = parse(run([args.nimble_run, nbc, "--function=" + name] + base))
    seeds = [seed_like(o, rng) for o in outs if holds_float(o)]
    got = parse(run([args.nimble_run, nbc, "--function=%s_grad" % name] + base + ["--input=" + fmt(s) for s in seeds]))
    wrt = [i for i, v in enumerate(inputs) if holds_float(v)]
    if len(got) != len(outs) + len(wrt):
        return "%d results, want %d outputs and %d adjoints" % (len(got), len(outs), len(wrt))
    worst = 0.0
    for j, i in enumerate(wrt):
        adj = got[len(outs) + j]
        if shape_of(adj) != shape_of(inputs[i]):
            return "the adjoint of input %d has another structure than the input" % i
        want_leaves = []
        for li, (path, arr) in enumerate(leaves(inputs[i])):
            g = np.zeros(arr.shape)
            for e in range(arr.size):
                vals = []
                for s in (1.0, -1.0):
                    x = copy(inputs[i])
                    leaves(x)[li][1].reshape(-1)[e] += s * H
                    xs = list(inputs)
                    xs[i] = x
                    r = parse(run([args.nimble_run, nbc, "--function=" + name] + ["--input=" + fmt(v) for v in xs]))
                    vals.append(loss([o for o in r if holds_float(o)], seeds))
                g.reshape(-1)[e] = (vals[0] - vals[1]) / (2 * H)
            want_leaves.append((path, g))
        scale = max([float(np.max(np.abs(g), initial=0.0)) for _, g in want_leaves] + [1e-12])
        for (path, want), (_, have) in zip(want_leaves, leaves(adj)):
            err = float(np.max(np.abs(have - want), initial=0.0)) / scale
            worst = max(worst, err)
            if err > args.tolerance:
                return "input %d%s: relative error %.3e (got %s, want %s)" % (i, path, err, have.tolist(), want.tolist())
    return worst


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nimble-opt", required=True)
    ap.add_argument("--nimblec", required=True)
    ap.add_argument("--nimble-run", required=True)
    ap.add_argument("--module", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--opt", default="-O2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoint", default="store", choices=["store", "recompute"])
    ap.add_argument("--tolerance", type=float, default=TOL)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    failed = 0
    all_cases = cases(rng)
    worst = 0.0
    for k, (name, inputs) in enumerate(all_cases):
        r = check(name, inputs, k, args, rng)
        if isinstance(r, str):
            failed += 1
            print("FAIL %s (case %d): %s" % (name, k, r))
        else:
            worst = max(worst, r)
            print("ok   %s (case %d): worst relative error %.1e" % (name, k, r))
    print("aggregate grads: %d cases, %d failed, worst relative error %.1e" % (len(all_cases), failed, worst))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
