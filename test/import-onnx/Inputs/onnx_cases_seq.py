"""onnx_cases.py's cases of sequences and optionals (frontend/onnx/Sequences.cpp),
and of the lowerings added with them (Unique's outputs, Loop's scan outputs,
Scan, Dropout and BatchNormalization in training mode, MaxPool's Indices,
the integer matmuls and convolutions), registered into its CASES by register(case)
(onnx_cases.py calls it). Each
case returns (model, feeds, expected) like onnx_cases.py's: the numeric ones
take and give tensors (a sequence built, changed and read inside the graph),
so e2e runs them; sequences.test FileChecks the imported IR and
errors.test the messages.
"""

import numpy as np
from onnx import TensorProto, helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def model(nodes, inputs, outputs, opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def T(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def S(name, t, shape):
    return helper.make_tensor_sequence_value_info(name, t, shape)


def N(op, ins, outs, name=None, **attrs):
    return helper.make_node(op, ins, outs, name=name or (op.lower() + "0"), **attrs)


def i64(v):
    return helper.make_tensor("k", I64, [], [v])


def seq_ops():
    # construct [a, b], insert c at 1 -> [a, c, b], erase -1 -> [a, c];
    # outputs: element -1 (c), the length (2) and element 0 (a).
    nodes = [N("SequenceConstruct", ["a", "b"], ["s"]),
             N("Constant", [], ["one"], name="one", value=i64(1)),
             N("Constant", [], ["minus1"], name="minus1", value=i64(-1)),
             N("Constant", [], ["zero"], name="zero", value=i64(0)),
             N("SequenceInsert", ["s", "c", "one"], ["s2"]),
             N("SequenceErase", ["s2", "minus1"], ["s3"]),
             N("SequenceAt", ["s3", "minus1"], ["last"]),
             N("SequenceLength", ["s3"], ["n"]),
             N("SequenceAt", ["s3", "zero"], ["first"], name="at0")]
    m = model(nodes, [T("a", F, [2, 3]), T("b", F, ["N", 3]), T("c", F, [1, 3])],
              [T("last", F, [None, 3]), T("n", I64, []), T("first", F, [None, 3])])
    a, b, c = (np.arange(k, k + 3 * r, dtype=np.float32).reshape(r, 3) for k, r in ((0, 2), (10, 4), (20, 1)))
    return m, [a, b, c], [c, np.array(2, np.int64), a]


def seq_insert_back():
    # SequenceEmpty's rank is learned from the insert (the import runs twice);
    # inserting without a position appends.
    nodes = [N("SequenceEmpty", [], ["e"], dtype=F),
             N("SequenceInsert", ["e", "x"], ["s1"], name="ins1"),
             N("SequenceInsert", ["s1", "y"], ["s2"], name="ins2"),
             N("Constant", [], ["one"], name="one", value=i64(1)),
             N("SequenceAt", ["s2", "one"], ["z"])]
    m = model(nodes, [T("x", F, [2, 2]), T("y", F, [3, 2])], [T("z", F, [None, 2])])
    x, y = np.ones((2, 2), np.float32), np.full((3, 2), 7, np.float32)
    return m, [x, y], [y]


def seq_map():
    # SequenceMap over a built sequence and a tensor: x_i + t, then read back.
    body = helper.make_graph([N("Add", ["e", "t"], ["o"], name="body_add")], "body",
                             [T("e", F, [None]), T("t", F, [None])], [T("o", F, [None])])
    nodes = [N("SequenceConstruct", ["a", "b"], ["s"]),
             N("SequenceMap", ["s", "t"], ["r"], body=body),
             N("Constant", [], ["one"], name="one", value=i64(1)),
             N("SequenceAt", ["r", "one"], ["y"])]
    m = model(nodes, [T("a", F, [4]), T("b", F, [4]), T("t", F, [4])], [T("y", F, [None])])
    a, b, t = np.arange(4, dtype=np.float32), np.full(4, 3, np.float32), np.full(4, 0.5, np.float32)
    return m, [a, b, t], [b + t]


def optional_get():
    # Optional of a tensor, then whether it has one and its value.
    nodes = [N("Optional", ["x"], ["o"]), N("OptionalHasElement", ["o"], ["h"]),
             N("OptionalGetElement", ["o"], ["y"])]
    m = model(nodes, [T("x", F, [3])], [T("h", TensorProto.BOOL, []), T("y", F, [None])], opset=18)
    x = np.array([1, 2, 3], np.float32)
    return m, [x], [np.array(True), x]


def optional_empty():
    # An empty optional (its element type from the attribute) has no element.
    tp = helper.make_tensor_type_proto(F, [2])
    nodes = [N("Optional", [], ["o"], type=tp), N("OptionalHasElement", ["o"], ["h"])]
    return model(nodes, [], [T("h", TensorProto.BOOL, [])], opset=18), [], [np.array(False)]


def seq_io():
    # A sequence input and output (FileCheck only: feeds are tensors).
    m = model([N("Identity", ["s"], ["r"])], [S("s", F, ["N", 3])], [S("r", F, ["N", 3])])
    return m, None, None


def seq_mixed_ranks():
    # Nimble's lists hold one rank: a vector and a matrix do not go together.
    m = model([N("SequenceConstruct", ["a", "b"], ["s"], name="mixed")],
              [T("a", F, [3]), T("b", F, [2, 3])], [S("s", F, None)])
    return m, None, None


def seq_insert_wrong_rank():
    # A sequence input's declared rank is a default: the first insert of a
    # vector makes it a list of vectors (learned, imported again); a matrix
    # inserted next no longer fits.
    nodes = [N("SequenceInsert", ["s", "v"], ["s1"], name="ins_v"),
             N("SequenceInsert", ["s1", "m"], ["s2"], name="ins_m")]
    m = model(nodes, [S("s", F, [None, None]), T("v", F, [3]), T("m", F, [2, 3])], [S("s2", F, None)])
    return m, None, None


# --- Unique's four outputs (ConvertComposite.cpp) -----------------------------

def unique_rows():
    # Distinct rows, sorted lexicographically, with first indices, each row's
    # position and the counts (numpy's np.unique with axis=0).
    x = np.array([[1, 0, 2], [0, 5, 1], [1, 0, 2], [0, 5, 0], [0, 5, 1]], np.float32)
    m = model([N("Unique", ["x"], ["y", "idx", "inv", "cnt"], axis=0)], [T("x", F, [5, 3])],
              [T("y", F, [None, 3]), T("idx", I64, [None]), T("inv", I64, [5]), T("cnt", I64, [None])], opset=11)
    y, idx, inv, cnt = np.unique(x, axis=0, return_index=True, return_inverse=True, return_counts=True)
    return m, [x], [y, idx.astype(np.int64), inv.reshape(-1).astype(np.int64), cnt.astype(np.int64)]


def unique_first_order():
    # sorted=0: in the order of first occurrence, no axis (flattened).
    x = np.array([[3, 1, 3], [2, 1, 7]], np.int64)
    m = model([N("Unique", ["x"], ["y", "idx", "inv", "cnt"], sorted=0)], [T("x", I64, [2, 3])],
              [T("y", I64, [None]), T("idx", I64, [None]), T("inv", I64, [6]), T("cnt", I64, [None])], opset=11)
    return m, [x], [np.array([3, 1, 2, 7]), np.array([0, 1, 3, 5]), np.array([0, 1, 0, 2, 1, 3]),
                    np.array([2, 2, 1, 1])]


# --- Loop's scan outputs and Scan (ControlFlow.cpp) ---------------------------

def loop_scan():
    # A running sum carried, and each iteration's sum stacked (a scan output).
    body = helper.make_graph([N("Identity", ["cin"], ["cout"], name="b_id"), N("Add", ["acc", "x"], ["acc2"], name="b_add"),
                              N("Identity", ["acc2"], ["row"], name="b_row")],
                             "body", [T("i", I64, []), T("cin", TensorProto.BOOL, []), T("acc", F, [2])],
                             [T("cout", TensorProto.BOOL, []), T("acc2", F, [2]), T("row", F, [2])])
    m = model([N("Loop", ["trip", "", "a0"], ["total", "rows"], body=body)],
              [T("trip", I64, []), T("a0", F, [2]), T("x", F, [2])], [T("total", F, [2]), T("rows", F, [None, 2])])
    a0, x = np.array([1, 2], np.float32), np.array([0.5, -1], np.float32)
    rows = np.stack([a0 + x * (k + 1) for k in range(4)])
    return m, [np.array(4, np.int64), a0, x], [rows[-1], rows]


def scan_reverse():
    # Scan (opset 9) over axis 1 backwards, the outputs stacked backwards
    # (prepended) and onto axis 1: a suffix sum of the columns.
    body = helper.make_graph([N("Add", ["s", "col"], ["s2"], name="b_add"), N("Identity", ["s2"], ["o"], name="b_o")],
                             "body", [T("s", F, [3]), T("col", F, [3])], [T("s2", F, [3]), T("o", F, [3])])
    m = model([N("Scan", ["s0", "x"], ["s", "cols"], body=body, num_scan_inputs=1, scan_input_axes=[1],
                 scan_input_directions=[1], scan_output_axes=[1], scan_output_directions=[1])],
              [T("s0", F, [3]), T("x", F, [3, 4])], [T("s", F, [3]), T("cols", F, [3, None])], opset=11)
    s0, x = np.zeros(3, np.float32), np.arange(12, dtype=np.float32).reshape(3, 4)
    suffix = np.cumsum(x[:, ::-1], axis=1)[:, ::-1]
    return m, [s0, x], [suffix[:, 0], suffix]


# --- Dropout in training mode (ConvertMath.cpp) -------------------------------

def dropout_training():
    # training_mode and ratio given at run time: ratio 0 drops nothing (the
    # input and a mask of true); another ratio is a run-time error.
    m = model([N("Dropout", ["x", "r", "t"], ["y", "mask"])],
              [T("x", F, [2, 3]), T("r", F, []), T("t", TensorProto.BOOL, [])],
              [T("y", F, [2, 3]), T("mask", TensorProto.BOOL, [2, 3])], opset=13)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    return m, [x, np.array(0, np.float32), np.array(True)], [x, np.ones((2, 3), bool)]


def dropout_training_ratio():
    # Training with a known nonzero ratio needs random numbers: an import error.
    nodes = [N("Constant", [], ["r"], name="r", value=helper.make_tensor("r", F, [], [0.25])),
             N("Constant", [], ["t"], name="t", value=helper.make_tensor("t", TensorProto.BOOL, [], [True])),
             N("Dropout", ["x", "r", "t"], ["y"], name="drop")]
    return model(nodes, [T("x", F, [2])], [T("y", F, [2])], opset=13), None, None


# --- MaxPool's Indices (ConvertWindow.cpp) -------------------------------------

def maxpool_indices(storage_order=0):
    # Strides, pads and a dilation; indices flat over (n, c, h, w), row major
    # (storage_order 0) or column major over the spatial axes (1).
    x = np.random.default_rng(5).permutation(2 * 2 * 5 * 6).astype(np.float32).reshape(2, 2, 5, 6)
    k, s, p, dil = (3, 2), (2, 2), (1, 0, 1, 1), (1, 2)
    m = model([N("MaxPool", ["x"], ["y", "i"], kernel_shape=list(k), strides=list(s), pads=list(p),
                 dilations=list(dil), storage_order=storage_order)],
              [T("x", F, [2, 2, 5, 6])], [T("y", F, None), T("i", I64, None)], opset=12)
    oh = (5 + p[0] + p[2] - dil[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (6 + p[1] + p[3] - dil[1] * (k[1] - 1) - 1) // s[1] + 1
    y, idx = np.zeros((2, 2, oh, ow), np.float32), np.zeros((2, 2, oh, ow), np.int64)
    for n in range(2):
        for c in range(2):
            for a in range(oh):
                for b in range(ow):
                    best = None
                    for u in range(k[0]):
                        for v in range(k[1]):
                            h, w = a * s[0] + u * dil[0] - p[0], b * s[1] + v * dil[1] - p[1]
                            if 0 <= h < 5 and 0 <= w < 6 and (best is None or x[n, c, h, w] > best[0]):
                                flat = w * 5 + h if storage_order else h * 6 + w
                                best = (x[n, c, h, w], (n * 2 + c) * 30 + flat)
                    y[n, c, a, b], idx[n, c, a, b] = best
    return m, [x], [y, idx]


def maxpool_indices_colmajor():
    return maxpool_indices(1)


def maxpool_indices_dynamic():
    m = model([N("MaxPool", ["x"], ["y", "i"], name="pool", kernel_shape=[2, 2])],
              [T("x", F, ["N", 1, 4, 4])], [T("y", F, None), T("i", I64, None)], opset=12)
    return m, None, None


# --- BatchNormalization in training mode (ConvertMath.cpp) ---------------------

def batchnorm_training():
    # Normalised by the batch's statistics; the running ones by momentum.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    sc, bi, mu, va = (rng.standard_normal(3).astype(np.float32) for _ in range(4))
    va = np.abs(va)
    m = model([N("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1, momentum=0.8,
                 epsilon=1e-3)],
              [T("x", F, [2, 3, 4])] + [T(n, F, [3]) for n in "sbmv"],
              [T("y", F, [2, 3, 4]), T("rm", F, [3]), T("rv", F, [3])], opset=15)
    bm, bv = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    y = (x - bm[:, None]) / np.sqrt(bv[:, None] + 1e-3) * sc[:, None] + bi[:, None]
    return m, [x, sc, bi, mu, va], [y, mu * 0.8 + bm * 0.2, va * 0.8 + bv * 0.2]


# --- The integer ops (ConvertComposite.cpp) ------------------------------------

U8 = TensorProto.UINT8
I8 = TensorProto.INT8


def matmul_integer():
    # Per-row zero points of A, per-column of B; i32 out.
    rng = np.random.default_rng(11)
    a, b = rng.integers(0, 256, (3, 4)).astype(np.uint8), rng.integers(-128, 128, (4, 2)).astype(np.int8)
    za, zb = np.array([1, 200, 7], np.uint8), np.array([-3, 5], np.int8)
    m = model([N("MatMulInteger", ["a", "b", "za", "zb"], ["y"])],
              [T("a", U8, [3, 4]), T("b", I8, [4, 2]), T("za", U8, [3]), T("zb", I8, [2])],
              [T("y", TensorProto.INT32, [3, 2])], opset=10)
    y = (a.astype(np.int32) - za[:, None]) @ (b.astype(np.int32) - zb)
    return m, [a, b, za, zb], [y]


def qlinear_conv():
    # Per-output-channel w_scale and w_zero_point, an i32 bias, padding.
    rng = np.random.default_rng(12)
    x, w = rng.integers(0, 256, (1, 2, 4, 4)).astype(np.uint8), rng.integers(0, 256, (3, 2, 3, 3)).astype(np.uint8)
    xs, xz, ws, wz = np.float32(0.05), np.uint8(128), np.array([0.01, 0.02, 0.03], np.float32), np.array([120, 128, 130], np.uint8)
    ys, yz, b = np.float32(0.5), np.uint8(10), np.array([100, -50, 7], np.int32)
    m = model([N("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], pads=[1, 1, 1, 1])],
              [T("x", U8, [1, 2, 4, 4]), T("xs", F, []), T("xz", U8, []), T("w", U8, [3, 2, 3, 3]), T("ws", F, [3]),
               T("wz", U8, [3]), T("ys", F, []), T("yz", U8, []), T("b", TensorProto.INT32, [3])],
              [T("y", U8, [1, 3, 4, 4])], opset=10)
    xp = np.pad(x.astype(np.int64) - 128, ((0, 0), (0, 0), (1, 1), (1, 1)))
    wi = w.astype(np.int64) - wz[:, None, None, None]
    acc = np.zeros((1, 3, 4, 4), np.int64)
    for o in range(3):
        for i in range(4):
            for j in range(4):
                acc[0, o, i, j] = (xp[0, :, i:i + 3, j:j + 3] * wi[o]).sum() + b[o]
    mult = (xs * ws / ys).astype(np.float32)
    y = np.clip(np.rint(acc * mult[None, :, None, None].astype(np.float64)) + yz, 0, 255).astype(np.uint8)
    return m, [x, np.array(xs), np.array(xz), w, ws, wz, np.array(ys), np.array(yz), b], [y]


def seq_to_tensor_op():
    # A sequence given to a tensor op.
    m = model([N("Relu", ["s"], ["y"], name="relu")], [S("s", F, [3])], [T("y", F, [3])])
    return m, None, None


def register(case):
    for fn in (seq_ops, seq_insert_back, seq_map, optional_get, optional_empty, seq_io, seq_mixed_ranks,
               seq_insert_wrong_rank, unique_rows, unique_first_order, loop_scan, scan_reverse,
               dropout_training, dropout_training_ratio, maxpool_indices, maxpool_indices_colmajor,
               maxpool_indices_dynamic, seq_to_tensor_op, batchnorm_training, matmul_integer, qlinear_conv):
        case(fn)
