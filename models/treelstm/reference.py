#!/usr/bin/env python3
"""PyTorch reference of the Tree-LSTM models: the correctness oracle and the
benchmark peer (PyTorch eager, Python recursion over the tree, as in the
paper's PyTorch baseline).

It loads the SAME .safetensors as the .nir and reads trees from the same
constructor-expression text files nimble-run reads (models/common/nimble_io.py).
Equations (see gen_treelstm.py for their derivation from Tai et al. 2015):

    leaf x:      i, o, u = split(x W_iou^T + b_iou, 3);  c = s(i) * tanh(u);  h = s(o) * tanh(c)
    node (l, r): i, o, u = split((h_l + h_r) U_iou^T + b_iou, 3)
                 f_k = s(h_k U_f^T + b_f)  for k in l, r
                 c = s(i) * tanh(u) + f_l * c_l + f_r * c_r;  h = s(o) * tanh(c)

    /usr/bin/python3 models/treelstm/reference.py --self-test
        compares with a float64 numpy implementation of Tai's general child-sum
        cell (x = 0 at internal nodes, no children at leaves), exit 1 on mismatch.
    /usr/bin/python3 models/treelstm/reference.py --check-fixtures [DIR]
        only the fixture check (of DIR instead of small/fixtures), within
        models/common/compare.py's FIXTURE_TOLERANCE; exit 1 on a mismatch.
    /usr/bin/python3 models/treelstm/reference.py VARIANT TREE.txt [--out PREFIX]

Interface for scripts/check_models.py and scripts/bench_models.py:
    load(variant) -> model;  run(model, tree) -> [h, c] (numpy)
    read_input(path) -> tree;  work(tree) -> nodes (leaves + internal);
    nimble_inputs(path) -> [--input values]
"""

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from models.common import nimble_io  # noqa: E402
from models.common.compare import check_fixtures as _check_fixtures  # noqa: E402
from models.common.compare import default_fixtures_dir, reference_main, rel_err  # noqa: E402
from models.treelstm.variants import VARIANTS, weights_path  # noqa: E402

UNIT = "node"
OUTPUTS = ["h", "c"]  # the results of @main, in order


class TreeLSTMReference(torch.nn.Module):
    def __init__(self, input_size, hidden, weights):
        super().__init__()
        self.hidden = hidden
        t = lambda k: torch.nn.Parameter(torch.from_numpy(weights[k]), requires_grad=False)  # noqa: E731
        self.w_iou = torch.nn.Linear(input_size, 3 * hidden)  # leaves: x -> i, o, u (+ b_iou)
        self.w_iou.weight, self.w_iou.bias = t("w_iou"), t("b_iou")
        self.u_iou = torch.nn.Linear(hidden, 3 * hidden, bias=False)  # nodes: h~ -> i, o, u
        self.u_iou.weight = t("u_iou")
        self.b_iou = t("b_iou")
        self.u_f = torch.nn.Linear(hidden, hidden)  # a child's h -> its forget gate
        self.u_f.weight, self.u_f.bias = t("u_f"), t("b_f")
        self.eval()

    def forward(self, tree):
        """(h, c) of `tree`: ("Leaf", x[1, I]) or ("Node", left, right)."""
        if tree[0] == "Leaf":
            i, o, u = torch.split(self.w_iou(tree[1]), self.hidden, dim=1)
            c = torch.sigmoid(i) * torch.tanh(u)
            h = torch.sigmoid(o) * torch.tanh(c)
            return h, c
        h_l, c_l = self(tree[1])
        h_r, c_r = self(tree[2])
        i, o, u = torch.split(self.u_iou(h_l + h_r) + self.b_iou, self.hidden, dim=1)
        f_l = torch.sigmoid(self.u_f(h_l))
        f_r = torch.sigmoid(self.u_f(h_r))
        c = torch.sigmoid(i) * torch.tanh(u) + f_l * c_l + f_r * c_r
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c


def load(variant):
    v = VARIANTS[variant]
    return TreeLSTMReference(v["input"], v["hidden"], nimble_io.read_safetensors(weights_path(variant)))


def to_torch(tree):
    if tree[0] == "Leaf":
        return ("Leaf", torch.from_numpy(np.ascontiguousarray(tree[1], dtype=np.float32)))
    return ("Node", to_torch(tree[1]), to_torch(tree[2]))


