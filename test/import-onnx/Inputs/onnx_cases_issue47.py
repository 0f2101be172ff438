"""onnx_cases.py's cases of issue 47's ops and types: unsigned integers, the
math, index, lowered, third-batch and sampling ops, each against numpy.
"""

import numpy as np
from onnx import TensorProto

from onnx_case_lib import family, B, F, I64, N, model, randn

case, register = family()


@case
def unsigned_ints():
    # uint8 and int16 inputs, initializers of every new type, Cast between
    # them: wrap-around (200 + 100 in uint8), unsigned division and
    # comparison, saturating float -> uint8, uint64 beyond int64.
    U8, U16, U32, U64, I16 = (TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32,
                              TensorProto.UINT64, TensorProto.INT16)
    m = model([N("Add", ["a", "b"], ["s"]), N("Div", ["a", "b"], ["q"]), N("Greater", ["a", "b"], ["g"]),
               N("Cast", ["a"], ["a16"], to=I16), N("Mul", ["a16", "k16"], ["m16"]),
               N("Cast", ["m16"], ["m32"], to=U32), N("Max", ["m32", "k32"], ["mx"]),
               N("Cast", ["f"], ["fu8"], to=U8), N("Sub", ["k64", "one64"], ["d64"]),
               N("Cast", ["a"], ["a16u"], to=U16), N("ReduceSum", ["a16u"], ["r"], keepdims=0)],
              [("a", U8, [4]), ("b", U8, [4]), ("f", F, [4])],
              [("s", U8, [4]), ("q", U8, [4]), ("g", B, [4]), ("mx", U32, [4]), ("fu8", U8, [4]),
               ("d64", U64, [2]), ("r", U16, [])],
              inits=[("k16", np.array([300, -2, 7, 1000], np.int16)), ("k32", np.array([5, 70000, 0, 9], np.uint32)),
                     ("k64", np.array([2**64 - 1, 0], np.uint64)), ("one64", np.array([1, 1], np.uint64))])
    a = np.array([200, 255, 7, 0], np.uint8)
    b = np.array([100, 2, 3, 1], np.uint8)
    f = np.array([-3.5, 300.0, 12.7, 0.0], np.float32)
    with np.errstate(all="ignore"):
        m16 = a.astype(np.int16) * np.array([300, -2, 7, 1000], np.int16)
        return m, [a, b, f], [a + b, a // b, a > b, np.maximum(m16.astype(np.uint32), np.array([5, 70000, 0, 9], np.uint32)),
                              np.array([0, 255, 12, 0], np.uint8), np.array([2**64 - 2, 2**64 - 1], np.uint64),
                              np.array(a.astype(np.uint16).sum(), np.uint16)]

@case
def issue47_ops():
    # Sin, Mod (fmod=1), ReduceProd, CumSum (known axis), Tile (known
    # repeats: static dims), Pad (opset 18 axes, known pads, reflect).
    nodes = [N("Sin", ["x"], ["s"]), N("Mod", ["x", "d"], ["m"], fmod=1),
             N("ReduceProd", ["x", "ax1"], ["p"], keepdims=0), N("CumSum", ["x", "cax"], ["c"], reverse=1),
             N("Tile", ["x", "reps"], ["t"]), N("Pad", ["x", "pads", "", "padaxes"], ["q"], mode="reflect")]
    m = model(nodes, [("x", F, ["N", 3]), ("d", F, [3])],
              [("s", F, ["N", 3]), ("m", F, ["N", 3]), ("p", F, ["N"]), ("c", F, ["N", 3]), ("t", F, ["N", 6]),
               ("q", F, ["N", 6])],
              inits=[("ax1", np.array([1], np.int64)), ("cax", np.array(1, np.int64)), ("reps", np.array([1, 2], np.int64)),
                     ("pads", np.array([1, 2], np.int64)), ("padaxes", np.array([-1], np.int64))], opset=18)
    x, d = randn(2, 3), np.array([0.5, -0.7, 1.5], np.float32)
    c = np.flip(np.cumsum(np.flip(x, 1), 1), 1)
    return m, [x, d], [np.sin(x), np.fmod(x, d), x.prod(axis=1), c, np.tile(x, (1, 2)),
                       np.pad(x, ((0, 0), (1, 2)), mode="reflect")]


