"""The BERT variants: sizes, files, seeds and weight names, shared by every
script here.

`bert_base` is BERT-base (Devlin et al. 2018): 12 layers, hidden 768, 12 heads,
FFN 3072, vocab 30522, 512 positions, post-LN. `bert_small` (2 layers,
hidden 32, 2 heads, FFN 64, vocab 100, 64 positions) is the test variant
committed under small/.

Weights use Hugging Face BertModel's state_dict names (without the `bert.`
prefix) and nn.Linear's [out, in] layout, so converted real checkpoints fit.
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))

VARIANTS = {
    "bert_base": dict(layers=12, hidden=768, heads=12, ffn=3072, vocab=30522, max_pos=512,
                      type_vocab=2, eps=1e-12, subdir="", seed=301,
                      # BERT's initializer_range; see make_weights.py.
                      std=0.02, bias_std=0.02),
    "bert_small": dict(layers=2, hidden=32, heads=2, ffn=64, vocab=100, max_pos=64,
                       type_vocab=2, eps=1e-12, subdir="small", seed=303,
                       std=0.2, bias_std=0.1),
}

FULL = ["bert_base"]


def nir_path(name):
    return os.path.join(HERE, VARIANTS[name]["subdir"], name + ".nir")


def weights_file(name):
    return name + ".safetensors"


def weights_path(name):
    return os.path.join(HERE, VARIANTS[name]["subdir"], weights_file(name))


# (short .nir symbol, Hugging Face name) of each per-layer weight.
LAYER_WEIGHTS = [
    ("query.w", "attention.self.query.weight"),
    ("query.b", "attention.self.query.bias"),
    ("key.w", "attention.self.key.weight"),
    ("key.b", "attention.self.key.bias"),
    ("value.w", "attention.self.value.weight"),
    ("value.b", "attention.self.value.bias"),
    ("attn_out.w", "attention.output.dense.weight"),
    ("attn_out.b", "attention.output.dense.bias"),
    ("attn_ln.g", "attention.output.LayerNorm.weight"),
    ("attn_ln.b", "attention.output.LayerNorm.bias"),
    ("ffn_in.w", "intermediate.dense.weight"),
    ("ffn_in.b", "intermediate.dense.bias"),
    ("ffn_out.w", "output.dense.weight"),
    ("ffn_out.b", "output.dense.bias"),
    ("ffn_ln.g", "output.LayerNorm.weight"),
    ("ffn_ln.b", "output.LayerNorm.bias"),
]

EMBEDDING_WEIGHTS = [
    ("emb.word", "embeddings.word_embeddings.weight"),
    ("emb.position", "embeddings.position_embeddings.weight"),
    ("emb.token_type", "embeddings.token_type_embeddings.weight"),
    ("emb_ln.g", "embeddings.LayerNorm.weight"),
    ("emb_ln.b", "embeddings.LayerNorm.bias"),
]


def layer_key(layer, hf_suffix):
    return "encoder.layer.%d.%s" % (layer, hf_suffix)


def weight_shapes(name):
    """{HF name: shape}, in the order the .nir declares them."""
    v = VARIANTS[name]
    D, F = v["hidden"], v["ffn"]
    shapes = {
        "embeddings.word_embeddings.weight": (v["vocab"], D),
        "embeddings.position_embeddings.weight": (v["max_pos"], D),
        "embeddings.token_type_embeddings.weight": (v["type_vocab"], D),
        "embeddings.LayerNorm.weight": (D,),
        "embeddings.LayerNorm.bias": (D,),
    }
    per_layer = {
        "query.w": (D, D), "query.b": (D,), "key.w": (D, D), "key.b": (D,),
        "value.w": (D, D), "value.b": (D,), "attn_out.w": (D, D), "attn_out.b": (D,),
        "attn_ln.g": (D,), "attn_ln.b": (D,), "ffn_in.w": (F, D), "ffn_in.b": (F,),
        "ffn_out.w": (D, F), "ffn_out.b": (D,), "ffn_ln.g": (D,), "ffn_ln.b": (D,),
    }
    for l in range(v["layers"]):
        for short, hf in LAYER_WEIGHTS:
            shapes[layer_key(l, hf)] = per_layer[short]
    return shapes
