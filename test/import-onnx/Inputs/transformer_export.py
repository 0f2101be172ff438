#!/usr/bin/python3
"""Transformers exported by PyTorch, for transformers.test and the "imported"
rows of scripts/bench_imported.py and scripts/bench_models.py.

    transformer_export.py DIR MODEL [--size=small|base] [--shapes=S,...]
        write DIR/MODEL.onnx (torch.onnx.export, opset 14) and per shape S
        the input DIR/MODEL-xS.npy and torch's output DIR/MODEL-yS.npy
    transformer_export.py DIR --check GOT:WANT...
        compare DIR/GOT.npy with DIR/WANT.npy: shapes equal and the largest
        difference at most 1e-4 of the largest |WANT| (and 1e-5 absolute)

MODEL:
  vit_b_16  torchvision's VisionTransformer (Debian's python3-torchvision),
            the batch axis dynamic, S a batch size. `base` is ViT-B/16 itself
            (224x224 images, 12 layers, hidden 768, 12 heads, MLP 3072);
            `small` the same class at 32x32 images, patch 16, 2 layers,
            hidden 64, 4 heads, MLP 128 (seconds, for lit). Its attention is
            nn.MultiheadAttention (batch_first): heads are split as
            [tokens, batch * heads, head size] and the scale is applied to q.
  bert      BERT's encoder written out as Hugging Face's BertModel computes it
            (token, position and token-type embeddings, LayerNorm, 12 layers
            of self-attention and a GELU (erf) feed-forward, post-LayerNorm),
            one sequence of token ids [1, ?]: the sequence axis dynamic, S a
            length. `base`: hidden 768, 12 heads, 12 layers, FFN 3072, vocab
            30522, 512 positions; `small`: hidden 64, 4 heads, 2 layers, FFN
            128, vocab 100, 128 positions. Its attention is the rank-4 form
            exporters write for Hugging Face models: [batch, heads, tokens,
            head size] by reshape and transpose, q k^T divided by sqrt(d).

Weights are random from a fixed seed (nothing is downloaded), the models in
eval mode. The output is the last hidden state (BERT) or the logits (ViT).
"""
import math
import os
import sys

import numpy as np

from compare_npy import check

SIZES = {
    "bert": {"base": dict(hidden=768, heads=12, layers=12, ffn=3072, vocab=30522, positions=512),
             "small": dict(hidden=64, heads=4, layers=2, ffn=128, vocab=100, positions=128)},
    "vit_b_16": {"base": dict(image_size=224, patch_size=16, num_layers=12, num_heads=12, hidden_dim=768,
                              mlp_dim=3072),
                 "small": dict(image_size=32, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64,
                               mlp_dim=128)},
}


def bert_module(hidden, heads, layers, ffn, vocab, positions):
    import torch
    import torch.nn as nn

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
            self.out = nn.Linear(hidden, hidden)
            self.norm = nn.LayerNorm(hidden, eps=1e-12)

        def heads(self, t):  # [B, T, hidden] -> [B, heads, T, head size]
            return t.view(t.size(0), t.size(1), heads, hidden // heads).permute(0, 2, 1, 3)

        def forward(self, x):
            q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hidden // heads)
            c = torch.matmul(s.softmax(-1), v).permute(0, 2, 1, 3).contiguous()
            c = c.view(c.size(0), c.size(1), hidden)
            return self.norm(self.out(c) + x)

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.att = SelfAttention()
            self.up, self.down = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
            self.norm = nn.LayerNorm(hidden, eps=1e-12)

        def forward(self, x):
            x = self.att(x)
            return self.norm(self.down(torch.nn.functional.gelu(self.up(x))) + x)

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos, self.typ = nn.Embedding(vocab, hidden), nn.Embedding(positions, hidden), \
                nn.Embedding(2, hidden)
            self.norm = nn.LayerNorm(hidden, eps=1e-12)
            self.layers = nn.ModuleList([Layer() for _ in range(layers)])
            self.register_buffer("position_ids", torch.arange(positions).unsqueeze(0))

        def forward(self, ids):
            pos = self.position_ids[:, :ids.size(1)]
            x = self.tok(ids) + self.pos(pos) + self.typ(torch.zeros_like(ids))
            x = self.norm(x)
            for layer in self.layers:
                x = layer(x)
            return x

    m = Bert()
    with torch.no_grad():  # BERT's initialisation, and norms that are not the identity
        for mod in m.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                mod.weight.normal_(0.0, 0.02)
            if isinstance(mod, nn.Linear):
                mod.bias.uniform_(-0.02, 0.02)
            if isinstance(mod, nn.LayerNorm):
                mod.weight.uniform_(0.8, 1.2)
                mod.bias.uniform_(-0.1, 0.1)
    return m


def build(name, size):
    import torch

    torch.manual_seed(47)
    if name == "bert":
        m = bert_module(**SIZES[name][size])
    elif name == "vit_b_16":
        import torchvision

        if size == "base":
            m = torchvision.models.vit_b_16(weights=None)
        else:
            m = torchvision.models.VisionTransformer(**SIZES[name][size])
        with torch.no_grad():  # torchvision zeroes the head: make the logits depend on the input
            m.heads.head.weight.normal_(0.0, 0.02)
            m.heads.head.bias.uniform_(-0.02, 0.02)
    else:
        sys.exit("transformer_export.py: error: unknown model '%s' (bert, vit_b_16)" % name)
    return m.eval()


def make_input(name, size, shape, g):
    import torch

    if name == "bert":
        return torch.randint(0, SIZES[name][size]["vocab"], (1, shape), generator=g)
    s = SIZES[name][size]["image_size"]
    return torch.randn(shape, 3, s, s, generator=g)


def export(d, name, size, shapes):
    import torch

    m = build(name, size)
    g = torch.Generator().manual_seed(7)
    xs = [make_input(name, size, s, g) for s in shapes]
    if name == "bert":
        args = dict(input_names=["ids"], output_names=["y"], dynamic_axes={"ids": {1: "seq"}, "y": {1: "seq"}})
    else:
        args = dict(input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    # Not under no_grad: there nn.MultiheadAttention takes its fused fast
    # path (aten::_native_multi_head_attention), which torch 1.13 cannot export.
    torch.onnx.export(m, (xs[0],), os.path.join(d, name + ".onnx"), opset_version=14, **args)
    with torch.no_grad():
        for s, x in zip(shapes, xs):
            np.save(os.path.join(d, "%s-x%d.npy" % (name, s)), x.numpy())
            np.save(os.path.join(d, "%s-y%d.npy" % (name, s)), m(x).numpy())


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[2] == "--check":
        sys.exit(check(sys.argv[1], sys.argv[3:]))
    size, shapes = "small", [1]
    for a in sys.argv[3:]:
        if a.startswith("--size="):
            size = a[7:]
        elif a.startswith("--shapes="):
            shapes = [int(b) for b in a[9:].split(",")]
        else:
            sys.exit(__doc__)
    export(sys.argv[1], sys.argv[2], size, shapes)
