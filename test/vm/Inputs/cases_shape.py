"""Cases for the data-movement kernels (reshape ... broadcast_to) and the
creation / shape kernels (constant ... device_copy). Every dtype."""

import numpy as np

from oplib import ALL, FLOATS, INTS, NP, NUMERIC, UINTS, Case, cast_to, round_bf16


def _slice(x, axes, starts, ends):
    idx = [slice(None)] * x.ndim
    for a, s, e in zip(axes, starts, ends):
        idx[a] = slice(s, e)  # Python slicing clamps exactly like the op
    return x[tuple(idx)]


def movement_cases(rng):
    cases = []
    for dt in ALL:
        r = lambda shape: rng.array(shape, dt)  # noqa: E731
        for shape, target in (((2, 3, 4), [4, -1]), ((6,), [2, 3]), ((), [1, 1]),
                              ((0, 3), [3, 0]), ((2, 0), [-1, 5]), ((1, 1), [])):
            x = r(shape)
            cases.append(Case("reshape", dt, [x], [x.reshape(target)], attrs={"shape": target}))
        for sdt in ("i64", "i32"):
            x = r((2, 3, 4))
            shape = np.array([3, -1, 2], NP[sdt])
            cases.append(Case("dyn_reshape", dt, [x, shape], [x.reshape(3, -1, 2)]))
        x = r((5,))
        cases.append(Case("dyn_reshape", dt, [x, np.array([5, 1], np.int64)], [x.reshape(5, 1)]))
        for shape, perm in (((2, 3, 4), []), ((2, 3, 4), [1, 0, 2]), ((2, 3, 4), [-1, 0, 1]),
                            ((5,), []), ((), []), ((2, 0, 3), [2, 0, 1]), ((1, 2, 3, 2), [3, 1, 0, 2])):
            x = r(shape)
            want = np.transpose(x, [p % max(x.ndim, 1) for p in perm] if perm else None)
            cases.append(Case("transpose", dt, [x], [want.copy()],
                              attrs={"perm": perm}))
        for shapes, axis in ((((2, 3), (4, 3)), 0), (((2, 1), (2, 0), (2, 4)), -1), (((3,),), 0),
                             (((2, 2, 2), (2, 1, 2), (2, 3, 2)), 1), (((0, 2), (0, 2)), 0)):
            xs = [r(s) for s in shapes]
            cases.append(Case("concat", dt, xs, [np.concatenate(xs, axis=axis)],
                              attrs={"axis": axis}))
        for shape, axis, n in (((4, 6), 1, 3), ((6,), 0, 2), ((2, 0), 1, 2), ((4, 2), -2, 4),
                               ((3, 2), 0, 1)):
            x = r(shape)
            cases.append(Case("split", dt, [x], list(np.split(x, n, axis=axis)),
                              attrs={"axis": axis, "sections": n}))
        for shape, axes, starts, ends in (
                ((5, 6), [0, 1], [1, -4], [4, 100]), ((5, 6), [-1], [-100], [-2]),
                ((5, 6), [0], [7], [9]), ((5, 6), [1], [3], [1]), ((2, 3, 4), [2, 0], [1, 1], [3, 2]),
                ((4,), [], [], []), ((0, 3), [1], [1], [2])):
            x = r(shape)
            cases.append(Case("slice", dt, [x], [_slice(x, axes, starts, ends)],
                              attrs={"axes": axes, "starts": starts, "ends": ends}))
        for shape, axis, size, start, sdt in (((5, 3), 0, 2, 3, "i64"), ((5, 3), -1, 0, 3, "i32"),
                                              ((2, 6, 2), 1, 3, 2, "i8"), ((4,), 0, 4, 0, "i64")):
            x = r(shape)
            a = axis % x.ndim
            want = np.take(x, range(start, start + size), axis=a)
            cases.append(Case("dynamic_slice", dt, [x, np.array(start, NP[sdt])], [want],
                              attrs={"axis": axis, "size": size}))
        for shape, ushape, axis, start, sdt in (((5, 3), (2, 3), 0, 3, "i64"), ((5, 3), (5, 1), -1, 2, "i32"),
                                                ((2, 6, 2), (2, 3, 2), 1, 0, "i8"), ((4,), (0,), 0, 4, "i64"),
                                                ((4,), (4,), 0, 0, "i64"), ((0, 3), (0, 3), 0, 0, "i64")):
            x, u = r(shape), r(ushape)
            a = axis % x.ndim
            want = x.copy()
            window = [slice(None)] * x.ndim
            window[a] = slice(start, start + ushape[a])
            want[tuple(window)] = u
            cases.append(Case("dynamic_update_slice", dt, [x, u, np.array(start, NP[sdt])], [want],
                              attrs={"axis": axis}))
        for shape, idx, axis in (((4, 3), [[0, -1], [2, 2]], 0), ((4, 3), [2, 0], -1),
                                 ((4, 3), 1, 0), ((4, 3), np.zeros((0,), int), 0),
                                 ((0, 3), np.zeros((0,), int), 0), ((2, 3, 2), [[1], [-2]], 1)):
            x = r(shape)
            ind = np.array(idx, NP[INTS[len(cases) % 3]])
            cases.append(Case("take", dt, [x, ind], [np.take(x, ind, axis=axis)],
                              attrs={"axis": axis}))
        for shape, axis in (((2, 3), 0), ((2, 3), 2), ((2, 3), -1), ((2, 3), -3), ((), 0), ((0,), 1)):
            x = r(shape)
            cases.append(Case("expand_dims", dt, [x], [np.expand_dims(x, axis)],
                              attrs={"axis": axis}))
        for shape, axes in (((1, 3, 1), []), ((1, 3, 1), [0]), ((1, 3, 1), [-1]), ((1,), []),
                            ((2, 3), []), ((1, 0, 1), [0, 2])):
            x = r(shape)
            want = np.squeeze(x, axis=tuple(axes) if axes else None)
            cases.append(Case("squeeze", dt, [x], [want], attrs={"axes": axes}))
        for shape, target in (((3,), [2, 3]), ((2, 1), [2, 4]), ((), [3, 2]), ((1, 0), [4, 0]),
                              ((2, 3), [2, 3]), ((1, 3), [0, 3]), ((1, 2, 1), [2, 3, 2, 5])):
            x = r(shape)
            cases.append(Case("broadcast_to", dt, [x], [np.broadcast_to(x, target).copy()],
                              attrs={"shape": target}))
    # Errors that depend on values: out-of-range starts and indices.
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    for start in (4, -1, 100):
        cases.append(Case("dynamic_slice", "f32", [x, np.array(start, np.int64)],
                          attrs={"axis": 0, "size": 2}, error="start %d is out of range [0, 3]" % start))
    for start in (4, -1, 2**40):
        cases.append(Case("dynamic_update_slice", "f32", [x, x[:2], np.array(start, np.int64)],
                          attrs={"axis": 0}, error="start %d is out of range [0, 3]" % start))
    for idx in ([0, 5], [-6], [2**40]):
        cases.append(Case("take", "f32", [x, np.array(idx, np.int64)], attrs={"axis": 0},
                          error="index %d is out of range [-5, 5)" % [i for i in idx if i >= 5 or i < -5][0]))
    big = rng.array((300, 200), "f32")
    cases.append(Case("transpose", "f32", [big], [np.ascontiguousarray(big.T)], threads=4))
    cases.append(Case("broadcast_to", "i64", [np.arange(300, dtype=np.int64)],
                      [np.broadcast_to(np.arange(300), (200, 300)).copy()],
                      attrs={"shape": [200, 300]}, threads=3))
    return cases + tile_pad_cases(rng) + index_cases(rng)


