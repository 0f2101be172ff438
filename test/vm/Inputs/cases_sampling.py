"""Cases for resize and grid_sample (the "sampling" group).

The expected values come from a port of ONNX's reference implementations
(onnx/backend/test/case/node/resize.py of ONNX 1.12, extended as
onnx/reference/ops/op_resize.py later was: antialias, half_pixel_symmetric,
keep_aspect_ratio_policy, axes; op_grid_sample.py for grid_sample), written
element by element in the reference's own way (the n nearest indices of an
edge-padded row, the recursion over axes), not as the kernels' tap tables.
pytorch_half_pixel with a single output is the spec's 0, not the 1.12
reference's -0.5.
"""

import itertools
import math

import numpy as np

from oplib import FLOATS, INTS, NUMERIC, Case, cast_to, wide


# ---- resize ------------------------------------------------------------------

def _cubic(a, x):
    x = abs(x)
    if x <= 1:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    if x < 2:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return 0.0


def _coeffs(mode, ratio, scale, a, antialias, nearest_mode):
    if mode == "nearest":
        if ratio == 1:
            return np.array([0.0, 1.0])
        up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
              "floor": False, "ceil": True}[nearest_mode]
        return np.array([0.0, 1.0]) if up else np.array([1.0, 0.0])
    s = min(scale, 1.0) if antialias else 1.0
    if mode == "linear":
        if not antialias:
            return np.array([1 - ratio, ratio])
        start = int(np.floor(-1 / s) + 1)
        c = np.clip(1 - np.abs((np.arange(start, 2 - start) - ratio) * s), 0, 1)
        return c / c.sum()
    if not antialias:
        return np.array([_cubic(a, ratio + 1), _cubic(a, ratio), _cubic(a, 1 - ratio), _cubic(a, 2 - ratio)])
    start = int(np.floor(-2 / s) + 1)
    c = np.array([_cubic(a, s * (i - ratio)) for i in range(start, 2 - start)])
    return c / c.sum()


def _neighbors(x, n, data):
    """The reference's get_neighbor: n nearest entries of the edge-padded row."""
    pad = int(np.ceil(n / 2))
    padded = np.pad(np.asarray(data, dtype=np.float64), pad, mode="edge")
    xp = x + pad
    idx = sorted(sorted(range(len(padded)), key=lambda i: (abs(xp - i), i))[:n])
    return np.array(idx) - pad, padded[idx]


def _resize_1d(data, scale, out_n, j, kw, roi):
    n = len(data)
    out_w = scale * n
    ctm = kw["ctm"]
    x = float(j)
    if ctm == "align_corners":
        xo = 0.0 if out_w == 1 else x * (n - 1) / (out_w - 1)
    elif ctm == "asymmetric":
        xo = x / scale
    elif ctm == "tf_crop_and_resize":
        xo = (roi[1] - roi[0]) * (n - 1) / 2 if out_w == 1 else x * (roi[1] - roi[0]) * (n - 1) / (out_w - 1)
        xo += roi[0] * (n - 1)
        if xo < 0 or xo > n - 1:
            return kw["extrapolation_value"]
    elif ctm == "pytorch_half_pixel":
        xo = (x + 0.5) / scale - 0.5 if out_n > 1 else 0.0
    elif ctm == "half_pixel_symmetric":
        xo = n / 2 * (1 - out_n / out_w) + (x + 0.5) / scale - 0.5
    elif ctm == "tf_half_pixel_for_nn":
        xo = (x + 0.5) / scale
    else:
        xo = (x + 0.5) / scale - 0.5
    ratio = 1.0 if float(xo).is_integer() else xo - math.floor(xo)
    c = _coeffs(kw["mode"], ratio, scale, kw["a"], kw["antialias"], kw["nearest_mode"])
    idx, pts = _neighbors(xo, len(c), data)
    if kw["exclude_outside"] and kw["mode"] != "nearest":
        c = np.where((idx < 0) | (idx >= n), 0.0, c)
        c = c / c.sum()
    return float(np.dot(c, pts))


