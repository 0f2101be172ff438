"""Cases for the element-wise kernels: unary, binary, comparisons, logical
ops, select and cast, with numpy's broadcasting as the reference."""

import numpy as np

from oplib import ALL, FLOATS, INTS, NP, NUMERIC, UINTS, Case, cast_to, math_erf, wide

SQRT1_2 = 0.7071067811865476

# x -> expected, on float64 (floats) or the integer dtype itself (ints).
UNARY = {
    "neg": lambda x: -x,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "relu": lambda x: np.where(x < 0, np.zeros_like(x), x),
    "gelu": lambda x: 0.5 * x * (1.0 + math_erf(x * SQRT1_2)),
    "erf": math_erf,
    "logical_not": np.logical_not,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
}
UNARY_DTYPES = {"neg": NUMERIC, "abs": NUMERIC, "relu": NUMERIC, "logical_not": ["i1"]}
POSITIVE_DOMAIN = {"log", "sqrt", "rsqrt"}
# Random inputs inside the domain (the specials below go outside it: NaN).
DOMAIN = {"asin": (-0.99, 0.99), "acos": (-0.99, 0.99), "atanh": (-0.99, 0.99), "acosh": (1.0, 5.0)}
UNARY_SHAPES = [(), (0,), (1,), (5,), (2, 3), (2, 0, 3), (3, 4, 5)]
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, 20.0, -20.0, 0.5, -3.0]


def _unary_expected(op, x, dt):
    with np.errstate(all="ignore"):
        if dt in INTS or dt == "i1":
            return UNARY[op](x).astype(x.dtype)
        return cast_to(UNARY[op](wide(x)), dt)


def unary_cases(rng):
    cases = []
    for op in UNARY:
        for dt in UNARY_DTYPES.get(op, FLOATS):
            for shape in UNARY_SHAPES:
                if dt == "i1":
                    x = rng.array(shape, dt)
                elif dt in INTS:
                    # The full range: abs/neg of the minimum wrap around.
                    info = np.iinfo(NP[dt])
                    lo, hi = (info.min, info.max) if dt in ("i8", "u8") else (-1000, 1000)
                    x = rng.array(shape, dt, lo, hi)
                elif op in POSITIVE_DOMAIN:
                    x = rng.array(shape, dt, 0.05, 5.0)
                elif op in DOMAIN:
                    x = rng.array(shape, dt, *DOMAIN[op])
                else:
                    x = rng.array(shape, dt)
                cases.append(Case(op, dt, [x], [_unary_expected(op, x, dt)]))
            if dt in ("f32", "f64"):
                x = np.array(SPECIALS, dtype=np.dtype(dt.replace("f", "float")))
                cases.append(Case(op, dt, [x], [_unary_expected(op, x, dt)]))
        # A large input on several threads.
        dt = UNARY_DTYPES.get(op, FLOATS)[0]
        lo, hi = DOMAIN.get(op, (0.05 if op in POSITIVE_DOMAIN else -4.0, 4.0))
        x = rng.array((300, 257), dt, lo, hi)
        cases.append(Case(op, dt, [x], [_unary_expected(op, x, dt)], threads=4))
    return cases


def _trunc_div(a, b):
    """Integer division rounding toward zero, on the integer dtype."""
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return (q + fix.astype(q.dtype)).astype(a.dtype)


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: _trunc_div(a, b) if a.dtype.kind in "iu" else a / b,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "fmod": np.fmod,
}
COMPARE = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}
BINARY_DTYPES = {
    "pow": FLOATS, "equal": ALL, "not_equal": ALL,
    "logical_and": ["i1"], "logical_or": ["i1"],
}
BROADCAST_PAIRS = [
    ((), ()), ((3,), ()), ((), (4,)), ((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)),
    ((4, 1, 5), (3, 1)), ((0, 3), (1, 3)), ((2, 0), (2, 1)), ((1,), (0,)),
    ((2, 3, 4), (1, 3, 1)), ((1, 2, 1, 3), (2, 1, 4, 1)), ((7, 1), (1,)), ((1, 1), (5, 1, 1)),
]


def binary_expected(op, a, b, dt):
    with np.errstate(all="ignore"):
        r = BINARY[op](wide(a), wide(b))
        if op in COMPARE or dt == "i1":
            return np.asarray(r, dtype=np.bool_)
        if dt in INTS:
            return np.asarray(r).astype(a.dtype)
        return cast_to(r, dt)


def _binary_inputs(rng, op, dt, sa, sb):
    if op in COMPARE or op in ("maximum", "minimum"):
        return rng.small_ints(sa, dt), rng.small_ints(sb, dt)
    if op == "pow":
        return rng.array(sa, dt, 0.1, 3.0), rng.array(sb, dt, -2.0, 2.0)
    if dt == "i1":
        return rng.array(sa, dt), rng.array(sb, dt)
    if dt in INTS:
        info = np.iinfo(NP[dt])
        lo, hi = (info.min + 1, info.max) if dt not in ("i64", "u64") else (-(2**40), 2**40)
        if dt == "u64":
            lo, hi = 0, 2**63 - 1  # the generator's int64 range; sums wrap past 2^64
        a, b = rng.array(sa, dt, lo, hi), rng.array(sb, dt, lo, hi)
        if op in ("div", "fmod"):
            b[b == 0] = 1
            if dt not in UINTS:
                b[b == -1] = 3  # keeps INT_MIN / -1 out of the random cases
        if op == "mul" and dt in ("i64", "u64"):
            b = rng.array(sb, dt, -(2**30), 2**30)  # wraps sometimes, like numpy
        return a, b
    return rng.array(sa, dt), rng.array(sb, dt, 0.25, 4.0) if op == "div" else rng.array(sb, dt)


