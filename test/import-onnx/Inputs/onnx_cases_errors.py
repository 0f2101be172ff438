"""onnx_cases.py's models for the importer's error messages (errors.test),
which return no feeds, and beside them the edges those messages guard that
do import and run against numpy: old and new opsets (Softmax before 13, the
opset 6 forms) and operands known only at run time (Slice, Split, Squeeze,
Reduce axes, Reshape's 0).
"""

import numpy as np
from onnx import TensorProto

from onnx_case_lib import family, B, F, I64, N, model, randn

case, register = family()


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
def isinf_int():
    # ONNX types IsInf's input as float only (found by onnx-fuzzer: an int64
    # input once reached an undefined -inf to int64 conversion).
    return model([N("IsInf", ["x"], ["y"], name="inf_check", detect_positive=0)], [("x", I64, [2])],
                 [("y", B, [2])]), None, None


@case
def qlinearconv_scalar_w():
    # A 1-D w_zero_point for a w of rank 0 (found by onnx-fuzzer: the
    # per-axis reshape indexed an empty shape).
    U8 = TensorProto.UINT8
    return model([N("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], name="qc")],
                 [("x", U8, [1, 1, 3, 3]), ("xs", F, []), ("xz", U8, []), ("w", U8, []), ("ws", F, []),
                  ("wz", U8, [1]), ("ys", F, []), ("yz", U8, [])], [("y", U8, [1, 1, 3, 3])]), None, None


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