def _resize_nd(data, scales, outs, x, kw, rois):
    if data.ndim == 1:
        return _resize_1d(data, scales[0], outs[0], x[0], kw, rois[0])
    rows = [_resize_nd(data[i], scales[1:], outs[1:], x[1:], kw, rois[1:]) for i in range(data.shape[0])]
    return _resize_1d(np.array(rows), scales[0], outs[0], x[0], kw, rois[0])


def resize_ref(x, scales=None, sizes=None, roi=None, axes=None, mode="nearest", ctm="half_pixel",
               nearest_mode="round_prefer_floor", a=-0.75, exclude_outside=False, extrapolation_value=0.0,
               antialias=False, policy="stretch"):
    """(output, attrs) of resize; `scales` / `sizes` per resized axis."""
    r = x.ndim
    ax = list(range(r)) if not axes else [k % r for k in axes]
    full_scale, outs, rois = [1.0] * r, list(x.shape), [[0.0, 1.0] for _ in range(r)]
    if sizes is not None:
        if policy == "stretch":
            for i, k in enumerate(ax):
                full_scale[k] = sizes[i] / x.shape[k]
                outs[k] = sizes[i]
        else:
            pick = min if policy == "not_larger" else max
            s = pick(sizes[i] / x.shape[k] for i, k in enumerate(ax))
            for k in ax:
                full_scale[k] = s
                outs[k] = int(math.floor(s * x.shape[k] + 0.5))
    else:
        for i, k in enumerate(ax):
            full_scale[k] = float(np.float32(scales[i]))
            outs[k] = int(math.floor(x.shape[k] * full_scale[k]))
    if roi is not None:
        for i, k in enumerate(ax):
            rois[k] = [float(np.float32(roi[i])), float(np.float32(roi[i + len(ax)]))]  # as the kernel reads them
    kw = dict(mode=mode, ctm=ctm, nearest_mode=nearest_mode, a=a, exclude_outside=exclude_outside,
              extrapolation_value=extrapolation_value, antialias=antialias)
    y = np.zeros(outs)
    for idx in itertools.product(*[range(o) for o in outs]):
        y[idx] = _resize_nd(wide(x).astype(np.float64), full_scale, outs, idx, kw, rois)
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
    if nearest_mode != "round_prefer_floor":
        attrs["nearest_mode"] = nearest_mode
    if a != -0.75:
        attrs["cubic_coeff_a"] = a
    if exclude_outside:
        attrs["exclude_outside"] = True
    if extrapolation_value != 0.0:
        attrs["extrapolation_value"] = extrapolation_value
    if antialias:
        attrs["antialias"] = True
    if policy != "stretch":
        attrs["keep_aspect_ratio_policy"] = policy
    if axes:
        attrs["axes"] = list(axes)
    return y, attrs


def _to(y, dt):
    """The kernel's conversion: floats rounded once; integers truncated
    toward zero and saturated."""
    if dt in INTS:
        info = np.iinfo(cast_to(np.zeros(1), dt).dtype)
        return np.clip(np.trunc(y), info.min, info.max).astype(cast_to(np.zeros(1), dt).dtype)
    return cast_to(y, dt)


def _resize_case(x, dt, scales=None, sizes=None, roi=None, sizes_dt=np.int64, **kw):
    y, attrs = resize_ref(x, scales=scales, sizes=sizes, roi=roi, **kw)
    sc = np.array(scales if scales is not None else [], np.float32)
    sz = np.array(sizes if sizes is not None else [], sizes_dt)
    ins = [x, sc, sz] + ([np.array(roi, np.float32)] if roi is not None else [])
    return Case("resize", dt, ins, [_to(y, dt)], attrs=attrs)


