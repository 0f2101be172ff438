#!/usr/bin/python3
"""A model exported by PyTorch (torch.onnx.export), for torch-export.test.

    torch_export.py DIR                       write DIR/enc.onnx, inputs x0/x1.npy and
                                              torch's outputs y0/y1.npy
    torch_export.py DIR --check GOT:WANT...   compare DIR/GOT.npy with DIR/WANT.npy
"""
import os
import sys

import numpy as np


def export(d):
    import torch
    import torch.nn as nn

    torch.manual_seed(47)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True)
            self.lin = nn.Linear(32, 10)

        def forward(self, x):
            return self.lin(self.enc(x)).softmax(-1)

    m = M().eval()
    xs = [torch.randn(2, 7, 32), torch.randn(3, 5, 32)]
    torch.onnx.export(m, (xs[0],), os.path.join(d, "enc.onnx"), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}, opset_version=14)
    with torch.no_grad():
        for k, x in enumerate(xs):
            np.save(os.path.join(d, "x%d.npy" % k), x.numpy())
            np.save(os.path.join(d, "y%d.npy" % k), m(x).numpy())


def check(d, pairs):
    bad = 0
    for pair in pairs:
        got, want = pair.split(":")
        a, b = np.load(os.path.join(d, got + ".npy")), np.load(os.path.join(d, want + ".npy"))
        if a.shape == b.shape and np.allclose(a, b, rtol=1e-4, atol=1e-5):
            print("%s matches %s (max difference %.2g)" % (got, want, np.abs(a - b).max()))
        else:
            print("%s differs from %s: %s vs %s" % (got, want, a.shape, b.shape))
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[2] == "--check":
        sys.exit(check(sys.argv[1], sys.argv[3:]))
    export(sys.argv[1])
