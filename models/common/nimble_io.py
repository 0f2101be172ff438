"""File formats shared by the model scripts, with numpy only.

* safetensors (the weights of `const @w : ... = external("f.safetensors", "key")`):
  an 8-byte little-endian header length N, N bytes of JSON
  {name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}},
  then the data buffer. `write_safetensors` / `read_safetensors`.

* nimble-run's value text (vm/io/ValueText.h), for algebraic data type inputs:
      value  ::= tensor | Ctor | Ctor `(` value (`,` value)* `)`
      tensor ::= dims `x` dtype `=` number*     (e.g. 1x4xf32=1 2 3 4)
               | `@` path                       (an .npy file, relative to the
                                                 directory of the text file)
  `format_tree` writes a binary @Tree (Leaf(tensor) | Node(@Tree, @Tree)),
  `parse_tree` reads one back (so the PyTorch reference reads exactly the file
  nimble-run reads).

Trees are Python tuples: ("Leaf", ndarray) or ("Node", left, right).
"""

import json
import os
import struct
import sys

import numpy as np

_ST_DTYPES = {
    np.dtype("float32"): "F32",
    np.dtype("float64"): "F64",
    np.dtype("float16"): "F16",
    np.dtype("int64"): "I64",
    np.dtype("int32"): "I32",
    np.dtype("int8"): "I8",
    np.dtype("bool"): "BOOL",
}
_ST_NP = {v: k for k, v in _ST_DTYPES.items()}

_NIR_DTYPES = {
    np.dtype("float32"): "f32",
    np.dtype("float64"): "f64",
    np.dtype("float16"): "f16",
    np.dtype("int64"): "i64",
    np.dtype("int32"): "i32",
    np.dtype("int8"): "i8",
    np.dtype("bool"): "i1",
}
_NIR_NP = {v: k for k, v in _NIR_DTYPES.items()}