def resize_cases(rng):
    cases = []
    x4 = np.arange(1, 17, dtype=np.float64).reshape(1, 1, 4, 4)
    ctms = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
            "tf_half_pixel_for_nn"]
    # Every mode and coordinate map, up and down, by scales and by sizes.
    for mode in ["nearest", "linear", "cubic"]:
        for ctm in ctms:
            if ctm == "tf_half_pixel_for_nn" and mode != "nearest":
                continue
            x = cast_to(x4, "f32")
            cases.append(_resize_case(x, "f32", scales=[1.0, 1.0, 0.6, 0.8], mode=mode, ctm=ctm))
            cases.append(_resize_case(x, "f32", scales=[1.0, 1.0, 1.5, 2.0], mode=mode, ctm=ctm))
            cases.append(_resize_case(x, "f32", sizes=[1, 1, 7, 3], mode=mode, ctm=ctm))
            cases.append(_resize_case(x, "f32", sizes=[1, 1, 1, 5], mode=mode, ctm=ctm))
    for nm in ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]:
        for ctm in ["half_pixel", "asymmetric", "align_corners"]:
            cases.append(_resize_case(cast_to(x4, "f32"), "f32", sizes=[1, 1, 8, 6], mode="nearest", ctm=ctm,
                                      nearest_mode=nm))
            cases.append(_resize_case(cast_to(x4, "f32"), "f32", sizes=[1, 1, 3, 2], mode="nearest", ctm=ctm,
                                      nearest_mode=nm))
    # Cubic's a and exclude_outside; antialias when downsampling (and up: no effect).
    xr = rng.array((2, 3, 5, 6), "f32")
    for kw in [dict(a=-0.5, exclude_outside=True), dict(a=-0.5), dict(exclude_outside=True)]:
        cases.append(_resize_case(xr, "f32", scales=[1.0, 1.0, 0.8, 1.7], mode="cubic", **kw))
    for mode in ["linear", "cubic"]:
        cases.append(_resize_case(xr, "f32", sizes=[2, 3, 2, 3], mode=mode, antialias=True))
        cases.append(_resize_case(xr, "f32", scales=[1.0, 1.0, 0.35, 1.5], mode=mode, antialias=True))
        cases.append(_resize_case(xr, "f32", sizes=[2, 3, 3, 4], mode=mode, antialias=True, exclude_outside=True))
    # tf_crop_and_resize: roi, extrapolation, a single output.
    for mode in ["nearest", "linear", "cubic"]:
        cases.append(_resize_case(cast_to(x4, "f32"), "f32", sizes=[1, 1, 3, 3],
                                  roi=[0, 0, 0.4, 0.6, 1, 1, 0.6, 0.8], mode=mode, ctm="tf_crop_and_resize"))
        cases.append(_resize_case(cast_to(x4, "f32"), "f32", sizes=[1, 1, 3, 3],
                                  roi=[0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7], mode=mode, ctm="tf_crop_and_resize",
                                  extrapolation_value=10.0))
        cases.append(_resize_case(cast_to(x4, "f32"), "f32", sizes=[1, 1, 1, 2],
                                  roi=[0, 0, 0.25, -0.5, 1, 1, 0.75, 0.5], mode=mode, ctm="tf_crop_and_resize"))
    # axes and keep_aspect_ratio_policy.
    cases.append(_resize_case(xr, "f32", sizes=[4, 9], axes=[2, -1], mode="linear"))
    cases.append(_resize_case(xr, "f32", scales=[2.0, 0.5], axes=[-1, 1], mode="nearest"))
    for policy in ["not_larger", "not_smaller"]:
        cases.append(_resize_case(xr, "f32", sizes=[7, 7], axes=[2, 3], policy=policy, mode="linear"))
        cases.append(_resize_case(xr, "f32", sizes=[2, 3, 7, 8], policy=policy, mode="nearest"))
    # Every numeric dtype; i32 sizes; rank 1 and 3; threads.
    for dt in NUMERIC:
        x = rng.small_ints((2, 3, 4), dt, 0, 9) if dt in INTS else rng.array((2, 3, 4), dt)
        cases.append(_resize_case(x, dt, sizes=[2, 5, 3], mode="nearest", sizes_dt=np.int32))
        if dt in FLOATS:
            cases.append(_resize_case(x, dt, scales=[1.0, 1.5, 0.75], mode="linear"))
    xi = np.array([0, 100, 0, 100], np.uint8)
    cases.append(_resize_case(xi, "u8", sizes=[9], mode="cubic"))  # overshoots saturate
    cases.append(_resize_case(np.array([-7, 9], np.int8), "i8", sizes=[5], mode="linear", ctm="align_corners"))
    big = rng.array((2, 30, 40), "f32")
    c = _resize_case(big, "f32", sizes=[2, 45, 25], mode="linear")
    c.threads = 4
    cases.append(c)
    # Empty tensors: an empty axis resized to 0, an empty output.
    cases.append(Case("resize", "f32", [np.zeros((0, 3), np.float32), np.array([1.0, 2.0], np.float32),
                                        np.array([], np.int64)], [np.zeros((0, 6), np.float32)]))
    cases.append(Case("resize", "f32", [rng.array((2, 3), "f32"), np.array([], np.float32),
                                        np.array([0, 3], np.int64)], [np.zeros((0, 3), np.float32)]))
    # Errors (the shape function's, at run time).
    e = [rng.array((2, 3), "f32")]
    cases.append(Case("resize", "f32", e + [np.array([], np.float32), np.array([], np.int64)],
                      error="one of scales"))
    cases.append(Case("resize", "f32", e + [np.array([], np.float32), np.array([2, -1], np.int64)],
                      error="is negative"))
    cases.append(Case("resize", "f32", e + [np.array([1.0, 0.0], np.float32), np.array([], np.int64)],
                      error="positive finite"))
    cases.append(Case("resize", "f32", e + [np.array([1.0], np.float32), np.array([], np.int64)],
                      error="must have 0 or 2 entries"))
    cases.append(Case("resize", "f32", e + [np.array([1.0, 0.0], np.float32), np.array([2, 2], np.int64)],
                      error="positive finite"))
    cases.append(Case("resize", "f32", e + [np.array([1.0, 1e-7], np.float32), np.array([2, 2], np.int64)],
                      attrs={"mode": "linear", "antialias": True}, error="taps per output"))
    cases.append(Case("resize", "f32", [np.zeros((0, 3), np.float32), np.array([], np.float32),
                                        np.array([2, 3], np.int64)], error="empty dimension"))
    cases.append(Case("resize", "f32", e + [np.array([], np.float32), np.array([2, 2], np.int64)],
                      attrs={"mode": "bilinear"}, error="mode must be"))
    return cases


