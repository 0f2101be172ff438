#!/usr/bin/python3
"""Recurrent models exported by PyTorch (torch.onnx.export), for torch-rnn.test.

    torch_rnn_export.py DIR                       write DIR/lstm.onnx (nn.LSTM, 2 layers)
                                                  and DIR/gru.onnx (nn.GRU, bidirectional),
                                                  each with a dynamic sequence axis, inputs
                                                  <m>_x0/x1.npy and torch's outputs
                                                  <m>_y0/y1.npy (Y, then h_n)
    torch_rnn_export.py DIR --check GOT:WANT...   compare DIR/GOT.npy with DIR/WANT.npy
    torch_rnn_export.py DIR gru --lengths=T,...   the GRU of scripts/bench_imported.py (the
                                                  LSTM's sizes: 300 -> 512, one layer): DIR/gru.onnx
                                                  (opset 17, the sequence axis dynamic) and per
                                                  length T DIR/gru-xT.npy (T x 1 x 300) and torch's
                                                  Y, DIR/gru-yT.npy
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_export import check  # noqa: E402


def export(d):
    import torch
    import torch.nn as nn

    torch.manual_seed(47)
    models = {
        "lstm": nn.LSTM(input_size=16, hidden_size=32, num_layers=2),
        "gru": nn.GRU(input_size=16, hidden_size=24, bidirectional=True),
    }
    for name, m in models.items():
        m.eval()
        xs = [torch.randn(9, 1, 16), torch.randn(4, 1, 16)]
        torch.onnx.export(m, (xs[0],), os.path.join(d, name + ".onnx"), input_names=["x"],
                          output_names=["y", "h"], dynamic_axes={"x": {0: "seq"}, "y": {0: "seq"}},
                          opset_version=14)
        with torch.no_grad():
            for k, x in enumerate(xs):
                np.save(os.path.join(d, "%s_x%d.npy" % (name, k)), x.numpy())
                y, h = m(x)
                if isinstance(h, tuple):
                    h = h[0]
                np.save(os.path.join(d, "%s_y%d.npy" % (name, k)), y.numpy())
                np.save(os.path.join(d, "%s_h%d.npy" % (name, k)), h.numpy())


def build(name):
    """The benchmark's model (only "gru"): its output is the GRU's Y alone."""
    import torch

    if name != "gru":
        raise ValueError("unknown model %r" % name)

    class GRU(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = torch.nn.GRU(input_size=300, hidden_size=512)

        def forward(self, x):
            return self.gru(x)[0]

    torch.manual_seed(47)
    return GRU().eval()


def export_bench(d, name, lengths):
    import torch

    m = build(name)
    g = torch.Generator().manual_seed(7)
    xs = {n: torch.randn(n, 1, 300, generator=g) for n in lengths}
    with torch.no_grad():
        torch.onnx.export(m, (xs[lengths[0]],), os.path.join(d, name + ".onnx"), input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "seq"}, "y": {0: "seq"}}, opset_version=17)
        for n, x in xs.items():
            np.save(os.path.join(d, "%s-x%d.npy" % (name, n)), x.numpy())
            np.save(os.path.join(d, "%s-y%d.npy" % (name, n)), m(x).numpy())


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[2] == "--check":
        sys.exit(check(sys.argv[1], sys.argv[3:]))
    if len(sys.argv) == 4 and sys.argv[3].startswith("--lengths="):
        export_bench(sys.argv[1], sys.argv[2], [int(n) for n in sys.argv[3].split("=", 1)[1].split(",")])
        sys.exit(0)
    export(sys.argv[1])