def read_input(path):
    return to_torch(nimble_io.read_tree_file(path))


def work(tree):
    """Tree nodes (leaves + internal nodes): one cell application each."""
    leaves, nodes = nimble_io.tree_counts(tree)
    return leaves + nodes


def nimble_inputs(path):
    return ["@" + os.path.abspath(path)]


def run(model, tree):
    with torch.inference_mode():
        h, c = model(tree)
    return [h.numpy().copy(), c.numpy().copy()]


# ---- hand-batched: level by level, as DGL does ----------------------------------------------


def batch_schedule(trees):
    """The schedule of a batch of trees, level by level: every node of every tree
    numbered (leaves first), then grouped by height (leaves 0, a node 1 + the
    higher of its children), as DGL's topological traversal of a batched graph
    does. Returns (leaf vectors [L, I], levels, roots, node count) where
    levels[k] = (node ids, left child ids, right child ids) as index tensors,
    in increasing height, and roots[t] is the node id of tree t's root; leaves
    are nodes 0..L-1. Iterative (chains are deep)."""
    leaves, internal = [], []  # leaves: tensors; internal: (height, left id, right id)
    roots = []
    for tree in trees:
        ids, heights = {}, {}
        stack = [(tree, False)]
        while stack:  # post-order: children before their parent
            t, done = stack.pop()
            if t[0] == "Leaf":
                ids[id(t)], heights[id(t)] = ("leaf", len(leaves)), 0
                leaves.append(t[1])
            elif not done:
                stack.extend([(t, True), (t[2], False), (t[1], False)])
            else:
                hgt = 1 + max(heights[id(t[1])], heights[id(t[2])])
                ids[id(t)], heights[id(t)] = ("node", len(internal)), hgt
                internal.append((hgt, ids[id(t[1])], ids[id(t[2])]))
        roots.append(ids[id(tree)])
    n_leaves = len(leaves)
    gid = lambda ref: ref[1] if ref[0] == "leaf" else n_leaves + ref[1]  # noqa: E731
    by_height = {}
    for k, (hgt, l, r) in enumerate(internal):
        by_height.setdefault(hgt, []).append((n_leaves + k, gid(l), gid(r)))
    levels = []
    for hgt in sorted(by_height):
        cols = list(zip(*by_height[hgt]))
        levels.append(tuple(torch.tensor(c, dtype=torch.long) for c in cols))
    return torch.cat(leaves, dim=0), levels, [gid(r) for r in roots], n_leaves + len(internal)


def run_batched(model, trees):
    """[[h, c] per tree] (numpy) for a batch of trees, computed level by level:
    one matmul for all leaves of the batch, then per height one matmul of the
    summed children's h with U_iou and one of all children's h with U_f. The
    hand-batched PyTorch peer of scripts/bench_models.py --batch (DGL's
    batching of the child-sum Tree-LSTM); equal to run() within 1e-5
    (--self-test)."""
    H = model.hidden
    with torch.inference_mode():
        x, levels, roots, n = batch_schedule(trees)
        h_all = torch.empty(n, H)
        c_all = torch.empty(n, H)
        i, o, u = torch.split(model.w_iou(x), H, dim=1)
        c = torch.sigmoid(i) * torch.tanh(u)
        h_all[: x.shape[0]] = torch.sigmoid(o) * torch.tanh(c)
        c_all[: x.shape[0]] = c
        for nodes, left, right in levels:
            h_l, h_r = h_all[left], h_all[right]
            i, o, u = torch.split(model.u_iou(h_l + h_r) + model.b_iou, H, dim=1)
            f = torch.sigmoid(model.u_f(torch.cat([h_l, h_r], dim=0)))
            m = nodes.shape[0]
            c = torch.sigmoid(i) * torch.tanh(u) + f[:m] * c_all[left] + f[m:] * c_all[right]
            h_all[nodes] = torch.sigmoid(o) * torch.tanh(c)
            c_all[nodes] = c
        return [[h_all[r : r + 1].numpy().copy(), c_all[r : r + 1].numpy().copy()] for r in roots]


# ---- self-test ---------------------------------------------------------------------------


