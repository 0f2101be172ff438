#!/usr/bin/env python3
"""PyTorch reference of the LSTM models: the correctness oracle and the
benchmark peer (PyTorch eager, one loop iteration per token, as in the paper).

It loads the SAME .safetensors as the .nir (numpy, then torch.from_numpy) and
computes what models/lstm/*.nir compute: per token, per layer, one
torch.nn.LSTMCell step (the gates i, f, g, o of nn.LSTM), h and c starting at
0; the result is (h, c) of the last layer after the last token.

    /usr/bin/python3 models/lstm/reference.py --self-test
        checks this reference against torch.nn.LSTM (cuDNN-style whole-sequence
        implementation) and against a hand-written numpy version of the
        equations in the .nir header, on every variant; exit 1 on a mismatch.
    /usr/bin/python3 models/lstm/reference.py --check-fixtures [DIR]
        only the fixture check (of DIR instead of small/fixtures), within
        models/common/compare.py's FIXTURE_TOLERANCE; exit 1 on a mismatch.
    /usr/bin/python3 models/lstm/reference.py VARIANT XS.npy [--out PREFIX]
        prints (or saves PREFIX.h.npy / PREFIX.c.npy) the outputs for one input.

Interface used by scripts/check_models.py and scripts/bench_models.py:
    load(variant) -> model;  run(model, xs) -> [h, c] (numpy)
    read_input(path) -> xs;  work(xs) -> tokens;  nimble_inputs(path) -> [--input values]
"""

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from models.common import nimble_io  # noqa: E402
from models.common.compare import check_fixtures as _check_fixtures  # noqa: E402
from models.common.compare import default_fixtures_dir, reference_main, rel_err  # noqa: E402
from models.lstm.variants import VARIANTS, weights_path  # noqa: E402

UNIT = "token"
OUTPUTS = ["h", "c"]  # the results of @main, in order


class LSTMReference(torch.nn.Module):
    """A stack of nn.LSTMCell run one token at a time."""

    def __init__(self, input_size, hidden, layers, weights):
        super().__init__()
        self.hidden = hidden
        self.cells = torch.nn.ModuleList()
        for k in range(layers):
            cell = torch.nn.LSTMCell(input_size if k == 0 else hidden, hidden)
            with torch.no_grad():
                for p in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    src = torch.from_numpy(weights["%s_l%d" % (p, k)])
                    getattr(cell, p).copy_(src)
            self.cells.append(cell)
        self.eval()

    def forward(self, xs):
        # xs: [T, I]
        state = [
            (torch.zeros(1, self.hidden), torch.zeros(1, self.hidden)) for _ in self.cells
        ]
        for t in range(xs.shape[0]):
            inp = xs[t : t + 1]
            for k, cell in enumerate(self.cells):
                h, c = cell(inp, state[k])
                state[k] = (h, c)
                inp = h
        return state[-1]


def load(variant):
    v = VARIANTS[variant]
    weights = nimble_io.read_safetensors(weights_path(variant))
    return LSTMReference(v["input"], v["hidden"], v["layers"], weights)


def read_input(path):
    return torch.from_numpy(np.load(path).astype(np.float32))


def work(xs):
    """Tokens: the unit of the paper's per-token latency."""
    return int(xs.shape[0])


def nimble_inputs(path):
    return ["@" + os.path.abspath(path)]


def run(model, xs):
    with torch.inference_mode():
        h, c = model(xs)
    return [h.numpy().copy(), c.numpy().copy()]


# ---- hand-batched: pack_padded_sequence through nn.LSTM -----------------------------------


def load_packed(variant):
    """torch.nn.LSTM with the variant's weights (the same .safetensors, nn.LSTM's
    own state_dict names): the hand-batched peer of scripts/bench_models.py --batch."""
    v = VARIANTS[variant]
    lstm = torch.nn.LSTM(v["input"], v["hidden"], v["layers"])
    weights = nimble_io.read_safetensors(weights_path(variant))
    lstm.load_state_dict({k: torch.from_numpy(a) for k, a in weights.items()})
    return lstm.eval()


def run_nn(lstm, xs):
    """[h, c] of one sequence through one nn.LSTM call (what a PyTorch user
    calls: the input projection of every token is one GEMM, the recurrence runs
    in ATen's C++ loop): the second PyTorch peer of scripts/bench_models.py."""
    with torch.inference_mode():
        _, (h, c) = lstm(xs.unsqueeze(1))
        return [h[-1].numpy().copy(), c[-1].numpy().copy()]


