"""Values of the random program generator (nimble_gen.py): a value's dtype
and per-dimension sizes, the declared and static types written for it, and
the .nir literals and nimble-run inputs drawn for it."""


def nested(vals, shape):
    """A .nir literal of `vals` (row-major) with `shape`."""
    if not shape:
        return repr(vals[0])
    if len(shape) == 1:
        return "[%s]" % ", ".join(repr(v) for v in vals)
    step = len(vals) // shape[0]
    return "[%s]" % ", ".join(nested(vals[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0]))


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
