#!/usr/bin/env python3
"""PyTorch reference of the BERT encoders: the correctness oracle and the
benchmark peer (PyTorch eager, plain modules).

It loads the SAME .safetensors as the .nir and computes what gen_bert.py
documents: x = LayerNorm(word[ids] + position[0..n) + token_type[0]), then
per layer post-LN self-attention (scores q k^T / sqrt(d), softmax) and a GELU
(exact erf) feed-forward block. Output: the last hidden states [n, D].

    /usr/bin/python3 models/bert/reference.py --self-test
        compares with (1) a hand-written float64 numpy BERT and (2)
        torch.nn.TransformerEncoderLayer (post-LN, GELU) loaded with the same
        weights; exit 1 on a mismatch.
    /usr/bin/python3 models/bert/reference.py --check-fixtures [DIR]
        only the fixture check (of DIR instead of small/fixtures), within
        models/common/compare.py's FIXTURE_TOLERANCE; exit 1 on a mismatch.
    /usr/bin/python3 models/bert/reference.py VARIANT IDS.npy [--out FILE.npy]

Interface for scripts/check_models.py and scripts/bench_models.py:
    load(variant) -> model;  run(model, ids) -> [hidden] (numpy)
    read_input(path) -> ids;  work(ids) -> tokens;  nimble_inputs(path) -> [--input values]
"""

import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from models.common import nimble_io  # noqa: E402
from models.common.compare import check_fixtures as _check_fixtures  # noqa: E402
from models.common.compare import default_fixtures_dir, reference_main, rel_err  # noqa: E402
from models.bert.variants import VARIANTS, layer_key, weights_path  # noqa: E402

UNIT = "token"
OUTPUTS = ["hidden"]  # the results of @main, in order


def _set(module, weight, bias):
    with torch.no_grad():
        module.weight.copy_(torch.from_numpy(weight))
        module.bias.copy_(torch.from_numpy(bias))


class BertLayer(torch.nn.Module):
    def __init__(self, D, heads, F, eps):
        super().__init__()
        self.heads, self.d = heads, D // heads
        self.query = torch.nn.Linear(D, D)
        self.key = torch.nn.Linear(D, D)
        self.value = torch.nn.Linear(D, D)
        self.attn_out = torch.nn.Linear(D, D)
        self.attn_ln = torch.nn.LayerNorm(D, eps=eps)
        self.ffn_in = torch.nn.Linear(D, F)
        self.gelu = torch.nn.GELU()  # exact erf form (approximate='none')
        self.ffn_out = torch.nn.Linear(F, D)
        self.ffn_ln = torch.nn.LayerNorm(D, eps=eps)

    def forward(self, x):
        n = x.shape[0]
        split = lambda t: t.view(n, self.heads, self.d).transpose(0, 1)  # noqa: E731  [heads, n, d]
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        probs = torch.softmax(torch.matmul(q, k.transpose(1, 2)) / math.sqrt(self.d), dim=-1)
        ctx = torch.matmul(probs, v).transpose(0, 1).reshape(n, self.heads * self.d)
        x = self.attn_ln(x + self.attn_out(ctx))
        return self.ffn_ln(x + self.ffn_out(self.gelu(self.ffn_in(x))))


