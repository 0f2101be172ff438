"""What the case modules of onnx_cases.py share: graph building with
onnx.helper, the seeded random inputs, and family(), by which a module's
cases join onnx_cases.py's registry.

A case module marks its cases with the `case` that family() returns and hands
them over in file order with its `register`: onnx_cases.py passes its registry
in (register(case)) rather than the modules importing it back, because
onnx_cases.py runs as a script (__main__), and a module importing
`onnx_cases` would load a second copy with a registry of its own.
"""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64
B = TensorProto.BOOL


def family():
    """(case, register) for one case module: `@case` marks a function as a
    case; `register(add)` calls add(fn) for each, in the order they were
    marked."""
    marked = []

    def case(fn):
        marked.append(fn)
        return fn

    def register(add):
        for fn in marked:
            add(fn)

    return case, register


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
