"""Random well-typed Nimble programs (issue 14): a Csmith/YARPGen for .nir.

usage: nimble_gen.py SEED [--size=N] [--stable]
                                          prints the program, then its inputs
                                          as `// INPUT: ...` lines

generate(seed, size) returns (nir_text, inputs): a module whose @main takes
tensors (static and `?` dimensions; the sizes of the `?` ones are drawn
here, 1..5) and returns one to three values, plus nimble-run's `--input=`
texts for them. The same seed always gives the same program.

How programs stay well typed and terminate: every value carries its dtype
and its run-time shape (each dimension's size, and whether the type has it
static), so each op is generated only with operands and attributes that
are legal for those shapes (broadcasting, matmul's inner size, split's
divisibility, slice bounds, take's indices); declared types (parameters,
block arguments, results) write every dimension as `?`, which sub-shaping
accepts for any value. Loops count a constant number of times, recursion
decreases a counter to zero, ADT lists are built by that recursion and
folded by `match`. Integer division is not generated (a zero divisor is a
run-time error: legal, but it would end most programs early); everything
else is defined by docs/LangRef.md (NaN, inf, float->int saturation), so
the oracle compares it exactly.

Ops of ir/Ops.def generated: every element-wise, comparison, logical,
select, cast, matmul, batch_matmul, conv, max_pool, avg_pool, reduction (prod included), cumsum,
softmax, layer_norm, attention, shape op (reshape, dyn_reshape, transpose, concat, split, slice, dynamic_slice,
dynamic_update_slice, take, expand_dims, squeeze, broadcast_to, tile, pad, gather_nd, scatter_elements,
scatter_nd, one_hot, shift_left, shift_right, top_k, conv_transpose,
non_max_suppression), resize, grid_sample, creation (constant, zeros, full,
arange, unique, nonzero), shape_of, dim, storage_size, and the structural
ops (call, br, cond_br, match, ret, construct, tuple, get_tuple); @main
sometimes carries the `dispatch` attribute (graph dispatch). Not
generated: the explicit-memory ops (alloc_storage, alloc_tensor,
invoke_mut, invoke_shape_func, kill), which only manifest-memory writes,
and device_copy (no second device on a CPU-only run).
"""
import math
import random
import sys


def nested(vals, shape):
    """A .nir literal of `vals` (row-major) with `shape`."""
    if not shape:
        return repr(vals[0])
    if len(shape) == 1:
        return "[%s]" % ", ".join(repr(v) for v in vals)
    step = len(vals) // shape[0]
    return "[%s]" % ", ".join(nested(vals[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0]))

UNARY_FLOAT = ["exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "gelu", "erf",
               "sin", "cos", "tan", "atan", "sinh", "cosh", "asinh"]
# NaN or inf at the edge of their domain (and fmod: a jump at each multiple
# of the divisor): a rounding difference can cross it, so stable programs
# (STABLE) leave them out.
UNARY_FLOAT_EDGE = ["asin", "acos", "acosh", "atanh"]
UNARY_NUM = ["neg", "abs", "relu"]
BIN_NUM = ["add", "sub", "mul", "maximum", "minimum"]
COMPARE = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
REDUCE = ["sum", "max", "min", "prod"]


class Val:
    """A value: name, dtype, and per dimension (run-time size or None when
    only the run knows it, static-in-the-type)."""

    def __init__(self, name, dt, dims):
        self.name, self.dt, self.dims = name, dt, dims

    @property
    def sizes(self):
        return [d[0] for d in self.dims]

    @property
    def rank(self):
        return len(self.dims)

    def known(self):
        return all(d[0] is not None for d in self.dims)

    def numel(self):
        n = 1
        for s in self.sizes:
            n *= s
        return n


def qtype(v):
    """The declared type of `v`: every dimension `?`."""
    return "tensor<%s>" % "x".join(["?"] * v.rank + [v.dt])


def stype(sizes, dt):
    return "tensor<%s>" % "x".join([str(s) for s in sizes] + [dt])


