"""Cases for matmul / batch_matmul, the reductions, softmax, layer_norm and attention."""

import numpy as np

from oplib import FLOATS, INTS, NUMERIC, Case, cast_to, wide


def _matmul_expected(a, b, dt):
    if dt in INTS:
        # Exact in int64 (the operands are small), then wrapped to the dtype.
        return np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(a.dtype)
    return cast_to(np.matmul(wide(a), wide(b)), dt)


def _operands(rng, dt, sa, sb):
    if dt in INTS:
        return rng.array(sa, dt, -9, 9), rng.array(sb, dt, -9, 9)
    return rng.array(sa, dt, -1, 1), rng.array(sb, dt, -1, 1)


def _stored(x, transposed):
    """The operand as stored when the op reads it transposed."""
    return np.ascontiguousarray(np.swapaxes(x, -1, -2)) if transposed else x


MATMUL_MKN = [(2, 3, 4), (1, 1, 1), (5, 0, 3), (0, 4, 3), (3, 4, 0), (7, 13, 5)]
BATCH_SHAPES = [
    ((2, 3, 4), (2, 4, 5)), ((1, 3, 4), (3, 4, 2)), ((2, 1, 2, 3), (1, 3, 3, 2)),
    ((0, 2, 3), (1, 3, 4)), ((4, 2, 0), (4, 0, 3)), ((2, 3, 1, 1), (2, 3, 1, 1)),
    ((3, 2, 5), (1, 5, 1)),
]
FLAGS = [(False, False), (True, False), (False, True), (True, True)]


def matmul_cases(rng):
    cases = []
    for dt in NUMERIC:
        for i, (m, k, n) in enumerate(MATMUL_MKN):
            for ta, tb in FLAGS if dt == "f32" or i == len(MATMUL_MKN) - 1 else FLAGS[i % 4:i % 4 + 1]:
                a, b = _operands(rng, dt, (m, k), (k, n))
                cases.append(Case("matmul", dt, [_stored(a, ta), _stored(b, tb)],
                                  [_matmul_expected(a, b, dt)],
                                  attrs={"transpose_a": ta, "transpose_b": tb}))
        for i, (sa, sb) in enumerate(BATCH_SHAPES):
            ta, tb = FLAGS[(i + len(dt)) % 4]
            a, b = _operands(rng, dt, sa, sb)
            cases.append(Case("batch_matmul", dt, [_stored(a, ta), _stored(b, tb)],
                              [_matmul_expected(a, b, dt)],
                              attrs={"transpose_a": ta, "transpose_b": tb}))
    # Big enough for the thread pool.
    a, b = _operands(rng, "f32", (64, 100), (100, 80))
    cases.append(Case("matmul", "f32", [a, _stored(b, True)], [_matmul_expected(a, b, "f32")],
                      attrs={"transpose_b": True}, threads=4))
    a, b = _operands(rng, "i32", (3, 1, 40, 30), (1, 2, 30, 20))
    cases.append(Case("batch_matmul", "i32", [a, b], [_matmul_expected(a, b, "i32")], threads=2))
    return cases


REDUCE_SHAPES = [
    ((2, 3, 4), []), ((2, 3, 4), [0]), ((2, 3, 4), [-1]), ((2, 3, 4), [0, 2]),
    ((2, 3, 4), [2, -3]), ((), []), ((5,), [0]), ((0, 3), [0]), ((0, 3), [1]),
    ((3, 0, 2), []), ((3, 0, 2), [1]), ((4, 1, 3), [-2]), ((2, 3, 4), [0, 1, 2]),
]


