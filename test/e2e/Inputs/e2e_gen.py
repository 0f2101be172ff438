#!/usr/bin/env python3
"""Inputs and numpy-computed expected outputs for the test/e2e programs.

    e2e_gen.py CASE PREFIX

writes PREFIX.* files (inputs as .npy, expected outputs as .npy, weights as
.safetensors, ADT values as constructor text files) for the lit test named in
each function's docstring. Every expected value is computed here with numpy
from the definition of the program, never taken from the tools' output.
Seeds are fixed, so the files are the same on every run.
"""
import json
import os
import sys

import numpy as np


def save(prefix, name, array):
    # C order: nimble-run refuses Fortran-ordered .npy files (np.argwhere
    # returns a transposed view). Not np.ascontiguousarray: it makes a 0-d
    # array 1-d.
    np.save("%s.%s.npy" % (prefix, name), np.array(array, order="C"))


def write_safetensors(path, tensors):
    """Writes a safetensors file (8-byte header length, JSON header, data)."""
    names = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}
    header, blobs, offset = {}, [], 0
    for key, arr in tensors.items():
        data = np.ascontiguousarray(arr).tobytes()
        header[key] = {"dtype": names[arr.dtype], "shape": list(arr.shape),
                       "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)


def softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


MLP_ROWS = [0, 1, 7, 64, 300]


def mlp(prefix):
    """mlp-dynamic-rows.nir: softmax(relu(x @ w1 + b1) @ w2 + b2), x: ?x16."""
    rng = np.random.default_rng(1)
    w1 = rng.standard_normal((16, 32)).astype(np.float32) * np.float32(0.25)
    b1 = rng.standard_normal(32).astype(np.float32) * np.float32(0.1)
    w2 = rng.standard_normal((32, 10)).astype(np.float32) * np.float32(0.25)
    b2 = rng.standard_normal(10).astype(np.float32) * np.float32(0.1)
    os.makedirs(prefix + ".weights", exist_ok=True)
    write_safetensors(os.path.join(prefix + ".weights", "mlp.safetensors"),
                      {"w1": w1, "b1": b1, "w2": w2, "b2": b2})
    for n in MLP_ROWS:
        x = rng.standard_normal((n, 16)).astype(np.float32)
        h = np.maximum(x.astype(np.float64) @ w1 + b1, 0.0)
        y = softmax(h @ w2 + b2)
        save(prefix, "x%d" % n, x)
        save(prefix, "y%d" % n, y.astype(np.float32))


LOOP_ROWS = [0, 1, 5, 33]


def loop(prefix):
    """loop-carried.nir: running sums and an RNN cell over the rows of xs."""
    rng = np.random.default_rng(2)
    wx = rng.standard_normal((4, 4)).astype(np.float32) * np.float32(0.5)
    wh = rng.standard_normal((4, 4)).astype(np.float32) * np.float32(0.5)
    b = rng.standard_normal(4).astype(np.float32) * np.float32(0.1)
    save(prefix, "wx", wx)
    save(prefix, "wh", wh)
    save(prefix, "b", b)
    for n in LOOP_ROWS:
        xs = rng.standard_normal((n, 4)).astype(np.float32)
        save(prefix, "xs%d" % n, xs)
        # @running_sum: (sum of the rows as 1x4, the prefix sums as nx4).
        save(prefix, "total%d" % n, xs.astype(np.float64).sum(axis=0, keepdims=True).astype(np.float32))
        save(prefix, "cumsum%d" % n, np.cumsum(xs.astype(np.float64), axis=0).astype(np.float32))
        # @rnn: h_{t+1} = tanh(x_t wx + h_t wh + b), h_0 = 0; the final h.
        h = np.zeros((1, 4))
        for t in range(n):
            h = np.tanh(xs[t:t + 1].astype(np.float64) @ wx + h @ wh + b)
        save(prefix, "h%d" % n, h.astype(np.float32))


def tree(prefix):
    """adt-tree.nir: @reduce(Leaf(v)) = sum(v, axis 0) * scale,
    @reduce(Node(l, r)) = 2 * @reduce(l) - @reduce(r), leaves of ?x3 rows."""
    rng = np.random.default_rng(3)
    leaves = [0]

    def build(depth):
        """Returns (text, value) of a random tree; leaves are .npy files."""
        if depth == 0 or (depth < 4 and rng.random() < 0.3):
            rows = int(rng.integers(0, 4))
            v = rng.standard_normal((rows, 3)).astype(np.float32)
            name = "leaf%d" % leaves[0]
            leaves[0] += 1
            save(prefix, name, v)
            # Relative to the tree file, which lives beside the leaves.
            path = os.path.basename("%s.%s.npy" % (prefix, name))
            return "Leaf(@%s)" % path, v.astype(np.float64).sum(axis=0, keepdims=True)
        lt, lv = build(depth - 1)
        rt, rv = build(depth - 1)
        return "Node(%s, %s)" % (lt, rt), 2 * lv - rv

    for k, depth in enumerate([0, 1, 3, 6]):
        text, value = build(depth)
        with open("%s.tree%d.txt" % (prefix, k), "w") as f:
            f.write(text + "\n")
        save(prefix, "tree%d.expected" % k, value.astype(np.float32))


def unique_nonzero(prefix):
    """dynamic-shapes.nir: np.unique over i32 vectors, np.argwhere over f32
    matrices with a ? row count."""
    rng = np.random.default_rng(4)
    for k, n in enumerate([1, 9, 100, 1000]):
        x = rng.integers(-5, 6, size=n).astype(np.int32)
        save(prefix, "u%d" % k, x)
        save(prefix, "u%d.expected" % k, np.unique(x).astype(np.int32))
    for k, (rows, density) in enumerate([(1, 1.0), (4, 0.5), (50, 0.1), (7, 0.0)]):
        m = rng.standard_normal((rows, 5)).astype(np.float32)
        m[rng.random((rows, 5)) >= density] = 0
        save(prefix, "nz%d" % k, m)
        save(prefix, "nz%d.expected" % k, np.argwhere(m).astype(np.int64))


def nested(prefix):
    """nested-loops.nir: @pairs(a, b) = sum over i, j of a[i] . b[j] (and the
    number of inner iterations); @gram(a) = a @ a.T, row by row."""
    rng = np.random.default_rng(5)
    for k, (n, m) in enumerate([(0, 3), (3, 0), (1, 1), (4, 6), (17, 9)]):
        a = rng.standard_normal((n, 3)).astype(np.float32)
        b = rng.standard_normal((m, 3)).astype(np.float32)
        save(prefix, "a%d" % k, a)
        save(prefix, "b%d" % k, b)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        total = sum(float(a64[i] @ b64[j]) for i in range(n) for j in range(m))
        save(prefix, "pairs%d" % k, np.array(total, dtype=np.float32))
        save(prefix, "count%d" % k, np.array(n * m, dtype=np.int64))
        save(prefix, "gram%d" % k, (a64 @ a64.T).astype(np.float32))


def attention(prefix):
    """attention.nir: one self-attention head with a residual and layer norm,
    x: ?x8, wq/wk/wv: 8x8, gamma/beta: 8."""
    rng = np.random.default_rng(6)
    w = {k: rng.standard_normal((8, 8)).astype(np.float32) * np.float32(0.3) for k in ("wq", "wk", "wv")}
    gamma = (1 + 0.1 * rng.standard_normal(8)).astype(np.float32)
    beta = (0.1 * rng.standard_normal(8)).astype(np.float32)
    for k, v in w.items():
        save(prefix, k, v)
    save(prefix, "gamma", gamma)
    save(prefix, "beta", beta)
    f = {k: v.astype(np.float64) for k, v in w.items()}
    for n in [0, 1, 5, 33]:
        x = rng.standard_normal((n, 8)).astype(np.float32)
        x64 = x.astype(np.float64)
        q, k, v = x64 @ f["wq"], x64 @ f["wk"], x64 @ f["wv"]
        a = softmax(q @ k.T / np.sqrt(8.0)) @ v if n else np.zeros((0, 8))
        h = x64 + a
        mu = h.mean(axis=-1, keepdims=True)
        var = ((h - mu) ** 2).mean(axis=-1, keepdims=True)
        y = (h - mu) / np.sqrt(var + 1e-5) * gamma + beta
        save(prefix, "x%d" % n, x)
        save(prefix, "y%d" % n, y.astype(np.float32))


def multihead(prefix):
    """multihead-attention.nir: 4 heads of 8 over x: ?x32 with an additive key
    mask: ?, wq/wk/wv: 32x32; the heads concatenated, ?x32."""
    rng = np.random.default_rng(52)
    w = {k: rng.standard_normal((32, 32)).astype(np.float32) * np.float32(0.3) for k in ("wq", "wk", "wv")}
    for k, v in w.items():
        save(prefix, k, v)
    f = {k: v.astype(np.float64) for k, v in w.items()}
    for n in [0, 1, 5, 33]:
        x = rng.standard_normal((n, 32)).astype(np.float32)
        mask = np.where(rng.random(n) < 0.3, -1e4, 0).astype(np.float32)
        if n:
            mask[0] = 0  # every row keeps a key
        x64 = x.astype(np.float64)
        q, k, v = ((x64 @ f[w_]).reshape(n, 4, 8).transpose(1, 0, 2) for w_ in ("wq", "wk", "wv"))
        s = q @ k.transpose(0, 2, 1) / np.sqrt(8.0) + mask.astype(np.float64)
        y = (softmax(s) @ v).transpose(1, 0, 2).reshape(n, 32) if n else np.zeros((0, 32))
        save(prefix, "x%d" % n, x)
        save(prefix, "m%d" % n, mask)
        save(prefix, "y%d" % n, y.astype(np.float32))


def _windows(x, k, s, pb, pe, fill):
    """[N, C, OH, OW, k*k]: the k x k windows of x at stride s, padded by pb
    before and pe after each spatial axis with `fill` (float64)."""
    n, c, h, w = x.shape
    xp = np.full((n, c, h + pb + pe, w + pb + pe), fill)
    xp[:, :, pb:pb + h, pb:pb + w] = x
    oh, ow = (h + pb + pe - k) // s + 1, (w + pb + pe - k) // s + 1
    return np.stack([xp[:, :, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s]
                     for i in range(k) for j in range(k)], axis=-1)


def _conv(x, w, b, s, p, groups=1):
    m, cg, k = w.shape[0], w.shape[1], w.shape[2]
    win = _windows(x, k, s, p, p, 0.0)  # n, c, oh, ow, k*k
    mg = m // groups
    out = [np.einsum("nchwt,ct->nhw", win[:, (o // mg) * cg:(o // mg + 1) * cg], w[o].reshape(cg, -1)) + b[o]
           for o in range(m)]
    return np.stack(out, axis=1)


CNN_SIZES = [(1, 8), (2, 11), (3, 16)]


def cnn(prefix):
    """cnn.nir: a residual block (conv, relu, conv, add, relu), a depthwise
    strided conv with ReLU6, max_pool and avg_pool; x: ?x4x?x?."""
    rng = np.random.default_rng(5)
    w1, w2 = (rng.standard_normal((4, 4, 3, 3)).astype(np.float32) * np.float32(0.3) for _ in range(2))
    b1, b2 = (rng.standard_normal(4).astype(np.float32) * np.float32(0.1) for _ in range(2))
    wd = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
    bd = rng.standard_normal(4).astype(np.float32)
    os.makedirs(prefix + ".weights", exist_ok=True)
    write_safetensors(os.path.join(prefix + ".weights", "cnn.safetensors"),
                      {"w1": w1, "b1": b1, "w2": w2, "b2": b2, "wd": wd, "bd": bd})
    for n, hw in CNN_SIZES:
        x = rng.standard_normal((n, 4, hw, hw)).astype(np.float32)
        x64 = x.astype(np.float64)
        r1 = np.maximum(_conv(x64, w1, b1, 1, 1), 0)
        r = np.maximum(_conv(r1, w2, b2, 1, 1) + x64, 0)
        d = np.minimum(np.maximum(_conv(r, wd, bd, 2, 1, groups=4), 0), 6)
        # max_pool 2x2 stride 2 with ceil_mode: the overhang holds nothing.
        mp = np.nanmax(_windows(d, 2, 2, 0, d.shape[2] % 2, np.nan), axis=-1)
        ap = np.nanmean(_windows(r, 3, 2, 1, 1, np.nan), axis=-1)  # padding not counted
        save(prefix, "x%d" % hw, x)
        save(prefix, "mp%d" % hw, mp.astype(np.float32))
        save(prefix, "ap%d" % hw, ap.astype(np.float32))


CASES = {"multihead": multihead, "cnn": cnn, "attention": attention, "nested": nested, "mlp": mlp, "loop": loop, "tree": tree, "unique_nonzero": unique_nonzero}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in CASES:
        sys.exit("usage: e2e_gen.py {%s} PREFIX" % ",".join(CASES))
    CASES[sys.argv[1]](sys.argv[2])