def run_packed(lstm, seqs):
    """[[h, c] per sequence] (numpy) for a batch of sequences of any lengths >= 1:
    padded to the longest (pad_sequence), packed (pack_padded_sequence, unsorted:
    PyTorch sorts and restores the order) and run through one nn.LSTM call, as a
    PyTorch user batches sequences by hand. Equal to run() within 1e-5 (--self-test)."""
    with torch.inference_mode():
        lengths = torch.tensor([int(x.shape[0]) for x in seqs])
        padded = torch.nn.utils.rnn.pad_sequence(list(seqs))  # [T_max, B, I]
        packed = torch.nn.utils.rnn.pack_padded_sequence(padded, lengths, enforce_sorted=False)
        _, (h, c) = lstm(packed)
        return [[h[-1, b : b + 1].numpy().copy(), c[-1, b : b + 1].numpy().copy()] for b in range(len(seqs))]


# ---- self-test ---------------------------------------------------------------------------


def numpy_lstm(weights, layers, hidden, xs):
    """The equations of the .nir header, in float64."""
    sig = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    h = [np.zeros((1, hidden)) for _ in range(layers)]
    c = [np.zeros((1, hidden)) for _ in range(layers)]
    for t in range(xs.shape[0]):
        x = xs[t : t + 1].astype(np.float64)
        for k in range(layers):
            W = lambda n: weights["%s_l%d" % (n, k)].astype(np.float64)  # noqa: E731
            gates = x @ W("weight_ih").T + h[k] @ W("weight_hh").T + (W("bias_ih") + W("bias_hh"))
            i, f, g, o = np.split(gates, 4, axis=1)
            c[k] = sig(f) * c[k] + sig(i) * np.tanh(g)
            h[k] = sig(o) * np.tanh(c[k])
            x = h[k]
    return h[-1], c[-1]


def self_test():
    ok = True
    rng = np.random.default_rng(7)
    for name, v in VARIANTS.items():
        if not os.path.exists(weights_path(name)):
            print("skip %s: %s missing (run make_weights.py)" % (name, weights_path(name)))
            continue
        model = load(name)
        weights = nimble_io.read_safetensors(weights_path(name))
        lstm = torch.nn.LSTM(v["input"], v["hidden"], v["layers"])
        lstm.load_state_dict({k: torch.from_numpy(a) for k, a in weights.items()})
        lstm.eval()
        for T in (1, 9, 64):
            xs = rng.normal(0, 0.4, size=(T, v["input"])).astype(np.float32)
            h, c = run(model, torch.from_numpy(xs))
            with torch.inference_mode():
                _, (hn, cn) = lstm(torch.from_numpy(xs)[:, None, :])
            e_torch = max(rel_err(h, hn[-1].numpy()), rel_err(c, cn[-1].numpy()))
            h64, c64 = numpy_lstm(weights, v["layers"], v["hidden"], xs)
            e_np = max(rel_err(h, h64), rel_err(c, c64))
            good = e_torch <= 1e-5 and e_np <= 1e-5
            ok &= good
            print("%-11s T=%-3d vs nn.LSTM %.2e   vs numpy(f64) %.2e   %s"
                  % (name, T, e_torch, e_np, "ok" if good else "MISMATCH"))
        # The empty sequence: zeros (nn.LSTM cannot take it; the equations say so).
        h, c = run(model, torch.zeros(0, v["input"]))
        good = not h.any() and not c.any() and h.shape == (1, v["hidden"])
        ok &= good
        print("%-11s T=0   zeros: %s" % (name, "ok" if good else "MISMATCH"))
        # The hand-batched peer: one packed batch of mixed lengths against the cell loop.
        seqs = [torch.from_numpy(rng.normal(0, 0.4, size=(int(T), v["input"])).astype(np.float32))
                for T in [1, 100] + list(rng.integers(1, 101, size=6))]
        got = run_packed(load_packed(name), seqs)
        e = max(rel_err(g, w) for x, outs in zip(seqs, got) for g, w in zip(outs, run(model, x)))
        good = e <= 1e-5
        ok &= good
        print("%-11s packed batch of %d (1..100 tokens) vs the cell loop %.2e   %s"
              % (name, len(seqs), e, "ok" if good else "MISMATCH"))
    return ok


def check_fixtures(fixtures_dir=None):
    """The committed fixtures of the small variant are what this reference
    computes now (same weights, same inputs), within the tolerance that holds
    across CPUs (models/common/compare.py): they must not go stale."""
    model = load("lstm_small")
    return _check_fixtures("lstm_small", fixtures_dir or default_fixtures_dir(__file__), "seq_??.npy", ".npy",
                           OUTPUTS, lambda path: run(model, read_input(path)))


def main(argv):
    return reference_main(argv, __doc__, self_test, check_fixtures,
                          lambda name, path: run(load(name), read_input(path)), ("h", "c"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
