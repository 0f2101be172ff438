"""The layout, indexing, sampling and creation ops of the random program
generator (nimble_gen.py): reshape .. storage_size, as methods mixed into its
Func (they build on Func's pick/const/op/emit). Each is generated only with
operands and attributes legal for the values' run-time shapes, as the
generator's docstring says."""
import math
import random  # noqa: F401 (kept for the methods that draw their own streams)

from gen_values import Val, nested


class LayoutOps:
    def g_reshape(self):
        a = self.pick(lambda v: v.rank >= 1)
        if a is None:
            return None
        n = a.numel()
        divs = [d for d in range(1, n + 1) if n % d == 0]
        d = self.rng.choice(divs) if divs else 1
        shape = self.rng.choice([[-1], [d, -1], [-1, d], [n]]) if n else [-1]
        if len(shape) == 1:
            sizes = [n]
        else:
            sizes = [d, n // d] if shape[0] == d else [n // d, d]
        static = all(x[1] for x in a.dims)
        return self.op("reshape %s, shape=[%s]" % (a.name, ", ".join(map(str, shape))), a.dt,
                       [(s, static or x != -1) for s, x in zip(sizes, shape)])

    def g_dynreshape(self):
        a = self.pick(lambda v: v.rank >= 1 and v.numel() > 0)
        if a is None:
            return None
        n = a.numel()
        d = self.rng.choice([x for x in range(1, n + 1) if n % x == 0])
        s = self.const([2], "i64", "[%d, %d]" % (d, n // d))
        return self.op("dyn_reshape %s, %s" % (a.name, s.name), a.dt, [(d, False), (n // d, False)])

    def g_transpose(self):
        a = self.pick(lambda v: v.rank >= 2)
        if a is None:
            return None
        perm = list(range(a.rank))
        self.rng.shuffle(perm)
        return self.op("transpose %s, perm=[%s]" % (a.name, ", ".join(map(str, perm))), a.dt,
                       [a.dims[p] for p in perm])

    def g_concat(self):
        a = self.pick(lambda v: v.rank >= 1)
        if a is None:
            return None
        ax = self.rng.randrange(a.rank)
        others = self.visible(lambda v: v.known() and v.dt == a.dt and v.rank == a.rank and all(
            i == ax or v.sizes[i] == a.sizes[i] for i in range(a.rank)))
        parts = [a] + self.rng.sample(others, min(len(others), self.rng.randint(1, 2)))
        size = sum(p.sizes[ax] for p in parts)
        dims = list(a.dims)
        dims[ax] = (size, all(p.dims[ax][1] for p in parts))
        return self.op("concat %s, axis=%d" % (", ".join(p.name for p in parts), ax), a.dt, dims)

    def g_split(self):
        a = self.pick(lambda v: v.rank >= 1 and any(s > 1 and s % 2 == 0 or s % 3 == 0 and s > 0 for s in v.sizes))
        if a is None:
            return None
        ax = self.rng.choice([i for i, s in enumerate(a.sizes) if s > 1 and (s % 2 == 0 or s % 3 == 0)])
        s = a.sizes[ax]
        k = self.rng.choice([x for x in (2, 3) if s % x == 0])
        names = [self.fresh() for _ in range(k)]
        self.emit("%s = split %s, axis=%d, sections=%d" % (", ".join(names), a.name, ax, k))
        dims = list(a.dims)
        dims[ax] = (s // k, a.dims[ax][1])
        outs = [self.add(Val(n, a.dt, dims)) for n in names]
        return self.rng.choice(outs)

    def g_slice(self):
        a = self.pick(lambda v: v.rank >= 1)
        if a is None:
            return None
        ax = self.rng.randrange(a.rank)
        n = a.sizes[ax]
        st = self.rng.randint(-n, n) if n else 0
        en = self.rng.randint(-n, n + 2)
        lo = max(0, st + n if st < 0 else st)
        hi = min(n, max(0, en + n if en < 0 else en))
        dims = list(a.dims)
        dims[ax] = (max(0, hi - lo), a.dims[ax][1])
        return self.op("slice %s, axes=[%d], starts=[%d], ends=[%d]" % (a.name, ax, st, en), a.dt, dims)

    def window(self, a):
        """`dynamic_slice` of a random window of %a along an axis of non-zero
        size: (the slice, its axis, the axis' size, the window's size)."""
        ax = self.rng.choice([i for i in range(a.rank) if a.sizes[i] > 0])
        n = a.sizes[ax]
        size = self.rng.randint(1, n)
        start = self.scalar_i64(self.rng.randint(0, n - size))
        dims = list(a.dims)
        dims[ax] = (size, True)
        v = self.op("dynamic_slice %s, %s, axis=%d, size=%d" % (a.name, start.name, ax, size), a.dt, dims)
        return v, ax, n, size

    def g_dynslice(self):
        a = self.pick(lambda v: v.rank >= 1 and v.sizes[0] > 0)
        if a is None:
            return None
        return self.window(a)[0]

    def g_dynupdate(self):
        # The update is a window of %a itself (sometimes negated), written
        # back at another start: in place when %a dies here, a copy if not.
        a = self.pick(lambda v: v.rank >= 1 and any(s > 0 for s in v.sizes))
        if a is None:
            return None
        u, ax, n, size = self.window(a)
        if a.dt != "i1" and self.rng.random() < 0.5:
            u = self.op("neg %s" % u.name, a.dt, u.dims)
        start = self.scalar_i64(self.rng.randint(0, n - size))
        return self.op("dynamic_update_slice %s, %s, %s, axis=%d" % (a.name, u.name, start.name, ax), a.dt,
                       a.dims)

    def g_take(self):
        a = self.pick(lambda v: v.rank >= 1 and all(s > 0 for s in v.sizes))
        if a is None:
            return None
        ax = self.rng.randrange(a.rank)
        n = a.sizes[ax]
        k = self.rng.randint(1, 4)
        idx = self.const([k], "i64", "[%s]" % ", ".join(str(self.rng.randint(-n, n - 1)) for _ in range(k)))
        dims = list(a.dims)
        dims[ax:ax + 1] = [(k, True)]
        return self.op("take %s, %s, axis=%d" % (a.name, idx.name, ax), a.dt, dims)

    def g_expand(self):
        a = self.pick(lambda v: v.rank < 4)
        if a is None:
            return None
        ax = self.rng.randint(0, a.rank)
        dims = list(a.dims)
        dims.insert(ax, (1, True))
        return self.op("expand_dims %s, axis=%d" % (a.name, ax), a.dt, dims)

    def g_squeeze(self):
        a = self.pick(lambda v: any(d == (1, True) for d in v.dims))
        if a is None:
            return None
        ones = [i for i, d in enumerate(a.dims) if d == (1, True)]
        ax = sorted(self.rng.sample(ones, self.rng.randint(1, len(ones))))
        return self.op("squeeze %s, axes=[%s]" % (a.name, ", ".join(map(str, ax))), a.dt,
                       [d for i, d in enumerate(a.dims) if i not in ax])

    def g_cumsum(self):
        a = self.pick(lambda v: v.rank >= 1 and v.dt != "i1")
        if a is None:
            return None
        ax = self.rng.randrange(-a.rank, a.rank)
        axis = self.const([], self.rng.choice(["i64", "i32"]), str(ax))
        flags = "".join(", %s=true" % f for f in ("exclusive", "reverse") if self.rng.random() < 0.5)
        return self.op("cumsum %s, %s%s" % (a.name, axis.name, flags), a.dt, a.dims)

    def g_tile(self):
        a = self.pick(lambda v: 1 <= v.rank <= 3 and v.numel() <= 64)
        if a is None:
            return None
        reps = [self.rng.randint(0 if self.rng.random() < 0.1 else 1, 3) for _ in range(a.rank)]
        r = self.const([a.rank], "i64", "[%s]" % ", ".join(map(str, reps)))
        dims = [(s * n, st or n == 0) for (s, st), n in zip(a.dims, reps)]
        return self.op("tile %s, %s" % (a.name, r.name), a.dt, dims)

    def g_pad(self):
        a = self.pick(lambda v: 1 <= v.rank <= 3)
        if a is None:
            return None
        rng = self.rng
        mode = rng.choice(["constant", "constant", "reflect", "edge", "wrap"])
        if mode != "constant" and 0 in a.sizes:
            mode = "constant"
        pads = []
        for side in range(2):
            for s in a.sizes:
                hi = {"reflect": s - 1, "edge": 2, "wrap": s}.get(mode, 2)
                pads.append(rng.randint(-1 if s > 0 else 0, max(hi, 0)))
        r = a.rank
        for k in range(r):  # no dimension below 0
            while a.sizes[k] + pads[k] + pads[k + r] < 0:
                pads[k + r] += 1
        p = self.const([2 * r], "i64", "[%s]" % ", ".join(map(str, pads)))
        operands = "%s, %s" % (a.name, p.name)
        if mode == "constant" and rng.random() < 0.5:
            operands += ", " + self.const([], a.dt).name
        dims = [(s + pads[k] + pads[k + r], st) for k, (s, st) in enumerate(a.dims)]
        return self.op("pad %s%s" % (operands, "" if mode == "constant" else ', mode="%s"' % mode), a.dt, dims)

    def index_const(self, shape, bounds):
        """A constant i64 tensor of `shape` whose last axis indexes `bounds`
        (negative indices included)."""
        rng = self.rng
        n = 1
        for s in shape[:-1]:
            n *= s
        rows = ["[%s]" % ", ".join(str(rng.randint(-b, b - 1)) for b in bounds) for _ in range(n)]
        text = "[%s]" % ", ".join(rows) if len(shape) == 2 else rows[0]
        return self.const(shape, "i64", text)

    def g_gathernd(self):
        a = self.pick(lambda v: v.rank >= 1 and all(s > 0 for s in v.sizes))
        if a is None:
            return None
        m = self.rng.randint(1, a.rank)
        k = self.rng.randint(1, 3)
        idx = self.index_const([k, m], a.sizes[:m])
        return self.op("gather_nd %s, %s" % (a.name, idx.name), a.dt, [(k, True)] + a.dims[m:])

    def g_scatternd(self):
        a = self.pick(lambda v: v.rank >= 1 and all(s > 0 for s in v.sizes))
        if a is None:
            return None
        m = self.rng.randint(1, a.rank)
        k = self.rng.randint(1, 3)
        idx = self.index_const([k, m], a.sizes[:m])
        upd = self.const([k] + a.sizes[m:], a.dt)
        red = "none" if a.dt == "i1" else self.rng.choice(["none", "add", "max", "min"])
        return self.op('scatter_nd %s, %s, %s%s' % (a.name, idx.name, upd.name,
                                                     "" if red == "none" else ', reduction="%s"' % red), a.dt, a.dims)

    def g_scatter(self):
        a = self.pick(lambda v: 1 <= v.rank <= 2 and all(s > 0 for s in v.sizes))
        if a is None:
            return None
        ax = self.rng.randrange(a.rank)
        shape = [self.rng.randint(1, s) for s in a.sizes]
        n = 1
        for s in shape:
            n *= s
        vals = [self.rng.randint(-a.sizes[ax], a.sizes[ax] - 1) for _ in range(n)]
        if a.rank == 1:
            text = "[%s]" % ", ".join(map(str, vals))
        else:
            text = "[%s]" % ", ".join("[%s]" % ", ".join(map(str, vals[r * shape[1]:(r + 1) * shape[1]]))
                                      for r in range(shape[0]))
        idx = self.const(shape, "i64", text)
        upd = self.const(shape, a.dt)
        red = "none" if a.dt == "i1" else self.rng.choice(["none", "add", "mul", "max", "min"])
        return self.op('scatter_elements %s, %s, %s, axis=%d%s' % (
            a.name, idx.name, upd.name, ax, "" if red == "none" else ', reduction="%s"' % red), a.dt, a.dims)

    def g_onehot(self):
        a = self.pick(lambda v: v.rank <= 2 and v.dt in ("i32", "i64"))
        if a is None:
            return None
        depth = self.rng.randint(0, 4)
        d = self.const([], "i64", str(depth))
        dt = self.rng.choice(["f32", "i32", "i1"])
        v = self.const([2], dt)
        ax = self.rng.randint(-a.rank - 1, a.rank)
        dims = list(a.dims)
        dims.insert(ax if ax >= 0 else ax + a.rank + 1, (depth, True))
        return self.op("one_hot %s, %s, %s, axis=%d" % (a.name, d.name, v.name, ax), dt, dims)

    def g_shift(self):
        a = self.pick(lambda v: v.dt in ("i32", "i64"))
        if a is None:
            return None
        # Counts past the width and negative ones are defined (every bit out).
        s = self.const([], a.dt, str(self.rng.randint(-1, 70)))
        op = self.rng.choice(["shift_left", "shift_right"])
        return self.op("%s %s, %s" % (op, a.name, s.name), a.dt, a.dims)

    def g_topk(self):
        # Floats: a rounding difference upstream can reorder near-ties.
        a = self.pick(lambda v: 1 <= v.rank <= 3 and v.dt in ("f32", "i32", "i64") and
                      not (self.stable and v.dt.startswith("f")))
        if a is None:
            return None
        ax = self.rng.randrange(a.rank)
        k = self.rng.randint(0, a.sizes[ax])
        kc = self.const([], "i64", str(k))
        dims = list(a.dims)
        dims[ax] = (k, True)
        name, idx = self.fresh(), self.fresh()
        largest = self.rng.random() < 0.5
        self.emit("%s, %s = top_k %s, %s, axis=%d, largest=%s" % (name, idx, a.name, kc.name, ax,
                                                                   "true" if largest else "false"))
        self.add(Val(idx, "i64", dims))
        return self.add(Val(name, a.dt, dims))

    def g_convt(self):
        a = self.pick(lambda v: v.rank in (3, 4) and v.dt == "f32" and 0 not in v.sizes[1:] and v.numel() <= 1024)
        if a is None:
            return None
        c = a.sizes[1]
        groups = c if c > 1 and self.rng.random() < 0.3 else 1
        mg = self.rng.randint(1, 2)
        k = a.rank - 2
        kernel = [self.rng.randint(1, 3) for _ in range(k)]
        st = [self.rng.choice([1, 2]) for _ in range(k)]
        dil = [self.rng.choice([1, 1, 2]) for _ in range(k)]
        full = [st[i] * (a.sizes[i + 2] - 1) + dil[i] * (kernel[i] - 1) + 1 for i in range(k)]
        pads = [self.rng.randint(0, (full[i] - 1) // 2) for i in range(k)] * 2
        w = self.const([c, mg] + kernel, "f32")
        text = ", strides=[%s], pads=[%s], dilations=[%s]" % (", ".join(map(str, st)), ", ".join(map(str, pads)),
                                                              ", ".join(map(str, dil)))
        if groups > 1:
            text += ", groups=%d" % groups
        dims = [a.dims[0], (mg * groups, True)] + [(full[i] - 2 * pads[i], a.dims[i + 2][1]) for i in range(k)]
        return self.op("conv_transpose %s, %s%s" % (a.name, w.name, text), "f32", dims)

    def g_nms(self):
        # Boxes and scores as constants on a coarse grid (ties and overlaps).
        n, cl = self.rng.randint(1, 5), self.rng.randint(1, 2)
        vals = lambda cnt: ", ".join(str(self.rng.randint(0, 4) / 2) for _ in range(cnt))  # noqa: E731
        boxes = self.const([1, n, 4], "f32", "[[%s]]" % ", ".join("[%s]" % vals(4) for _ in range(n)))
        scores = self.const([1, cl, n], "f32", "[[%s]]" % ", ".join("[%s]" % vals(n) for _ in range(cl)))
        m = self.const([], "i64", str(self.rng.randint(0, 3)))
        iou = self.const([], "f32", "0.5")
        thr = self.const([], "f32", "0.0")
        return self.op("non_max_suppression %s, %s, %s, %s, %s" % (boxes.name, scores.name, m.name, iou.name, thr.name),
                       "i64", [(None, False), (3, True)])
    def g_resize(self):
        a = self.pick(lambda v: 1 <= v.rank <= 4 and v.dt in ("f32", "f64", "i32"))
        if a is None:
            return None
        rng = self.rng
        r = a.rank
        mode = rng.choice(["nearest", "linear", "cubic"])
        ctm = rng.choice(["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                          "asymmetric", "tf_crop_and_resize"])
        attrs = ', mode="%s", coordinate_transformation_mode="%s"' % (mode, ctm)
        if mode == "nearest":
            attrs += ', nearest_mode="%s"' % rng.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
        if mode != "nearest" and rng.random() < 0.3:
            attrs += ", antialias=true"
        if mode == "cubic" and rng.random() < 0.3:
            attrs += ", exclude_outside=true"
        if rng.random() < 0.5 or 0 in a.sizes:
            sizes = [s if s == 0 else rng.randint(1, 5) for s in a.sizes]
            sc = self.const([0], "f32", "[]")
            sz = self.const([r], "i64", "[%s]" % ", ".join(map(str, sizes)))
        else:
            scales = [rng.choice([0.5, 0.75, 1.0, 1.5, 2.0, 3.0]) for _ in range(r)]
            sizes = [int(math.floor(s * f)) for s, f in zip(a.sizes, scales)]
            sc = self.const([r], "f32", "[%s]" % ", ".join("%.2f" % f for f in scales))
            sz = self.const([0], "i64", "[]")
        operands = "%s, %s, %s" % (a.name, sc.name, sz.name)
        if ctm == "tf_crop_and_resize":
            roi = [rng.choice([0.0, 0.25]) for _ in range(r)] + [rng.choice([0.75, 1.0, 1.25]) for _ in range(r)]
            operands += ", " + self.const([2 * r], "f32", "[%s]" % ", ".join("%.2f" % v for v in roi)).name
            attrs += ", extrapolation_value=%.1f" % rng.choice([0.0, -1.0])
        return self.op("resize %s%s" % (operands, attrs), a.dt, [(n, st) for n, (_, st) in zip(sizes, a.dims)])

    def g_gridsample(self):
        a = self.pick(lambda v: 3 <= v.rank <= 4 and v.dt in ("f32", "f64") and all(s > 0 for s in v.sizes))
        if a is None:
            return None
        rng = self.rng
        sp = a.rank - 2
        out = [rng.randint(1, 3) for _ in range(sp)]
        n = a.sizes[0]
        count = n * sp
        for o in out:
            count *= o
        vals = [rng.choice([-1.25, -1.0, -0.5, -0.2, 0.0, 0.3, 0.5, 1.0, 1.1]) for _ in range(count)]
        g = self.const([n] + out + [sp], a.dt, nested(vals, [n] + out + [sp]))
        attrs = ', mode="%s", padding_mode="%s"' % (rng.choice(["linear", "nearest", "cubic"]),
                                                     rng.choice(["zeros", "border", "reflection"]))
        if rng.random() < 0.5:
            attrs += ", align_corners=true"
        return self.op("grid_sample %s, %s%s" % (a.name, g.name, attrs), a.dt,
                       [a.dims[0], a.dims[1]] + [(o, True) for o in out])

    def g_bcast(self):
        a = self.pick(lambda v: v.rank < 3)
        if a is None:
            return None
        sizes = [s if s != 1 else self.rng.randint(1, 3) for s in a.sizes]
        if self.rng.random() < 0.5:
            sizes = [self.rng.randint(1, 3)] + sizes
        return self.op("broadcast_to %s, shape=[%s]" % (a.name, ", ".join(map(str, sizes))), a.dt,
                       [(s, True) for s in sizes])

    def g_zeros(self):
        a = self.pick()
        if a is None:
            return None
        s = self.op("shape_of %s" % a.name, "i64", [(a.rank, True)])
        dt = self.rng.choice(["f32", "i64", "i1"])
        return self.op("zeros %s, dtype=%s" % (s.name, dt), dt, [(x, False) for x in a.sizes])

    def g_full(self):
        a = self.pick()
        if a is None:
            return None
        s = self.op("shape_of %s" % a.name, "i64", [(a.rank, True)])
        v = self.const([], self.rng.choice(["f32", "i32"]))
        return self.op("full %s, %s" % (s.name, v.name), v.dt, [(x, False) for x in a.sizes])

    def g_arange(self):
        dt = self.rng.choice(["i64", "f32"])
        lo, hi, step = self.rng.randint(-3, 3), self.rng.randint(-3, 6), self.rng.choice([1, 2, -1, 3])
        n = max(0, math.ceil((hi - lo) / step))
        fmt = (lambda x: str(x)) if dt == "i64" else (lambda x: "%d.0" % x)
        a, b, c = (self.const([], dt, fmt(x)) for x in (lo, hi, step))
        return self.op("arange %s, %s, %s" % (a.name, b.name, c.name), dt, [(n, True)])

    def g_unique(self):
        a = self.pick(lambda v: v.rank == 1 and v.dt != "i1" and not (self.stable and v.dt.startswith("f")))
        if a is None:
            return None
        return self.op("unique %s" % a.name, a.dt, [(None, False)])

    def g_nonzero(self):
        a = self.pick(lambda v: v.rank >= 1 and not (self.stable and v.dt.startswith("f")))
        if a is None:
            return None
        return self.op("nonzero %s" % a.name, "i64", [(None, False), (a.rank, True)])

    def g_shapeof(self):
        a = self.pick()
        if a is None:
            return None
        return self.op("shape_of %s" % a.name, "i64", [(a.rank, True)])

    def g_dim(self):
        a = self.pick(lambda v: v.rank >= 1)
        if a is None:
            return None
        return self.op("dim %s, axis=%d" % (a.name, self.rng.randrange(a.rank)), "i64", [])

    def g_storagesize(self):
        a = self.pick()
        if a is None:
            return None
        s = self.op("shape_of %s" % a.name, "i64", [(a.rank, True)])
        dt = self.rng.choice(["f32", "f16", "i8", "i64"])
        return self.op("storage_size %s, dtype=%s, alignment=%d" % (s.name, dt, self.rng.choice([1, 8, 64])),
                       "i64", [])
