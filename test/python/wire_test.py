"""nimble.wire, the JSON form of values that nimble.serve speaks
(docs/serving.md): round trips of every dtype both ways, ADTs and tuples,
and each refusal's status and one-line message. No Ray needed: the serving
tests proper are test/serving/."""

import base64
import io
import json
import unittest

import numpy as np

from nimble import wire
from nimble_testing import path

LIMITS = wire.Limits()


def body(obj):
    return json.dumps(obj).encode()


class RoundTrip(unittest.TestCase):
    def test_tensors_every_dtype_both_encodings(self):
        for dtype in wire.DTYPES:
            for shape in [(), (3,), (2, 0), (2, 3)]:
                x = (np.arange(int(np.prod(shape)), dtype=np.int64) % 3).astype(dtype).reshape(shape)
                for enc in ("list", "npy"):
                    j = json.loads(json.dumps(wire.encode_value(x, enc)))
                    y = wire.decode_value(j, LIMITS)
                    self.assertEqual((y.dtype, y.shape), (x.dtype, x.shape), (dtype, shape, enc))
                    self.assertTrue(np.array_equal(x, y))

    def test_float_bits_survive_lists(self):
        x = np.random.default_rng(0).normal(size=(64,)).astype(np.float32)
        x[:3] = [np.float32(1e-45), np.finfo(np.float32).max, -0.0]
        y = wire.decode_value(json.loads(json.dumps(wire.encode_value(x))), LIMITS)
        self.assertEqual(x.tobytes(), y.tobytes())

    def test_non_finite_results_come_back_as_npy(self):
        x = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
        j = wire.encode_value(x, "list")
        self.assertEqual(list(j), ["npy"])
        json.dumps(j, allow_nan=False)   # strict JSON, as Starlette writes it
        y = wire.decode_value(json.loads(json.dumps(j)), LIMITS)
        self.assertEqual(x.tobytes(), y.tobytes())

    def test_adts_and_tuples(self):
        leaf = ("Leaf", np.ones((1, 4), np.float32))
        v = ("Node", leaf, ("Node", leaf, "Nil"), (np.zeros(2, np.int64), "Nil"))
        j = json.loads(json.dumps(wire.encode_value(v)))
        self.assertEqual(j[0], "Node")
        self.assertEqual(j[2][2], "Nil")
        back = wire.decode_value(j, LIMITS)
        self.assertEqual(back[0], "Node")
        self.assertTrue(np.array_equal(back[1][1], leaf[1]))
        self.assertEqual(back[3][1], "Nil")

    def test_request_and_outputs(self):
        fns = {"main": None}
        b = wire.request("main", (np.ones((2, 8), np.float32),), encoding="npy", input_encoding="npy")
        fn, inputs, enc = wire.decode_request(b, fns, LIMITS)
        self.assertEqual((fn, enc, inputs[0].shape), ("main", "npy", (2, 8)))
        out = wire.encode_outputs((np.ones(2), np.zeros(1)), 2)
        self.assertEqual(len(out["outputs"]), 2)
        out = wire.encode_outputs(np.ones(2), 1)
        self.assertEqual(len(wire.decode_outputs(out)), 1)

    def test_works_on_a_model(self):
        import nimble
        exe = nimble.load(nimble.compile(path("models/treelstm/small/treelstm_small.nir")))
        leaf = ("Leaf", np.full((1, 8), 0.5, np.float32))
        fn, inputs, _ = wire.decode_request(wire.request("main", (("Node", leaf, leaf),)), exe.functions, LIMITS)
        h, c = exe.run(fn, *inputs, kernels="native")
        got = wire.decode_outputs(json.loads(json.dumps(wire.encode_outputs((h, c), 2))))
        self.assertTrue(np.array_equal(got[0], h) and np.array_equal(got[1], c))