def _reduce_expected(op, x, axes, keep, dt):
    """numpy's answer, or the error substring when numpy refuses."""
    axis = None if not axes else tuple(axes)
    try:
        with np.errstate(all="ignore"):
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if op == "sum":
                    if dt in INTS:
                        return np.sum(x, axis=axis, keepdims=keep, dtype=x.dtype), None
                    return cast_to(np.sum(wide(x), axis=axis, keepdims=keep), dt), None
                if op == "mean":
                    return cast_to(np.mean(wide(x), axis=axis, keepdims=keep), dt), None
                if op == "prod":
                    if dt in INTS:
                        return np.prod(x, axis=axis, keepdims=keep, dtype=x.dtype), None
                    return cast_to(np.prod(wide(x), axis=axis, keepdims=keep), dt), None
                # The identity over an empty axis (ONNX's; numpy would raise).
                f = np.max if op == "max" else np.min
                if dt in INTS:
                    info = np.iinfo(x.dtype)
                    ident = info.min if op == "max" else info.max
                else:
                    ident = -np.inf if op == "max" else np.inf
                return np.asarray(f(x, axis=axis, keepdims=keep, initial=ident)), None
    except ValueError:
        return None, "has no identity"


def reduce_cases(rng):
    cases = []
    for op in ("sum", "mean", "max", "min", "prod"):
        for dt in FLOATS if op == "mean" else NUMERIC:
            for i, (shape, axes) in enumerate(REDUCE_SHAPES):
                keep = (i + len(dt)) % 2 == 1
                if op == "prod":  # products of up to 24 factors: stay in range
                    x = rng.array(shape, dt, -3, 3) if dt in INTS else rng.array(shape, dt, -1.5, 1.5)
                else:
                    x = rng.array(shape, dt, -9, 9) if dt in INTS else rng.array(shape, dt)
                want, err = _reduce_expected(op, x, axes, keep, dt)
                cases.append(Case(op, dt, [x], None if err else [want],
                                  attrs={"axes": axes, "keepdims": keep}, error=err))
        x = rng.array((300, 200), "f32", 0.9, 1.1) if op == "prod" else rng.array((300, 200), "f32")
        want, _ = _reduce_expected(op, x, [1], False, "f32")
        cases.append(Case(op, "f32", [x], [want], attrs={"axes": [1]}, threads=4))
    # Integer sums wrap around in the element type.
    x = np.full((2, 100), 100, np.int8)
    cases.append(Case("sum", "i8", [x], [np.sum(x, axis=1, dtype=np.int8)], attrs={"axes": [1]}))
    # NaN propagates through max / min.
    x = np.array([[1, np.nan, 3], [4, 5, 6]], np.float32)
    for op, f in (("max", np.max), ("min", np.min)):
        cases.append(Case(op, "f32", [x], [f(x, axis=1)], attrs={"axes": [1]}))
    # Integer products wrap around in the element type.
    x = np.full((2, 9), 3, np.int8)
    cases.append(Case("prod", "i8", [x], [np.prod(x, axis=1, dtype=np.int8)], attrs={"axes": [1]}))
    return cases


def _cumsum_expected(x, axis, exclusive, reverse, dt):
    w = x if dt in INTS else wide(x)
    if reverse:
        w = np.flip(w, axis)
    with np.errstate(all="ignore"):
        c = np.cumsum(w, axis=axis, dtype=x.dtype if dt in INTS else np.float64)
    if exclusive:  # shifted by one along the axis, starting at 0
        c = np.moveaxis(c, axis, 0)
        c = np.concatenate([np.zeros_like(c[:1]), c[:-1]], axis=0)
        c = np.moveaxis(c, 0, axis)
    if reverse:
        c = np.flip(c, axis)
    return np.ascontiguousarray(c) if dt in INTS else cast_to(c, dt)


CUMSUM_SHAPES = [((5,), 0), ((2, 3), 0), ((2, 3), 1), ((2, 3), -1), ((2, 3, 4), 1), ((0, 3), 1),
                 ((3, 0), 0), ((4, 1, 2), -3)]