@case
def issue47_index_ops():
    # GatherND (batch_dims), ScatterElements (add), ScatterND, OneHot with
    # float indices and depth (cast to i64) and a negative index.
    nodes = [N("GatherND", ["x", "gi"], ["g"], batch_dims=1),
             N("ScatterElements", ["x", "si", "su"], ["s"], axis=1, reduction="add"),
             N("ScatterND", ["x", "ni", "nu"], ["n"]),
             N("OneHot", ["oi", "depth", "ov"], ["o"], axis=0)]
    m = model(nodes, [("x", F, [2, 3]), ("gi", I64, [2, 1]), ("si", I64, [2, 2]), ("su", F, [2, 2]),
                      ("ni", I64, [1, 1]), ("nu", F, [1, 3]), ("oi", F, [3])],
              [("g", F, [2]), ("s", F, [2, 3]), ("n", F, [2, 3]), ("o", F, [4, 3])],
              inits=[("depth", np.array(4.0, np.float32)), ("ov", np.array([-1.0, 2.0], np.float32))], opset=16)
    x = randn(2, 3)
    gi = np.array([[2], [0]], np.int64)
    si, su = np.array([[0, 0], [2, -1]], np.int64), randn(2, 2)
    ni, nu = np.array([[1]], np.int64), randn(1, 3)
    oi = np.array([1.7, -1.0, 7.0], np.float32)
    s = x.copy()
    for r in range(2):
        for c in range(2):
            s[r, si[r, c] % 3] += su[r, c]
    n = x.copy()
    n[1] = nu[0]
    o = np.full((4, 3), -1.0, np.float32)
    o[1, 0], o[3, 1] = 2.0, 2.0
    return m, [x, gi, si, su, ni, nu, oi], [x[np.arange(2), gi[:, 0]], s, n, o]


@case
def issue47_lowered():
    # Lowered to existing ops: QuantizeLinear (per axis) and DequantizeLinear,
    # DynamicQuantizeLinear, HannWindow (symmetric), Einsum (a contraction
    # and a diagonal), LRN, Compress (no axis), Det (3x3), ReverseSequence,
    # MaxUnpool.
    U8 = TensorProto.UINT8
    nodes = [N("QuantizeLinear", ["x", "qs", "qz"], ["q"], axis=1), N("DequantizeLinear", ["q", "qs", "qz"], ["dq"], axis=1),
             N("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"]),
             N("HannWindow", ["wn"], ["hw"], periodic=0),
             N("Einsum", ["a", "b"], ["e"], equation="bij,bkj->bik"), N("Einsum", ["sq"], ["dg"], equation="ii->i"),
             N("LRN", ["img"], ["l"], size=3, alpha=0.1, beta=0.75, bias=2.0),
             N("Compress", ["x", "cond"], ["cp"]), N("Det", ["sq"], ["dt"]),
             N("ReverseSequence", ["seq", "lens"], ["rs"], batch_axis=1, time_axis=0),
             N("MaxUnpool", ["mu", "mi"], ["up"], kernel_shape=[2, 2], strides=[2, 2])]
    m = model(nodes, [("x", F, [2, 3]), ("a", F, [2, 2, 3]), ("b", F, [2, 4, 3]), ("sq", F, [3, 3]),
                      ("img", F, [1, 4, 2, 2]), ("cond", B, [4]), ("seq", F, [4, 3]), ("mu", F, [1, 1, 2, 2])],
              [("q", U8, [2, 3]), ("dq", F, [2, 3]), ("y", U8, [2, 3]), ("ys", F, []), ("yz", U8, []), ("hw", F, [5]),
               ("e", F, [2, 2, 4]), ("dg", F, [3]), ("l", F, [1, 4, 2, 2]), ("cp", F, [None]), ("dt", F, []),
               ("rs", F, [4, 3]), ("up", F, [1, 1, 4, 4])],
              inits=[("qs", np.array([0.02, 0.05, 0.1], np.float32)), ("qz", np.array([128, 0, 10], np.uint8)),
                     ("wn", np.array(5, np.int64)), ("lens", np.array([4, 1, 2], np.int64)),
                     ("mi", np.array([[[[0, 3], [9, 14]]]], np.int64))], opset=17)
    x = np.array([[-1.0, 0.5, 2.5], [3.0, -0.01, 30.0]], np.float32)
    a, b, sq, img = randn(2, 2, 3), randn(2, 4, 3), randn(3, 3), randn(1, 4, 2, 2)
    cond = np.array([True, False, False, True])
    seq, mu = randn(4, 3), randn(1, 1, 2, 2)
    qs, qz = np.array([0.02, 0.05, 0.1], np.float32), np.array([128, 0, 10], np.uint8)
    q = np.clip(np.round(x / qs) + qz, 0, 255).astype(np.uint8)
    dq = ((q.astype(np.float32) - qz.astype(np.float32)) * qs).astype(np.float32)
    lo, hi = min(0.0, x.min()), max(0.0, x.max())
    ys = np.float32((hi - lo) / 255)
    yz = np.uint8(np.clip(round(float(np.float32(0 - lo) / ys)), 0, 255))
    y = np.clip(np.round(x / ys) + yz, 0, 255).astype(np.uint8)
    hw = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(5) / 4)).astype(np.float32)
    sqs = np.zeros_like(img)
    for c in range(4):
        sqs[:, c] = (img[:, max(0, c - 1):c + 2] ** 2).sum(axis=1)
    lrn = img / (2.0 + 0.1 / 3 * sqs) ** 0.75
    rs = seq.copy()
    for bi, n in enumerate([4, 1, 2]):
        rs[:n, bi] = seq[:n, bi][::-1]
    up = np.zeros(16, np.float32)
    up[[0, 3, 9, 14]] = mu.reshape(-1)
    return m, [x, a, b, sq, img, cond, seq, mu], [
        q, dq, y, ys, yz, hw, np.einsum("bij,bkj->bik", a, b), np.diagonal(sq).copy(), lrn.astype(np.float32),
        x.reshape(-1)[[0, 3]], np.float32(np.linalg.det(sq.astype(np.float64))), rs, up.reshape(1, 1, 4, 4)]