def _pad_expected(x, pads, mode, value=None):
    """numpy.pad of the positive pads, then the negative ones cropped."""
    r = x.ndim
    pos = [(max(pads[k], 0), max(pads[k + r], 0)) for k in range(r)]
    kw = {"constant_values": value} if mode == "constant" and value is not None else {}
    y = np.pad(x, pos, mode=mode, **kw) if r else x.copy()
    if r == 0:
        return y
    idx = tuple(slice(max(-pads[k], 0), y.shape[k] - max(-pads[k + r], 0)) for k in range(r))
    return np.ascontiguousarray(y[idx])


def _periodic(d, j, mode):
    """The source index of coordinate j (outside [0, d)) of a reflect / wrap
    pad, written out as the periodic extension (numpy 1.24's iterative pad
    is not periodic for some pads larger than the axis)."""
    if mode == "wrap":
        return j % d
    if d == 1:
        return 0
    p = 2 * (d - 1)
    m = j % p
    return m if m < d else p - m


def tile_pad_cases(rng):
    cases = []
    for dt in ALL:
        r = lambda shape: rng.array(shape, dt)  # noqa: E731
        for shape, reps in (((2, 3), [2, 1]), ((3,), [3]), ((), []), ((2, 0), [2, 3]), ((1, 2, 3), [2, 0, 2]),
                            ((2, 3, 4), [1, 2, 1])):
            x = r(shape)
            cases.append(Case("tile", dt, [x, np.array(reps, np.int64)], [np.tile(x, reps) if reps else x.copy()]))
        for k, (shape, pads) in enumerate((((2, 3), [1, 0, 0, 2]), ((4,), [2, 3]), ((3, 4), [-1, 2, 1, -2]),
                                            ((), []), ((0, 3), [1, 1, 0, 0]), ((2, 3, 4), [0, 1, 2, 1, 1, 0]),
                                            ((5,), [-2, -3]))):
            x = r(shape)
            value = r(()) if k % 2 else None
            ins = [x, np.array(pads, np.int64 if k % 3 else np.int32)] + ([value] if value is not None else [])
            cases.append(Case("pad", dt, ins, [_pad_expected(x, pads, "constant", value)]))
            if 0 in shape:
                continue
            for mode in ("reflect", "edge", "wrap"):
                ok = all(p <= (d - 1 if mode == "reflect" else d) for p, d in zip(pads, list(shape) * 2))
                if ok:
                    cases.append(Case("pad", dt, ins[:2], [_pad_expected(x, pads, mode)], attrs={"mode": mode}))
    # Pads longer than the axis: reflect and wrap continue periodically.
    x = np.arange(3, dtype=np.float32)
    for mode in ("reflect", "wrap"):
        for b, e in ((1, 8), (8, 1), (7, 7)):
            want = np.array([x[_periodic(3, j - b, mode)] for j in range(3 + b + e)], np.float32)
            cases.append(Case("pad", "f32", [x, np.array([b, e], np.int64)], [want], attrs={"mode": mode}))
    x = np.array([5], np.int32)
    cases.append(Case("pad", "i32", [x, np.array([2, 1], np.int64)], [np.full(4, 5, np.int32)], attrs={"mode": "reflect"}))
    # Large outputs on several threads.
    x = rng.array((50, 40), "f32")
    cases.append(Case("tile", "f32", [x, np.array([3, 4], np.int64)], [np.tile(x, (3, 4))], threads=4))
    cases.append(Case("pad", "f32", [x, np.array([30, 20, 30, 20], np.int64)],
                      [_pad_expected(x, [30, 20, 30, 20], "reflect")], attrs={"mode": "reflect"}, threads=4))
    # Errors: the shape function's, with the values.
    x = np.zeros((2, 3), np.float32)
    cases.append(Case("tile", "f32", [x, np.array([1], np.int64)], error="must have 2 entries"))
    cases.append(Case("tile", "f32", [x, np.array([1, -1], np.int64)], error="negative"))
    cases.append(Case("pad", "f32", [x, np.array([0, -2, 0, -2], np.int64)], error="remove more than"))
    cases.append(Case("pad", "f32", [np.zeros((0, 3), np.float32), np.array([1, 0, 0, 0], np.int64)],
                      attrs={"mode": "edge"}, error="cannot pad the empty dimension"))
    cases.append(Case("pad", "f32", [x, np.array([0, 0, 0, 0], np.int64)], attrs={"mode": "mirror"},
                      error="mode must be"))
    cases.append(Case("pad", "f32", [x, np.zeros(4, np.int64), np.array(1, np.float32)], attrs={"mode": "edge"},
                      error="needs mode constant"))
    return cases