# ---- safetensors ---------------------------------------------------------------


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: ndarray} (names sorted, as the reference implementation
    does) atomically, with optional {str: str} metadata (`__metadata__`).
    The header is padded with spaces to a multiple of 8."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        if a.dtype not in _ST_DTYPES:
            raise ValueError("%s: unsupported dtype %s" % (name, a.dtype))
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        raw = a.tobytes()
        header[name] = {
            "dtype": _ST_DTYPES[a.dtype],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
    os.replace(tmp, path)


def read_safetensors(path, with_metadata=False):
    """Returns {name: ndarray} (copies, writable), and the metadata dict if
    with_metadata."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("%s: not a safetensors file (too short)" % path)
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError("%s: header length %d exceeds the file" % (path, n))
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    buf = memoryview(data)[8 + n :]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dt = _ST_NP[e["dtype"]].newbyteorder("<")
        b, end = e["data_offsets"]
        shape = tuple(e["shape"])
        count = int(np.prod(shape, dtype=np.int64))
        if end - b != count * dt.itemsize or end > len(buf):
            raise ValueError("%s: bad data_offsets for %s" % (path, name))
        out[name] = np.frombuffer(buf[b:end], dtype=dt).reshape(shape).astype(dt.newbyteorder("="))
    if with_metadata:
        return out, header.get("__metadata__", {})
    return out


def read_safetensors_header(path):
    """The JSON header only (cheap for big files): {name: entry}."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError("%s: not a safetensors file" % path)
        (n,) = struct.unpack("<Q", head)
        return json.loads(f.read(n).decode("utf-8"))


def weights_up_to_date(path, shapes, metadata):
    """True if `path` exists and holds exactly `shapes` ({name: shape}, F32)
    with this metadata: make_weights.py then need not write it again."""
    try:
        header = read_safetensors_header(path)
    except (OSError, ValueError):
        return False
    meta = header.pop("__metadata__", {})
    if meta != {str(k): str(v) for k, v in metadata.items()}:
        return False
    if set(header) != set(shapes):
        return False
    size = os.path.getsize(path)
    return all(
        header[k]["dtype"] == "F32" and tuple(header[k]["shape"]) == tuple(shapes[k])
        and header[k]["data_offsets"][1] <= size
        for k in shapes
    )


def make_weights_main(argv, variants, weights_path, weight_shapes, make, metadata, show_size=False):
    """The command line every models/*/make_weights.py has: `[--force]
    [NAME...]` (default: every variant) writes each variant's weights unless
    weights_up_to_date says the file already holds them; exit 2 on an
    unknown name. show_size adds the file's size to the `wrote` line."""
    force = "--force" in argv
    names = [a for a in argv if not a.startswith("--")] or list(variants)
    for name in names:
        if name not in variants:
            print("unknown variant %r (have %s)" % (name, ", ".join(variants)), file=sys.stderr)
            return 2
        path = weights_path(name)
        if not force and weights_up_to_date(path, weight_shapes(name), metadata(name)):
            print("up to date:", os.path.relpath(path))
            continue
        write_safetensors(path, make(name), metadata(name))
        if show_size:
            print("wrote %s (%.0f MB)" % (os.path.relpath(path), os.path.getsize(path) / 1e6))
        else:
            print("wrote", os.path.relpath(path))
    return 0


# ---- value text (nimble-run --input=...) -------------------------------------------


def format_float(v):
    """Shortest text that reads back as the same float32 (numpy's repr)."""
    return str(np.float32(v))


def format_tensor(a):
    """A tensor literal: `1x4xf32=1 2.5 -3 4`."""
    a = np.asarray(a)
    dims = "x".join(str(d) for d in a.shape)
    dt = _NIR_DTYPES[a.dtype]
    head = (dims + "x" + dt) if dims else dt
    if a.dtype.kind == "f":
        body = " ".join(format_float(v) for v in a.reshape(-1))
    elif a.dtype == np.bool_:
        body = " ".join("1" if v else "0" for v in a.reshape(-1))
    else:
        body = " ".join(str(int(v)) for v in a.reshape(-1))
    return head + "=" + body


def parse_tensor(text):
    head, _, body = text.partition("=")
    parts = head.strip().split("x")
    dt = _NIR_NP[parts[-1]]
    shape = tuple(int(p) for p in parts[:-1])
    vals = body.replace("[", " ").replace("]", " ").split()  # nimble-run prints [[...]]
    count = int(np.prod(shape, dtype=np.int64))
    if len(vals) == 1 and count != 1:
        return np.full(shape, np.array(vals[0], dtype=np.float64).astype(dt), dtype=dt)
    if len(vals) != count:
        raise ValueError("tensor literal %s has %d values" % (head, len(vals)))
    return np.array([float(v) for v in vals], dtype=np.float64).astype(dt).reshape(shape) \
        if dt.kind == "f" else np.array([int(v) for v in vals], dtype=dt).reshape(shape)


def format_tree(tree, leaf_file=None):
    """Constructor-expression text of a tree. Leaves are inline literals, or
    `@name` when leaf_file(ndarray) returns a name (e.g. after saving an .npy).
    Iterative, so deep trees do not hit Python's recursion limit."""
    out = []
    stack = [tree]
    while stack:
        t = stack.pop()
        if isinstance(t, str):
            out.append(t)
        elif t[0] == "Leaf":
            name = leaf_file(t[1]) if leaf_file else None
            out.append("Leaf(" + ("@" + name if name else format_tensor(t[1])) + ")")
        else:
            out.append("Node(")
            stack.extend([")", t[2], ", ", t[1]])
    return "".join(out)


def parse_tree(text, base_dir="."):
    """Parses format_tree's text (and any equivalent spacing)."""
    pos = 0
    n = len(text)

    def skip():
        nonlocal pos
        while pos < n and text[pos].isspace():
            pos += 1

    def expect(c):
        nonlocal pos
        skip()
        if pos >= n or text[pos] != c:
            raise ValueError("expected %r at offset %d" % (c, pos))
        pos += 1

    def name():
        nonlocal pos
        skip()
        s = pos
        while pos < n and (text[pos].isalnum() or text[pos] == "_"):
            pos += 1
        return text[s:pos]

    def tensor():
        nonlocal pos
        skip()
        s = pos
        while pos < n and text[pos] not in ",)":
            pos += 1
        t = text[s:pos].strip()
        if t.startswith("@"):
            p = t[1:]
            return np.load(p if os.path.isabs(p) else os.path.join(base_dir, p))
        return parse_tensor(t)

    def tree():
        c = name()
        if c == "Leaf":
            expect("(")
            v = tensor()
            expect(")")
            return ("Leaf", v)
        if c == "Node":
            expect("(")
            l = tree()
            expect(",")
            r = tree()
            expect(")")
            return ("Node", l, r)
        raise ValueError("unknown constructor %r at offset %d" % (c, pos))

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 100000))
    try:
        t = tree()
    finally:
        sys.setrecursionlimit(old)
    skip()
    if pos != n:
        raise ValueError("unexpected text at offset %d" % pos)
    return t


def read_tree_file(path):
    with open(path) as f:
        return parse_tree(f.read(), os.path.dirname(os.path.abspath(path)))


def tree_counts(tree):
    """(leaves, internal nodes)."""
    leaves = nodes = 0
    stack = [tree]
    while stack:
        t = stack.pop()
        if t[0] == "Leaf":
            leaves += 1
        else:
            nodes += 1
            stack.extend([t[1], t[2]])
    return leaves, nodes


def random_tree(rng, leaves, make_leaf):
    """A random binary tree with `leaves` leaves: split the leaf count at a
    uniformly random point, recursively (shapes from chains to balanced)."""
    if leaves == 1:
        return ("Leaf", make_leaf())
    k = int(rng.integers(1, leaves))
    return ("Node", random_tree(rng, k, make_leaf), random_tree(rng, leaves - k, make_leaf))


def chain_tree(leaves, make_leaf, left_deep=True):
    """The degenerate tree with `leaves` leaves: a left-deep chain
    Node(Node(Node(L, L), L), L) (every right child a leaf), or right-deep.
    Leaves are made innermost first. Built iteratively (a chain of
    thousands of leaves must not hit Python's recursion limit)."""
    tree = ("Leaf", make_leaf())
    for _ in range(leaves - 1):
        leaf = ("Leaf", make_leaf())
        tree = ("Node", tree, leaf) if left_deep else ("Node", leaf, tree)
    return tree


def write_text_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def save_npy_atomic(path, a):
    tmp = path + ".tmp.npy"
    np.save(tmp, a)
    os.replace(tmp, path)