@case
def issue47_batch3_ops():
    # BitShift, TopK (run-time K), ConvTranspose (strides, output_shape:
    # asymmetric pads), NonMaxSuppression (center boxes, defaults omitted).
    U16 = TensorProto.UINT16
    cw, cb = randn(2, 3, 3, 3), randn(3)
    nodes = [N("BitShift", ["bx", "bs"], ["bl"], direction="LEFT"), N("BitShift", ["bx", "bs"], ["br"], direction="RIGHT"),
             N("TopK", ["tx", "k"], ["tv", "ti"], axis=1, largest=0),
             N("ConvTranspose", ["cx", "cw", "cb"], ["cy"], strides=[2, 2], output_shape=[6, 5]),
             N("NonMaxSuppression", ["boxes", "scores", "maxper", "iou"], ["sel"], center_point_box=1)]
    m = model(nodes, [("bx", U16, [4]), ("bs", U16, [4]), ("tx", F, [2, 5]), ("k", I64, [1]), ("cx", F, [1, 2, 3, 2]),
                      ("boxes", F, [1, 4, 4]), ("scores", F, [1, 1, 4])],
              [("bl", U16, [4]), ("br", U16, [4]), ("tv", F, [2, None]), ("ti", I64, [2, None]), ("cy", F, [1, 3, 6, 5]),
               ("sel", I64, [None, 3])],
              inits=[("cw", cw), ("cb", cb), ("maxper", np.array([2], np.int64)),
                     ("iou", np.array([0.3], np.float32))], opset=13)
    bx, bs = np.array([1, 0x8001, 300, 7], np.uint16), np.array([3, 1, 16, 0], np.uint16)
    tx = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], np.float32)
    k = np.array([3], np.int64)
    cx = randn(1, 2, 3, 2)
    boxes = np.array([[[0.5, 0.5, 1, 1], [0.6, 0.5, 1, 1], [3, 3, 1, 1], [0.5, 0.5, 0.1, 0.1]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7, 0.95]]], np.float32)
    # ConvTranspose by the scatter form: natural 7x5 (pads from output_shape
    # [6, 5]: total 1 and 0, the odd unit at the end).
    full = np.zeros((1, 3, 7, 5))
    for c in range(2):
        for i in range(3):
            for j in range(2):
                full[0, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3] += cx[0, c, i, j] * cw[c]
    cy = (full[:, :, 0:6, 0:5] + cb.reshape(1, 3, 1, 1)).astype(np.float32)
    order = np.argsort(tx, axis=1, kind="stable")[:, :3]
    # Box 1 overlaps box 0 (IoU 0.82) and is suppressed; box 3 (inside box 0,
    # IoU 0.01) is kept first; max 2 per class.
    sel = np.array([[0, 0, 3], [0, 0, 0]], np.int64)
    return m, [bx, bs, tx, k, cx, boxes, scores], [
        (bx.astype(np.uint32) << bs.astype(np.uint32) & 0xFFFF).astype(np.uint16) * (bs < 16),
        (bx >> np.minimum(bs, 15)) * (bs < 16), np.take_along_axis(tx, order, 1), order.astype(np.int64), cy, sel]