def _gather_nd(x, idx, b):
    """ONNX's reference GatherND, written out."""
    bshape = idx.shape[:b]
    out = []
    for bi in np.ndindex(*bshape):
        for t in np.ndindex(*idx.shape[b:-1]):
            out.append(x[bi][tuple(idx[bi + t])])
    return np.array(out, dtype=x.dtype).reshape(idx.shape[:-1] + x.shape[b + idx.shape[-1]:])


def _combine(red, a, b):
    with np.errstate(all="ignore"):
        if red == "none":
            return b
        if red == "add":
            return a + b
        if red == "mul":
            return a * b
        if np.isnan(a) or np.isnan(b):
            return a if np.isnan(a) else b
        return max(a, b) if red == "max" else min(a, b)


def _scatter_elements(x, idx, upd, axis, red):
    y = x.copy()
    for p in np.ndindex(*idx.shape):
        q = list(p)
        q[axis] = idx[p]
        y[tuple(q)] = _combine(red, y[tuple(q)], upd[p])
    return y


def _scatter_nd(x, idx, upd, red):
    y = x.copy()
    for p in np.ndindex(*idx.shape[:-1]):
        t = tuple(idx[p])
        if red == "none":
            y[t] = upd[p]
        else:
            for s in np.ndindex(*y[t].shape):
                y[t + s] = _combine(red, y[t + s], upd[p + s])
    return y


