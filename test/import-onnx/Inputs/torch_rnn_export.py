#!/usr/bin/python3
"""Recurrent models exported by PyTorch (torch.onnx.export), for torch-rnn.test.

    torch_rnn_export.py DIR                       write DIR/lstm.onnx (nn.LSTM, 2 layers)
                                                  and DIR/gru.onnx (nn.GRU, bidirectional),
                                                  each with a dynamic sequence axis, inputs
                                                  <m>_x0/x1.npy and torch's outputs
                                                  <m>_y0/y1.npy (Y, then h_n)
    torch_rnn_export.py DIR --check GOT:WANT...   compare DIR/GOT.npy with DIR/WANT.npy
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


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[2] == "--check":
        sys.exit(check(sys.argv[1], sys.argv[3:]))
    export(sys.argv[1])