@case
def issue47_sampling_ops():
    # Resize with constant scales (static dims), with sizes computed at run
    # time from Shape (dims ?), linear align_corners by sizes; GridSample
    # (opset 16's bilinear name) with an identity grid and border padding.
    nodes = [N("Resize", ["x", "", "sc"], ["r"], mode="nearest"),
             N("Shape", ["x"], ["shp"]), N("Mul", ["shp", "two"], ["sz"]),
             N("Resize", ["x", "", "", "sz"], ["d"], mode="nearest"),
             N("Resize", ["s", "", "", "lin"], ["l"], mode="linear", coordinate_transformation_mode="align_corners"),
             N("GridSample", ["s", "grid"], ["g"], mode="bilinear", padding_mode="border", align_corners=1)]
    grid = np.array([[[[-1, -1], [0, -1], [1, -1], [-5, 7]], [[-1, 1], [0, 1], [1, 1], [9, 9]]]], np.float32)
    m = model(nodes, [("x", F, [1, 2, "H", 3]), ("s", F, [1, 1, 2, 3])],
              [("r", F, [1, 2, "H2", 6]), ("d", F, ["A", "B", "C", "D"]), ("l", F, [1, 1, 3, 5]),
               ("g", F, [1, 1, 2, 4])],
              inits=[("sc", np.array([1, 1, 2, 2], np.float32)), ("two", np.array([1, 1, 2, 2], np.int64)),
                     ("lin", np.array([1, 1, 3, 5], np.int64)), ("grid", grid)], opset=16)
    x, s = randn(1, 2, 2, 3), randn(1, 1, 2, 3)
    up = np.repeat(np.repeat(x, 2, 2), 2, 3)
    rows = np.stack([s[0, 0, 0], (s[0, 0, 0] + s[0, 0, 1]) / 2, s[0, 0, 1]])
    cols = np.arange(5) / 2
    lin = np.stack([np.interp(cols, np.arange(3), r) for r in rows])[None, None].astype(np.float32)
    g = np.array([[[[s[0, 0, 0, 0], s[0, 0, 0, 1], s[0, 0, 0, 2], s[0, 0, 1, 0]],
                    [s[0, 0, 1, 0], s[0, 0, 1, 1], s[0, 0, 1, 2], s[0, 0, 1, 2]]]]], np.float32)
    return m, [x, s], [up, up, lin, g]


@case
def upsample_opset9():
    # Upsample (opset 9: scales an input): nearest floors, linear is asymmetric.
    nodes = [N("Upsample", ["x", "sc"], ["n"], mode="nearest"), N("Upsample", ["x", "sc"], ["l"], mode="linear")]
    m = model(nodes, [("x", F, [1, 1, 2, 2])], [("n", F, [1, 1, 4, 6]), ("l", F, [1, 1, 4, 6])],
              inits=[("sc", np.array([1, 1, 2, 3], np.float32))], opset=9)
    x = randn(1, 1, 2, 2)
    n = np.repeat(np.repeat(x, 2, 2), 3, 3)
    # Asymmetric linear: source j / scale, clamped at the last entry.
    def lin1(v, k, out):
        src = np.minimum(np.arange(out) / k, len(v) - 1)
        return np.interp(src, np.arange(len(v)), v)
    rows = np.stack([lin1(r, 3, 6) for r in x[0, 0]])
    l = np.stack([lin1(c, 2, 4) for c in rows.T]).T
    return m, [x], [n, l[None, None].astype(np.float32)]