def index_cases(rng):
    """gather_nd, scatter_elements, scatter_nd, one_hot."""
    cases = []
    for k, dt in enumerate(ALL):
        r = lambda shape: rng.array(shape, dt)  # noqa: E731
        x = r((2, 3, 4))
        for idx, b in (([[0, 1], [1, -1]], 0), ([[[1]], [[0]]], 0), ([[1, 2, 3]], 0), ([[0], [2]], 1),
                       ([[[0, 1]], [[2, 3]]], 1), (np.zeros((0, 2), int), 0)):
            i = np.array(idx, np.int64 if k % 2 else np.int32)
            cases.append(Case("gather_nd", dt, [x, i], [_gather_nd(x, np.where(i < 0, i + 3, i), b)],
                              attrs={"batch_dims": b}))
        reds = ["none"] if dt == "i1" else ["none", "add", "mul", "max", "min"]
        for j, red in enumerate(reds):
            x = r((3, 4))
            axis = j % 2
            i = rng.g.integers(-3, 3, size=(2, 3)).astype(np.int64)
            u = r((2, 3))
            cases.append(Case("scatter_elements", dt, [x, i, u],
                              [_scatter_elements(x, np.where(i < 0, i + x.shape[axis], i), u, axis, red)],
                              attrs={"axis": axis, "reduction": red}))
            x = r((4, 2, 3))
            i = np.array([[1], [3], [1]], np.int64) if j % 2 else np.array([[0, 1], [-1, 0]], np.int32)
            u = r(i.shape[:-1] + x.shape[i.shape[-1]:])
            cases.append(Case("scatter_nd", dt, [x, i, u], [_scatter_nd(x, np.where(i < 0, i + 4, i), u, red)],
                              attrs={"reduction": red}))
        values = r((2,))
        for shape, axis in (((3,), -1), ((2, 3), 0), ((2, 3), 1), ((), 0), ((0, 2), -1)):
            i = rng.g.integers(-5, 6, size=shape).astype(np.int64)
            depth = 4
            hot = np.where(i < 0, i + depth, i)
            want = np.moveaxis(np.where(np.arange(depth) == hot[..., None], values[1], values[0]), -1, axis)
            cases.append(Case("one_hot", dt, [i, np.array(depth, np.int32), values],
                              [np.ascontiguousarray(want).astype(values.dtype)], attrs={"axis": axis}))
    # Errors: indices out of range (run time), bad reductions (shape function).
    x = np.zeros((3, 4), np.float32)
    cases.append(Case("gather_nd", "f32", [x, np.array([[3, 0]], np.int64)], error="index 3 is out of range"))
    cases.append(Case("scatter_elements", "f32", [x, np.array([[5]], np.int64), np.ones((1, 1), np.float32)],
                      attrs={"axis": 1}, error="index 5 is out of range"))
    cases.append(Case("scatter_nd", "f32", [x, np.array([[-4]], np.int64), np.ones((1, 4), np.float32)],
                      error="index -4 is out of range"))
    cases.append(Case("scatter_nd", "i1", [np.zeros(3, bool), np.array([[1]], np.int64), np.ones(1, bool)],
                      attrs={"reduction": "add"}, error="needs a numeric element type"))
    cases.append(Case("scatter_nd", "f32", [x, np.array([[1]], np.int64), np.ones((4,), np.float32)],
                      error="updates (operand 2) must have shape"))
    cases.append(Case("scatter_nd", "f32", [x, np.array([[1]], np.int64), np.ones((1, 3), np.float32)],
                      error="dimension 1 of updates must be equal"))
    cases.append(Case("one_hot", "f32", [np.array([1], np.int64), np.array(-1, np.int64), np.zeros(2, np.float32)],
                      error="depth -1 is negative"))
    # Repeated indices: none keeps the last update, add sums them.
    x = np.zeros(3, np.float32)
    i = np.array([[1], [1], [0]], np.int64)
    u = np.array([1.0, 2.0, 4.0], np.float32)
    cases.append(Case("scatter_nd", "f32", [x, i, u], [np.array([4.0, 2.0, 0.0], np.float32)]))
    cases.append(Case("scatter_nd", "f32", [x, i, u], [np.array([4.0, 3.0, 0.0], np.float32)],
                      attrs={"reduction": "add"}))
    return cases


