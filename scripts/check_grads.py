#!/usr/bin/env python3
"""Checks the gradients of the `grad` pass against PyTorch autograd on the models.

    /usr/bin/python3 scripts/check_grads.py [--models lstm_small,treelstm_small,bert_small]
        [--count N] [--tolerance 1e-4] [--opt -O2] [--checkpoint store|recompute]
        [--kernels reference|native]
        [--nimble-opt PATH] [--nimblec PATH] [--nimble-run PATH] [--keep DIR] [-v]

For each model: `nimble-opt --passes=grad{func=main,wrt=...,consts=@every,const}`
adds @main_grad (the model's outputs, then the gradients with respect to the
float inputs, then one per const weight, in the .nir's order); nimblec compiles
it, and nimble-run runs it on every input with random seeds (one per output,
N(0, 1), seeded by the input's name). PyTorch runs the model's reference
module (models/<m>/reference.py) on the same weights and input and
backpropagates the same seeds (torch.autograd.backward). Every output and
every gradient is compared: relative error max|got - want| / max|want|
(models/common/compare.py); a gradient that is zero in exact arithmetic
(reference below 1e-5 of the input's largest gradient, marked "(zero)") is
measured against that largest gradient instead. Prints one line per model with the worst error
and where; exits 1 above the tolerance or on a tool failure.

Gradients with respect to inputs: the LSTM's token matrix; the Tree-LSTM's
tree, whose adjoint is a tree of the same shape with each leaf's gradient
(printed by nimble-run as value text, compared leaf by leaf). BERT takes
integer ids, so its input gradients are those of the embedding weights.

Full-size variants (lstm_1l, lstm_2l, treelstm, bert_base) need
models/make_all.sh first; the small ones use the committed fixtures.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from models.common import nimble_io, tools  # noqa: E402
from models.common.compare import rel_err  # noqa: E402
from models.common.registry import VARIANTS  # noqa: E402

DEFAULT = "lstm_small,treelstm_small,bert_small"
# Below this fraction of the input's largest gradient, a reference gradient is
# taken as zero in exact arithmetic (see check_model).
ZERO_GRAD = 1e-5
_CONST = re.compile(r'^const @([\w.$]+) : tensor<[^>]*f(?:32|64)> = external\("[^"]*", "([^"]*)"\)', re.M)


def consts_of(nir):
    """[(const name, safetensors key)] of the float weights, in .nir order."""
    with open(nir) as f:
        return _CONST.findall(f.read())


def torch_params(family, model, key):
    """The reference module's parameters that hold safetensors tensor `key`
    (Tree-LSTM's b_iou feeds two of them; its gradient is their sum)."""
    if family == "lstm":
        m = re.fullmatch(r"(weight_ih|weight_hh|bias_ih|bias_hh)_l(\d+)", key)
        return [getattr(model.cells[int(m.group(2))], m.group(1))]
    if family == "treelstm":
        return {"w_iou": [model.w_iou.weight], "b_iou": [model.w_iou.bias, model.b_iou],
                "u_iou": [model.u_iou.weight], "u_f": [model.u_f.weight], "b_f": [model.u_f.bias]}[key]
    if family == "bert":
        emb = {"embeddings.word_embeddings.weight": model.word.weight,
               "embeddings.position_embeddings.weight": model.position.weight,
               "embeddings.token_type_embeddings.weight": model.token_type.weight,
               "embeddings.LayerNorm.weight": model.emb_ln.weight,
               "embeddings.LayerNorm.bias": model.emb_ln.bias}
        if key in emb:
            return [emb[key]]
        m = re.fullmatch(r"encoder\.layer\.(\d+)\.(.*)\.(weight|bias)", key)
        layer = model.layers[int(m.group(1))]
        mod = {"attention.self.query": layer.query, "attention.self.key": layer.key,
               "attention.self.value": layer.value, "attention.output.dense": layer.attn_out,
               "attention.output.LayerNorm": layer.attn_ln, "intermediate.dense": layer.ffn_in,
               "output.dense": layer.ffn_out, "output.LayerNorm": layer.ffn_ln}[m.group(2)]
        return [getattr(mod, m.group(3))]
    raise ValueError(family)


def wrt_inputs(family):
    """Indices of @main's parameters to differentiate (those holding floats)."""
    return [0] if family in ("lstm", "treelstm") else []


def tree_leaves(tree):
    """The leaves of a tree (("Leaf", x) / ("Node", l, r)), left to right."""
    out, stack = [], [tree]
    while stack:
        t = stack.pop()
        if t[0] == "Leaf":
            out.append(t[1])
        else:
            stack.extend([t[2], t[1]])
    return out


def leaves_with_grad(tree):
    """The tree with every leaf a fresh tensor that requires grad."""
    if tree[0] == "Leaf":
        return ("Leaf", tree[1].clone().requires_grad_(True))
    return ("Node", leaves_with_grad(tree[1]), leaves_with_grad(tree[2]))


def reference_grads(v, model, inp_path, seeds, consts):
    """PyTorch: outputs and gradients (inputs first, then consts) for the seeds."""
    ref = v.reference
    x = ref.read_input(inp_path)
    params = [torch_params(v.family, model, key) for _, key in consts]
    for group in params:
        for p in group:
            p.requires_grad_(True)
            p.grad = None
    xs = []
    if wrt_inputs(v.family) and v.family == "treelstm":
        x = leaves_with_grad(x)
        xs = tree_leaves(x)
    elif wrt_inputs(v.family):
        x = x.clone().requires_grad_(True)
        xs = [x]
    with torch.enable_grad():
        out = model(x)
        out = list(out) if isinstance(out, (tuple, list)) else [out]
        # An empty sequence gives constant outputs: nothing to backpropagate.
        live = [(o, torch.from_numpy(s)) for o, s in zip(out, seeds) if o.requires_grad]
        if live:
            torch.autograd.backward([o for o, _ in live], [s for _, s in live])
    grads = [t.grad.numpy().copy() if t.grad is not None else np.zeros(tuple(t.shape), np.float32) for t in xs]
    if v.family == "treelstm" and xs:
        grads = [np.concatenate(grads, axis=0)]  # the leaves' gradients, one row each
    for group in params:
        g = sum((p.grad if p.grad is not None else torch.zeros_like(p)) for p in group)
        grads.append(g.detach().numpy().copy())
    return [o.detach().numpy().copy() for o in out], grads


def check_model(v, args, work_dir):
    inputs = v.inputs()
    if args.count:
        inputs = inputs[: args.count]
    if not os.path.exists(v.weights):
        raise tools.ToolError("%s missing: run models/make_all.sh" % v.weights)
    consts = consts_of(v.nir)
    # The .nir names its weights relative to itself: keep it beside them.
    model_dir = os.path.join(work_dir, v.name)
    os.makedirs(model_dir, exist_ok=True)
    for f in os.listdir(os.path.dirname(v.nir)):
        if f.endswith(".safetensors"):
            dst = os.path.join(model_dir, f)
            if not os.path.exists(dst):
                os.symlink(os.path.join(os.path.dirname(v.nir), f), dst)
    grad_nir = os.path.join(model_dir, v.name + ".grad.nir")
    wrt = wrt_inputs(v.family)
    pipeline = "grad{func=main,wrt=%s,consts=%s,checkpoint=%s}" % (
        ",".join(map(str, wrt)) or "none", ",".join("@" + n for n, _ in consts), args.checkpoint)
    p = subprocess.run([args.nimble_opt, v.nir, "--passes=" + pipeline, "-o", grad_nir],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise tools.ToolError("nimble-opt failed: %s" % p.stderr[-4000:])
    nbc = os.path.join(model_dir, v.name + ".grad.nbc")
    tools.compile_model(args.nimblec, grad_nir, nbc, opt=args.opt, extra=["--kernels=" + args.kernels])
    model = v.reference.load(v.name)
    names_out = list(v.reference.OUTPUTS)
    names_grad = ["d.input%d" % i for i in wrt] + ["d." + n for n, _ in consts]
    worst = {"rel": 0.0, "abs": 0.0, "where": "-", "values": 0}
    problems = []
    for inp in inputs:
        rng = np.random.default_rng(zlib.crc32(inp.name.encode()))
        # Output shapes from a forward run of the reference (seeds match them).
        with torch.no_grad():
            fwd = model(v.reference.read_input(inp.path))
        fwd = list(fwd) if isinstance(fwd, (tuple, list)) else [fwd]
        seeds = [rng.standard_normal(tuple(o.shape)).astype(np.float32) for o in fwd]
        seed_files = []
        for k, s in enumerate(seeds):
            path = os.path.join(model_dir, "%s.seed%d.npy" % (inp.name, k))
            np.save(path, s)
            seed_files.append("@" + path)
        outs = [os.path.join(model_dir, "%s.%s.npy" % (inp.name, n)) for n in names_out + names_grad]
        # A tree's adjoint is printed (value text), not written as .npy.
        tree_out = len(names_out) if v.family == "treelstm" and wrt else None
        run_outs = [("-" if k == tree_out else o) for k, o in enumerate(outs)]
        p = tools.run_model(args.nimble_run, nbc, v.reference.nimble_inputs(inp.path) + seed_files, run_outs,
                            extra=["--function=main_grad"])
        if tree_out is not None:
            leaves = tree_leaves(nimble_io.parse_tree(p.stdout))
            np.save(outs[tree_out], np.concatenate([np.asarray(x, np.float32) for x in leaves], axis=0))
        want_out, want_grad = reference_grads(v, model, inp.path, seeds, consts)
        # A gradient that is zero in exact arithmetic (BERT's key biases:
        # softmax ignores a shift of a row of scores) is float32 round-off on
        # both sides; it is measured against the largest gradient of the input.
        scale = max([float(np.max(np.abs(w), initial=0.0)) for w in want_grad] + [0.0])
        for k, (name, path, want) in enumerate(zip(names_out + names_grad, outs, want_out + want_grad)):
            got = np.load(path)
            where = "%s:%s" % (inp.name, name)
            if got.shape != want.shape or not np.all(np.isfinite(got)):
                problems.append("%s: shape %s (want %s) or non-finite values" % (where, got.shape, want.shape))
                continue
            peak = float(np.max(np.abs(want), initial=0.0))
            if k >= len(names_out) and peak <= ZERO_GRAD * scale:
                denom = scale or 1.0
                rel = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)), initial=0.0)) / denom
                where += "(zero)"
            else:
                rel = rel_err(got, want) if peak else float(np.max(np.abs(got), initial=0.0))
            diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)), initial=0.0))
            worst["values"] += 1
            if args.verbose:
                print("  %-40s rel %.3e  abs %.3e" % (where, rel, diff))
            if rel > worst["rel"] or worst["where"] == "-":
                worst["rel"], worst["where"] = rel, where
            worst["abs"] = max(worst["abs"], diff)
    return len(inputs), worst, problems


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=DEFAULT, help="comma-separated variants (default: %(default)s)")
    ap.add_argument("--count", type=int, default=0, help="use only the first N inputs of each model")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--opt", default="-O2", help="nimblec optimisation level (default %(default)s)")
    ap.add_argument("--checkpoint", default="store", choices=["store", "recompute"])
    ap.add_argument("--kernels", default="reference", choices=["reference", "native"],
                    help="nimblec --kernels (default %(default)s)")
    ap.add_argument("--nimble-opt", dest="nimble_opt",
                    default=os.environ.get("NIMBLE_OPT") or
                    os.path.join(os.path.dirname(tools.default_tool("nimblec")), "nimble-opt"))
    ap.add_argument("--nimblec", default=tools.default_tool("nimblec"))
    ap.add_argument("--nimble-run", dest="nimble_run", default=tools.default_tool("nimble-run"))
    ap.add_argument("--keep", metavar="DIR", help="keep the generated files in DIR")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every value's error")
    args = ap.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    for n in names:
        if n not in VARIANTS:
            ap.error("unknown model %r (have %s)" % (n, ", ".join(VARIANTS)))
    try:
        for t in (args.nimble_opt, args.nimblec, args.nimble_run):
            tools.require_tool(t)
    except tools.ToolError as e:
        print("check_grads: error: %s" % e, file=sys.stderr)
        return 1
    torch.manual_seed(0)
    work_dir = args.keep or tempfile.mkdtemp(prefix="check_grads.")
    os.makedirs(work_dir, exist_ok=True)
    failed = False
    print("%-15s %7s %8s %14s %14s  %-44s %s" % ("model", "inputs", "values", "worst rel err", "max abs err",
                                               "worst at", "status"))
    try:
        for n in names:
            v = VARIANTS[n]
            try:
                count, worst, problems = check_model(v, args, work_dir)
            except (tools.ToolError, FileNotFoundError) as e:
                failed = True
                print("%-15s %7s %8s %14s %14s  %-44s FAIL" % (n, "-", "-", "-", "-", "-"))
                print("  " + str(e).replace("\n", "\n  "), file=sys.stderr)
                continue
            bad = problems or not worst["rel"] <= args.tolerance
            failed |= bool(bad)
            print("%-15s %7d %8d %14.3e %14.3e  %-44s %s" % (
                n, count, worst["values"], worst["rel"], worst["abs"], worst["where"],
                "FAIL" if bad else "ok (<= %g)" % args.tolerance))
            for p in problems:
                print("  " + p, file=sys.stderr)
    finally:
        if not args.keep:
            shutil.rmtree(work_dir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