# ---- grid_sample -------------------------------------------------------------

def _reflect(x, lo, hi):
    rng = hi - lo
    if x < lo:
        dx = lo - x
        n = int(dx / rng)
        r = dx - n * rng
        return lo + r if n % 2 == 0 else hi - r
    if x > hi:
        dx = x - hi
        n = int(dx / rng)
        r = dx - n * rng
        return hi - r if n % 2 == 0 else lo + r
    return x


def _pixel(data, idx, bounds, padding):
    """The reference's _pixel_at_ndarray: idx one integer per axis."""
    for k, i in enumerate(idx):
        d = data.shape[0]
        if padding == "zeros":
            if not 0 <= i < d:
                return 0.0
        elif padding == "border":
            i = min(max(i, 0), d - 1)
        else:
            i = int(_reflect(i, bounds[k][0], bounds[k][1]))
        data = data[i]
    return float(data)


def _gs_1d_coeffs(mode, t):
    if mode == "linear":
        return [1 - t, t]
    return [_cubic(-0.75, t + 1), _cubic(-0.75, t), _cubic(-0.75, 1 - t), _cubic(-0.75, 2 - t)]


def grid_sample_ref(x, grid, mode="linear", padding="zeros", align=False):
    x = wide(x).astype(np.float64)
    n, c = x.shape[:2]
    dims = x.shape[2:]
    r = len(dims)
    outs = grid.shape[1:-1]
    y = np.zeros((n, c) + tuple(outs))
    bounds = [((0.0, d - 1.0) if align else (-0.5, d - 0.5)) for d in dims]
    for b in range(n):
        for o in itertools.product(*[range(s) for s in outs]):
            g = [float(v) for v in grid[(b,) + o]][::-1]
            u = [((gi + 1) / 2 * (d - 1)) if align else (((gi + 1) * d - 1) / 2) for gi, d in zip(g, dims)]
            if mode == "nearest":
                u = [float(np.rint(v)) for v in u]
            for k, v in enumerate(u):
                lo, hi = bounds[k]
                if v < lo or v > hi:
                    if padding == "border":
                        u[k] = min(max(v, 0.0), dims[k] - 1.0)
                    elif padding == "reflection":
                        u[k] = _reflect(v, lo, hi)
            for ch in range(c):
                data = x[b, ch]
                if mode == "nearest":
                    y[(b, ch) + o] = _pixel(data, [int(v) for v in u], bounds, padding)
                    continue
                taps = []
                for v in u:
                    f = math.floor(v)
                    w = _gs_1d_coeffs(mode, v - f)
                    first = f if mode == "linear" else f - 1
                    taps.append([(first + i, w[i]) for i in range(len(w))])
                acc = 0.0
                for combo in itertools.product(*taps):
                    wt = 1.0
                    for _, w in combo:
                        wt *= w
                    acc += wt * _pixel(data, [i for i, _ in combo], bounds, padding)
                y[(b, ch) + o] = acc
    return y