def literal(rng, sizes, dt):
    def elem():
        if dt == "i1":
            return rng.choice(["true", "false"])
        if dt.startswith("i"):
            return str(rng.randint(-4, 4))
        if dt.startswith("u"):  # small, and near the top of u8 so that it wraps
            return str(rng.choice([rng.randint(0, 8), rng.randint(250, 255)] if dt == "u8" else [rng.randint(0, 8)]))
        return repr(rng.randint(-16, 16) / 8.0)

    def nest(k):
        if k == len(sizes):
            return elem()
        return "[" + ", ".join(nest(k + 1) for _ in range(sizes[k])) + "]"

    if rng.random() < 0.3 or not sizes:
        return elem()  # a splat
    return nest(0)


def input_text(rng, v):
    vals = []
    for _ in range(v.numel()):
        if v.dt == "i1":
            vals.append(rng.choice(["true", "false"]))
        elif v.dt.startswith("i"):
            vals.append(str(rng.randint(-4, 4)))
        elif v.dt.startswith("u"):
            vals.append(str(rng.randint(0, 8)))
        else:
            vals.append(repr(rng.randint(-24, 24) / 8.0))
    shape = "x".join([str(s) for s in v.sizes] + [v.dt])
    return "%s=%s" % (shape, " ".join(vals))