def numpy_child_sum(weights, hidden, tree):
    """Tai et al. (2015) child-sum cell, float64: node j with input x_j
    (zero for internal nodes) and children C(j) (none for leaves). Written from
    the paper's equations, not from the reference above."""
    s = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    W = weights["w_iou"].astype(np.float64)
    U = weights["u_iou"].astype(np.float64)
    b = weights["b_iou"].astype(np.float64)
    Uf = weights["u_f"].astype(np.float64)
    bf = weights["b_f"].astype(np.float64)
    H = hidden
    Wi, Wo, Wu = W[:H], W[H : 2 * H], W[2 * H :]
    Ui, Uo, Uu = U[:H], U[H : 2 * H], U[2 * H :]
    bi, bo, bu = b[:H], b[H : 2 * H], b[2 * H :]

    def cell(x, children):
        h_tilde = sum((h for h, _ in children), np.zeros(H))
        i = s(Wi @ x + Ui @ h_tilde + bi)
        o = s(Wo @ x + Uo @ h_tilde + bo)
        u = np.tanh(Wu @ x + Uu @ h_tilde + bu)
        c = i * u
        for h_k, c_k in children:
            f_k = s(Uf @ h_k + bf)  # W_f x_j = 0: internal nodes have no input
            c = c + f_k * c_k
        return o * np.tanh(c), c

    def visit(t):
        if t[0] == "Leaf":
            return cell(np.asarray(t[1], np.float64).reshape(-1), [])
        return cell(np.zeros(W.shape[1]), [visit(t[1]), visit(t[2])])

    h, c = visit(tree)
    return h[None, :], c[None, :]


def self_test():
    ok = True
    rng = np.random.default_rng(11)
    for name, v in VARIANTS.items():
        if not os.path.exists(weights_path(name)):
            print("skip %s: %s missing (run make_weights.py)" % (name, weights_path(name)))
            continue
        model = load(name)
        weights = nimble_io.read_safetensors(weights_path(name))
        for leaves in (1, 2, 7, 40):
            tree = nimble_io.random_tree(
                rng, leaves, lambda: rng.normal(0, 0.4, size=(1, v["input"])).astype(np.float32))
            # Through the text format, as nimble-run reads it.
            tree = nimble_io.parse_tree(nimble_io.format_tree(tree))
            h, c = run(model, to_torch(tree))
            h64, c64 = numpy_child_sum(weights, v["hidden"], tree)
            e = max(rel_err(h, h64), rel_err(c, c64))
            good = e <= 1e-5
            ok &= good
            print("%-15s %2d leaves: vs numpy child-sum (f64) %.2e  %s"
                  % (name, leaves, e, "ok" if good else "MISMATCH"))
        ok &= self_test_batched(name, model, v["input"], rng)
    return ok


def self_test_batched(name, model, dim, rng):
    """run_batched (level by level) against run (recursion) on a batch with a
    single leaf, left- and right-deep chains and random trees."""
    leaf = lambda: rng.normal(0, 0.4, size=(1, dim)).astype(np.float32)  # noqa: E731
    trees = [("Leaf", leaf()), nimble_io.chain_tree(9, leaf, True), nimble_io.chain_tree(9, leaf, False)]
    trees += [nimble_io.random_tree(rng, int(n), leaf) for n in rng.integers(2, 30, size=9)]
    trees = [to_torch(t) for t in trees]
    got = run_batched(model, trees)
    e = max(rel_err(g, w) for t, outs in zip(trees, got) for g, w in zip(outs, run(model, t)))
    good = e <= 1e-5
    print("%-15s batch of %d trees: level-by-level vs recursion %.2e  %s"
          % (name, len(trees), e, "ok" if good else "MISMATCH"))
    return good


def check_fixtures(fixtures_dir=None):
    """The committed fixtures of the small variant are what this reference
    computes now (same weights, same inputs), within the tolerance that holds
    across CPUs (models/common/compare.py): they must not go stale."""
    model = load("treelstm_small")
    return _check_fixtures("treelstm_small", fixtures_dir or default_fixtures_dir(__file__), "tree_??.txt", ".txt",
                           OUTPUTS, lambda path: run(model, read_input(path)))


def main(argv):
    return reference_main(argv, __doc__, self_test, check_fixtures,
                          lambda name, path: run(load(name), read_input(path)), ("h", "c"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