class Refusals(unittest.TestCase):
    def refused(self, raw, status, message, limits=LIMITS):
        with self.assertRaises(wire.RequestError) as cm:
            wire.decode_request(raw, {"main": None}, limits)
        self.assertEqual(cm.exception.status, status)
        self.assertIn(message, cm.exception.message)
        self.assertNotIn("\n", cm.exception.message)
        self.assertTrue(cm.exception.message.startswith("error: "))

    def test_each(self):
        t = {"dtype": "float32", "data": [[1.0]]}
        self.refused(b"{", 400, "request is not JSON")
        self.refused(b"\xff\xfe", 400, "request is not JSON")
        self.refused(b"3", 400, "got a JSON number")
        self.refused(body({"function": "other", "inputs": []}), 404, 'no function "other" (the model has @main)')
        self.refused(body({"inputs": [], "x": 1}), 400, "unknown request field x")
        self.refused(body({"inputs": {}}), 400, '"inputs" must be an array')
        self.refused(body({"inputs": [t], "encoding": "xml"}), 400, '"encoding" is "list" or "npy"')
        self.refused(body({"inputs": [{"dtype": "float32"}]}), 400, "a tensor is")
        self.refused(body({"inputs": [{"dtype": "bfloat16", "data": 1}]}), 400, 'unknown dtype "bfloat16"')
        self.refused(body({"inputs": [{"dtype": "float32", "data": [[1], [2, 3]]}]}), 400, "not a rectangular array")
        self.refused(body({"inputs": [{"dtype": "float32", "data": "abc"}]}), 400, "data is not")
        self.refused(body({"inputs": [{"dtype": "int8", "data": [1000]}]}), 400, "out of the range of int8")
        self.refused(body({"inputs": [{"dtype": "int32", "data": [1.5]}]}), 400, "non-integers for dtype int32")
        self.refused(body({"inputs": [{"dtype": "int64", "data": [1 << 70]}]}), 400, "not a rectangular array of numbers")
        self.refused(body({"inputs": [{"dtype": "float32", "data": [1, 2], "shape": [3]}]}), 400,
                     "shape [3] has 3 elements, data has 2")
        self.refused(body({"inputs": [{"dtype": "float32", "data": [], "shape": [-1]}]}), 400, "non-negative")
        self.refused(body({"inputs": [{"npy": "AAAA", "dtype": "float32"}]}), 400, 'takes only "npy"')
        self.refused(body({"inputs": [{"npy": "!!"}]}), 400, "not base64")
        self.refused(body({"inputs": [{"npy": base64.b64encode(b"garbage").decode()}]}), 400, "not an .npy file")
        self.refused(body({"inputs": [True]}), 400, "got a JSON boolean")
        self.refused(body({"inputs": [1.5]}), 400, "got a JSON number")

    def test_npy_claims(self):
        def npy(header, data):
            f = io.BytesIO()
            np.lib.format.write_array_header_1_0(f, header)
            return body({"inputs": [{"npy": base64.b64encode(f.getvalue() + data).decode()}]})
        self.refused(npy({"descr": "<f4", "fortran_order": False, "shape": (1 << 16, 1 << 15)}, b""), 413,
                     "a tensor of shape [65536, 32768] (float32) is over the limit of 268435456 bytes")
        self.refused(npy({"descr": "<f4", "fortran_order": False, "shape": (4,)}, b"\0" * 15), 400,
                     "holds 15 data bytes, needs 16")
        self.refused(npy({"descr": "|O", "fortran_order": False, "shape": (1,)}, b"\0" * 8), 400, "dtype object")
        # Big-endian and Fortran order are read right.
        x = np.arange(6, dtype=">i4").reshape(2, 3)
        f = io.BytesIO()
        np.save(f, np.asfortranarray(x))
        v = wire.decode_value({"npy": base64.b64encode(f.getvalue()).decode()}, LIMITS)
        self.assertTrue(np.array_equal(v, x) and v.dtype == np.int32 and v.flags.c_contiguous)

    def test_limits(self):
        small = wire.Limits(max_body_bytes=100, max_depth=5, max_tensor_bytes=16)
        self.refused(b" " * 101, 413, "request body of 101 bytes is over the limit of 100 bytes", small)
        self.refused(body({"inputs": [[[[[["Leaf"]]]]]]}), 400, "nested more than 5 levels", small)
        self.refused(body({"inputs": [{"dtype": "float32", "data": [1], "shape": [8]}]}), 413,
                     "a tensor of shape [8] is over the limit of 16 bytes", small)
        # Brackets inside strings do not count; a tree 100,000 deep is one pass.
        wire.parse_body(body({"inputs": ["[[[[[[[[[[[["]}), small)
        deep = b"[" * 100000 + b"]" * 100000
        self.refused(deep, 400, "nested more than 2000 levels")


if __name__ == "__main__":
    unittest.main()
