"""onnx_cases.py's recurrent layers (frontend/onnx/Recurrent.cpp): LSTM, GRU
and RNN against ONNX's equations in numpy.
"""

import numpy as np
from onnx import TensorProto

from onnx_case_lib import family, F, N, model, randn, sigmoid

case, register = family()


def _rnn_ref(cell, x, w, r, b=None, h0=None, c0=None, p=None, lens=None, direction="forward",
             acts=None, clip=None, lbr=0):
    """ONNX's LSTM / GRU / RNN equations in numpy (layout 0): Y, Y_h, Y_c."""
    f = {"Sigmoid": sigmoid, "Tanh": np.tanh, "Relu": lambda v: np.maximum(v, 0)}
    per = {"LSTM": 3, "GRU": 2, "RNN": 1}[cell]
    dirs = 2 if direction == "bidirectional" else 1
    acts = acts or ({"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}[cell] * dirs)
    S, Bn, _ = x.shape
    H = r.shape[2]
    lens = np.full(Bn, S) if lens is None else lens
    cl = (lambda v: np.clip(v, -clip, clip)) if clip is not None else (lambda v: v)
    ys, hs, cs = [], [], []
    for d in range(dirs):
        a = [f[n] for n in acts[d * per:(d + 1) * per]]
        wd, rd = w[d], r[d]
        bd = b[d] if b is not None else np.zeros(2 * wd.shape[0], np.float32)
        wb, rb = bd[:wd.shape[0]], bd[wd.shape[0]:]
        h = h0[d].copy() if h0 is not None else np.zeros((Bn, H), np.float32)
        c = c0[d].copy() if c0 is not None else np.zeros((Bn, H), np.float32)
        y = np.zeros((S, Bn, H), np.float32)
        order = range(S - 1, -1, -1) if (direction == "reverse" or d == 1) else range(S)
        for t in order:
            xt = x[t]
            if cell == "LSTM":
                g = xt @ wd.T + h @ rd.T + wb + rb
                gi, go, gf, gc = np.split(g, 4, axis=1)
                pi, po, pf = np.split(p[d], 3) if p is not None else (0, 0, 0)
                i = a[0](cl(gi + pi * c)); fg = a[0](cl(gf + pf * c)); cc = a[1](cl(gc))
                cn = fg * c + i * cc
                o = a[0](cl(go + po * cn))
                hn = o * a[2](cn)
            elif cell == "GRU":
                xz, xr, xh = np.split(xt @ wd.T + wb, 3, axis=1)
                rz, rr, rh = np.split(rd, 3)
                bz, br, bh = np.split(rb, 3)
                z = a[0](cl(xz + h @ rz.T + bz)); rg = a[0](cl(xr + h @ rr.T + br))
                hh = a[1](cl(xh + rg * (h @ rh.T + bh))) if lbr else a[1](cl(xh + (rg * h) @ rh.T + bh))
                hn = (1 - z) * hh + z * h
                cn = c
            else:
                hn = a[0](cl(xt @ wd.T + h @ rd.T + wb + rb))
                cn = c
            valid = (t < lens)[:, None]
            y[t] = np.where(valid, hn, 0)
            h = np.where(valid, hn, h)
            c = np.where(valid, cn, c)
        ys.append(y[:, None]); hs.append(h[None]); cs.append(c[None])
    return np.concatenate(ys, 1), np.concatenate(hs, 0), np.concatenate(cs, 0)


@case
def lstm_bidirectional():
    # Bidirectional, a `?` sequence axis, biases, initial states, peepholes
    # and clip: Y, Y_h and Y_c.
    I, H = 3, 4
    w, r, b = randn(2, 4 * H, I), randn(2, 4 * H, H), randn(2, 8 * H)
    p = randn(2, 3 * H)
    m = model([N("LSTM", ["x", "w", "r", "b", "", "h0", "c0", "p"], ["y", "yh", "yc"], hidden_size=H,
                 direction="bidirectional", clip=2.5)],
              [("x", F, ["S", 2, I]), ("h0", F, [2, 2, H]), ("c0", F, [2, 2, H])],
              [("y", F, ["S", 2, 2, H]), ("yh", F, [2, 2, H]), ("yc", F, [2, 2, H])],
              inits=[("w", w), ("r", r), ("b", b), ("p", p)], opset=14)
    x, h0, c0 = randn(5, 2, I), randn(2, 2, H), randn(2, 2, H)
    return m, [x, h0, c0], list(_rnn_ref("LSTM", x, w, r, b, h0, c0, p, direction="bidirectional", clip=2.5))


@case
def gru_sequence_lens():
    # Forward GRU, linear_before_reset, a run-time sequence_lens shorter than
    # the sequence for some entries (masked steps: state kept, Y rows zero).
    I, H = 3, 5
    w, r, b = randn(1, 3 * H, I), randn(1, 3 * H, H), randn(1, 6 * H)
    m = model([N("GRU", ["x", "w", "r", "b", "lens"], ["y", "yh"], hidden_size=H, linear_before_reset=1)],
              [("x", F, ["S", 3, I]), ("lens", TensorProto.INT32, [3])],
              [("y", F, ["S", 1, 3, H]), ("yh", F, [1, 3, H])],
              inits=[("w", w), ("r", r), ("b", b)], opset=14)
    x, lens = randn(6, 3, I), np.array([6, 2, 4], dtype=np.int32)
    y, yh, _ = _rnn_ref("GRU", x, w, r, b, lens=lens, lbr=1)
    return m, [x, lens], [y, yh]


@case
def rnn_reverse_batch_first():
    # Reverse RNN with Relu, layout = 1 (batch first in and out), Y_h only.
    I, H = 4, 3
    w, r = randn(1, H, I), randn(1, H, H)
    m = model([N("RNN", ["x", "w", "r"], ["", "yh"], hidden_size=H, direction="reverse", activations=["Relu"],
                 layout=1)],
              [("x", F, [2, "S", I])], [("yh", F, [2, 1, H])], inits=[("w", w), ("r", r)], opset=14)
    x = randn(2, 7, I)
    _, yh, _ = _rnn_ref("RNN", x.transpose(1, 0, 2), w, r, direction="reverse", acts=["Relu"])
    return m, [x], [yh.transpose(1, 0, 2)]