def binary_cases(rng):
    cases = []
    for op in BINARY:
        dts = BINARY_DTYPES.get(op, NUMERIC)
        for k, dt in enumerate(dts):
            # Every pair for the first dtype, a rotating four for the others.
            pairs = BROADCAST_PAIRS if k == 0 else [
                BROADCAST_PAIRS[(3 * k + j) % len(BROADCAST_PAIRS)] for j in range(4)]
            for sa, sb in pairs:
                a, b = _binary_inputs(rng, op, dt, sa, sb)
                cases.append(Case(op, dt, [a, b], [binary_expected(op, a, b, dt)]))
        dt = dts[0]
        a, b = _binary_inputs(rng, op, dt, (512, 300), (300,))
        cases.append(Case(op, dt, [a, b], [binary_expected(op, a, b, dt)], threads=4))
    # IEEE corner cases (NaN propagation of maximum/minimum, inf, division by 0.0).
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.0], dtype=np.float32)
    a, b = np.meshgrid(sp, sp)
    for op in ("add", "sub", "mul", "div", "maximum", "minimum", "pow", "equal", "less", "fmod"):
        cases.append(Case(op, "f32", [a, b], [binary_expected(op, a, b, "f32")]))
    # Integer corner cases: INT_MIN / -1 wraps; truncation toward zero.
    for dt, mn in (("i8", -128), ("i16", -(2**15)), ("i32", -(2**31)), ("i64", -(2**63))):
        t = NP[dt]
        a = np.array([mn, 7, -7, 7, -7, 0], dtype=t)
        b = np.array([-1, 2, 2, -2, -2, 5], dtype=t)
        cases.append(Case("div", dt, [a, b], [np.array([mn, 3, -3, -3, 3, 0], dtype=t)]))
    # fmod: C's remainder, the sign of the dividend; MIN fmod -1 is 0.
    for dt, mn in (("i8", -128), ("i32", -(2**31)), ("i64", -(2**63))):
        t = np.dtype(dt.replace("i", "int"))
        a = np.array([mn, 7, -7, 7, -7, 0, mn], dtype=t)
        b = np.array([-1, 2, 2, -2, -2, 5, 3], dtype=t)
        cases.append(Case("fmod", dt, [a, b], [np.array([0, 1, -1, 1, -1, 0, np.fmod(mn, 3)], dtype=t)]))
        cases.append(Case("fmod", dt, [a, np.array([0], t)], error="integer division by zero"))
    a = np.array([5.5, -5.5, 5.5, -5.5, 1e30, 0.1], np.float32)
    b = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 0.03], np.float32)
    cases.append(Case("fmod", "f32", [a, b], [np.fmod(a, b)]))
    # Division by zero is an error for integers, wherever it happens.
    # Unsigned division is unsigned: 255 / 2 is 127 in u8, never -1 / 2.
    for dt in UINTS:
        t = NP[dt]
        mx = np.iinfo(t).max
        a = np.array([mx, mx, 7, 0, mx - 1], dtype=t)
        b = np.array([2, mx, 2, 5, mx], dtype=t)
        cases.append(Case("div", dt, [a, b], [np.array([mx // 2, 1, 3, 0, 0], dtype=t)]))
    for dt in INTS:
        t = NP[dt]
        cases.append(Case("div", dt, [np.arange(6, dtype=t).reshape(2, 3), np.array([1, 0, 2], t)],
                          error="integer division by zero"))
    big = np.ones((600, 100), np.int32)
    big_b = np.ones((100,), np.int32)
    big_b[77] = 0
    cases.append(Case("div", "i32", [big, big_b], error="integer division by zero", threads=4))
    # Incompatible shapes are the shape function's error.
    cases.append(Case("add", "f32", [np.zeros((2, 3), np.float32), np.zeros((4,), np.float32)],
                      error="not broadcast-compatible"))
    return cases


SELECT_SHAPES = [
    ((2, 3), (2, 3), (2, 3)), ((2, 1), (1, 3), ()), ((), (4,), (2, 1)),
    ((0, 3), (1,), (3,)), ((3, 1, 2), (2,), (1, 1, 1)), ((), (), ()),
]


def select_cases(rng):
    cases = []
    for dt in ALL:
        for sc, sa, sb in SELECT_SHAPES:
            c = rng.array(sc, "i1")
            a, b = rng.array(sa, dt), rng.array(sb, dt)
            cases.append(Case("select", dt, [c, a, b], [np.where(c, a, b)]))
    c = rng.array((400, 100), "i1")
    a, b = rng.array((400, 100), "f32"), rng.array((100,), "f32")
    cases.append(Case("select", "f32", [c, a, b], [np.where(c, a, b)], threads=3))
    return cases


def _cast_source(rng, src, dst, shape):
    if src == "i1":
        return rng.array(shape, src)
    if src in INTS:
        if dst in ("f16", "bf16"):
            return rng.array(shape, src, -2000, 2000)
        return rng.array(shape, src, -(2**40), 2**40)  # narrowing wraps, like numpy
    # Floats: within every integer destination's range, with fractions of
    # both signs (truncation toward zero) and exact zeros (for i1); not
    # negative for an unsigned destination (numpy leaves that undefined).
    hi = 100.0 if dst in ("i8", "u8") else 1000.0
    x = rng.array(shape, src, 0.0 if dst in UINTS else -hi, hi)
    x.reshape(-1)[::5] = 0
    return x


def cast_cases(rng):
    cases = []
    for src in ALL:
        for dst in ALL:
            for shape in ((3, 4), (0,), ()):
                x = _cast_source(rng, src, dst, shape)
                if dst == "bf16":
                    want = cast_to(wide(x), "bf16")
                else:
                    with np.errstate(all="ignore"):
                        want = x.astype(NP[dst])
                cases.append(Case("cast", src, [x], [want], attrs={"dtype": dst}))
    x = rng.array((500, 200), "f32", -100, 100)
    cases.append(Case("cast", "f32", [x], [x.astype(np.int32)], attrs={"dtype": "i32"}, threads=4))
    # Out of range and NaN (undefined in numpy and ONNX): saturation, NaN to 0.
    sp = [-5.5, -0.5, 300.0, 70000.0, 5e9, 2e19, 1e30, np.nan, np.inf, -np.inf]
    for src in ("f32", "f64"):
        x = np.array(sp, NP[src])
        for dst in UINTS + ["i16"]:
            info = np.iinfo(NP[dst])
            want = [0 if v != v else min(max(v, info.min), info.max) for v in sp]
            want = np.array([int(w) if abs(w) != np.inf else (info.max if w > 0 else info.min)
                             for w in want], dtype=NP[dst])
            cases.append(Case("cast", src, [x], [want], attrs={"dtype": dst}))
    return cases


def _shift(a, s, left, dt):
    """Python integers: bits past the width lost; counts >= the width (or
    negative) shift everything out; right shifts of signed types arithmetic."""
    bits = NP[dt](0).nbytes * 8
    info = np.iinfo(NP[dt])
    out = []
    for x, n in zip(a.reshape(-1).tolist(), s.reshape(-1).tolist()):
        if n < 0 or n >= bits:
            r = -1 if (not left and x < 0) else 0
        elif left:
            r = (x << n) & ((1 << bits) - 1)
            if info.min < 0 and r >= 1 << (bits - 1):
                r -= 1 << bits
        else:
            r = x >> n
        out.append(r)
    return np.array(out, dtype=NP[dt]).reshape(a.shape)


def shift_cases(rng):
    cases = []
    for dt in INTS:
        info = np.iinfo(NP[dt])
        bits = NP[dt](0).nbytes * 8
        lo, hi = (info.min, info.max) if bits < 64 else (-(2**62), 2**62)
        if dt == "u64":
            lo, hi = 0, 2**63 - 1
        for sa, sb in (((2, 3), (2, 3)), ((2, 3), (3,)), ((), (4,)), ((0, 2), (1,))):
            a = rng.array(sa, dt, lo, hi)
            # Counts from past-the-end (and negative, for signed types) through the width.
            s = rng.array(sb, dt, 0 if dt in UINTS else -2, bits + 2)
            ab, sb_ = np.broadcast_arrays(a, s)
            for op, left in (("shift_left", True), ("shift_right", False)):
                cases.append(Case(op, dt, [a, s], [_shift(np.array(ab), np.array(sb_), left, dt)]))
    # ONNX's BitShift example, and the edges: 0, width - 1, width.
    x = np.array([16, 4, 1, 255], np.uint8)
    cases.append(Case("shift_right", "u8", [x, np.array([1, 2, 3, 8], np.uint8)],
                      [np.array([8, 1, 0, 0], np.uint8)]))
    cases.append(Case("shift_left", "u8", [x, np.array([0, 7, 7, 8], np.uint8)],
                      [np.array([16, 0, 128, 0], np.uint8)]))
    y = np.array([-128, -1, 64, -5], np.int8)
    cases.append(Case("shift_right", "i8", [y, np.array([7, 9, -1, 1], np.int8)],
                      [np.array([-1, -1, 0, -3], np.int8)]))
    cases.append(Case("shift_left", "i8", [y, np.array([1, 7, 1, -3], np.int8)],
                      [np.array([0, -128, -128, 0], np.int8)]))
    cases.append(Case("shift_left", "f32", [np.ones(2, np.float32), np.ones(2, np.float32)],
                      error="must have an integer element type"))
    return cases


def cases(rng):
    return unary_cases(rng) + binary_cases(rng) + select_cases(rng) + cast_cases(rng) + shift_cases(rng)