def _literal(x, dt):
    dims = "".join("%dx" % d for d in x.shape)
    vals = " ".join(repr(float(v)) if dt in FLOATS else str(int(v)) for v in x.reshape(-1))
    return "%s%s=%s" % (dims, dt, vals)


def create_cases(rng):
    cases = []
    for dt in ALL:
        # constant: from a .npy file (numpy has no bf16: a text literal there),
        # as a splat literal, and as a rank-0 literal.
        x = rng.array((2, 3), dt)
        if dt == "bf16":
            value = _literal(x, dt)
        else:
            value = x
        cases.append(Case("constant", dt, [], [x], attrs={"value": value}))
        splat = {"i1": ("1", np.True_), "i8": ("-7", -7), "i32": ("123456", 123456),
                 "i64": ("-5000000000", -5000000000), "i16": ("-300", -300), "u8": ("200", 200),
                 "u16": ("60000", 60000), "u32": ("4000000000", 4000000000),
                 "u64": ("18446744073709551615", 2**64 - 1)}.get(dt, ("0.1", 0.1))
        want = np.full((2, 0, 3) if dt == "i8" else (3, 2), splat[1], NP[dt])
        if dt == "bf16":
            want = round_bf16(want)
        elif dt in FLOATS:
            want = cast_to(np.full(want.shape, 0.1), dt)
        dims = "x".join(map(str, want.shape))
        cases.append(Case("constant", dt, [], [want],
                          attrs={"value": "splat:%sx%s=%s" % (dims, dt, splat[0])}))
        s = rng.array((), dt)
        cases.append(Case("constant", dt, [], [s], attrs={"value": _literal(s, dt)}))
        # zeros / full: the shape comes from a run-time tensor.
        for shape, sdt in (((2, 3), np.int64), ((), np.int64), ((4, 0), np.int32), ((5,), np.int8)):
            sh = np.array(shape, sdt)
            cases.append(Case("zeros", dt, [sh], [np.zeros(shape, NP[dt])], attrs={"dtype": dt}))
            v = rng.array((), dt)
            cases.append(Case("full", dt, [sh, v], [np.full(shape, v, NP[dt])]))
        # unique (sorted, upper-bound output).
        for shape in ((12,), (0,), (1,), (40,)):
            x = rng.small_ints(shape, dt, -3, 3)
            cases.append(Case("unique", dt, [x], [np.unique(x)]))
        # nonzero: numpy.argwhere, row-major.
        for shape in ((), (5,), (2, 3), (2, 0, 3), (3, 1, 4)):
            x = rng.small_ints(shape, dt, -1, 1)
            if dt in FLOATS and x.size:
                x.reshape(-1)[0] = -0.0  # negative zero is zero
            cases.append(Case("nonzero", dt, [x], [np.argwhere(x).astype(np.int64)]))
        cases.append(Case("nonzero", dt, [np.ones((), NP[dt])], [np.zeros((1, 0), np.int64)]))
        for shape in ((), (0,), (2, 3, 4)):
            x = rng.array(shape, dt)
            cases.append(Case("shape_of", dt, [x], [np.array(shape, np.int64)]))
        for axis in (0, 1, -1):
            x = rng.array((2, 0, 4), dt)
            cases.append(Case("dim", dt, [x], [np.array(x.shape[axis], np.int64)],
                              attrs={"axis": axis}))
        x = rng.array((3, 2), dt)
        cases.append(Case("device_copy", dt, [x], [x], attrs={"src": "cpu", "dst": "cpu"}))
    # storage_size: bytes of a dense tensor of that shape, rounded up to the
    # alignment (a value computed from the shape, not the input's own size).
    for dt in INTS:
        for shape, tdt, align in (((2, 3), "f32", 64), ((0, 5), "f16", 64), ((), "f64", 1),
                                  ((7, 9, 3), "i8", 16), ((100, 120), "bf16", 128)):
            itemsize = {"f32": 4, "f16": 2, "f64": 8, "i8": 1, "bf16": 2}[tdt]
            nbytes = int(np.prod(shape, dtype=np.int64)) * itemsize
            want = -(-nbytes // align) * align
            cases.append(Case("storage_size", dt, [np.array(shape, NP[dt])],
                              [np.array(want, np.int64)], attrs={"dtype": tdt, "alignment": align}))
    x = np.array([3, np.nan, 1, np.nan, 3, -np.inf], np.float32)
    cases.append(Case("unique", "f32", [x], [np.unique(x)]))
    cases.append(Case("device_copy", "f32", [np.zeros(3, np.float32)],
                      attrs={"src": "cuda", "dst": "cpu"}, error="cpu -> cpu only"))
    # arange: integers and floats, up, down and empty.
    for dt in NUMERIC:
        ranges = ((0, 10, 3), (10, 0, -3), (5, 5, 1), (-7, 8, 2), (3, 1, 1))
        if dt in UINTS:
            ranges = ((0, 10, 3), (5, 5, 1), (3, 1, 1), (250, 255, 2))
        if dt in FLOATS:
            ranges += ((0, 1, 0.125), (1, -1, -0.25), (0.5, 3.75, 0.5))
        for start, stop, step in ranges:
            ins = [cast_to(np.array(v), dt) for v in (start, stop, step)]
            s, e, st = (float(v) for v in ins)
            want = cast_to(np.arange(s, e, st), dt)
            cases.append(Case("arange", dt, ins, [want]))
    return cases


def cases(rng):
    return movement_cases(rng) + create_cases(rng)