def cumsum_cases(rng):
    cases = []
    for dt in NUMERIC:
        for i, (shape, axis) in enumerate(CUMSUM_SHAPES):
            for exclusive, reverse in ((False, False), (True, False), (False, True), (True, True)):
                if dt != "f32" and (i + exclusive + 2 * reverse) % 3:
                    continue  # every combination on f32, a third of them on the others
                x = rng.array(shape, dt, -9, 9) if dt in INTS else rng.array(shape, dt)
                adt = np.int64 if i % 2 else np.int32
                cases.append(Case("cumsum", dt, [x, np.array(axis, adt)],
                                  [_cumsum_expected(x, axis, exclusive, reverse, dt)],
                                  attrs={"exclusive": exclusive, "reverse": reverse}))
    # Integer sums wrap; long lines on several threads.
    x = np.full((3, 100), 100, np.int8)
    cases.append(Case("cumsum", "i8", [x, np.array(1, np.int64)], [np.cumsum(x, axis=1, dtype=np.int8)]))
    x = rng.array((400, 300), "f32")
    cases.append(Case("cumsum", "f32", [x, np.array(0, np.int64)],
                      [_cumsum_expected(x, 0, False, False, "f32")], threads=4))
    # The axis is a value: out of range is an error.
    x = np.zeros((2, 3), np.float32)
    cases.append(Case("cumsum", "f32", [x, np.array(2, np.int64)], error="out of range"))
    cases.append(Case("cumsum", "f32", [x, np.array(-3, np.int64)], error="out of range"))
    cases.append(Case("cumsum", "f32", [x, np.array([0], np.int64)], error="must be a scalar"))
    return cases


ARGMAX_SHAPES = [((2, 3, 4), -1), ((2, 3, 4), 0), ((2, 3, 4), 1), ((7,), 0), ((3, 1), -1),
                 ((0, 3), 1), ((0, 3), 0), ((2, 0), -2), ((2, 0), 1)]


def argmax_cases(rng):
    cases = []
    for dt in NUMERIC:
        for i, (shape, axis) in enumerate(ARGMAX_SHAPES):
            keep = (i + len(dt)) % 2 == 0
            x = rng.small_ints(shape, dt, -2, 2)  # many ties: the first index wins
            try:
                want, err = np.argmax(x, axis=axis, keepdims=keep).astype(np.int64), None
            except ValueError:
                want, err = None, "has no identity"
            cases.append(Case("argmax", dt, [x], None if err else [want],
                              attrs={"axis": axis, "keepdims": keep}, error=err))
    x = np.array([[1, np.nan, 3, np.nan], [4, 9, 9, 2]], np.float32)
    cases.append(Case("argmax", "f32", [x], [np.argmax(x, axis=1)], attrs={"axis": 1}))
    return cases


def _softmax(x, axis):
    x = wide(x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True)) if x.size else x
    return e / np.sum(e, axis=axis, keepdims=True) if x.size else x


def _layer_norm(x, g, b, eps):
    x, g, b = wide(x), wide(g), wide(b)
    if x.size == 0:
        return x
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


def norm_cases(rng):
    cases = []
    for dt in FLOATS:
        for shape, axis, scale in (((3, 5), -1, 1), ((3, 5), 0, 1), ((2, 3, 4), 1, 1),
                                   ((4,), 0, 1), ((2, 0, 3), -1, 1), ((2, 0, 3), 1, 1),
                                   ((2, 6), -1, 300)):
            # scale 300: exp would overflow without the max shift (f16/bf16
            # cannot hold 300 * 4, so they get a smaller spread).
            s = scale if dt in ("f32", "f64") else min(scale, 10)
            x = rng.array(shape, dt, -4 * s, 4 * s)
            cases.append(Case("softmax", dt, [x], [cast_to(_softmax(x, axis), dt)],
                              attrs={"axis": axis}))
        for shape, eps in (((2, 5), 1e-5), ((3, 4, 8), 1e-5), ((1, 1), 1e-5), ((0, 4), 1e-5),
                           ((6,), 0.5), ((2, 3), 1e-2)):
            x = rng.array(shape, dt)
            g, b = rng.array(shape[-1:], dt), rng.array(shape[-1:], dt)
            cases.append(Case("layer_norm", dt, [x, g, b],
                              [cast_to(_layer_norm(x, g, b, eps), dt)], attrs={"eps": eps}))
    x = rng.array((200, 300), "f32")
    cases.append(Case("softmax", "f32", [x], [cast_to(_softmax(x, 0), "f32")],
                      attrs={"axis": 0}, threads=2))
    x, g, b = rng.array((256, 200), "f32"), rng.array((200,), "f32"), rng.array((200,), "f32")
    cases.append(Case("layer_norm", "f32", [x, g, b],
                      [cast_to(_layer_norm(x, g, b, 1e-5), "f32")], threads=4))
    return cases


