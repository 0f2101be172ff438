"""onnx_cases.py's op mappings: small graphs whose import is FileCheck'd
(ops.test) and, where they return feeds, run end to end against numpy.
"""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnx_case_lib import family, B, F, I64, N, model, randn, sigmoid

case, register = family()


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