class BertReference(torch.nn.Module):
    def __init__(self, v, weights):
        super().__init__()
        D = v["hidden"]
        self.word = torch.nn.Embedding(v["vocab"], D)
        self.position = torch.nn.Embedding(v["max_pos"], D)
        self.token_type = torch.nn.Embedding(v["type_vocab"], D)
        self.emb_ln = torch.nn.LayerNorm(D, eps=v["eps"])
        self.layers = torch.nn.ModuleList(
            BertLayer(D, v["heads"], v["ffn"], v["eps"]) for _ in range(v["layers"]))
        W = lambda k: torch.from_numpy(weights[k])  # noqa: E731
        with torch.no_grad():
            self.word.weight.copy_(W("embeddings.word_embeddings.weight"))
            self.position.weight.copy_(W("embeddings.position_embeddings.weight"))
            self.token_type.weight.copy_(W("embeddings.token_type_embeddings.weight"))
        _set(self.emb_ln, weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"])
        for l, layer in enumerate(self.layers):
            g = lambda s: weights[layer_key(l, s)]  # noqa: E731
            for mod, hf in ((layer.query, "attention.self.query"), (layer.key, "attention.self.key"),
                            (layer.value, "attention.self.value"),
                            (layer.attn_out, "attention.output.dense"),
                            (layer.attn_ln, "attention.output.LayerNorm"),
                            (layer.ffn_in, "intermediate.dense"), (layer.ffn_out, "output.dense"),
                            (layer.ffn_ln, "output.LayerNorm")):
                _set(mod, g(hf + ".weight"), g(hf + ".bias"))
        self.eval()

    def forward(self, ids):
        n = ids.shape[0]
        positions = torch.arange(n, dtype=torch.int64)
        x = self.word(ids) + self.position(positions) + self.token_type.weight[0:1]
        x = self.emb_ln(x)
        for layer in self.layers:
            x = layer(x)
        return x


def load(variant):
    return BertReference(VARIANTS[variant], nimble_io.read_safetensors(weights_path(variant)))


def read_input(path):
    return torch.from_numpy(np.load(path).astype(np.int64))


def work(ids):
    return int(ids.shape[0])


def nimble_inputs(path):
    return ["@" + os.path.abspath(path)]


def run(model, ids):
    with torch.inference_mode():
        return [model(ids).numpy().copy()]


# ---- self-test ---------------------------------------------------------------------------


def numpy_bert(v, weights, ids):
    """BERT from the equations, float64 numpy, independent of the modules above."""
    W = lambda k: weights[k].astype(np.float64)  # noqa: E731
    erf = np.vectorize(math.erf)

    def ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + v["eps"]) * g + b

    def softmax(z):
        z = z - z.max(-1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(-1, keepdims=True)

    n, D, NH = len(ids), v["hidden"], v["heads"]
    d = D // NH
    x = (W("embeddings.word_embeddings.weight")[ids]
         + W("embeddings.position_embeddings.weight")[:n]
         + W("embeddings.token_type_embeddings.weight")[0])
    x = ln(x, W("embeddings.LayerNorm.weight"), W("embeddings.LayerNorm.bias"))
    for l in range(v["layers"]):
        P = lambda s: W(layer_key(l, s))  # noqa: E731
        lin = lambda t, s: t @ P(s + ".weight").T + P(s + ".bias")  # noqa: E731
        q = lin(x, "attention.self.query")
        k = lin(x, "attention.self.key")
        val = lin(x, "attention.self.value")
        heads = []
        for h in range(NH):
            sl = slice(h * d, (h + 1) * d)
            p = softmax(q[:, sl] @ k[:, sl].T / np.sqrt(d))
            heads.append(p @ val[:, sl])
        a = lin(np.concatenate(heads, axis=1), "attention.output.dense")
        x = ln(x + a, P("attention.output.LayerNorm.weight"), P("attention.output.LayerNorm.bias"))
        f = lin(x, "intermediate.dense")
        f = 0.5 * f * (1.0 + erf(f / np.sqrt(2.0)))
        x = ln(x + lin(f, "output.dense"), P("output.LayerNorm.weight"), P("output.LayerNorm.bias"))
    return x


def torch_encoder_layers(v, weights):
    """The same layers as torch.nn.TransformerEncoderLayer (post-LN, GELU)."""
    D = v["hidden"]
    layers = []
    for l in range(v["layers"]):
        g = lambda s: torch.from_numpy(weights[layer_key(l, s)])  # noqa: E731
        m = torch.nn.TransformerEncoderLayer(D, v["heads"], v["ffn"], dropout=0.0, activation="gelu",
                                             layer_norm_eps=v["eps"], batch_first=True, norm_first=False)
        with torch.no_grad():
            m.self_attn.in_proj_weight.copy_(torch.cat(
                [g("attention.self.%s.weight" % p) for p in ("query", "key", "value")]))
            m.self_attn.in_proj_bias.copy_(torch.cat(
                [g("attention.self.%s.bias" % p) for p in ("query", "key", "value")]))
            m.self_attn.out_proj.weight.copy_(g("attention.output.dense.weight"))
            m.self_attn.out_proj.bias.copy_(g("attention.output.dense.bias"))
            m.norm1.weight.copy_(g("attention.output.LayerNorm.weight"))
            m.norm1.bias.copy_(g("attention.output.LayerNorm.bias"))
            m.linear1.weight.copy_(g("intermediate.dense.weight"))
            m.linear1.bias.copy_(g("intermediate.dense.bias"))
            m.linear2.weight.copy_(g("output.dense.weight"))
            m.linear2.bias.copy_(g("output.dense.bias"))
            m.norm2.weight.copy_(g("output.LayerNorm.weight"))
            m.norm2.bias.copy_(g("output.LayerNorm.bias"))
        m.eval()
        layers.append(m)
    return layers


def self_test():
    ok = True
    rng = np.random.default_rng(13)
    for name, v in VARIANTS.items():
        if not os.path.exists(weights_path(name)):
            print("skip %s: %s missing (run make_weights.py)" % (name, weights_path(name)))
            continue
        weights = nimble_io.read_safetensors(weights_path(name))
        model = BertReference(v, weights)
        enc = torch_encoder_layers(v, weights)
        for n in (1, 7, min(64, v["max_pos"])):
            ids = rng.integers(0, v["vocab"], size=n).astype(np.int64)
            (out,) = run(model, torch.from_numpy(ids))
            e_np = rel_err(out, numpy_bert(v, weights, ids))
            with torch.inference_mode():
                x = model.emb_ln(model.word(torch.from_numpy(ids)) + model.position.weight[:n]
                                 + model.token_type.weight[0:1])[None]
                for m in enc:
                    x = m(x)
            e_t = rel_err(out, x[0].numpy())
            good = e_np <= 1e-5 and e_t <= 1e-5
            ok &= good
            print("%-10s n=%-3d vs numpy BERT (f64) %.2e   vs nn.TransformerEncoderLayer %.2e   %s"
                  % (name, n, e_np, e_t, "ok" if good else "MISMATCH"))
    return ok


def check_fixtures(fixtures_dir=None):
    """The committed fixtures of the small variant are what this reference
    computes now (same weights, same inputs), within the tolerance that holds
    across CPUs (models/common/compare.py): they must not go stale."""
    model = load("bert_small")
    return _check_fixtures("bert_small", fixtures_dir or default_fixtures_dir(__file__), "ids_??.npy", ".npy",
                           ["out"], lambda path: run(model, read_input(path)))


def main(argv):
    return reference_main(argv, __doc__, self_test, check_fixtures,
                          lambda name, path: run(load(name), read_input(path)), (None,))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