def _attention(q, k, v, mask, scale):
    """numpy's composition: per head softmax(scale q k^T + mask) v, token-major."""
    q, k, v = wide(q), wide(k), wide(v)
    qt, kt, vt = (np.transpose(t, (1, 0, 2)) for t in (q, k, v))
    s = scale * np.matmul(qt, np.swapaxes(kt, -1, -2))
    if mask is not None:
        s = s + wide(mask)
    return np.transpose(np.matmul(_softmax(s, -1), vt), (1, 0, 2))


def attention_cases(rng):
    cases = []
    # (m, n, H, D, E, mask shape or None, scale): BERT's head size, odd sizes
    # (tails of every vector loop), one query, many keys, masks broadcast;
    # E past one 16-column strip of v with a tail (20, 33: the AVX2 kernel's
    # packed strips).
    shapes = [(5, 5, 2, 8, 8, None, 0.35), (1, 7, 3, 4, 5, (7,), 1.0), (6, 3, 1, 3, 2, (6, 3), 0.5),
              (4, 4, 2, 5, 3, (2, 1, 4), 2.0), (3, 2, 2, 2, 2, (2, 3, 2), 0.7),
              (9, 33, 2, 3, 20, (33,), 0.5), (7, 19, 1, 5, 33, None, 0.3)]
    for dt in FLOATS:
        for m, n, h, d, e, ms, scale in shapes:
            q, k, v = rng.array((m, h, d), dt, -1, 1), rng.array((n, h, d), dt, -1, 1), rng.array((n, h, e), dt)
            ins = [q, k, v]
            mask = None
            if ms is not None:
                mask = rng.array(ms, dt, -3, 0)
                ins.append(mask)
            cases.append(Case("attention", dt, ins, [cast_to(_attention(q, k, v, mask, scale), dt)],
                              attrs={"scale": scale}))
    # BERT's shape at a length with vector tails (37 keys, 64 per head), on
    # two threads. (A larger scale multiplies the f32 dot products' rounding
    # past check_ops.py's rtol of 1e-5, for the composition as for the fused
    # kernel.)
    q, k, v = (rng.array((37, 12, 64), "f32", -1, 1) for _ in range(3))
    cases.append(Case("attention", "f32", [q, k, v], [cast_to(_attention(q, k, v, None, 1.0), "f32")],
                      attrs={"scale": 1.0}, threads=2))
    mask = np.where(rng.array((37,), "f32") > 0, 0, -1e4).astype(np.float32)
    cases.append(Case("attention", "f32", [q, k, v, mask],
                      [cast_to(_attention(q, k, v, mask, 0.125), "f32")], attrs={"scale": 0.125}))
    return cases


def _top_k(x, k, axis, largest):
    """A stable argsort of the key (NaN ranked above every number): equal
    entries keep index order."""
    w = wide(x)
    if w.dtype.kind == "f":
        nan = np.isnan(w)
        key = np.where(nan, -np.inf, -w) if largest else np.where(nan, np.inf, w)
        # NaN before (largest) or after every number; -inf/inf tie with NaN
        # otherwise, so rank on (nan flag, key).
        flag = np.where(nan, 0 if largest else 1, 1 if largest else 0)
        order = np.lexsort((np.moveaxis(key, axis, -1), np.moveaxis(flag, axis, -1)), axis=-1)
    else:
        key = -w.astype(np.float64) if largest and w.dtype.kind == "u" else (-w if largest else w)
        order = np.argsort(np.moveaxis(key, axis, -1), axis=-1, kind="stable")
    idx = np.moveaxis(order[..., :k], -1, axis).astype(np.int64)
    return np.take_along_axis(x, idx, axis=axis), idx


TOPK_SHAPES = [((2, 5), -1, 3), ((2, 5), 0, 1), ((4,), 0, 4), ((3, 4, 2), 1, 2), ((3, 0), 1, 0), ((2, 6), 1, 0)]


