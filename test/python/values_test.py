"""Values both ways: ADT trees and lists as ("Ctor", fields...) tuples,
tuples, every numpy dtype, scalars, deep values; and when arrays are
borrowed or handed over without a copy."""

import os
import unittest

import numpy as np

import nimble
import values_nir
from nimble_testing import nimble_run, scratch


def py_list(items):
    out = ("Nil",)
    for x in reversed(items):
        out = ("Cons", x, out)
    return out


class ValuesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.exe = nimble.load(nimble.compile(values_nir.SOURCE, kernels="native"))

    def test_signatures(self):
        f = self.exe.functions
        self.assertEqual(f["map"].params, [("l", "@List"), ("k", "tensor<f32>")])
        self.assertEqual(f["map"].results, ["@List"])
        self.assertEqual(f["pack"].results, ["tuple<tensor<?x4xf32>, tensor<i64>>"])
        self.assertEqual(self.exe.adts["List"], [("Nil", []), ("Cons", ["tensor<?xf32>", "@List"])])
        self.assertEqual(self.exe.adts["Tree"], [("Leaf", ["tensor<1x4xf32>"]), ("Node", ["@Tree", "@Tree"])])

    def test_list_round_trip(self):
        items = [np.arange(n, dtype=np.float32) for n in (3, 1, 0, 5)]
        got = self.exe.run("id_list", py_list(items))
        for x in items:
            self.assertEqual(got[0], "Cons")
            np.testing.assert_array_equal(got[1], x)
            got = got[2]
        self.assertEqual(got, ("Nil",))
        self.assertEqual(self.exe.run("id_list", "Nil"), ("Nil",))  # a bare name for a nullary constructor
        self.assertEqual(self.exe.run("id_list", ["Nil"]), ("Nil",))  # lists work as tuples

    def test_tree_round_trip(self):
        leaf = lambda k: ("Leaf", np.full((1, 4), k, np.float32))
        tree = ("Node", leaf(1), ("Node", leaf(2), leaf(3)))
        got = self.exe.run("id_tree", tree)
        self.assertEqual(got[0], "Node")
        self.assertEqual(got[1][0], "Leaf")
        np.testing.assert_array_equal(got[2][2][1], np.full((1, 4), 3, np.float32))

    def test_map_against_cli(self):
        items = [np.array([1, 2, 3], np.float32), np.array([-0.5], np.float32)]
        got = self.exe.run("map", py_list(items), np.float32(2))
        want = py_list([x * 2 for x in items])
        self.assertEqual(repr(got), repr(want))
        nbc = os.path.join(scratch(), "v.nbc")
        nimble.compile(values_nir.SOURCE, kernels="native", output=nbc)
        rc, out, err = nimble_run(nbc, "--function=map", "--input=Cons(3xf32=1 2 3, Cons(1xf32=-0.5, Nil))",
                                  "--input=f32=2")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.strip(), "Cons(3xf32=[2 4 6], Cons(1xf32=[-1], Nil))")

    def test_deep_values(self):
        # 100,000 levels each way: no recursion in C++ (nor in the test).
        n = 100000
        got = self.exe.run("count", n)
        depth = 0
        while got[0] == "Cons":
            self.assertEqual(got[1][0], n - 1 - depth)
            got = got[2]
            depth += 1
        self.assertEqual(depth, n)
        # Inputs are held to the IR's limit of nesting (10000), as nimble-run's.
        deep = ("Nil",)
        for i in range(9999):
            deep = ("Cons", np.zeros(1, np.float32), deep)
        self.assertEqual(self.exe.run("id_list", deep)[0], "Cons")

    def test_tuples(self):
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        t = self.exe.run("pack", x)
        self.assertIsInstance(t, tuple)
        np.testing.assert_array_equal(t[0], x)
        self.assertEqual(t[1].dtype, np.int64)
        self.assertEqual(t[1].shape, ())
        self.assertEqual(int(t[1]), 2)
        np.testing.assert_array_equal(self.exe.run("unpack", (x, np.int64(3))), x.sum(axis=1) * 3)
        np.testing.assert_array_equal(self.exe.run("unpack", (x, 3)), x.sum(axis=1) * 3)

    def test_dtypes(self):
        a = np.array([1, -2], np.int32)
        b = np.array([0.5, 1.5], np.float16)
        c = np.array([True, False])
        d = np.array([1.5], np.float64)
        e = np.array([7], np.int8)
        r = self.exe.run("kinds", a, b, c, d, e)
        self.assertEqual([x.dtype for x in r],
                         [np.dtype(t) for t in ("int32", "float16", "bool", "float64", "int8")])
        np.testing.assert_array_equal(r[0], a + a)
        np.testing.assert_array_equal(r[1], b + b)
        np.testing.assert_array_equal(r[2], ~c)
        np.testing.assert_array_equal(r[3], d * d)
        np.testing.assert_array_equal(r[4], e - e)

    def test_unsigned_and_int16(self):
        # numpy's uint8..uint64 and int16 in and out; arithmetic wraps as numpy's does.
        a = np.array([200, 3], np.uint8)
        b = np.array([7, 65535], np.uint16)
        c = np.array([70000, 2], np.uint32)
        d = np.array([1, 0], np.uint64)
        e = np.array([-20000, 5], np.int16)
        r = self.exe.run("wraps", a, b, c, d, e)
        self.assertEqual([x.dtype for x in r],
                         [np.dtype(t) for t in ("uint8", "uint16", "uint32", "uint64", "int16")])
        with np.errstate(over="ignore"):
            for got, want in zip(r, (a + a, b - b, c * c, -d, e + e)):
                np.testing.assert_array_equal(got, want)
        self.assertEqual(r[3][0], 2**64 - 1)

    def test_scalars(self):
        np.testing.assert_array_equal(self.exe.run("upto", 5), np.arange(5))
        np.testing.assert_array_equal(self.exe.run("upto", np.int64(3)), np.arange(3))
        np.testing.assert_array_equal(self.exe.run("upto", np.array(2, np.int64)), np.arange(2))

    def test_any_layout_in(self):
        # Strided, Fortran-order, byte-swapped, read-only and unaligned
        # arrays are copied once; the results are the same.
        x = np.arange(24, dtype=np.float32).reshape(6, 4)
        want = x[::2] + x[::2]
        for arg in (x[::2], np.asfortranarray(x[::2]), x[::2].astype(">f4")):
            np.testing.assert_array_equal(self.exe.run("add", arg, arg), want)
        ro = x.copy()
        ro.setflags(write=False)
        np.testing.assert_array_equal(self.exe.run("add", ro, ro), x + x)
        raw = np.zeros(x.nbytes + 1, np.uint8)[1:].view(np.float32).reshape(6, 4)
        raw[...] = x
        self.assertFalse(raw.flags.aligned)
        np.testing.assert_array_equal(self.exe.run("add", raw, raw), x + x)
        # Not a numpy array: anything numpy turns into one (the buffer
        # protocol), and DLPack producers (torch, JAX: numpy.from_dlpack).
        np.testing.assert_array_equal(self.exe.run("add", memoryview(x), x), x + x)

        class Producer:  # only DLPack's two methods, as a foreign tensor has
            def __init__(self, a):
                self.a = a

            def __dlpack__(self, stream=None):
                return self.a.__dlpack__()

            def __dlpack_device__(self):
                return self.a.__dlpack_device__()

        np.testing.assert_array_equal(self.exe.run("add", Producer(x), Producer(x)), x + x)

    def test_borrowed_inputs_are_not_results(self):
        # A result that is an argument (or shares its buffer) is a copy: the
        # caller's array is theirs to change afterwards.
        x = np.ones(3, np.float32)
        got = self.exe.run("id_list", ("Cons", x, ("Nil",)))
        x[:] = 7
        np.testing.assert_array_equal(got[1], np.ones(3, np.float32))
        self.assertFalse(np.shares_memory(got[1], x))

    def test_results_own_their_buffers(self):
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        r = self.exe.run("add", x, x)
        self.assertTrue(r.flags.writeable)
        self.assertTrue(r.flags.c_contiguous)
        r2 = self.exe.run("add", x, x)
        self.assertFalse(np.shares_memory(r, r2))
        r[...] = 0  # a result is the caller's: later runs do not see it
        np.testing.assert_array_equal(self.exe.run("add", x, x), x + x)
        # A constant of the executable comes back as a copy.
        w = self.exe.run("weights")
        w[0] = 100
        np.testing.assert_array_equal(self.exe.run("weights"), [1, 2, 3, 4])
        # Dropping the results returns their memory (no leak over many runs).
        for _ in range(1000):
            self.exe.run("add", x, x)


if __name__ == "__main__":
    unittest.main()
