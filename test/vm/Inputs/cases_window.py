"""Cases for conv, conv_transpose, max_pool and avg_pool (the "window" group).

The expected values come from a numpy formulation independent of the
kernels' loops: the input is padded explicitly (zeros for conv and sums,
-inf for max, an indicator array for avg_pool's divisor), and each tap of the
window is one strided slice of the padded input, so an output is a sum (or a
max) of whole slices.
"""

import numpy as np

from oplib import FLOATS, NUMERIC, Case, cast_to, wide


def _geometry(shape, kernel, strides, pads, dil, ceil=False):
    """Per spatial axis: the output size and the extra end padding that a
    ceil_mode window past the padded input needs (those positions are not
    padding: they hold nothing and are never counted)."""
    k = len(kernel)
    strides = strides or [1] * k
    dil = dil or [1] * k
    pads = pads or [0] * (2 * k)
    outs, extra = [], []
    for i in range(k):
        d = shape[2 + i]
        span = dil[i] * (kernel[i] - 1) + 1
        room = d + pads[i] + pads[i + k] - span
        assert room >= 0
        o = (-(-room // strides[i]) if ceil else room // strides[i]) + 1
        if ceil and (o - 1) * strides[i] >= d + pads[i]:
            o -= 1
        outs.append(o)
        extra.append(max(0, (o - 1) * strides[i] + span - (d + pads[i] + pads[i + k])))
    return outs, extra, strides, pads, dil


def _padded(x, pads, extra, value):
    k = x.ndim - 2
    width = [(0, 0), (0, 0)] + [(pads[i], pads[i + k] + extra[i]) for i in range(k)]
    return np.pad(x, width, constant_values=value)


def _tap_slices(kernel, outs, strides, dil):
    """(tap index, slices of the padded input) for every tap."""
    for t in np.ndindex(*kernel):
        yield t, tuple(slice(t[i] * dil[i], t[i] * dil[i] + strides[i] * (outs[i] - 1) + 1, strides[i])
                       for i in range(len(kernel)))


def conv_ref(x, w, b, strides=(), pads=(), dil=(), groups=1):
    x, w = wide(x), wide(w)
    kernel = list(w.shape[2:])
    outs, extra, st, pd, dl = _geometry(x.shape, kernel, list(strides), list(pads), list(dil))
    xp = _padded(x, pd, extra, 0.0)
    n, c, m = x.shape[0], x.shape[1], w.shape[0]
    cg, mg = c // groups, m // groups
    y = np.zeros([n, m] + outs)
    for t, sl in _tap_slices(kernel, outs, st, dl):
        win = xp[(slice(None), slice(None)) + sl]  # n, c, outs...
        for g in range(groups):
            xs = win[:, g * cg:(g + 1) * cg]
            ws = w[(slice(g * mg, (g + 1) * mg), slice(None)) + t]  # mg, cg
            y[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", xs, ws)
    if b is not None:
        y += wide(b).reshape([1, m] + [1] * len(kernel))
    return y


def pool_ref(x, kind, kernel, strides=(), pads=(), dil=(), ceil=False, include_pad=False):
    outs, extra, st, pd, dl = _geometry(x.shape, kernel, list(strides), list(pads), list(dil), ceil)
    if kind == "max":
        lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        xp = _padded(wide(x), pd, extra, lowest)
        y = None
        for _, sl in _tap_slices(kernel, outs, st, dl):
            s = xp[(slice(None), slice(None)) + sl]
            y = s if y is None else np.maximum(y, s)  # np.maximum propagates NaN
        return y
    xp = _padded(wide(x), pd, extra, 0.0)
    # The divisor's indicator: input positions, or the padded input's.
    ones = np.ones((1, 1) + x.shape[2:])
    k = len(kernel)
    if include_pad:
        ind = _padded(np.ones((1, 1) + tuple(x.shape[2 + i] + pd[i] + pd[i + k] for i in range(k))),
                      [0] * (2 * k), extra, 0.0)
    else:
        ind = _padded(ones, pd, extra, 0.0)
    total, count = 0.0, 0.0
    for _, sl in _tap_slices(kernel, outs, st, dl):
        total = total + xp[(slice(None), slice(None)) + sl]
        count = count + ind[(slice(None), slice(None)) + sl]
    with np.errstate(all="ignore"):
        return total / count


CONV = [
    # x shape, w shape, strides, pads, dilations, groups, bias
    ((1, 1, 5), (1, 1, 3), [], [], [], 1, False),
    ((2, 3, 7), (4, 3, 3), [2], [1, 0], [], 1, True),
    ((2, 3, 9), (3, 1, 2), [], [2, 1], [3], 3, True),
    ((1, 2, 5, 6), (3, 2, 3, 3), [], [1, 1, 1, 1], [], 1, True),
    ((2, 3, 8, 7), (4, 3, 3, 2), [2, 1], [0, 1, 2, 0], [1, 2], 1, False),
    ((1, 4, 6, 6), (4, 1, 3, 3), [1, 1], [1, 1, 1, 1], [], 4, True),  # depthwise
    ((1, 6, 5, 5), (4, 3, 1, 1), [], [], [], 2, True),  # two groups, 1x1
    ((1, 2, 7, 7), (2, 2, 7, 7), [], [], [], 1, True),  # one output position
    ((1, 2, 3, 4, 5), (2, 2, 2, 2, 3), [1, 2, 1], [1, 0, 0, 0, 1, 1], [], 1, True),  # 3-D
    ((0, 3, 5, 5), (2, 3, 3, 3), [], [], [], 1, True),  # empty batch
    ((2, 0, 4, 4), (3, 0, 3, 3), [], [], [], 1, True),  # no input channels: the bias
    ((1, 1, 2, 2), (1, 1, 3, 3), [], [1, 1, 1, 1], [], 1, False),  # window wider than the input
]

def conv_transpose_ref(x, w, b, strides=(), pads=(), dil=(), out_pad=(), groups=1):
    """The scatter form, one tap at a time: the whole input times w[c, m, t]
    lands on the strided slice that starts at t * dilation of the unpadded
    output; the pads are cut off at the end."""
    x, w = wide(x), wide(w)
    k = x.ndim - 2
    kernel = list(w.shape[2:])
    st, dl = list(strides) or [1] * k, list(dil) or [1] * k
    pd, op = list(pads) or [0] * (2 * k), list(out_pad) or [0] * k
    full = [st[i] * (x.shape[2 + i] - 1) + dl[i] * (kernel[i] - 1) + 1 + op[i] for i in range(k)]
    n, c, mg = x.shape[0], x.shape[1], w.shape[1]
    cg = c // groups
    y = np.zeros([n, mg * groups] + full)
    for t in np.ndindex(*kernel):
        sl = tuple(slice(t[i] * dl[i], t[i] * dl[i] + st[i] * (x.shape[2 + i] - 1) + 1, st[i]) for i in range(k))
        for g in range(groups):
            xs = x[:, g * cg:(g + 1) * cg]
            ws = w[(slice(g * cg, (g + 1) * cg), slice(None)) + t]  # cg, mg
            y[(slice(None), slice(g * mg, (g + 1) * mg)) + sl] += np.einsum("nc...,cm->nm...", xs, ws)
    if b is not None:
        y += wide(b).reshape([1, mg * groups] + [1] * k)
    return y[(slice(None), slice(None)) + tuple(slice(pd[i], full[i] - pd[i + k]) for i in range(k))]


CONV_TRANSPOSE = [
    # x shape, w shape, strides, pads, dilations, output_padding, groups, bias
    ((1, 1, 3), (1, 2, 3), [], [], [], [], 1, False),
    ((2, 3, 4), (3, 2, 3), [2], [1, 0], [], [1], 1, True),
    ((1, 1, 3, 3), (1, 2, 3, 3), [3, 2], [], [], [1, 1], 1, True),
    ((1, 2, 4, 3), (2, 3, 2, 3), [2, 1], [1, 0, 0, 1], [1, 2], [], 1, False),
    ((1, 4, 3, 3), (4, 1, 3, 3), [2, 2], [1, 1, 1, 1], [], [1, 1], 2, True),
    ((1, 1, 2, 3, 2), (1, 2, 2, 2, 2), [1, 2, 1], [], [], [], 1, True),  # 3-D
    ((0, 2, 3, 3), (2, 2, 2, 2), [], [], [], [], 1, True),  # empty batch
]

POOL = [
    # x shape, kernel, strides, pads, dilations, ceil
    ((1, 1, 6), [2], [2], [], [], False),
    ((2, 3, 7), [3], [2], [1, 1], [], True),
    ((1, 2, 5, 5), [2, 2], [], [], [], False),
    ((1, 2, 6, 7), [3, 3], [2, 2], [1, 1, 1, 1], [], False),
    ((2, 1, 7, 7), [3, 3], [2, 2], [1, 1, 1, 1], [], True),
    ((1, 1, 4, 4), [3, 3], [2, 2], [], [], True),
    ((1, 2, 8, 6), [2, 3], [1, 2], [1, 0, 0, 2], [2, 1], False),
    ((1, 1, 3, 4, 5), [2, 2, 2], [2, 2, 2], [], [], True),
    ((0, 2, 4, 4), [2, 2], [], [], [], False),
    ((1, 1, 2, 2), [2, 2], [], [2, 2, 0, 0], [], False),  # windows wholly in the padding
]


def cases(rng):
    out = []
    for dt in FLOATS:
        for xs, ws, st, pd, dl, g, bias in CONV:
            x, w = rng.array(xs, dt, -1, 1), rng.array(ws, dt, -1, 1)
            b = rng.array((ws[0],), dt, -1, 1) if bias else None
            attrs = {"strides": st, "pads": pd, "dilations": dl, "groups": g}
            ins = [x, w] + ([b] if bias else [])
            out.append(Case("conv", dt, ins, [cast_to(conv_ref(x, w, b, st, pd, dl, g), dt)], attrs=attrs))
        for xs, ws, st, pd, dl, opd, g, bias in CONV_TRANSPOSE:
            x, w = rng.array(xs, dt, -1, 1), rng.array(ws, dt, -1, 1)
            b = rng.array((ws[1] * g,), dt, -1, 1) if bias else None
            attrs = {"strides": st, "pads": pd, "dilations": dl, "output_padding": opd, "groups": g}
            want = cast_to(conv_transpose_ref(x, w, b, st, pd, dl, opd, g), dt)
            out.append(Case("conv_transpose", dt, [x, w] + ([b] if bias else []), [want], attrs=attrs))
        for xs, k, st, pd, dl, ceil in POOL:
            for include in (False, True):
                x = rng.array(xs, dt)
                attrs = {"kernel": k, "strides": st, "pads": pd, "dilations": dl, "ceil_mode": ceil,
                         "count_include_pad": include}
                out.append(Case("avg_pool", dt, [x], [cast_to(pool_ref(x, "avg", k, st, pd, dl, ceil, include), dt)],
                                attrs=attrs))
    for dt in NUMERIC:
        for xs, k, st, pd, dl, ceil in POOL:
            x = rng.small_ints(xs, dt, -50, 50) if dt == "i8" else rng.array(xs, dt, -100, 100)
            attrs = {"kernel": k, "strides": st, "pads": pd, "dilations": dl, "ceil_mode": ceil}
            out.append(Case("max_pool", dt, [x], [cast_to(pool_ref(x, "max", k, st, pd, dl, ceil), dt)],
                            attrs=attrs))
    # NaN propagates through max_pool.
    x = np.array([[[1.0, np.nan, 3.0, 2.0]]], dtype=np.float32)
    out.append(Case("max_pool", "f32", [x], [np.array([[[np.nan, np.nan, 3.0]]], dtype=np.float32)],
                    attrs={"kernel": [2]}))
    # Larger, on the thread pool (ResNet's stem shapes, reduced).
    x, w, b = rng.array((2, 3, 20, 20), "f32", -1, 1), rng.array((8, 3, 7, 7), "f32", -1, 1), rng.array((8,), "f32")
    out.append(Case("conv", "f32", [x, w, b], [cast_to(conv_ref(x, w, b, [2, 2], [3, 3, 3, 3]), "f32")],
                    attrs={"strides": [2, 2], "pads": [3, 3, 3, 3]}, threads=2))
    x = rng.array((2, 8, 16, 16), "f32")
    out.append(Case("max_pool", "f32", [x], [cast_to(pool_ref(x, "max", [3, 3], [2, 2], [1, 1, 1, 1]), "f32")],
                    attrs={"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, threads=2))
    # Errors the shape function words (the kernel-runner applies it first).
    x, w = rng.array((1, 4, 5, 5), "f32"), rng.array((2, 3, 3, 3), "f32")
    out.append(Case("conv", "f32", [x, w], error="the input channels and weights dim 1 times groups must be equal"))
    out.append(Case("max_pool", "f32", [rng.array((1, 1, 2, 2), "f32")], attrs={"kernel": [3, 3]},
                    error="is larger than the padded input"))
    out.append(Case("conv_transpose", "f32", [rng.array((1, 3, 2, 2), "f32"), rng.array((2, 1, 3, 3), "f32")],
                    error="the input channels and weights dim 0 must be equal"))
    out.append(Case("conv_transpose", "f32", [rng.array((1, 1, 2, 2), "f32"), rng.array((1, 1, 1, 1), "f32")],
                    attrs={"pads": [1, 1, 1, 1]}, error="the pads exceed it"))
    return out


def max_pool_bits(x, kernel, strides=(), pads=(), dil=(), ceil=False):
    """max_pool over NCHW f32 to the bit, as the kernels define it: the taps
    in row-major order, `v > best ? v : best` from -inf (so of -0 and +0 the
    first one stays) and the quiet NaN wherever a tap is NaN."""
    outs, extra, st, pd, dl = _geometry(x.shape, kernel, list(strides), list(pads), list(dil), ceil)
    xp = _padded(x, pd, extra, -np.inf)
    y = np.full(list(x.shape[:2]) + outs, -np.inf, dtype=np.float32)
    nan = np.zeros(y.shape, dtype=bool)
    for _, sl in _tap_slices(kernel, outs, st, dl):
        s = xp[(slice(None), slice(None)) + sl]
        nan |= np.isnan(s)
        y = np.where(s > y, s, y)
    y[nan] = np.float32(np.nan)
    return y


def _to_last(a):
    return np.ascontiguousarray(np.moveaxis(a, 1, -1))


# Channels-last max_pool geometries: (N, C, spatial.., kernel, strides, pads,
# dilations, ceil_mode). Channel counts cover the vectorized path's blocks
# (AVX-512: 64 and 16 with a masked tail; AVX2: 32 and 8 with a scalar tail).
POOL_LAST = [
    ((1, 64, 12, 12), [3, 3], [2, 2], [1, 1, 1, 1], [], False),  # ResNet's stem pool
    ((2, 65, 9, 7), [3, 3], [2, 2], [1, 1, 1, 1], [], False),
    ((1, 100, 8, 8), [2, 2], [2, 2], [], [], False),
    ((1, 17, 7, 9), [3, 3], [1, 1], [1, 1, 1, 1], [], False),
    ((1, 31, 9, 9), [3, 2], [2, 1], [0, 1, 2, 0], [2, 3], False),
    ((1, 130, 7, 7), [3, 3], [2, 2], [1, 1, 1, 1], [], True),
    ((1, 8, 5, 5), [2, 2], [1, 1], [0, 0, 0, 0], [], False),
    ((1, 3, 4, 4), [2, 2], [2, 2], [2, 2, 2, 2], [], False),  # windows wholly in the padding: -inf
    ((1, 1, 6, 6), [7, 7], [1, 1], [3, 3, 3, 3], [], False),
    ((1, 16, 1, 1), [1, 1], [], [], [], False),
    ((2, 24, 11), [3], [2], [1, 1], [], False),  # 1-D
    ((1, 72, 10), [4], [3], [0, 2], [2], True),
    ((0, 64, 6, 6), [3, 3], [2, 2], [1, 1, 1, 1], [], False),  # empty batch
]


def _special(rng, shape):
    """f32 values with many ties, both zeros, both infinities and NaNs of
    other bit patterns than the quiet NaN (negative, with a payload, a
    signalling one): the output's NaN is still the quiet NaN."""
    choice = np.array([-2.0, -1.0, -0.0, 0.0, 1.0, 2.0, -np.inf, np.inf], dtype=np.float32)
    x = np.array(choice[rng.g.integers(0, len(choice), size=shape)], dtype=np.float32)
    bits = x.reshape(-1).view(np.uint32)
    n = bits.size
    for k, pattern in enumerate([0x7FC00000, 0xFFC00000, 0x7FC12345, 0x7F800001]):
        if n > 8 * (k + 1):
            bits[(k * 7919 + 13) % n] = pattern
    return x


def pool_last_cases(rng):
    """max_pool over channels-last f32, compared bit for bit (the "pool-last"
    group: kernels-pool-last.test runs it with every NIMBLE_KERNEL_ISA)."""
    out = []
    for shape, k, st, pd, dl, ceil in POOL_LAST:
        attrs = {"kernel": k, "strides": st, "pads": pd, "dilations": dl, "ceil_mode": ceil, "channels_last": True}
        for kind in ("random", "special"):
            x = np.asarray(rng.array(shape, "f32"), dtype=np.float32) if kind == "random" else _special(rng, shape)
            want = _to_last(max_pool_bits(x, k, st, pd, dl, ceil))
            out.append(Case("max_pool", "f32", [_to_last(x)], [want], attrs=attrs, exact=True))
    # Larger, on the thread pool: ResNet-18's pool at a quarter of its size.
    x = _special(rng, (2, 64, 28, 28))
    x[0, :, 3:9, 5:11] = np.asarray(rng.array((64, 6, 6), "f32"), dtype=np.float32)
    attrs = {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "channels_last": True}
    out.append(Case("max_pool", "f32", [_to_last(x)], [_to_last(max_pool_bits(x, [3, 3], [2, 2], [1, 1, 1, 1]))],
                    attrs=attrs, threads=2, exact=True))
    return out
