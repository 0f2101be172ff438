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

    def test_npy_headers(self):
        """Headers the fast reader (a regex and a cache of parsed headers)
        does not take still get numpy's reader and its one-line 400; a
        cached header checks each file's data length anew."""
        def raw(data):
            return body({"inputs": [{"npy": base64.b64encode(data).decode()}]})
        f = io.BytesIO()
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (2, 2)})
        h = f.getvalue()
        self.assertEqual(len(h), 128)
        self.refused(raw(h[:30]), 400, "not an .npy file: EOF: reading array header, expected 118 bytes got 20")
        self.refused(raw(h[:8] + (5000).to_bytes(2, "little") + h[10:]), 400,
                     "not an .npy file: EOF: reading array header, expected 5000 bytes got 118")
        self.refused(raw(b"\x93NUMPY\x01\x00" + (16).to_bytes(2, "little") + b"[1, 2, 3]      \n"), 400,
                     "not an .npy file: Header is not a dictionary")
        self.refused(raw(h.replace(b"(2, 2)", b"(2,-2)") + b"\0" * 16), 400,
                     "not an .npy file: shape [2, -2] has a negative dimension")
        self.refused(raw(b"\x93NUMPY\x09\x00" + h[8:] + b"\0" * 16), 400, "not an .npy file: Invalid version (9, 0)")
        self.refused(raw(b"\x93NUMPY\x05\x00" + (118).to_bytes(4, "little") + h[10:] + b"\0" * 16), 400,
                     "not an .npy file: Invalid version (5, 0)")
        self.refused(raw(b"\x93NUMPY"), 400, "not an .npy file: EOF: reading magic string")
        wire.decode_request(raw(h + b"\0" * 16), {"main": None}, LIMITS)   # the header cached
        for _ in range(2):
            self.refused(raw(h + b"\0" * 12), 400, ".npy of shape [2, 2] holds 12 data bytes, needs 16")
        self.refused(raw(h + b"\0" * 20), 400, ".npy of shape [2, 2] holds 20 data bytes, needs 16")
        for text, message in (("AAA", "\"npy\" is not base64: Incorrect padding"), ("\u00e9", "only ASCII"), ("AA\nAA", "Only base64"),
                              (" AAAA", "Only base64")):
            self.refused(body({"inputs": [{"npy": text}]}), 400, message)
        # Read right: version 2.0, rank 0, a 0 dimension, Fortran order of rank 1 and 2, big-endian
        # (the cache keeps each header's dtype and order).
        for x, version in ((np.arange(6, dtype="<f8").reshape(2, 3), (2, 0)), (np.array(3, np.float32), (1, 0)),
                           (np.zeros((2, 0), np.int16), (1, 0)), (np.asfortranarray(np.arange(4.0)), (1, 0)),
                           (np.asfortranarray(np.arange(6.0).reshape(2, 3)), (1, 0)),
                           (np.arange(6, dtype=">u2").reshape(3, 2), (1, 0)), (np.array([True, False]), (1, 0))):
            for _ in range(2):   # parsed, then from the cache
                f = io.BytesIO()
                np.lib.format.write_array(f, x, version=version)
                y = wire.decode_value({"npy": base64.b64encode(f.getvalue()).decode()}, LIMITS)
                self.assertEqual((y.shape, y.dtype.newbyteorder("=")), (x.shape, x.dtype.newbyteorder("=")))
                self.assertTrue(np.array_equal(x, y) and y.dtype.isnative and y.flags.c_contiguous, (x, version))

    def test_npy_results(self):
        """Results as npy: np.save's bytes, also when the header comes from the cache."""
        for x in (np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(6, dtype=np.float32).reshape(2, 3) + 1,
                  np.arange(6, dtype=np.float32).reshape(3, 2).T, np.array(2.5), np.zeros((0, 3), np.int8)):
            f = io.BytesIO()
            np.save(f, x, allow_pickle=False)
            self.assertEqual(base64.b64decode(wire.tensor(x, "npy")["npy"]), f.getvalue())

    def test_bracket_count(self):
        # Over 2 KB the brackets are counted by numpy: '[' and '{' only.
        text = (b'"' + b"a" * 3000 + b'"' + b"[{]}" * 7 + bytes(range(256))) * 2
        self.assertEqual(wire._opening_brackets(text), text.count(b"[") + text.count(b"{"))
        self.assertEqual(wire._opening_brackets(text[:100]), text[:100].count(b"[") + text[:100].count(b"{"))

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
