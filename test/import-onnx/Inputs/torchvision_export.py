#!/usr/bin/python3
"""torchvision CNNs exported by PyTorch, for torchvision.test and the
"imported" rows of scripts/bench_models.py.

    torchvision_export.py DIR MODEL [--size=S] [--batches=B,...]
        write DIR/MODEL.onnx (torch.onnx.export, opset 14, the batch axis
        dynamic), and per batch size B the input DIR/MODEL-xB.npy and torch's
        output DIR/MODEL-yB.npy (S x S images, default 64)
    torchvision_export.py DIR --check GOT:WANT...
        compare DIR/GOT.npy with DIR/WANT.npy: shapes equal and the largest
        difference at most 1e-4 of the largest |WANT| (and 1e-5 absolute)

MODEL: resnet18, mobilenet_v2 (Debian's python3-torchvision; random
weights from a fixed seed, the model in eval mode so that the exporter folds
each BatchNormalization into its Conv; nothing is downloaded). The
BatchNorm statistics are randomised too, so that the folding is exercised
with values other than 0 and 1.
"""
import os
import sys

import numpy as np

from compare_npy import check


def build(name):
    import torch
    import torchvision

    torch.manual_seed(47)
    m = getattr(torchvision.models, name)(weights=None)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.1, 0.1)
    return m.eval()


def export(d, name, size, batches):
    import torch

    m = build(name)
    x0 = torch.randn(batches[0], 3, size, size)
    torch.onnx.export(m, (x0,), os.path.join(d, name + ".onnx"), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=14)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for b in batches:
            x = torch.randn(b, 3, size, size, generator=g)
            np.save(os.path.join(d, "%s-x%d.npy" % (name, b)), x.numpy())
            np.save(os.path.join(d, "%s-y%d.npy" % (name, b)), m(x).numpy())


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[2] == "--check":
        sys.exit(check(sys.argv[1], sys.argv[3:]))
    size, batches = 64, [1]
    for a in sys.argv[3:]:
        if a.startswith("--size="):
            size = int(a[7:])
        elif a.startswith("--batches="):
            batches = [int(b) for b in a[10:].split(",")]
    export(sys.argv[1], sys.argv[2], size, batches)