def grid_cases(rng):
    cases = []
    x = rng.array((2, 2, 4, 5), "f32")
    grid = rng.array((2, 3, 4, 2), "f32", -1.3, 1.3)
    # Exact halves and the ends, where rounding and padding decide.
    grid[0, 0, :, :] = [[-1.0, -1.0], [1.0, 1.0], [0.25, -0.5], [-0.75, 0.5]]
    for mode in ["linear", "nearest", "cubic"]:
        for padding in ["zeros", "border", "reflection"]:
            for align in [False, True]:
                y = grid_sample_ref(x, grid, mode, padding, align)
                attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
                cases.append(Case("grid_sample", "f32", [x, grid], [cast_to(y, "f32")], attrs=attrs))
    # 1 and 3 spatial axes; far outside (reflection repeats).
    x1 = rng.array((1, 2, 5), "f32")
    g1 = np.array([[[-7.3], [-1.0], [0.1], [2.6], [40.0]]], np.float32)
    x3 = rng.array((1, 1, 3, 4, 2), "f32")
    g3 = rng.array((1, 2, 2, 3, 3), "f32", -1.5, 1.5)
    for mode in ["linear", "nearest", "cubic"]:
        for padding in ["zeros", "border", "reflection"]:
            attrs = {"mode": mode, "padding_mode": padding}
            cases.append(Case("grid_sample", "f32", [x1, g1], [cast_to(grid_sample_ref(x1, g1, mode, padding), "f32")],
                              attrs=attrs))
            cases.append(Case("grid_sample", "f32", [x3, g3], [cast_to(grid_sample_ref(x3, g3, mode, padding), "f32")],
                              attrs=attrs))
    for dt in FLOATS:
        xd, gd = rng.array((1, 3, 3, 3), dt), rng.array((1, 2, 5, 2), dt, -1.1, 1.1)
        cases.append(Case("grid_sample", dt, [xd, gd], [cast_to(grid_sample_ref(xd, gd), dt)]))
    big = rng.array((2, 8, 20, 20), "f32")
    gb = rng.array((2, 16, 16, 2), "f32", -1.1, 1.1)
    c = Case("grid_sample", "f32", [big, gb], [cast_to(grid_sample_ref(big, gb, "linear", "border"), "f32")],
             attrs={"padding_mode": "border"})
    c.threads = 4
    cases.append(c)
    cases.append(Case("grid_sample", "f32", [np.zeros((1, 1, 0, 3), np.float32), gb[:1, :1]],
                      error="empty spatial dimension"))
    cases.append(Case("grid_sample", "f32", [x, grid[:1]], error="batch dimensions"))
    return cases


def cases(rng):
    return resize_cases(rng) + grid_cases(rng)