@case
def gelu_erf():
    # The exact GELU as exporters write it below opset 20 (Idioms.cpp): torch's
    # x * (1 + erf(x / sqrt 2)) * 0.5 with Constant nodes -> gelu; (x * 0.5) *
    # (1 + erf(x * (1/sqrt 2))) with initializers -> gelu; kept as arithmetic
    # when the erf has another use, and when the divisor is not sqrt 2.
    from onnx import helper
    import math

    def const(name, v):
        return helper.make_node("Constant", [], [name], name=name + "_c",
                                value=helper.make_tensor(name, F, [], [v]))

    nodes = [const("sqrt2", 1.4142135), const("one", 1.0), const("half", 0.5), const("c15", 1.5),
             N("Div", ["x", "sqrt2"], ["d1"], "d1"), N("Erf", ["d1"], ["e1"], "e1"), N("Add", ["e1", "one"], ["p1"], "p1"),
             N("Mul", ["x", "p1"], ["m1"], "m1"), N("Mul", ["m1", "half"], ["y1"], "y1"),
             N("Mul", ["x", "h_init"], ["h2"], "h2"), N("Mul", ["x", "rs_init"], ["d2"], "d2"),
             N("Erf", ["d2"], ["e2"], "e2"), N("Add", ["one_init", "e2"], ["p2"], "p2"), N("Mul", ["h2", "p2"], ["y2"], "y2"),
             N("Div", ["x", "sqrt2"], ["d3"], "d3"), N("Erf", ["d3"], ["e3"], "e3"), N("Add", ["e3", "one"], ["p3"], "p3"),
             N("Mul", ["x", "p3"], ["m3"], "m3"), N("Mul", ["m3", "half"], ["y3"], "y3"),
             N("Div", ["x", "c15"], ["d4"], "d4"), N("Erf", ["d4"], ["e4"], "e4"), N("Add", ["e4", "one"], ["p4"], "p4"),
             N("Mul", ["x", "p4"], ["m4"], "m4"), N("Mul", ["m4", "half"], ["y4"], "y4")]
    m = model(nodes, [("x", F, ["N", 4])],
              [("y1", F, ["N", 4]), ("y2", F, ["N", 4]), ("y3", F, ["N", 4]), ("e3", F, ["N", 4]), ("y4", F, ["N", 4])],
              inits=[("h_init", np.array(0.5, np.float32)), ("rs_init", np.array(0.70710677, np.float32)),
                     ("one_init", np.array(1.0, np.float32))])
    x = np.concatenate([randn(2, 4), np.array([[-6.0, -3.0, 0.0, 4.0]], np.float32)])
    erf = np.vectorize(math.erf)
    g = (0.5 * x * (1 + erf(x / math.sqrt(2)))).astype(np.float32)
    e3 = erf(x / math.sqrt(2)).astype(np.float32)
    y4 = (0.5 * x * (1 + erf(x / 1.5))).astype(np.float32)
    return m, [x], [g, g, g, e3, y4]


@case
def layernorm_decomposed():
    # LayerNormalization as torch exports it below opset 17 (Idioms.cpp):
    # ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul, Add ->
    # layer_norm; the square as Mul(d, d) too. Kept when d has another use
    # (an output).
    from onnx import helper

    def const(name, v):
        return helper.make_node("Constant", [], [name], name=name + "_c",
                                value=helper.make_tensor(name, F, [], [v]))

    def ln(p, sq):
        return [N("ReduceMean", ["x"], [p + "m"], p + "m", axes=[-1]), N("Sub", ["x", p + "m"], [p + "d"], p + "d"),
                sq, N("ReduceMean", [p + "q"], [p + "v"], p + "v", axes=[-1]),
                N("Add", [p + "v", "eps"], [p + "ve"], p + "ve"), N("Sqrt", [p + "ve"], [p + "s"], p + "s"),
                N("Div", [p + "d", p + "s"], [p + "n"], p + "n"), N("Mul", [p + "n", "g"], [p + "y0"], p + "y0"),
                N("Add", [p + "y0", "b"], [p + "y"], p + "y")]

    nodes = [const("two", 2.0), const("eps", 1e-5)]
    nodes += ln("a", N("Pow", ["ad", "two"], ["aq"], "aq"))
    nodes += ln("c", N("Mul", ["cd", "cd"], ["cq"], "cq"))
    nodes += ln("e", N("Pow", ["ed", "two"], ["eq"], "eq"))
    m = model(nodes, [("x", F, ["N", 6])],
              [("ay", F, ["N", 6]), ("cy", F, ["N", 6]), ("ey", F, ["N", 6]), ("ed", F, ["N", 6])],
              inits=[("g", randn(6)), ("b", randn(6))], opset=13)
    x = randn(3, 6) * 4 + 1
    g, b = [np.array(t.float_data if t.float_data else np.frombuffer(t.raw_data, np.float32), np.float32)
            for t in m.graph.initializer]
    mu = x.mean(-1, keepdims=True)
    y = ((x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b).astype(np.float32)
    return m, [x], [y, y, y, (x - mu).astype(np.float32)]
