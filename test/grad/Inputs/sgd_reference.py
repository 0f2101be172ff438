#!/usr/bin/env python3
"""PyTorch's answer for models/examples/lstm_loss.nir + lstm_sgd.nirpart.

    sgd_reference.py REPO XS.npy TARGET LR STEPS OUT_PREFIX

Reads Nimble's @train outputs OUT_PREFIX.{l0,l1,w_ih,w_hh,b}.npy, runs the
same training in PyTorch (nn.LSTMCell equations on layer 0 of the small LSTM's
weights, loss = mean((h_T - target)^2), STEPS steps of w -= LR * grad from
torch.autograd) and compares: losses and trained weights within 1e-5
relative (max|diff| / max|want|). Prints both losses; exits 1 on a mismatch
or if the loss did not go down.
"""

import os
import sys

import numpy as np
import torch

repo, xs_path, target, lr, steps, prefix = sys.argv[1:7]
sys.path.insert(0, repo)
from models.common import nimble_io  # noqa: E402

W = nimble_io.read_safetensors(os.path.join(repo, "models/lstm/small/lstm_small.safetensors"))
w_ih = torch.tensor(W["weight_ih_l0"], dtype=torch.float32, requires_grad=True)
w_hh = torch.tensor(W["weight_hh_l0"], dtype=torch.float32, requires_grad=True)
b = torch.tensor(W["bias_ih_l0"] + W["bias_hh_l0"], dtype=torch.float32, requires_grad=True)
xs = torch.from_numpy(np.load(xs_path).astype(np.float32))
tgt = torch.full((1, 16), float(target))


def loss_fn():
    h = torch.zeros(1, 16)
    c = torch.zeros(1, 16)
    for t in range(xs.shape[0]):
        gates = xs[t:t + 1] @ w_ih.T + h @ w_hh.T + b
        i, f, g, o = gates.split(16, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
    return ((h - tgt) ** 2).mean()


l0 = loss_fn().item()
for _ in range(int(steps)):
    l = loss_fn()
    for p in (w_ih, w_hh, b):
        p.grad = None
    l.backward()
    with torch.no_grad():
        for p in (w_ih, w_hh, b):
            p -= float(lr) * p.grad
l1 = loss_fn().item()


def rel(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-30)


bad = []
got = {k: np.load("%s.%s.npy" % (prefix, k)) for k in ("l0", "l1", "w_ih", "w_hh", "b")}
want = {"l0": l0, "l1": l1, "w_ih": w_ih.detach().numpy(), "w_hh": w_hh.detach().numpy(), "b": b.detach().numpy()}
for k in got:
    e = rel(got[k], want[k])
    print("%-5s rel err %.2e" % (k, e))
    if not e <= 1e-5:
        bad.append(k)
print("loss before %.6f after %d steps %.6f (PyTorch: %.6f, %.6f)" % (got["l0"], int(steps), got["l1"], l0, l1))
if not float(got["l1"]) < float(got["l0"]):
    bad.append("the loss did not go down")
if bad:
    print("error: mismatch: %s" % ", ".join(bad))
    sys.exit(1)
print("ok")