def top_k_cases(rng):
    cases = []
    for j, dt in enumerate(NUMERIC):
        for i, (shape, axis, k) in enumerate(TOPK_SHAPES):
            largest = (i + j) % 2 == 0
            x = rng.small_ints(shape, dt, 0 if dt in ("u8", "u16", "u32", "u64") else -3, 3)  # ties
            v, ix = _top_k(x, k, axis, largest)
            cases.append(Case("top_k", dt, [x, np.array(k, np.int64)], [v, ix],
                              attrs={"axis": axis, "largest": largest}))
    x = np.array([[1, np.nan, 3, -np.inf, np.nan, 3]], np.float32)
    for largest in (True, False):
        v, ix = _top_k(x, 4, 1, largest)
        cases.append(Case("top_k", "f32", [x, np.array(4, np.int32)], [v, ix], attrs={"largest": largest}))
    cases.append(Case("top_k", "f32", [x, np.array(7, np.int64)], error="k 7 is out of range"))
    return cases


def _iou(a, b, center):
    def corners(p):
        if center:
            return p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2, p[0] + p[2] / 2
        return min(p[0], p[2]), min(p[1], p[3]), max(p[0], p[2]), max(p[1], p[3])
    y0, x0, y1, x1 = corners([float(v) for v in a])
    v0, u0, v1, u1 = corners([float(v) for v in b])
    aa, ab = (y1 - y0) * (x1 - x0), (v1 - v0) * (u1 - u0)
    ih, iw = min(y1, v1) - max(y0, v0), min(x1, u1) - max(x0, u0)
    if aa <= 0 or ab <= 0 or ih <= 0 or iw <= 0:
        return 0.0
    return ih * iw / (aa + ab - ih * iw)


def _nms(boxes, scores, max_per, iou, thr, center):
    rows = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = [float(v) for v in scores[b, c]]
            cand = sorted((i for i in range(len(s)) if s[i] > thr), key=lambda i: -s[i])
            kept = []
            for i in cand:
                if len(kept) >= max_per:
                    break
                if all(_iou(boxes[b, k], boxes[b, i], center) <= iou for k in kept):
                    kept.append(i)
                    rows.append([b, c, i])
    return np.array(rows, np.int64).reshape(-1, 3)


def nms_cases(rng):
    cases = []
    for j, dt in enumerate(FLOATS):
        for center in (False, True):
            # Boxes on a coarse grid (overlaps and equal scores are common).
            boxes = cast_to(rng.g.integers(0, 6, size=(2, 7, 4)) / 2.0, dt)
            scores = cast_to(rng.g.integers(0, 8, size=(2, 3, 7)) / 8.0, dt)
            for max_per, iou, thr in ((3, 0.5, 0.1), (10, 0.0, -np.inf), (0, 0.5, 0.0), (2, 1.0, 0.5)):
                want = _nms(boxes, scores, max_per, iou, float(cast_to(thr, dt)), center)
                ins = [boxes, scores, np.array(max_per, np.int64), cast_to(np.array(iou), dt),
                       cast_to(np.array(thr), dt)]
                cases.append(Case("non_max_suppression", dt, ins, [want], attrs={"center_point_box": center}))
    # ONNX's suppress_by_IOU example (flipped corners in the second box).
    boxes = np.array([[[0, 0, 1, 1], [0, 1.1, 1, 0.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11], [0, 10.1, 1, 11.1],
                       [0, 100, 1, 101]]], np.float32)
    scores = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3]]], np.float32)
    cases.append(Case("non_max_suppression", "f32",
                      [boxes, scores, np.array(3, np.int64), np.array(0.5, np.float32), np.array(0.0, np.float32)],
                      [np.array([[0, 0, 3], [0, 0, 0], [0, 0, 5]], np.int64)]))
    cases.append(Case("non_max_suppression", "f32",
                      [boxes, scores[:, :, :5], np.array(3, np.int64), np.array(0.5, np.float32),
                       np.array(0.0, np.float32)], error="must be equal"))
    return cases


def cases(rng):
    return (matmul_cases(rng) + reduce_cases(rng) + argmax_cases(rng) + norm_cases(rng) + cumsum_cases(rng)
            + attention_cases(rng) + top_k_cases(rng) + nms_cases(rng))
