#!/usr/bin/python3
"""The .onnx inputs of test/import-onnx, made at test time with onnx.helper
(Debian's python3-onnx; nothing is downloaded and no binary model is
committed), and the end-to-end check of the importer against numpy.

    onnx_cases.py make NAME OUT.onnx     write one model (external data beside it)
    onnx_cases.py e2e [NAME...]          for each numeric case (default: all):
                                         import | nimblec -O0 / -O2 | nimble-run on
                                         the case's inputs, compared with numpy
    onnx_cases.py list                   the case names

Each case builds a graph and, where it is numeric, feeds and the numpy
reference of its outputs. The tools are found on PATH (lit puts ours first).
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64
B = TensorProto.BOOL

CASES = {}
# Cases saved with their initializers in a file beside the model: the file's
# length (None: as written; a number: truncated to it).
EXTERNAL = {"external-data": None, "short-external": 100}


def case(fn):
    CASES[fn.__name__.replace("_", "-")] = fn
    return fn


def model(nodes, inputs, outputs, inits=(), opset=17, name="g"):
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=[numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def N(op, ins, outs, name=None, **attrs):
    return helper.make_node(op, ins, outs, name=name or (op.lower() + "0"), **attrs)


rng = np.random.default_rng(47)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


# --- Op mappings (FileCheck and numeric) -------------------------------------

@case
def add_relu():
    m = model([N("Add", ["a", "b"], ["s"]), N("Relu", ["s"], ["y"])],
              [("a", F, ["N", 4]), ("b", F, [4])], [("y", F, ["N", 4])])
    a, b = randn(3, 4), randn(4)
    return m, [a, b], [np.maximum(a + b, 0)]


@case
def dim_params():
    # Two inputs share the dim_param "batch": one run-time size (checked).
    m = model([N("Add", ["x", "y"], ["s"])],
              [("x", F, ["batch", None, 8]), ("y", F, ["batch", 1, 8])], [("s", F, ["batch", None, 8])])
    x, y = randn(2, 3, 8), randn(2, 1, 8)
    return m, [x, y], [x + y]


@case
def gemm():
    w, b = randn(5, 4), randn(5)
    m = model([N("Gemm", ["x", "w", "b"], ["y"], transB=1, alpha=0.5, beta=2.0)],
              [("x", F, ["N", 4])], [("y", F, ["N", 5])], inits=[("w", w), ("b", b)])
    x = randn(3, 4)
    return m, [x], [0.5 * x @ w.T + 2.0 * b]


@case
def matmul_batched():
    m = model([N("MatMul", ["a", "b"], ["y"])], [("a", F, [2, "S", 4]), ("b", F, [4, 3])], [("y", F, [2, "S", 3])])
    a, b = randn(2, 5, 4), randn(4, 3)
    return m, [a, b], [a @ b]


@case
def matmul_vector():
    m = model([N("MatMul", ["a", "b"], ["y"])], [("a", F, [4]), ("b", F, [3, 4, 2])], [("y", F, [3, 2])])
    a, b = randn(4), randn(3, 4, 2)
    return m, [a, b], [np.matmul(a, b)]


@case
def reduce_axes_input():
    # opset 18: ReduceMean's axes are an input; ReduceSum's since 13.
    axes = np.array([1], dtype=np.int64)
    m = model([N("ReduceMean", ["x", "axes"], ["m"], keepdims=0), N("ReduceSum", ["x", "axes"], ["s"]),
               N("ReduceMax", ["x"], ["mx"], keepdims=0)],
              [("x", F, ["N", 6])], [("m", F, ["N"]), ("s", F, ["N", 1]), ("mx", F, [])], inits=[("axes", axes)],
              opset=18)
    x = randn(3, 6)
    return m, [x], [x.mean(axis=1), x.sum(axis=1, keepdims=True), x.max()]


@case
def reduce_axes_attr():
    # opset 13: ReduceMean's axes are an attribute.
    m = model([N("ReduceMean", ["x"], ["m"], axes=[0, 2]), N("ReduceL2", ["x"], ["l2"], axes=[2], keepdims=0),
               N("ReduceLogSumExp", ["x"], ["lse"], axes=[1], keepdims=0)],
              [("x", F, [2, 3, 4])], [("m", F, [1, 3, 1]), ("l2", F, [2, 3]), ("lse", F, [2, 4])], opset=13)
    x = randn(2, 3, 4)
    return m, [x], [x.mean(axis=(0, 2), keepdims=True), np.sqrt((x * x).sum(axis=2)),
                    np.log(np.exp(x).sum(axis=1))]


@case
def squeeze_unsqueeze():
    ax = np.array([0, 3], dtype=np.int64)
    m = model([N("Unsqueeze", ["x", "ax"], ["u"]), N("Squeeze", ["u", "ax"], ["y"])],
              [("x", F, ["N", 4])], [("u", F, [1, "N", 4, 1]), ("y", F, ["N", 4])], inits=[("ax", ax)])
    x = randn(3, 4)
    return m, [x], [x[None, :, :, None], x]


@case
def split_input():
    # opset 13: the sizes are an input; unequal sizes become slices.
    sizes = np.array([2, 4], dtype=np.int64)
    m = model([N("Split", ["x", "sizes"], ["a", "b"], axis=1), N("Split", ["x"], ["c", "d"], axis=1)],
              [("x", F, ["N", 6])], [("a", F, ["N", 2]), ("b", F, ["N", 4]), ("c", F, ["N", 3]), ("d", F, ["N", 3])],
              inits=[("sizes", sizes)])
    x = randn(2, 6)
    return m, [x], [x[:, :2], x[:, 2:], x[:, :3], x[:, 3:]]


@case
def split_num_outputs():
    # opset 18: num_outputs, the last part smaller when the size does not divide.
    m = model([N("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3)],
              [("x", F, [7, 2])], [("a", F, [3, 2]), ("b", F, [3, 2]), ("c", F, [1, 2])], opset=18)
    x = randn(7, 2)
    return m, [x], [x[:3], x[3:6], x[6:]]


@case
def reshape_shape_of():
    # The torch export pattern: the target computed from Shape, Gather,
    # Unsqueeze and Concat; with a dynamic batch it is computed at run time.
    m = model([N("Shape", ["x"], ["s"]),
               N("Gather", ["s", "zero"], ["n"], axis=0),
               N("Unsqueeze", ["n", "zero1"], ["n1"]),
               N("Concat", ["n1", "minus1"], ["t"], axis=0),
               N("Reshape", ["x", "t"], ["y"]),
               N("Reshape", ["x", "zero_m1"], ["z"], name="reshape1")],
              [("x", F, ["N", 3, 4])], [("y", F, ["N", 12]), ("z", F, ["N", 12])],
              inits=[("zero", np.array(0, dtype=np.int64)), ("zero1", np.array([0], dtype=np.int64)),
                     ("minus1", np.array([-1], dtype=np.int64)), ("zero_m1", np.array([0, -1], dtype=np.int64))])
    x = randn(2, 3, 4)
    return m, [x], [x.reshape(2, 12), x.reshape(2, 12)]


@case
def flatten_transpose():
    m = model([N("Transpose", ["x"], ["t"], perm=[0, 2, 1]), N("Flatten", ["t"], ["y"], axis=1)],
              [("x", F, ["N", 3, 4])], [("y", F, ["N", 12])])
    x = randn(2, 3, 4)
    return m, [x], [x.transpose(0, 2, 1).reshape(2, 12)]


@case
def slice_gather():
    m = model([N("Slice", ["x", "st", "en", "ax"], ["s"]), N("Gather", ["s", "idx"], ["y"], axis=1)],
              [("x", F, ["N", 8])], [("y", F, ["N", 2])],
              inits=[("st", np.array([1], dtype=np.int64)), ("en", np.array([-1], dtype=np.int64)),
                     ("ax", np.array([1], dtype=np.int64)), ("idx", np.array([0, -1], dtype=np.int64))])
    x = randn(3, 8)
    s = x[:, 1:-1]
    return m, [x], [s[:, [0, -1]]]


@case
def activations():
    m = model([N("LeakyRelu", ["x"], ["a"], alpha=0.1), N("Elu", ["x"], ["b"]), N("HardSigmoid", ["x"], ["c"]),
               N("Softplus", ["x"], ["d"]), N("Sigmoid", ["x"], ["e"]), N("Tanh", ["x"], ["f"]),
               N("Clip", ["x", "lo", "hi"], ["g"]), N("Selu", ["x"], ["h"]), N("HardSwish", ["x"], ["i"]),
               N("Sign", ["x"], ["j"]), N("Reciprocal", ["x"], ["k"]), N("Softsign", ["x"], ["l"])],
              [("x", F, ["N", 5])], [(n, F, ["N", 5]) for n in "abcdefghijkl"],
              inits=[("lo", np.array(-0.5, dtype=np.float32)), ("hi", np.array(0.5, dtype=np.float32))])
    x = randn(4, 5)
    al, ga = 1.67326319217681884765625, 1.05070102214813232421875
    return m, [x], [np.where(x < 0, 0.1 * x, x), np.where(x < 0, np.exp(x) - 1, x),
                    np.clip(0.2 * x + 0.5, 0, 1), np.log(np.exp(x) + 1), sigmoid(x), np.tanh(x),
                    np.clip(x, -0.5, 0.5), ga * np.where(x <= 0, al * np.exp(x) - al, x),
                    x * np.clip(x / 6 + 0.5, 0, 1), np.sign(x), 1 / x, x / (1 + np.abs(x))]


@case
def softmax_layernorm():
    g, b = randn(8), randn(8)
    m = model([N("Softmax", ["x"], ["s"]), N("LogSoftmax", ["x"], ["ls"], axis=1),
               N("LayerNormalization", ["x", "g", "b"], ["ln"], epsilon=1e-5)],
              [("x", F, ["N", 8])], [("s", F, ["N", 8]), ("ls", F, ["N", 8]), ("ln", F, ["N", 8])],
              inits=[("g", g), ("b", b)])
    x = randn(3, 8)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    sm = e / e.sum(axis=1, keepdims=True)
    mu, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    return m, [x], [sm, np.log(sm), (x - mu) / np.sqrt(var + 1e-5) * g + b]


@case
def batchnorm_pool():
    sc, bi, mean, var = randn(3), randn(3), randn(3), np.abs(randn(3)) + 0.5
    m = model([N("BatchNormalization", ["x", "sc", "bi", "mean", "var"], ["bn"]),
               N("GlobalAveragePool", ["bn"], ["gap"]), N("InstanceNormalization", ["x", "sc", "bi"], ["inn"])],
              [("x", F, ["N", 3, 4, 4])], [("gap", F, ["N", 3, 1, 1]), ("inn", F, ["N", 3, 4, 4])],
              inits=[("sc", sc), ("bi", bi), ("mean", mean), ("var", var)], opset=15)
    x = randn(2, 3, 4, 4)
    c = lambda v: v.reshape(1, 3, 1, 1)
    bn = (x - c(mean)) / np.sqrt(c(var) + 1e-5) * c(sc) + c(bi)
    mu, vr = x.mean(axis=(2, 3), keepdims=True), x.var(axis=(2, 3), keepdims=True)
    return m, [x], [bn.mean(axis=(2, 3), keepdims=True), (x - mu) / np.sqrt(vr + 1e-5) * c(sc) + c(bi)]


def _windows(x, k, s, pads, dil=1, ceil=False, fill=0.0):
    """The windows of a square 2-D op over x [N, C, H, W]: [N, C, OH, OW, k*k]
    (padding `fill`, ceil_mode's overhang NaN), for the numpy references."""
    n, c, h, w = x.shape
    pb, pe = pads
    span = dil * (k - 1) + 1
    out = lambda d: (-(-(d + pb + pe - span) // s) if ceil else (d + pb + pe - span) // s) + 1
    oh, ow = out(h), out(w)
    xp = np.full((n, c, (oh - 1) * s + span + 1, (ow - 1) * s + span + 1), np.nan)
    xp[:, :, :h + pb + pe, :w + pb + pe] = fill
    xp[:, :, pb:pb + h, pb:pb + w] = x
    taps = [xp[:, :, i * dil:i * dil + s * (oh - 1) + 1:s, j * dil:j * dil + s * (ow - 1) + 1:s]
            for i in range(k) for j in range(k)]
    return np.stack(taps, axis=-1)


@case
def conv_pool():
    # Conv with groups, bias, dilation and SAME_UPPER (stride 1: fine with ?
    # spatial sizes), then MaxPool with ceil_mode and AveragePool with
    # count_include_pad and SAME_LOWER, on ? batch and spatial sizes.
    w, b = randn(4, 1, 3, 3), randn(4)
    m = model([N("Conv", ["x", "w", "b"], ["c"], group=2, dilations=[2, 2], auto_pad="SAME_UPPER"),
               N("MaxPool", ["c"], ["mp"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
               N("AveragePool", ["mp"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
               N("AveragePool", ["c"], ["al"], kernel_shape=[2, 2], strides=[1, 1], auto_pad="SAME_LOWER")],
              [("x", F, ["N", 2, "H", "W"])], [("ap", F, ["N", 4, None, None]), ("al", F, ["N", 4, None, None])],
              inits=[("w", w), ("b", b)])
    x = randn(2, 2, 7, 7)
    win = _windows(x.astype(np.float64), 3, 1, (2, 2), dil=2)  # [2, 2, 7, 7, 9]
    c = np.stack([np.einsum("nhwt,t->nhw", win[:, o // 2], w[o, 0].reshape(-1)) + b[o] for o in range(4)], axis=1)
    mp = np.nanmax(_windows(c, 2, 2, (0, 0), ceil=True), axis=-1)
    ap = _windows(mp, 3, 1, (1, 1)).mean(axis=-1)
    # SAME_LOWER with a 2x2 window: the padding unit goes first; excluded
    # from the divisor.
    cp = _windows(c, 2, 1, (1, 0), fill=np.nan)
    al = np.nanmean(cp, axis=-1)
    return m, [x], [ap.astype(np.float32), al.astype(np.float32)]


@case
def same_dynamic_stride():
    # auto_pad SAME with stride 2 on a ? size: the padding would depend on it.
    return model([N("Conv", ["x", "w"], ["y"], name="same2", strides=[2, 2], auto_pad="SAME_UPPER")],
                 [("x", F, [1, 1, "H", 8])], [("y", F, [1, 1, None, 4])], inits=[("w", randn(1, 1, 3, 3))]), None, None


@case
def conv_stride_zero():
    # A hostile stride: refused before any arithmetic on it (no division by 0).
    return model([N("Conv", ["x", "w"], ["y"], name="zero", strides=[0, 1], auto_pad="SAME_UPPER")],
                 [("x", F, [1, 1, 4, 4])], [("y", F, [1, 1, 4, 4])], inits=[("w", randn(1, 1, 3, 3))]), None, None


@case
def compare_where_cast():
    m = model([N("Greater", ["a", "b"], ["gt"]), N("Where", ["gt", "a", "b"], ["w"]),
               N("Cast", ["gt"], ["gi"], to=TensorProto.INT64), N("Not", ["gt"], ["ng"]),
               N("Equal", ["a", "a"], ["eq"]), N("Xor", ["gt", "eq"], ["x"])],
              [("a", F, ["N"]), ("b", F, ["N"])],
              [("w", F, ["N"]), ("gi", I64, ["N"]), ("ng", B, ["N"]), ("x", B, ["N"])])
    a, b = randn(6), randn(6)
    return m, [a, b], [np.where(a > b, a, b), (a > b).astype(np.int64), ~(a > b), (a > b) ^ True]


@case
def expand_constant():
    m = model([N("Constant", [], ["c"], value=numpy_helper.from_array(np.array([2, 1, 3], dtype=np.int64))),
               N("Expand", ["x", "c"], ["y"]), N("ConstantOfShape", ["c"], ["z"],
                                                 value=numpy_helper.from_array(np.array([1.5], dtype=np.float32))),
               N("Range", ["s", "l", "d"], ["r"])],
              [("x", F, [1, 4, 1]), ("s", F, []), ("l", F, []), ("d", F, [])],
              [("y", F, [2, 4, 3]), ("z", F, [2, 1, 3]), ("r", F, ["R"])])
    x = randn(1, 4, 1)
    s, l, d = (np.array(v, dtype=np.float32) for v in (1.0, 4.0, 0.5))
    return m, [x, s, l, d], [np.broadcast_to(x, (2, 4, 3)), np.full((2, 1, 3), 1.5, np.float32),
                             np.arange(1.0, 4.0, 0.5, dtype=np.float32)]


@case
def constant_of_shape_dynamic():
    # torch's zeros_like(ids): ConstantOfShape of the Shape of a [1, T]
    # input keeps the static 1 (run in transformers.test's BERT).
    m = model([N("Shape", ["ids"], ["s"]),
               N("ConstantOfShape", ["s"], ["z"], value=numpy_helper.from_array(np.array([0], dtype=np.int64))),
               N("Add", ["ids", "z"], ["y"])],
              [("ids", I64, [1, "T"])], [("y", I64, [1, "T"])])
    return m, None, None


@case
def variadic():
    m = model([N("Sum", ["a", "b", "c"], ["s"]), N("Max", ["a", "b", "c"], ["mx"]), N("Mean", ["a", "b"], ["mn"])],
              [("a", F, [3]), ("b", F, [3]), ("c", F, [1])], [("s", F, [3]), ("mx", F, [3]), ("mn", F, [3])])
    a, b, c = randn(3), randn(3), randn(1)
    return m, [a, b, c], [a + b + c, np.maximum(np.maximum(a, b), c), (a + b) / 2]


@case
def if_branches():
    # If as cond_br and a merge block; the branches read an outer value.
    then_g = helper.make_graph([N("Add", ["x", "x"], ["t"], name="then_add")], "then", [],
                               [helper.make_tensor_value_info("t", F, ["N"])])
    else_g = helper.make_graph([N("Neg", ["x"], ["e"], name="else_neg")], "else", [],
                               [helper.make_tensor_value_info("e", F, ["N"])])
    m = model([N("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
              [("c", B, []), ("x", F, ["N"])], [("y", F, ["N"])])
    x = randn(4)
    return m, [np.array(True), x], [x + x]


@case
def loop_count():
    # Loop as header / body / exit blocks: y = x doubled `trip` times.
    body = helper.make_graph([N("Identity", ["cin"], ["cout"], name="b_id"), N("Add", ["v", "v"], ["v2"], name="b_add")],
                             "body", [helper.make_tensor_value_info("i", I64, []),
                                      helper.make_tensor_value_info("cin", B, []),
                                      helper.make_tensor_value_info("v", F, [3])],
                             [helper.make_tensor_value_info("cout", B, []), helper.make_tensor_value_info("v2", F, [3])])
    m = model([N("Loop", ["trip", "", "x"], ["y"], body=body)],
              [("trip", I64, []), ("x", F, [3])], [("y", F, [3])])
    x = randn(3)
    return m, [np.array(3, dtype=np.int64), x], [x * 8]


@case
def big_weights():
    # 64x32 floats (8 KiB) go to the side file; the 4-float bias stays inline.
    w, b = randn(32, 64), randn(64)
    m = model([N("MatMul", ["x", "w"], ["h"]), N("Add", ["h", "b"], ["y"])],
              [("x", F, ["N", 32])], [("y", F, ["N", 64])], inits=[("w", w), ("b", b[:64])])
    x = randn(2, 32)
    return m, [x], [x @ w + b]


@case
def external_data():
    # The initializer's bytes live in a file beside the model.
    w = randn(16, 8)
    m = model([N("MatMul", ["x", "w"], ["y"])], [("x", F, ["N", 16])], [("y", F, ["N", 8])], inits=[("w", w)])
    x = randn(2, 16)
    return m, [x], [x @ w]


@case
def rounding():
    # Floor, Ceil and Round (half to even) as exact composites; NaN, the
    # infinities and large values pass through.
    m = model([N("Floor", ["x"], ["f"]), N("Ceil", ["x"], ["c"]), N("Round", ["x"], ["r"])],
              [("x", F, [10])], [("f", F, [10]), ("c", F, [10]), ("r", F, [10])])
    x = np.array([-2.5, -1.5, -0.4, 0.5, 1.5, 2.5, 3.7, 1e10, np.inf, np.nan], dtype=np.float32)
    return m, [x], [np.floor(x), np.ceil(x), np.round(x)]


@case
def arg_hardmax():
    # ArgMin of integers and select_last_index through max/min, equal, select;
    # Hardmax through argmax and equal.
    m = model([N("ArgMin", ["i"], ["a"], axis=1, keepdims=0), N("ArgMax", ["i"], ["b"], axis=1, select_last_index=1),
               N("Hardmax", ["x"], ["h"])],
              [("i", I64, ["N", 5]), ("x", F, ["N", 4])], [("a", I64, ["N"]), ("b", I64, ["N", 1]), ("h", F, ["N", 4])])
    i = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 9]], dtype=np.int64)
    x = randn(2, 4)
    last = i.shape[1] - 1 - np.argmax(i[:, ::-1], axis=1)
    return m, [i, x], [np.argmin(i, axis=1), last[:, None], np.eye(4, dtype=np.float32)[np.argmax(x, axis=1)]]


@case
def nll_loss():
    # NegativeLogLikelihoodLoss with weights and an ignored class (mean).
    m = model([N("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["l"], ignore_index=2)],
              [("x", F, [4, 3]), ("t", I64, [4]), ("w", F, [3])], [("l", F, [])])
    x, t, w = randn(4, 3), np.array([0, 2, 1, 1], dtype=np.int64), np.array([0.5, 1.0, 2.0], dtype=np.float32)
    keep = t != 2
    picked = -x[np.arange(4), t] * w[t]
    return m, [x, t, w], [np.array((picked * keep).sum() / (w[t] * keep).sum(), dtype=np.float32)]


@case
def depth_to_space():
    m = model([N("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD"), N("SpaceToDepth", ["y"], ["z"], blocksize=2)],
              [("x", F, ["N", 8, 2, 3])], [("y", F, ["N", 2, 4, 6]), ("z", F, ["N", 8, 2, 3])])
    x = randn(1, 8, 2, 3)
    y = x.reshape(1, 2, 2, 2, 2, 3).transpose(0, 1, 4, 2, 5, 3).reshape(1, 2, 4, 6)
    z = y.reshape(1, 2, 2, 2, 3, 2).transpose(0, 3, 5, 1, 2, 4).reshape(1, 8, 2, 3)
    return m, [x], [y, z]


@case
def trilu_gather_mod():
    # Trilu through an iota mask, GatherElements through a one-hot sum (with
    # a negative index), integer Mod with the divisor's sign.
    m = model([N("Trilu", ["x", "k"], ["u"], upper=0), N("GatherElements", ["x", "i"], ["g"], axis=1),
               N("Mod", ["a", "b"], ["r"])],
              [("x", F, ["N", 4]), ("k", I64, []), ("i", I64, ["N", 2]), ("a", I64, [6]), ("b", I64, [6])],
              [("u", F, ["N", 4]), ("g", F, ["N", 2]), ("r", I64, [6])])
    x = randn(3, 4)
    i = np.array([[0, 3], [-1, 1], [2, 2]], dtype=np.int64)
    a, b = np.array([7, -7, 7, -7, 0, 5], dtype=np.int64), np.array([2, 2, -2, -2, 3, 5], dtype=np.int64)
    return m, [x, np.array(1, dtype=np.int64), i, a, b], [np.tril(x, 1), np.take_along_axis(x, i % 4, axis=1),
                                                          np.mod(a, b)]


# --- Recurrent layers (frontend/onnx/Recurrent.cpp) ---------------------------

def _rnn_ref(cell, x, w, r, b=None, h0=None, c0=None, p=None, lens=None, direction="forward",
             acts=None, clip=None, lbr=0):
    """ONNX's LSTM / GRU / RNN equations in numpy (layout 0): Y, Y_h, Y_c."""
    f = {"Sigmoid": sigmoid, "Tanh": np.tanh, "Relu": lambda v: np.maximum(v, 0)}
    per = {"LSTM": 3, "GRU": 2, "RNN": 1}[cell]
    dirs = 2 if direction == "bidirectional" else 1
    acts = acts or ({"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}[cell] * dirs)
    S, Bn, _ = x.shape
    H = r.shape[2]
    lens = np.full(Bn, S) if lens is None else lens
    cl = (lambda v: np.clip(v, -clip, clip)) if clip is not None else (lambda v: v)
    ys, hs, cs = [], [], []
    for d in range(dirs):
        a = [f[n] for n in acts[d * per:(d + 1) * per]]
        wd, rd = w[d], r[d]
        bd = b[d] if b is not None else np.zeros(2 * wd.shape[0], np.float32)
        wb, rb = bd[:wd.shape[0]], bd[wd.shape[0]:]
        h = h0[d].copy() if h0 is not None else np.zeros((Bn, H), np.float32)
        c = c0[d].copy() if c0 is not None else np.zeros((Bn, H), np.float32)
        y = np.zeros((S, Bn, H), np.float32)
        order = range(S - 1, -1, -1) if (direction == "reverse" or d == 1) else range(S)
        for t in order:
            xt = x[t]
            if cell == "LSTM":
                g = xt @ wd.T + h @ rd.T + wb + rb
                gi, go, gf, gc = np.split(g, 4, axis=1)
                pi, po, pf = np.split(p[d], 3) if p is not None else (0, 0, 0)
                i = a[0](cl(gi + pi * c)); fg = a[0](cl(gf + pf * c)); cc = a[1](cl(gc))
                cn = fg * c + i * cc
                o = a[0](cl(go + po * cn))
                hn = o * a[2](cn)
            elif cell == "GRU":
                xz, xr, xh = np.split(xt @ wd.T + wb, 3, axis=1)
                rz, rr, rh = np.split(rd, 3)
                bz, br, bh = np.split(rb, 3)
                z = a[0](cl(xz + h @ rz.T + bz)); rg = a[0](cl(xr + h @ rr.T + br))
                hh = a[1](cl(xh + rg * (h @ rh.T + bh))) if lbr else a[1](cl(xh + (rg * h) @ rh.T + bh))
                hn = (1 - z) * hh + z * h
                cn = c
            else:
                hn = a[0](cl(xt @ wd.T + h @ rd.T + wb + rb))
                cn = c
            valid = (t < lens)[:, None]
            y[t] = np.where(valid, hn, 0)
            h = np.where(valid, hn, h)
            c = np.where(valid, cn, c)
        ys.append(y[:, None]); hs.append(h[None]); cs.append(c[None])
    return np.concatenate(ys, 1), np.concatenate(hs, 0), np.concatenate(cs, 0)


@case
def lstm_bidirectional():
    # Bidirectional, a `?` sequence axis, biases, initial states, peepholes
    # and clip: Y, Y_h and Y_c.
    I, H = 3, 4
    w, r, b = randn(2, 4 * H, I), randn(2, 4 * H, H), randn(2, 8 * H)
    p = randn(2, 3 * H)
    m = model([N("LSTM", ["x", "w", "r", "b", "", "h0", "c0", "p"], ["y", "yh", "yc"], hidden_size=H,
                 direction="bidirectional", clip=2.5)],
              [("x", F, ["S", 2, I]), ("h0", F, [2, 2, H]), ("c0", F, [2, 2, H])],
              [("y", F, ["S", 2, 2, H]), ("yh", F, [2, 2, H]), ("yc", F, [2, 2, H])],
              inits=[("w", w), ("r", r), ("b", b), ("p", p)], opset=14)
    x, h0, c0 = randn(5, 2, I), randn(2, 2, H), randn(2, 2, H)
    return m, [x, h0, c0], list(_rnn_ref("LSTM", x, w, r, b, h0, c0, p, direction="bidirectional", clip=2.5))


@case
def gru_sequence_lens():
    # Forward GRU, linear_before_reset, a run-time sequence_lens shorter than
    # the sequence for some entries (masked steps: state kept, Y rows zero).
    I, H = 3, 5
    w, r, b = randn(1, 3 * H, I), randn(1, 3 * H, H), randn(1, 6 * H)
    m = model([N("GRU", ["x", "w", "r", "b", "lens"], ["y", "yh"], hidden_size=H, linear_before_reset=1)],
              [("x", F, ["S", 3, I]), ("lens", TensorProto.INT32, [3])],
              [("y", F, ["S", 1, 3, H]), ("yh", F, [1, 3, H])],
              inits=[("w", w), ("r", r), ("b", b)], opset=14)
    x, lens = randn(6, 3, I), np.array([6, 2, 4], dtype=np.int32)
    y, yh, _ = _rnn_ref("GRU", x, w, r, b, lens=lens, lbr=1)
    return m, [x, lens], [y, yh]


@case
def rnn_reverse_batch_first():
    # Reverse RNN with Relu, layout = 1 (batch first in and out), Y_h only.
    I, H = 4, 3
    w, r = randn(1, H, I), randn(1, H, H)
    m = model([N("RNN", ["x", "w", "r"], ["", "yh"], hidden_size=H, direction="reverse", activations=["Relu"],
                 layout=1)],
              [("x", F, [2, "S", I])], [("yh", F, [2, 1, H])], inits=[("w", w), ("r", r)], opset=14)
    x = randn(2, 7, I)
    _, yh, _ = _rnn_ref("RNN", x.transpose(1, 0, 2), w, r, direction="reverse", acts=["Relu"])
    return m, [x], [yh.transpose(1, 0, 2)]

@case
def unsigned_ints():
    # uint8 and int16 inputs, initializers of every new type, Cast between
    # them: wrap-around (200 + 100 in uint8), unsigned division and
    # comparison, saturating float -> uint8, uint64 beyond int64.
    U8, U16, U32, U64, I16 = (TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32,
                              TensorProto.UINT64, TensorProto.INT16)
    m = model([N("Add", ["a", "b"], ["s"]), N("Div", ["a", "b"], ["q"]), N("Greater", ["a", "b"], ["g"]),
               N("Cast", ["a"], ["a16"], to=I16), N("Mul", ["a16", "k16"], ["m16"]),
               N("Cast", ["m16"], ["m32"], to=U32), N("Max", ["m32", "k32"], ["mx"]),
               N("Cast", ["f"], ["fu8"], to=U8), N("Sub", ["k64", "one64"], ["d64"]),
               N("Cast", ["a"], ["a16u"], to=U16), N("ReduceSum", ["a16u"], ["r"], keepdims=0)],
              [("a", U8, [4]), ("b", U8, [4]), ("f", F, [4])],
              [("s", U8, [4]), ("q", U8, [4]), ("g", B, [4]), ("mx", U32, [4]), ("fu8", U8, [4]),
               ("d64", U64, [2]), ("r", U16, [])],
              inits=[("k16", np.array([300, -2, 7, 1000], np.int16)), ("k32", np.array([5, 70000, 0, 9], np.uint32)),
                     ("k64", np.array([2**64 - 1, 0], np.uint64)), ("one64", np.array([1, 1], np.uint64))])
    a = np.array([200, 255, 7, 0], np.uint8)
    b = np.array([100, 2, 3, 1], np.uint8)
    f = np.array([-3.5, 300.0, 12.7, 0.0], np.float32)
    with np.errstate(all="ignore"):
        m16 = a.astype(np.int16) * np.array([300, -2, 7, 1000], np.int16)
        return m, [a, b, f], [a + b, a // b, a > b, np.maximum(m16.astype(np.uint32), np.array([5, 70000, 0, 9], np.uint32)),
                              np.array([0, 255, 12, 0], np.uint8), np.array([2**64 - 2, 2**64 - 1], np.uint64),
                              np.array(a.astype(np.uint16).sum(), np.uint16)]

@case
def issue47_ops():
    # Sin, Mod (fmod=1), ReduceProd, CumSum (known axis), Tile (known
    # repeats: static dims), Pad (opset 18 axes, known pads, reflect).
    nodes = [N("Sin", ["x"], ["s"]), N("Mod", ["x", "d"], ["m"], fmod=1),
             N("ReduceProd", ["x", "ax1"], ["p"], keepdims=0), N("CumSum", ["x", "cax"], ["c"], reverse=1),
             N("Tile", ["x", "reps"], ["t"]), N("Pad", ["x", "pads", "", "padaxes"], ["q"], mode="reflect")]
    m = model(nodes, [("x", F, ["N", 3]), ("d", F, [3])],
              [("s", F, ["N", 3]), ("m", F, ["N", 3]), ("p", F, ["N"]), ("c", F, ["N", 3]), ("t", F, ["N", 6]),
               ("q", F, ["N", 6])],
              inits=[("ax1", np.array([1], np.int64)), ("cax", np.array(1, np.int64)), ("reps", np.array([1, 2], np.int64)),
                     ("pads", np.array([1, 2], np.int64)), ("padaxes", np.array([-1], np.int64))], opset=18)
    x, d = randn(2, 3), np.array([0.5, -0.7, 1.5], np.float32)
    c = np.flip(np.cumsum(np.flip(x, 1), 1), 1)
    return m, [x, d], [np.sin(x), np.fmod(x, d), x.prod(axis=1), c, np.tile(x, (1, 2)),
                       np.pad(x, ((0, 0), (1, 2)), mode="reflect")]


@case
def issue47_index_ops():
    # GatherND (batch_dims), ScatterElements (add), ScatterND, OneHot with
    # float indices and depth (cast to i64) and a negative index.
    nodes = [N("GatherND", ["x", "gi"], ["g"], batch_dims=1),
             N("ScatterElements", ["x", "si", "su"], ["s"], axis=1, reduction="add"),
             N("ScatterND", ["x", "ni", "nu"], ["n"]),
             N("OneHot", ["oi", "depth", "ov"], ["o"], axis=0)]
    m = model(nodes, [("x", F, [2, 3]), ("gi", I64, [2, 1]), ("si", I64, [2, 2]), ("su", F, [2, 2]),
                      ("ni", I64, [1, 1]), ("nu", F, [1, 3]), ("oi", F, [3])],
              [("g", F, [2]), ("s", F, [2, 3]), ("n", F, [2, 3]), ("o", F, [4, 3])],
              inits=[("depth", np.array(4.0, np.float32)), ("ov", np.array([-1.0, 2.0], np.float32))], opset=16)
    x = randn(2, 3)
    gi = np.array([[2], [0]], np.int64)
    si, su = np.array([[0, 0], [2, -1]], np.int64), randn(2, 2)
    ni, nu = np.array([[1]], np.int64), randn(1, 3)
    oi = np.array([1.7, -1.0, 7.0], np.float32)
    s = x.copy()
    for r in range(2):
        for c in range(2):
            s[r, si[r, c] % 3] += su[r, c]
    n = x.copy()
    n[1] = nu[0]
    o = np.full((4, 3), -1.0, np.float32)
    o[1, 0], o[3, 1] = 2.0, 2.0
    return m, [x, gi, si, su, ni, nu, oi], [x[np.arange(2), gi[:, 0]], s, n, o]


@case
def issue47_lowered():
    # Lowered to existing ops: QuantizeLinear (per axis) and DequantizeLinear,
    # DynamicQuantizeLinear, HannWindow (symmetric), Einsum (a contraction
    # and a diagonal), LRN, Compress (no axis), Det (3x3), ReverseSequence,
    # MaxUnpool.
    U8 = TensorProto.UINT8
    nodes = [N("QuantizeLinear", ["x", "qs", "qz"], ["q"], axis=1), N("DequantizeLinear", ["q", "qs", "qz"], ["dq"], axis=1),
             N("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"]),
             N("HannWindow", ["wn"], ["hw"], periodic=0),
             N("Einsum", ["a", "b"], ["e"], equation="bij,bkj->bik"), N("Einsum", ["sq"], ["dg"], equation="ii->i"),
             N("LRN", ["img"], ["l"], size=3, alpha=0.1, beta=0.75, bias=2.0),
             N("Compress", ["x", "cond"], ["cp"]), N("Det", ["sq"], ["dt"]),
             N("ReverseSequence", ["seq", "lens"], ["rs"], batch_axis=1, time_axis=0),
             N("MaxUnpool", ["mu", "mi"], ["up"], kernel_shape=[2, 2], strides=[2, 2])]
    m = model(nodes, [("x", F, [2, 3]), ("a", F, [2, 2, 3]), ("b", F, [2, 4, 3]), ("sq", F, [3, 3]),
                      ("img", F, [1, 4, 2, 2]), ("cond", B, [4]), ("seq", F, [4, 3]), ("mu", F, [1, 1, 2, 2])],
              [("q", U8, [2, 3]), ("dq", F, [2, 3]), ("y", U8, [2, 3]), ("ys", F, []), ("yz", U8, []), ("hw", F, [5]),
               ("e", F, [2, 2, 4]), ("dg", F, [3]), ("l", F, [1, 4, 2, 2]), ("cp", F, [None]), ("dt", F, []),
               ("rs", F, [4, 3]), ("up", F, [1, 1, 4, 4])],
              inits=[("qs", np.array([0.02, 0.05, 0.1], np.float32)), ("qz", np.array([128, 0, 10], np.uint8)),
                     ("wn", np.array(5, np.int64)), ("lens", np.array([4, 1, 2], np.int64)),
                     ("mi", np.array([[[[0, 3], [9, 14]]]], np.int64))], opset=17)
    x = np.array([[-1.0, 0.5, 2.5], [3.0, -0.01, 30.0]], np.float32)
    a, b, sq, img = randn(2, 2, 3), randn(2, 4, 3), randn(3, 3), randn(1, 4, 2, 2)
    cond = np.array([True, False, False, True])
    seq, mu = randn(4, 3), randn(1, 1, 2, 2)
    qs, qz = np.array([0.02, 0.05, 0.1], np.float32), np.array([128, 0, 10], np.uint8)
    q = np.clip(np.round(x / qs) + qz, 0, 255).astype(np.uint8)
    dq = ((q.astype(np.float32) - qz.astype(np.float32)) * qs).astype(np.float32)
    lo, hi = min(0.0, x.min()), max(0.0, x.max())
    ys = np.float32((hi - lo) / 255)
    yz = np.uint8(np.clip(round(float(np.float32(0 - lo) / ys)), 0, 255))
    y = np.clip(np.round(x / ys) + yz, 0, 255).astype(np.uint8)
    hw = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(5) / 4)).astype(np.float32)
    sqs = np.zeros_like(img)
    for c in range(4):
        sqs[:, c] = (img[:, max(0, c - 1):c + 2] ** 2).sum(axis=1)
    lrn = img / (2.0 + 0.1 / 3 * sqs) ** 0.75
    rs = seq.copy()
    for bi, n in enumerate([4, 1, 2]):
        rs[:n, bi] = seq[:n, bi][::-1]
    up = np.zeros(16, np.float32)
    up[[0, 3, 9, 14]] = mu.reshape(-1)
    return m, [x, a, b, sq, img, cond, seq, mu], [
        q, dq, y, ys, yz, hw, np.einsum("bij,bkj->bik", a, b), np.diagonal(sq).copy(), lrn.astype(np.float32),
        x.reshape(-1)[[0, 3]], np.float32(np.linalg.det(sq.astype(np.float64))), rs, up.reshape(1, 1, 4, 4)]


@case
def issue47_batch3_ops():
    # BitShift, TopK (run-time K), ConvTranspose (strides, output_shape:
    # asymmetric pads), NonMaxSuppression (center boxes, defaults omitted).
    U16 = TensorProto.UINT16
    cw, cb = randn(2, 3, 3, 3), randn(3)
    nodes = [N("BitShift", ["bx", "bs"], ["bl"], direction="LEFT"), N("BitShift", ["bx", "bs"], ["br"], direction="RIGHT"),
             N("TopK", ["tx", "k"], ["tv", "ti"], axis=1, largest=0),
             N("ConvTranspose", ["cx", "cw", "cb"], ["cy"], strides=[2, 2], output_shape=[6, 5]),
             N("NonMaxSuppression", ["boxes", "scores", "maxper", "iou"], ["sel"], center_point_box=1)]
    m = model(nodes, [("bx", U16, [4]), ("bs", U16, [4]), ("tx", F, [2, 5]), ("k", I64, [1]), ("cx", F, [1, 2, 3, 2]),
                      ("boxes", F, [1, 4, 4]), ("scores", F, [1, 1, 4])],
              [("bl", U16, [4]), ("br", U16, [4]), ("tv", F, [2, None]), ("ti", I64, [2, None]), ("cy", F, [1, 3, 6, 5]),
               ("sel", I64, [None, 3])],
              inits=[("cw", cw), ("cb", cb), ("maxper", np.array([2], np.int64)),
                     ("iou", np.array([0.3], np.float32))], opset=13)
    bx, bs = np.array([1, 0x8001, 300, 7], np.uint16), np.array([3, 1, 16, 0], np.uint16)
    tx = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], np.float32)
    k = np.array([3], np.int64)
    cx = randn(1, 2, 3, 2)
    boxes = np.array([[[0.5, 0.5, 1, 1], [0.6, 0.5, 1, 1], [3, 3, 1, 1], [0.5, 0.5, 0.1, 0.1]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7, 0.95]]], np.float32)
    # ConvTranspose by the scatter form: natural 7x5 (pads from output_shape
    # [6, 5]: total 1 and 0, the odd unit at the end).
    full = np.zeros((1, 3, 7, 5))
    for c in range(2):
        for i in range(3):
            for j in range(2):
                full[0, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3] += cx[0, c, i, j] * cw[c]
    cy = (full[:, :, 0:6, 0:5] + cb.reshape(1, 3, 1, 1)).astype(np.float32)
    order = np.argsort(tx, axis=1, kind="stable")[:, :3]
    # Box 1 overlaps box 0 (IoU 0.82) and is suppressed; box 3 (inside box 0,
    # IoU 0.01) is kept first; max 2 per class.
    sel = np.array([[0, 0, 3], [0, 0, 0]], np.int64)
    return m, [bx, bs, tx, k, cx, boxes, scores], [
        (bx.astype(np.uint32) << bs.astype(np.uint32) & 0xFFFF).astype(np.uint16) * (bs < 16),
        (bx >> np.minimum(bs, 15)) * (bs < 16), np.take_along_axis(tx, order, 1), order.astype(np.int64), cy, sel]


@case
def issue47_sampling_ops():
    # Resize with constant scales (static dims), with sizes computed at run
    # time from Shape (dims ?), linear align_corners by sizes; GridSample
    # (opset 16's bilinear name) with an identity grid and border padding.
    nodes = [N("Resize", ["x", "", "sc"], ["r"], mode="nearest"),
             N("Shape", ["x"], ["shp"]), N("Mul", ["shp", "two"], ["sz"]),
             N("Resize", ["x", "", "", "sz"], ["d"], mode="nearest"),
             N("Resize", ["s", "", "", "lin"], ["l"], mode="linear", coordinate_transformation_mode="align_corners"),
             N("GridSample", ["s", "grid"], ["g"], mode="bilinear", padding_mode="border", align_corners=1)]
    grid = np.array([[[[-1, -1], [0, -1], [1, -1], [-5, 7]], [[-1, 1], [0, 1], [1, 1], [9, 9]]]], np.float32)
    m = model(nodes, [("x", F, [1, 2, "H", 3]), ("s", F, [1, 1, 2, 3])],
              [("r", F, [1, 2, "H2", 6]), ("d", F, ["A", "B", "C", "D"]), ("l", F, [1, 1, 3, 5]),
               ("g", F, [1, 1, 2, 4])],
              inits=[("sc", np.array([1, 1, 2, 2], np.float32)), ("two", np.array([1, 1, 2, 2], np.int64)),
                     ("lin", np.array([1, 1, 3, 5], np.int64)), ("grid", grid)], opset=16)
    x, s = randn(1, 2, 2, 3), randn(1, 1, 2, 3)
    up = np.repeat(np.repeat(x, 2, 2), 2, 3)
    rows = np.stack([s[0, 0, 0], (s[0, 0, 0] + s[0, 0, 1]) / 2, s[0, 0, 1]])
    cols = np.arange(5) / 2
    lin = np.stack([np.interp(cols, np.arange(3), r) for r in rows])[None, None].astype(np.float32)
    g = np.array([[[[s[0, 0, 0, 0], s[0, 0, 0, 1], s[0, 0, 0, 2], s[0, 0, 1, 0]],
                    [s[0, 0, 1, 0], s[0, 0, 1, 1], s[0, 0, 1, 2], s[0, 0, 1, 2]]]]], np.float32)
    return m, [x, s], [up, up, lin, g]


@case
def upsample_opset9():
    # Upsample (opset 9: scales an input): nearest floors, linear is asymmetric.
    nodes = [N("Upsample", ["x", "sc"], ["n"], mode="nearest"), N("Upsample", ["x", "sc"], ["l"], mode="linear")]
    m = model(nodes, [("x", F, [1, 1, 2, 2])], [("n", F, [1, 1, 4, 6]), ("l", F, [1, 1, 4, 6])],
              inits=[("sc", np.array([1, 1, 2, 3], np.float32))], opset=9)
    x = randn(1, 1, 2, 2)
    n = np.repeat(np.repeat(x, 2, 2), 3, 3)
    # Asymmetric linear: source j / scale, clamped at the last entry.
    def lin1(v, k, out):
        src = np.minimum(np.arange(out) / k, len(v) - 1)
        return np.interp(src, np.arange(len(v)), v)
    rows = np.stack([lin1(r, 3, 6) for r in x[0, 0]])
    l = np.stack([lin1(c, 2, 4) for c in rows.T]).T
    return m, [x], [n, l[None, None].astype(np.float32)]


# --- Models for the error messages (not numeric) ------------------------------

@case
def unsupported_op():
    return model([N("DeformConv", ["x", "w", "off"], ["y"], name="deconv1")],
                 [("x", F, [1, 1, 4, 4]), ("w", F, [1, 1, 3, 3]), ("off", F, [1, 18, 2, 2])],
                 [("y", F, [1, 1, 2, 2])]), None, None


@case
def lstm_reverse_lens():
    w, r = randn(1, 8, 3), randn(1, 8, 2)
    return model([N("LSTM", ["x", "w", "r", "", "lens"], ["y"], name="enc", hidden_size=2, direction="reverse")],
                 [("x", F, ["S", 2, 3]), ("lens", TensorProto.INT32, [2])], [("y", F, ["S", 1, 2, 2])],
                 inits=[("w", w), ("r", r)], opset=14), None, None


@case
def gru_activation():
    w, r = randn(1, 6, 3), randn(1, 6, 2)
    return model([N("GRU", ["x", "w", "r"], ["y"], name="dec", hidden_size=2, activations=["HardSigmoid", "Tanh"])],
                 [("x", F, ["S", 1, 3])], [("y", F, ["S", 1, 1, 2])], inits=[("w", w), ("r", r)], opset=14), None, None


@case
def unknown_op():
    return model([N("FancyOp", ["x"], ["y"], name="mystery")], [("x", F, [2])], [("y", F, [2])]), None, None


@case
def old_opset():
    # Add changed at opset 7 (numpy broadcasting replaced `broadcast`/`axis`).
    return model([N("Add", ["x", "x"], ["y"])], [("x", F, [2])], [("y", F, [2])], opset=6), None, None


@case
def opset_zero():
    return model([N("Relu", ["x"], ["y"])], [("x", F, [2])], [("y", F, [2])], opset=0), None, None


@case
def opset6_ops():
    # Ops whose schema at opset 6 is the one still in effect at 7 and later
    # (Relu-6, Elu-6, Softsign-1, GlobalAveragePool-1, Not-1) import.
    m = model([N("Relu", ["x"], ["r"]), N("Elu", ["x"], ["e"], alpha=0.5), N("Softsign", ["x"], ["s"]),
               N("GlobalAveragePool", ["x"], ["g"]), N("Not", ["b"], ["n"])],
              [("x", F, [1, 2, 3]), ("b", B, [2])],
              [("r", F, [1, 2, 3]), ("e", F, [1, 2, 3]), ("s", F, [1, 2, 3]), ("g", F, [1, 2, 1]), ("n", B, [2])],
              opset=6)
    x = randn(1, 2, 3)
    b = np.array([True, False])
    return m, [x, b], [np.maximum(x, 0), np.where(x < 0, 0.5 * (np.exp(x) - 1), x), x / (1 + np.abs(x)),
                       x.mean(axis=2, keepdims=True), ~b]


@case
def old_op():
    # BatchNormalization before opset 9 had the `spatial` attribute.
    return model([N("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn")],
                 [(n, F, [2]) for n in "sbmv"] + [("x", F, [1, 2])], [("y", F, [1, 2])], opset=8), None, None


@case
def softmax_opset11():
    # Before opset 13 Softmax reads its input as 2-D from `axis` (default 1).
    m = model([N("Softmax", ["x"], ["y"]), N("LogSoftmax", ["x"], ["z"], axis=2), N("Clip", ["x"], ["c"], min=-0.5)],
              [("x", F, ["N", 3, 4])], [("y", F, ["N", 3, 4]), ("z", F, ["N", 3, 4]), ("c", F, ["N", 3, 4])],
              opset=10)
    x = randn(2, 3, 4)
    e = np.exp(x - x.max(axis=(1, 2), keepdims=True))
    ez = np.exp(x - x.max(axis=2, keepdims=True))
    return m, [x], [e / e.sum(axis=(1, 2), keepdims=True), np.log(ez / ez.sum(axis=2, keepdims=True)),
                    np.maximum(x, -0.5)]


@case
def slice_runtime():
    # starts/ends/axes/steps as graph inputs (ONNX's clamping for both step
    # signs), on `?` dims; and known operands with steps other than 1 on a
    # static dim (constant indices).
    m = model([N("Slice", ["x", "s", "e", "a", "st"], ["y"]),
               N("Slice", ["x", "s2", "e2", "a2"], ["z"]),
               N("Slice", ["w", "ks", "ke", "ka", "kst"], ["v"])],
              [("x", F, ["N", "M", 5]), ("s", I64, [2]), ("e", I64, [2]), ("a", I64, [2]), ("st", I64, [2]),
               ("s2", I64, [1]), ("e2", I64, [1]), ("a2", I64, [1]), ("w", F, [6, 4])],
              [("y", F, [None, None, None]), ("z", F, [None, None, None]), ("v", F, [None, None])],
              inits=[("ks", np.array([-1, 1])), ("ke", np.array([-100, 4])), ("ka", np.array([0, 1])),
                     ("kst", np.array([-2, 2]))])
    x, w = randn(4, 6, 5), randn(6, 4)
    s, e, a, st = (np.array(v, np.int64) for v in ([-1, 1], [-2**63, 100], [-1, 1], [-2, 2]))
    return m, [x, s, e, a, st, np.array([1]), np.array([-1]), np.array([2]), w], [
        x[:, 1::2, ::-2], x[:, :, 1:-1], w[::-2, 1:4:2]]


@case
def split_squeeze_runtime():
    # Split sizes, Unsqueeze and Squeeze axes as graph inputs (results of
    # `?` dims and the rank the axes' count fixes).
    m = model([N("Split", ["x", "sz"], ["p", "q"], axis=1),
               N("Unsqueeze", ["p", "ua"], ["u"]), N("Squeeze", ["u", "sa"], ["sq"])],
              [("x", F, [2, "M", 3]), ("sz", I64, [2]), ("ua", I64, [2]), ("sa", I64, [1])],
              [("p", F, [2, None, 3]), ("q", F, [2, None, 3]), ("u", F, [None] * 5), ("sq", F, [None] * 4)],
              opset=13)
    x = randn(2, 7, 3)
    p, q = x[:, :3], x[:, 3:]
    u = np.expand_dims(p, (4, 0))
    return m, [x, np.array([3, 4]), np.array([-1, 0]), np.array([4])], [p, q, u, np.squeeze(u, 4)]


@case
def reduce_runtime_axes():
    # ReduceSum's axes as a graph input (opset 13), kept and dropped; the
    # opset-18 reductions the same way (max, log-sum-exp).
    m = model([N("ReduceSum", ["x", "ax"], ["k"]), N("ReduceSum", ["x", "ax"], ["d"], keepdims=0)],
              [("x", F, [2, "M", 4]), ("ax", I64, [2])], [("k", F, [None] * 3), ("d", F, [None])], opset=13)
    x = randn(2, 3, 4)
    ax = np.array([-1, 0])
    return m, [x, ax], [x.sum(axis=(0, 2), keepdims=True), x.sum(axis=(0, 2))]


@case
def reduce18_runtime_axes():
    m = model([N("ReduceMax", ["x", "ax"], ["m"], keepdims=0), N("ReduceLogSumExp", ["x", "ax"], ["l"]),
               N("ReduceMean", ["x", "ax"], ["n"], keepdims=0)],
              [("x", F, [2, 3, 4]), ("ax", I64, [1])], [("m", F, [None, None]), ("l", F, [None] * 3),
                                                        ("n", F, [None, None])], opset=18)
    x = randn(2, 3, 4)
    mx = x.max(axis=1, keepdims=True)
    return m, [x, np.array([1])], [x.max(axis=1), np.log(np.exp(x - mx).sum(axis=1, keepdims=True)) + mx,
                                   x.mean(axis=1)]


@case
def reshape_runtime_zero():
    # A run-time target with a 0 (copy the input's dimension) and a -1.
    m = model([N("Reshape", ["x", "s"], ["y"])], [("x", F, [2, 3, 4]), ("s", I64, [3])], [("y", F, ["A", "B", "C"])])
    x = randn(2, 3, 4)
    return m, [x, np.array([0, -1, 2], dtype=np.int64)], [x.reshape(2, 6, 2)]


@case
def new_opset():
    return model([N("Relu", ["x"], ["y"])], [("x", F, [2])], [("y", F, [2])], opset=22), None, None


@case
def complex_input():
    return model([N("Identity", ["x"], ["y"])], [("x", TensorProto.COMPLEX64, [2])],
                 [("y", TensorProto.COMPLEX64, [2])]), None, None


@case
def string_cast():
    return model([N("Cast", ["x"], ["y"], name="to_str", to=TensorProto.STRING)], [("x", F, [2])],
                 [("y", TensorProto.STRING, [2])]), None, None


@case
def slice_dynamic_count():
    # starts of a run-time length: the number of sliced axes is unknown.
    return model([N("Slice", ["x", "st", "en"], ["y"], name="cut")], [("x", F, [8]), ("st", I64, ["K"]),
                                                                     ("en", I64, ["K"])], [("y", F, [None])]), None, None


@case
def unsqueeze_dynamic_count():
    # axes of a run-time length: the result's rank would depend on values.
    return model([N("Unsqueeze", ["x", "ax"], ["y"], name="grow")], [("x", F, [8]), ("ax", I64, ["K"])],
                 [("y", F, None)]), None, None


@case
def reshape_dynamic_length():
    return model([N("Reshape", ["x", "s"], ["y"], name="to")], [("x", F, [8]), ("s", I64, ["K"])],
                 [("y", F, None)]), None, None


@case
def split_count_mismatch():
    return model([N("Split", ["x", "sz"], ["a", "b"], name="halves")], [("x", F, [8]), ("sz", I64, [3])],
                 [("a", F, [None]), ("b", F, [None])]), None, None


@case
def squeeze_too_many():
    return model([N("Squeeze", ["x", "ax"], ["y"], name="flat")], [("x", F, [1, 8]), ("ax", I64, [3])],
                 [("y", F, None)]), None, None


@case
def shape_mismatch():
    return model([N("Add", ["a", "b"], ["y"], name="bad_add")], [("a", F, [2, 3]), ("b", F, [4, 3])],
                 [("y", F, [2, 3])]), None, None


@case
def control_chars():
    # Names are arbitrary bytes: a message naming one stays one line.
    return model([N("Relu", ["x"], ["y\nz"], name="bad\nname"), N("DeformConv", ["y\nz"], ["w"], name="conv\r2")],
                 [("x", F, [2])], [("w", F, [2])]), None, None


@case
def hostile_external():
    # The external data points outside the model's directory.
    m = model([N("Identity", ["w"], ["y"])], [], [("y", F, [2])], inits=[("w", np.zeros(2, np.float32))])
    t = m.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "../../../../etc/passwd"), ("offset", "0"), ("length", "8")):
        e = t.external_data.add()
        e.key, e.value = k, v
    return m, None, None


@case
def short_external():
    # The external file is shorter than the tensor.
    return model([N("Identity", ["w"], ["y"])], [], [("y", F, [64])], inits=[("w", np.zeros(64, np.float32))]), None, None


# Sequences and optionals: a module of their own (this file is big).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_cases_seq  # noqa: E402

onnx_cases_seq.register(case)


def write(name, path):
    m, feeds, expected = CASES[name]()
    if name in EXTERNAL:
        d = os.path.dirname(os.path.abspath(path))
        data = os.path.basename(path) + ".data"
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location=data,
                        size_threshold=0)
        if EXTERNAL[name] is not None:
            with open(os.path.join(d, data), "r+b") as f:
                f.truncate(EXTERNAL[name])
    else:
        onnx.save_model(m, path)
    return feeds, expected


def e2e(names):
    """import | nimblec -O0/-O2 | nimble-run, each output against numpy."""
    failures = 0
    runs = 0
    with tempfile.TemporaryDirectory() as d:
        for name in names:
            onnx_path = os.path.join(d, name + ".onnx")
            feeds, expected = write(name, onnx_path)
            if feeds is None:
                continue
            nir = os.path.join(d, name + ".nir")
            subprocess.run(["nimble-import-onnx", onnx_path, "-o", nir], check=True)
            ins = []
            for k, v in enumerate(feeds):
                p = os.path.join(d, "%s.in%d.npy" % (name, k))
                np.save(p, np.asarray(v))
                ins.append("--input=@" + p)
            for level in ("-O0", "-O2"):
                nbc = os.path.join(d, name + level + ".nbc")
                subprocess.run(["nimblec", level, nir, "-o", nbc], check=True)
                outs = [os.path.join(d, "%s%s.out%d.npy" % (name, level, k)) for k in range(len(expected))]
                subprocess.run(["nimble-run", nbc] + ins + ["--output=@" + p for p in outs], check=True,
                               stdout=subprocess.DEVNULL)
                runs += 1
                before = failures
                for k, (p, want) in enumerate(zip(outs, expected)):
                    got = np.load(p)
                    want = np.asarray(want)
                    ok = got.shape == want.shape and got.dtype == want.dtype and np.allclose(
                        got, want, rtol=1e-4, atol=1e-5, equal_nan=True)
                    if not ok:
                        failures += 1
                        print("MISMATCH %s %s output %d: got %s %s, want %s %s" % (
                            name, level, k, got.dtype, got.shape, want.dtype, want.shape))
                        print("  got  %s\n  want %s" % (got.ravel()[:8], want.ravel()[:8]))
                if failures == before:
                    print("%s %s: %d outputs match" % (name, level, len(expected)))
    print("e2e: %d runs, %d mismatches" % (runs, failures))
    return 1 if failures else 0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "make":
        write(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] == "e2e":
        names = sys.argv[2:] or [n for n in CASES if CASES[n]()[1] is not None]
        return e2e(names)
    if len(sys.argv) == 2 and sys.argv[1] == "list":
        print("\n".join(CASES))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