class Func:
    def __init__(self, gen, name):
        self.gen, self.rng, self.name = gen, gen.rng, name
        self.stable = gen.stable
        self.lines = []
        self.scopes = [[]]  # values visible, innermost last
        self.n = 0

    def fresh(self):
        self.n += 1
        return "%%v%d" % self.n

    def visible(self, pred=lambda v: True):
        return [v for s in self.scopes for v in s if pred(v)]

    def add(self, v):
        self.scopes[-1].append(v)
        return v

    def emit(self, text):
        self.lines.append("  " + text)

    def const(self, sizes, dt, text=None, rng=None):
        name = self.fresh()
        self.emit("%s = constant %s : %s" % (name, text or literal(rng or self.rng, sizes, dt), stype(sizes, dt)))
        return self.add(Val(name, dt, [(s, True) for s in sizes]))

    def scalar_i64(self, k):
        return self.const([], "i64", str(k))

    def op(self, text, dt, dims):
        name = self.fresh()
        self.emit("%s = %s" % (name, text))
        return self.add(Val(name, dt, dims))

    # ---- operand choice -------------------------------------------------
    def pick(self, pred=lambda v: True):
        cands = self.visible(lambda v: v.known() and pred(v))
        return self.rng.choice(cands) if cands else None

    def partner(self, a, same_dt=True):
        """A value broadcastable with `a` (another one, or a new constant)."""
        rng = self.rng

        def compat(b):
            if b is a or (same_dt and b.dt != a.dt) or not b.known():
                return False
            for x, y in zip(reversed(a.sizes), reversed(b.sizes)):
                if x != y and x != 1 and y != 1:
                    return False
            return True

        cands = self.visible(compat)
        if cands and rng.random() < 0.7:
            return rng.choice(cands)
        # A constant over a suffix of a's shape, some dims set to 1.
        k = rng.randint(0, a.rank)
        sizes = [s if rng.random() < 0.7 else 1 for s in a.sizes[a.rank - k:]]
        return self.const(sizes, a.dt)

    # ---- the ops ----------------------------------------------------------
    def gen_op(self):
        # linalg-fuse's pattern from a stream of its own (as dispatch_attr),
        # so that a program without it is the one the seed gave before.
        if self.gen.linalg_rng.random() < 0.04:
            v = self.g_lincomb(self.gen.linalg_rng)
            if v is not None:
                return v
        rng = self.rng
        kinds = ["unary", "unary", "unary", "unary", "binary", "binary", "compare", "select", "cast", "matmul", "chain", "bmm", "reduce",
                 "argmax", "softmax", "layernorm", "reshape", "dynreshape", "transpose", "concat", "split",
                 "slice", "dynslice", "dynupdate", "take", "expand", "squeeze", "bcast", "zeros", "full", "arange",
                 "unique", "nonzero", "shapeof", "dim", "storagesize", "tuple", "conv", "pool",
                 "cumsum", "tile", "pad", "gathernd", "scatter", "scatternd", "onehot", "attention",
                 "shift", "topk", "convt", "nms", "resize", "gridsample"]
        for _ in range(10):
            v = getattr(self, "g_" + rng.choice(kinds))()
            if v is not None:
                return v
        return None

    def g_unary(self):
        r = self.rng.random()
        a = (r < 0.7 and self.pick(lambda v: v.dt in ("f32", "f64", "f16"))) or \
            (r < 0.85 and self.pick(lambda v: v.dt == "i1")) or self.pick()
        if not a:
            return None
        if a.dt == "i1":
            return self.op("logical_not %s" % a.name, "i1", a.dims)
        ops = UNARY_FLOAT + ([] if self.stable else UNARY_FLOAT_EDGE) + ["neg", "abs", "relu"] \
            if a.dt in ("f32", "f64", "f16") else UNARY_NUM
        return self.op("%s %s" % (self.rng.choice(ops), a.name), a.dt, a.dims)

    def bdims(self, a, b):
        ra, rb = a.dims[::-1], b.dims[::-1]
        out = []
        for i in range(max(a.rank, b.rank)):
            x = ra[i] if i < a.rank else (1, True)
            y = rb[i] if i < b.rank else (1, True)
            size = max(x[0], y[0]) if 0 not in (x[0], y[0]) else 0
            out.append((size, x[1] and y[1]))
        return out[::-1]

    def g_binary(self):
        a = self.pick(lambda v: v.dt != "i1")
        if a is None:
            return None
        b = self.partner(a)
        ops = BIN_NUM + (["div", "pow"] + ([] if self.stable else ["fmod"]) if a.dt.startswith("f") else [])
        return self.op("%s %s, %s" % (self.rng.choice(ops), a.name, b.name), a.dt, self.bdims(a, b))

    def g_compare(self):
        a = self.pick()
        if a is None:
            return None
        b = self.partner(a)
        if a.dt == "i1":
            op = self.rng.choice(["equal", "not_equal", "logical_and", "logical_or"])
        elif self.stable and a.dt.startswith("f"):
            op = self.rng.choice(COMPARE[2:])
            b = self.off(b)
        else:
            op = self.rng.choice(COMPARE)
        return self.op("%s %s, %s" % (op, a.name, b.name), "i1", self.bdims(a, b))

    def off(self, a):
        """In stable mode, `a` moved off the values rounding can straddle:
        a + 0.37 (see STABLE)."""
        d = self.const([], a.dt, "0.37")
        return self.op("add %s, %s" % (a.name, d.name), a.dt, a.dims)

    def g_select(self):
        c = self.pick(lambda v: v.dt == "i1")
        if c is None:
            return None
        a = self.pick(lambda v: v.dt != "i1")
        if a is None:
            return None
        for x, y in zip(reversed(a.sizes), reversed(c.sizes)):
            if x != y and x != 1 and y != 1:
                return None
        # The third operand must broadcast with the first two together.
        ca = Val(a.name, a.dt, self.bdims(c, a))
        b = self.partner(ca)
        d = self.bdims(ca, b)
        return self.op("select %s, %s, %s" % (c.name, a.name, b.name), a.dt, d)

    def g_cast(self):
        a = self.pick()
        if a is None:
            return None
        dt = self.rng.choice(["f32", "f32", "i32", "i64", "i8", "i1", "f64", "f16", "i16", "u8", "u16",
                              "u32", "u64"])
        if self.stable and a.dt.startswith("f") and not dt.startswith("f"):
            a = self.off(a)
        return self.op("cast %s, dtype=%s" % (a.name, dt), dt, a.dims)

    def g_matmul(self):
        a = self.pick(lambda v: v.rank == 2 and v.dt == "f32")
        if a is None:
            return None
        ta, tb = self.rng.random() < 0.3, self.rng.random() < 0.3
        m, k = (a.dims[1], a.dims[0]) if ta else (a.dims[0], a.dims[1])
        n = self.rng.randint(1, 4)
        b = self.const([n, k[0]] if tb else [k[0], n], "f32")
        attrs = "".join([", transpose_a=true" if ta else "", ", transpose_b=true" if tb else ""])
        return self.op("matmul %s, %s%s" % (a.name, b.name, attrs), "f32", [m, (n, True)])

    def g_chain(self):
        """Two or three products in a row on new matrices of sizes 1..6:
        chains for matmul-reassociate (nimblec --fp-reassociate), static or
        with the first matrix's `?` rows (a run-time choice of order)."""
        v = self.g_matmul()
        for _ in range(self.rng.randint(1, 2)):
            if v is None:
                return None
            m, k = v.dims
            n = self.rng.randint(1, 6)
            tb = self.rng.random() < 0.3
            b = self.const([n, k[0]] if tb else [k[0], n], "f32")
            v = self.op("matmul %s, %s%s" % (v.name, b.name, ", transpose_b=true" if tb else ""), "f32",
                        [m, (n, True)])
        return v

    def g_lincomb(self, rng):
        """x·W + h·U (+ b) on one-row x and h and constant weights:
        linalg-fuse's pattern (nimblec -O2 --fp-reassociate makes it one
        product on concatenations; the weights' concat folds)."""
        def row():
            rows = self.visible(lambda v: v.known() and v.rank == 2 and v.dt == "f32" and v.dims[0] == (1, True))
            if rows and rng.random() < 0.6:
                return rng.choice(rows)
            return self.const([1, rng.randint(1, 5)], "f32", rng=rng)
        x, h = row(), row()
        n, tb = rng.randint(1, 6), rng.random() < 0.4
        prods = []
        for a in (x, h):
            k = a.sizes[1]
            w = self.const([n, k] if tb else [k, n], "f32", rng=rng)
            prods.append(self.op("matmul %s, %s%s" % (a.name, w.name, ", transpose_b=true" if tb else ""), "f32",
                                 [(1, True), (n, True)]))
        if rng.random() < 0.5:
            prods.reverse()
        s = self.op("add %s, %s" % (prods[0].name, prods[1].name), "f32", [(1, True), (n, True)])
        if rng.random() < 0.5:
            b = self.const([n], "f32", rng=rng)
            s = self.op("add %s, %s" % (s.name, b.name), "f32", s.dims)
        return s

    def g_bmm(self):
        a = self.pick(lambda v: v.rank == 3 and v.dt == "f32")
        if a is None:
            return None
        bt, m, k = a.dims
        n = self.rng.randint(1, 3)
        tb = self.rng.random() < 0.3
        b = self.const([bt[0], n, k[0]] if tb else [bt[0], k[0], n], "f32")
        return self.op("batch_matmul %s, %s%s" % (a.name, b.name, ", transpose_b=true" if tb else ""),
                       "f32", [bt, m, (n, True)])

    def axes(self, a):
        ax = sorted(self.rng.sample(range(a.rank), self.rng.randint(1, a.rank)))
        return ax

    def g_reduce(self):
        a = self.pick(lambda v: v.rank >= 1 and v.dt != "i1" and 0 not in v.sizes)
        if a is None:
            return None
        ops = REDUCE + (["mean"] if a.dt.startswith("f") else [])
        op = self.rng.choice(ops)
        ax = self.axes(a)
        keep = self.rng.random() < 0.4
        dims = [((1, True) if i in ax else d) for i, d in enumerate(a.dims)] if keep else \
            [d for i, d in enumerate(a.dims) if i not in ax]
        spelled = ax if self.rng.random() < 0.8 else [i - a.rank for i in ax]
        return self.op("%s %s, axes=[%s]%s" % (op, a.name, ", ".join(map(str, spelled)),
                                                ", keepdims=true" if keep else ""), a.dt, dims)

    def g_argmax(self):
        a = self.pick(lambda v: v.rank >= 1 and v.dt != "i1" and 0 not in v.sizes and
                      not (self.stable and v.dt.startswith("f")))
        if a is None:
            return None
        ax = self.rng.randrange(a.rank)
        keep = self.rng.random() < 0.3
        dims = [((1, True) if i == ax else d) for i, d in enumerate(a.dims)] if keep else \
            [d for i, d in enumerate(a.dims) if i != ax]
        return self.op("argmax %s, axis=%d%s" % (a.name, ax, ", keepdims=true" if keep else ""), "i64", dims)

    def g_softmax(self):
        a = self.pick(lambda v: v.rank >= 1 and v.dt == "f32")
        if a is None:
            return None
        return self.op("softmax %s, axis=%d" % (a.name, self.rng.randrange(-a.rank, a.rank)), "f32", a.dims)

    def g_attention(self):
        # Self-attention of one m x H x D value (q = k = v), sometimes masked.
        a = self.pick(lambda v: v.rank == 3 and v.dt == "f32" and 0 not in v.sizes)
        if a is None:
            return None
        mask = ""
        if self.rng.random() < 0.4:
            mask = ", " + self.const([a.sizes[0]], "f32").name
        return self.op("attention %s, %s, %s%s, scale=0.5" % (a.name, a.name, a.name, mask), "f32", a.dims)

    def g_layernorm(self):
        a = self.pick(lambda v: v.rank >= 1 and v.dt == "f32")
        if a is None:
            return None
        d = a.sizes[-1]
        g, b = self.const([d], "f32"), self.const([d], "f32")
        return self.op("layer_norm %s, %s, %s" % (a.name, g.name, b.name), "f32", a.dims)

    def conv_window(self, a, kernel_max):
        """Random strides, pads and dilations over a's spatial axes, and a
        window (sizes up to kernel_max) that fits each padded axis: (kernel,
        strides, pads, dilations, attribute text for all but the kernel)."""
        rng, k = self.rng, a.rank - 2
        kernel, st, pads, dil = [], [], [0] * (2 * k), []
        for i in range(k):
            pads[i], pads[i + k] = rng.randint(0, 1), rng.randint(0, 1)
            padded = a.sizes[i + 2] + pads[i] + pads[i + k]
            d = rng.choice([1, 1, 2])
            kk = rng.randint(1, kernel_max)
            while kk > 1 and d * (kk - 1) + 1 > padded:
                kk -= 1
            if d * (kk - 1) + 1 > padded:
                d = 1
            kernel.append(kk)
            dil.append(d)
            st.append(rng.choice([1, 1, 2]))
        text = ""
        if any(x != 1 for x in st):
            text += ", strides=[%s]" % ", ".join(map(str, st))
        if any(pads):
            text += ", pads=[%s]" % ", ".join(map(str, pads))
        if any(x != 1 for x in dil):
            text += ", dilations=[%s]" % ", ".join(map(str, dil))
        return kernel, st, pads, dil, text

    def out_dims(self, a, kernel, st, pads, dil, ceil=False):
        k, out = a.rank - 2, []
        for i in range(k):
            room = a.sizes[i + 2] + pads[i] + pads[i + k] - (dil[i] * (kernel[i] - 1) + 1)
            o = (-(-room // st[i]) if ceil else room // st[i]) + 1
            if ceil and (o - 1) * st[i] >= a.sizes[i + 2] + pads[i]:
                o -= 1
            out.append((o, a.dims[i + 2][1]))
        return out

    def g_conv(self):
        a = self.pick(lambda v: v.rank in (3, 4) and v.dt == "f32" and 0 not in v.sizes[1:] and v.numel() <= 4096)
        if a is None:
            return None
        c = a.sizes[1]
        groups = c if c > 1 and self.rng.random() < 0.3 else 1
        m = groups * self.rng.randint(1, 3)
        kernel, st, pads, dil, text = self.conv_window(a, 3)
        w = self.const([m, c // groups] + kernel, "f32")
        bias = ""
        if self.rng.random() < 0.6:
            bias = ", " + self.const([m], "f32").name
        if groups > 1:
            text += ", groups=%d" % groups
        return self.op("conv %s, %s%s%s" % (a.name, w.name, bias, text), "f32",
                       [a.dims[0], (m, True)] + self.out_dims(a, kernel, st, pads, dil))

    def g_pool(self):
        a = self.pick(lambda v: v.rank in (3, 4) and v.dt in ("f32", "i32", "i64") and 0 not in v.sizes[2:])
        if a is None:
            return None
        kernel, st, pads, dil, text = self.conv_window(a, 3)
        # Pads below the window, so that no window lies wholly in the padding.
        k = a.rank - 2
        for i in range(k):
            if pads[i] >= kernel[i] or pads[i + k] >= kernel[i]:
                return None
        ceil = self.rng.random() < 0.3
        if ceil:
            text += ", ceil_mode=true"
        op = "max_pool"
        if a.dt == "f32" and self.rng.random() < 0.5:
            op = "avg_pool"
            if self.rng.random() < 0.5:
                text += ", count_include_pad=true"
        return self.op("%s %s, kernel=[%s]%s" % (op, a.name, ", ".join(map(str, kernel)), text), a.dt,
                       [a.dims[0], a.dims[1]] + self.out_dims(a, kernel, st, pads, dil, ceil))

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

    def g_tuple(self):
        a, b = self.pick(), self.pick()
        if a is None or b is None:
            return None
        t = self.fresh()
        self.emit("%s = tuple %s, %s" % (t, a.name, b.name))
        i = self.rng.randint(0, 1)
        src = (a, b)[i]
        return self.op("get_tuple %s, index=%d" % (t, i), src.dt, src.dims)

    # ---- a value of exactly `like`'s shape and dtype (loop-carried) ----------
    def same_shape(self, like):
        rng = self.rng
        cur = like
        for _ in range(rng.randint(1, 3)):
            if cur.dt.startswith("f") and rng.random() < 0.5:
                cur = self.op("%s %s" % (rng.choice(["tanh", "sigmoid", "neg", "abs", "relu"]), cur.name),
                              cur.dt, cur.dims)
            else:
                others = self.visible(lambda v: v.known() and v.dt == cur.dt and v.rank <= cur.rank and all(
                    y == 1 or y == x for x, y in zip(reversed(cur.sizes), reversed(v.sizes))))
                b = rng.choice(others) if others else self.const([], cur.dt)
                op = rng.choice(["add", "sub", "mul", "maximum", "minimum"] if cur.dt != "i1"
                                else ["logical_and", "logical_or"])
                cur = self.op("%s %s, %s" % (op, cur.name, b.name), cur.dt, cur.dims)
        return cur


class Gen:
    def __init__(self, seed, size, stable=False):
        self.rng = random.Random(seed)
        # A stream of its own, so that adding the dispatch attribute (issue
        # 49) left every seed's program otherwise as it was.
        self.dispatch_rng = random.Random(seed * 7919 + 49)
        self.linalg_rng = random.Random(seed * 7919 + 4949)
        self.size = size
        self.stable = stable
        self.funcs = []
        self.types = []

    def params(self):
        rng = self.rng
        sym = {"N": rng.randint(1, 5), "M": rng.randint(1, 4)}
        out = []
        for i in range(rng.randint(1, 3)):
            rank = rng.choice([1, 2, 2, 3])
            dims = []
            for _ in range(rank):
                r = rng.random()
                if r < 0.3:
                    dims.append((sym["N"], False))
                elif r < 0.45:
                    dims.append((sym["M"], False))
                else:
                    dims.append((rng.randint(1, 4), True))
            dt = rng.choice(["f32", "f32", "f32", "f32", "i32", "i64", "u8"])
            out.append(Val("%%x%d" % i, dt, dims))
        return out

    def helper(self, like):
        """@hN(%a: like) -> like: straight-line code (a call target)."""
        f = Func(self, "h%d" % len(self.funcs))
        a = f.add(Val("%a", like.dt, like.dims))
        for _ in range(self.rng.randint(1, 4)):
            f.gen_op()
        r = f.same_shape(a)
        f.lines.insert(0, "func @%s(%%a: %s) -> %s {" % (f.name, qtype(a), qtype(a)))
        f.emit("ret %s" % r.name)
        f.lines.append("}")
        self.funcs.append(f)
        return f.name

    def recursive(self, like):
        """@rN(%n, %a) -> like: a = g(a), n times, by recursion."""
        f = Func(self, "r%d" % len(self.funcs))
        a = f.add(Val("%a", like.dt, like.dims))
        f.lines.append("func @%s(%%n: tensor<i64>, %%a: %s) -> %s {" % (f.name, qtype(a), qtype(a)))
        f.emit("%zero = constant 0 : tensor<i64>")
        f.emit("%done = less_equal %n, %zero")
        f.emit("cond_br %done, ^base, ^step")
        f.lines.append("^base:")
        f.emit("ret %a")
        f.lines.append("^step:")
        f.emit("%one = constant 1 : tensor<i64>")
        f.emit("%n1 = sub %n, %one")
        b = f.same_shape(a)
        f.emit("%%r = call @%s(%%n1, %s)" % (f.name, b.name))
        f.emit("ret %r")
        f.lines.append("}")
        self.funcs.append(f)
        return f.name

    def adt(self, like):
        """A list type of `like`s, a builder (recursion) and a fold (match)."""
        k = len(self.types)
        t = "@L%d" % k
        self.types.append("type %s = Nil%d | Cons%d(%s, %s)" % (t, k, k, qtype(like), t))
        b = Func(self, "build%d" % k)
        a = b.add(Val("%a", like.dt, like.dims))
        b.lines.append("func @%s(%%n: tensor<i64>, %%a: %s) -> %s {" % (b.name, qtype(a), t))
        b.emit("%zero = constant 0 : tensor<i64>")
        b.emit("%done = less_equal %n, %zero")
        b.emit("cond_br %done, ^nil, ^cons")
        b.lines.append("^nil:")
        b.emit("%%e = construct %s::Nil%d()" % (t, k))
        b.emit("ret %e")
        b.lines.append("^cons:")
        b.emit("%one = constant 1 : tensor<i64>")
        b.emit("%n1 = sub %n, %one")
        nxt = b.same_shape(a)
        b.emit("%%tail = call @%s(%%n1, %s)" % (b.name, nxt.name))
        b.emit("%%c = construct %s::Cons%d(%%a, %%tail)" % (t, k))
        b.emit("ret %c")
        b.lines.append("}")
        f = Func(self, "fold%d" % k)
        f.lines.append("func @%s(%%l: %s, %%acc: %s) -> %s {" % (f.name, t, qtype(a), qtype(a)))
        f.emit("match %%l [Nil%d: ^nil, Cons%d: ^cons]" % (k, k))
        f.lines.append("^nil:")
        f.emit("ret %acc")
        f.lines.append("^cons(%%h: %s, %%t: %s):" % (qtype(a), t))
        op = "add" if like.dt != "i1" else "logical_or"
        f.emit("%%s = %s %%acc, %%h" % op)
        f.emit("%%r = call @%s(%%t, %%s)" % f.name)
        f.emit("ret %r")
        f.lines.append("}")
        self.funcs += [b, f]
        return b.name, f.name

    def main(self):
        rng = self.rng
        f = Func(self, "main")
        params = [f.add(p) for p in self.params()]
        body = f.lines
        blocks = 0
        for step in range(self.size):
            r = rng.random()
            if r < 0.08:  # a loop with a carried tensor
                acc = f.pick(lambda v: v.rank >= 1)
                if acc is None:
                    continue
                blocks += 1
                h, bb, ex = "^loop%d" % blocks, "^body%d" % blocks, "^exit%d" % blocks
                zero = f.scalar_i64(0)
                count = f.scalar_i64(rng.randint(0, 4))
                f.emit("br %s(%s, %s)" % (h, zero.name, acc.name))
                i, c = "%%i%d" % blocks, "%%c%d" % blocks
                f.lines.append("%s(%s: tensor<i64>, %s: %s):" % (h, i, c, qtype(acc)))
                f.scopes.append([Val(i, "i64", []), Val(c, acc.dt, acc.dims)])
                done = f.op("greater_equal %s, %s" % (i, count.name), "i1", [])
                f.emit("cond_br %s, %s, %s" % (done.name, ex, bb))
                f.lines.append(bb + ":")
                f.scopes.append([])
                for _ in range(rng.randint(0, 3)):
                    f.gen_op()
                new = f.same_shape(f.scopes[-2][1])
                one = f.scalar_i64(1)
                i1 = f.op("add %s, %s" % (i, one.name), "i64", [])
                f.emit("br %s(%s, %s)" % (h, i1.name, new.name))
                f.scopes.pop()
                f.lines.append(ex + ":")
            elif r < 0.14:  # a branch joining one value
                a = f.pick(lambda v: v.dt.startswith("f") and v.rank >= 1)
                if a is None:
                    continue
                blocks += 1
                s = f.op("sum %s" % a.name, a.dt, [])
                z = f.const([], a.dt, "0.37" if self.stable else "0.0")
                c = f.op("greater %s, %s" % (s.name, z.name), "i1", [])
                t, e, j = "^then%d" % blocks, "^else%d" % blocks, "^join%d" % blocks
                f.emit("cond_br %s, %s, %s" % (c.name, t, e))
                outs = []
                for lbl in (t, e):
                    f.lines.append(lbl + ":")
                    f.scopes.append([])
                    for _ in range(rng.randint(0, 2)):
                        f.gen_op()
                    outs.append(f.same_shape(a))
                    f.emit("br %s(%s)" % (j, outs[-1].name))
                    f.scopes.pop()
                r_ = "%%j%d" % blocks
                f.lines.append("%s(%s: %s):" % (j, r_, qtype(a)))
                f.add(Val(r_, a.dt, a.dims))
            elif r < 0.2:  # a call
                a = f.pick(lambda v: v.rank >= 1)
                if a is not None:
                    f.op("call @%s(%s)" % (self.helper(a), a.name), a.dt, a.dims)
            elif r < 0.24:  # bounded recursion
                a = f.pick(lambda v: v.rank >= 1 and v.dt != "i1")
                if a is not None:
                    n = f.scalar_i64(rng.randint(0, 4))
                    f.op("call @%s(%s, %s)" % (self.recursive(a), n.name, a.name), a.dt, a.dims)
            elif r < 0.28:  # an ADT list, built and folded
                a = f.pick(lambda v: v.rank >= 1 and v.dt != "i1")
                if a is not None:
                    b, fo = self.adt(a)
                    n = f.scalar_i64(rng.randint(0, 3))
                    lst = f.fresh()
                    f.emit("%s = call @%s(%s, %s)" % (lst, b, n.name, a.name))
                    f.op("call @%s(%s, %s)" % (fo, lst, a.name), a.dt, a.dims)
            else:
                f.gen_op()
        # Return the last few values (the most derived), plus maybe another.
        vals = f.visible()
        rets = [vals[-1]]
        tensors = [v for v in vals[:-1] if v.rank >= 1 and v.dt == "f32"] or vals[:-1]
        for v in rng.sample(tensors, min(len(tensors), rng.randint(0, 2))):
            rets.append(v)
        f.emit("ret %s" % ", ".join(v.name for v in rets))
        head = "func @main(%s) -> (%s) {" % (", ".join("%s: %s" % (p.name, qtype(p)) for p in params),
                                              ", ".join(qtype(v) for v in rets))
        head = self.dispatch_attr(head, params)
        f.lines = [head] + body + ["}"]
        return f, params

    def dispatch_attr(self, head, params):
        """Sometimes `attributes {dispatch = [n], dispatch_dim = [p, a]}` on
        @main, n the run-time size of that axis: -O1 and up then run a copy
        with the axis static (the `dispatch` pass), the oracle -O0 the body
        as written. Only the size that runs: a copy for another size could
        be statically ill-typed where the run would only have failed a
        check (docs/passes.md, `dispatch`). Parameters of rank 1 or 2 (the
        reshape to the copy's shape keeps at most one other `?` axis)."""
        rng = self.dispatch_rng
        cands = [(i, p) for i, p in enumerate(params) if 1 <= p.rank <= 2]
        if not cands or rng.random() >= 0.3:
            return head
        i, p = rng.choice(cands)
        axis = rng.randrange(p.rank)
        return head[:-2] + " attributes {dispatch = [%d], dispatch_dim = [%d, %d]} {" % (p.sizes[axis], i, axis)

    def generate(self):
        main, params = self.main()
        parts = ["module @gen", ""] + self.types + [""]
        for fn in self.funcs + [main]:
            parts += fn.lines + [""]
        inputs = [input_text(self.rng, p) for p in params]
        return "\n".join(parts), inputs


STABLE = """Stable programs (generate(..., stable=True), difftest.py --native):
native kernels round differently from the reference ones (vectorized
transcendentals, reassociated sums), within the oracle's tolerance. A
discrete decision on a float turns that rounding into a different answer:
`less %s, %t` where %s and %t are equal in exact arithmetic but computed
along different paths (((x + s) - x) against s: finding 11), a float->int
cast of a value that is an integer in exact arithmetic, argmax over a
near-tie, unique/nonzero of values that cancel to (almost) zero. In stable
mode the generator keeps those decisions off the values rounding can
straddle: float comparisons compare against the other operand + 0.37 (and
only with the ordered predicates), float->integer casts cast x + 0.37, the
branch condition is sum > 0.37, and argmax, unique and nonzero take only
integer operands. Inputs and constants are multiples of 1/8, so exact values
are dyadic rationals with small denominators and 0.37 is far (>= 1e-4
relative) from every one of them; only continuum values (after exp, tanh,
...) could come within rounding of it, with negligible probability. The
reference levels are still compared bit for bit on every program."""


def generate(seed, size=12, stable=False):
    return Gen(seed, size, stable).generate()


def main():
    seed = int(sys.argv[1])
    size = 12
    stable = False
    for a in sys.argv[2:]:
        if a.startswith("--size="):
            size = int(a.split("=", 1)[1])
        elif a == "--stable":
            stable = True
    text, inputs = generate(seed, size, stable)
    print(text)
    for i in inputs:
        print("// INPUT: %s" % i)


if __name__ == "__main__":
    main()
