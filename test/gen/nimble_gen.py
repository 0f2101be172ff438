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
sometimes carries the `dispatch` attribute (graph dispatch), and some
functions a `phase` (program phases of auto-batching). Not
generated: the explicit-memory ops (alloc_storage, alloc_tensor,
invoke_mut, invoke_shape_func, kill), which only manifest-memory writes,
and device_copy (no second device on a CPU-only run).
"""
import math
import random
import sys

from gen_layout_ops import LayoutOps
from gen_values import Val, input_text, literal, nested, qtype, stype  # noqa: F401

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


class Func(LayoutOps):
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
        self.phase_rng = random.Random(seed * 7919 + 49049)
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

    def phase_attrs(self, funcs):
        """Sometimes `phase = N` (program phases of auto-batching, seed 001
        section 4.1; docs/autobatch.md) on some of the functions: -O1 and up
        check the value and keep the calls of such a function (the inliner
        leaves them), -O0 ignores it; results never change, so the oracle
        compares them as for any program. N is small, or the largest
        allowed (65536). A stream of its own, as dispatch_attr's: without
        the attribute every seed's program is what it was before it."""
        rng = self.phase_rng
        if rng.random() >= 0.3:
            return
        for fn in funcs:
            if rng.random() < 0.5:
                fn.lines[0] = with_attr(fn.lines[0], "phase = %d" % rng.choice([0, 1, 1, 2, 3, 65536]))

    def generate(self):
        main, params = self.main()
        self.phase_attrs(self.funcs + [main])
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


def with_attr(head, attr):
    """A function's head line (`func @f(...) -> ... {`, maybe with an
    `attributes {...}` clause already) with `attr` added to its attributes."""
    if head.endswith("} {"):
        return head[:-3] + ", %s} {" % attr
    return head[:-2] + " attributes {%s} {" % attr


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
