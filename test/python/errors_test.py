"""Every error path of the module, pinned by message: a nimble.Error (of the
right subclass) carrying what the command-line tool prints for the same
mistake, without the tool's name; never a crash, never a partial result."""

import os
import unittest

import numpy as np

import nimble
import values_nir
from nimble_testing import MODELS, cli_error, nimble_run, nimblec, scratch

X = np.zeros((2, 4), np.float32)


class ErrorsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = scratch()
        cls.nir = os.path.join(cls.dir, "values.nir")
        with open(cls.nir, "w") as f:
            f.write(values_nir.SOURCE)
        cls.nbc = os.path.join(cls.dir, "values.nbc")
        rc, err = nimblec(cls.nir, "-o", cls.nbc)
        assert rc == 0, err
        cls.exe = nimble.load(cls.nbc)

    def check(self, cls, message, function, args, cli_inputs=None):
        """Running `function` on `args` raises `cls` with `message`, which is
        also what nimble-run says for `cli_inputs` (when given)."""
        with self.assertRaises(cls) as ctx:
            self.exe.run(function, *args)
        self.assertEqual(ctx.exception.message, message)
        self.assertEqual(str(ctx.exception), message)
        if cli_inputs is not None:
            rc, out, err = nimble_run(self.nbc, "--function=" + function, *["--input=" + i for i in cli_inputs])
            self.assertEqual(rc, 1)
            self.assertEqual(out, "")  # no partial result
            self.assertEqual(cli_error(err), message)
        return ctx.exception

    def test_argument_count(self):
        self.check(nimble.InputError,
                   "error: @add takes 2 inputs, got 1\n  input 0 (%a): tensor<?x4xf32>\n  input 1 (%b): tensor<?x4xf32>",
                   "add", [X], ["2x4xf32=0"])

    def test_dtype(self):
        f64 = os.path.join(self.dir, "f64.npy")
        np.save(f64, X.astype(np.float64))
        self.check(nimble.InputError, "error: input 0 (%a) must be tensor<?x4xf32>, got tensor<2x4xf64>",
                   "add", [X.astype(np.float64), X], ["@" + f64, "@" + f64])
        self.check(nimble.InputError,
                   "error: input 0 (%a) must be tensor<?x4xf32>, got an array of numpy dtype complex64 (no Nimble dtype)",
                   "add", [X.astype(np.complex64), X])
        self.check(nimble.InputError,
                   "error: input 0 (%a) must be tensor<?x4xf32>, got an array of numpy dtype object (no Nimble dtype)",
                   "add", [object(), X])

    def test_shape_and_rank(self):
        self.check(nimble.InputError, "error: input 1 (%b) must be tensor<?x4xf32>, got tensor<2x5xf32>",
                   "add", [X, np.zeros((2, 5), np.float32)], ["2x4xf32=0", "2x5xf32=0"])
        self.check(nimble.InputError, "error: input 0 (%a) must be tensor<?x4xf32>, got tensor<4xf32>",
                   "add", [np.zeros(4, np.float32), X], ["4xf32=0", "2x4xf32=0"])
        self.check(nimble.InputError, "error: input 0 (%x) must be tensor<3x4xf32>, got tensor<2x4xf32>",
                   "scale", [X, 1.0], ["2x4xf32=0", "f32=1"])

    def test_no_such_function(self):
        e = self.check(nimble.InputError,
                       "error: no function @nope in '%s' (it has @id_list, @id_tree, @map, @count, @pack, "
                       "@unpack, @add, @scale, @upto, @kinds, @wraps, @weights)" % self.nbc, "nope", [], [])
        self.assertIsNone(e.location)

    def test_constructors(self):
        self.check(nimble.InputError, "error: input 0 (%l): @List has no constructor 'Conz' (it has Nil, Cons)",
                   "map", [("Conz", X), 1.0])
        self.check(nimble.InputError, "error: input 0 (%l): constructor 'Cons' takes 2 fields, got 1",
                   "map", [("Cons", np.zeros(2, np.float32)), 1.0])
        self.check(nimble.InputError,
                   "error: input 0 (%l) must be @List, a (constructor, fields...) tuple, got int", "map", [5, 1.0])
        self.check(nimble.InputError,
                   "error: input 0 (%t): tuple<tensor<?x4xf32>, tensor<i64>> takes 2 elements, got 1",
                   "unpack", [(X,)])
        deep = ("Nil",)
        for _ in range(10001):
            deep = ("Cons", np.zeros(1, np.float32), deep)
        self.check(nimble.InputError, "error: input 0 (%l): the value is nested more than 10000 levels",
                   "id_list", [deep])

    def test_kernel_errors_are_located(self):
        e = self.check(nimble.ExecutionError,
                       "%s:60:3: error: 'add' operands are not broadcast-compatible: dimension 0 is 3 in operand 0 "
                       "and 5 in operand 1 (3x4 vs 5x4)" % self.nir,
                       "add", [np.zeros((3, 4), np.float32), np.zeros((5, 4), np.float32)], ["3x4xf32=0", "5x4xf32=0"])
        self.assertEqual(e.location, (self.nir, 60, 3))
        # BERT's embedding lookup with an id past the vocabulary.
        bert_nir = os.path.join(MODELS, "bert/small/bert_small.nir")
        bert = os.path.join(self.dir, "bert.nbc")
        self.assertEqual(nimblec(bert_nir, "-o", bert)[0], 0)
        ids = np.array([1, 2, 1000], np.int64)
        with self.assertRaises(nimble.ExecutionError) as ctx:
            nimble.load(bert).run("main", ids)
        rc, out, err = nimble_run(bert, "--input=3xi64=1 2 1000")
        self.assertEqual((rc, out), (1, ""))
        self.assertEqual(ctx.exception.message, cli_error(err))
        self.assertEqual(ctx.exception.location[0], bert_nir)

    def test_out_of_memory(self):
        e = self.check(nimble.OutOfMemoryError, "%s:72:3: error: out of memory allocating 8796093022208 bytes" % self.nir,
                       "upto", [1 << 40], ["i64=1099511627776"])
        self.assertIsInstance(e, nimble.ExecutionError)
        # The executable is still usable.
        np.testing.assert_array_equal(self.exe.run("upto", 3), np.arange(3))

    def test_limits(self):
        with self.assertRaises(nimble.ExecutionError) as ctx:
            self.exe.run("count", 1000, max_instructions=50)
        rc, _, err = nimble_run(self.nbc, "--function=count", "--input=i64=1000", "--max-instructions=50")
        self.assertEqual(ctx.exception.message, cli_error(err))

    def test_load_errors(self):
        with self.assertRaises(nimble.LoadError) as ctx:
            nimble.load(b"garbage")
        self.assertEqual(ctx.exception.message,
                         "error: <bytes>: not a Nimble executable: 7 bytes is too small for the 40-byte header")
        missing = os.path.join(self.dir, "missing.nbc")
        with self.assertRaises(nimble.LoadError) as ctx:
            nimble.load(missing)
        rc, _, err = nimble_run(missing)
        self.assertEqual(ctx.exception.message, cli_error(err))
        # A flipped byte: the checksum (the verifier runs on every load).
        with open(self.nbc, "rb") as f:
            data = bytearray(f.read())
        data[len(data) // 2] ^= 0xFF
        bad = os.path.join(self.dir, "bad.nbc")
        with open(bad, "wb") as f:
            f.write(data)
        with self.assertRaises(nimble.LoadError) as ctx:
            nimble.load(bad)
        rc, _, err = nimble_run(bad)
        self.assertEqual(rc, 1)
        self.assertEqual(ctx.exception.message, cli_error(err))

    def test_compile_errors(self):
        bad = os.path.join(self.dir, "bad.nir")
        with open(bad, "w") as f:
            f.write("module @m\nfunc @f(%x: tensor<2xf32>) -> tensor<2xf32> {\n  %y = add %x, %z\n  ret %y\n}\n")
        with self.assertRaises(nimble.CompileError) as ctx:
            nimble.compile(bad)
        rc, err = nimblec(bad, "-o", os.path.join(self.dir, "bad.nbc"))
        self.assertEqual(rc, 1)
        self.assertEqual(ctx.exception.message, err.rstrip("\n"))
        self.assertEqual(ctx.exception.location, (bad, 3, 16))
        self.assertTrue(ctx.exception.message.startswith(bad + ":3:16: error: use of undefined value %z\n"))
        with self.assertRaises(nimble.CompileError) as ctx:
            nimble.compile(os.path.join(self.dir, "nothing.nir"))
        self.assertIn("error: cannot open", ctx.exception.message)
        # Missing weights: located at the constant's declaration.
        with self.assertRaises(nimble.CompileError) as ctx:
            nimble.compile(os.path.join(MODELS, "lstm/small/lstm_small.nir"), weights_dir=self.dir)
        self.assertIn("error: constant @weight_ih_l0: ", ctx.exception.message)
        with self.assertRaises(ValueError):
            nimble.compile(bad, opt_level=7)

    def test_bad_keywords(self):
        with self.assertRaises(ValueError):
            self.exe.run("add", X, X, kernels="fastest")
        with self.assertRaises(ValueError):
            self.exe.run("add", X, X, threads=0)
        with self.assertRaises(ValueError):
            self.exe.run_many("add", [(X, X)], errors="ignore")
        with self.assertRaises(ValueError) as ctx:
            self.exe.run_many("add", [(X, X)], batch_window=-1)
        self.assertIn("batch_window takes a count (0: every instance at once), got -1", str(ctx.exception))

    def test_run_many_errors(self):
        instances = [(X, X), (X,), (np.zeros((3, 4), np.float32), np.zeros((5, 4), np.float32)), (X, X + 1)]
        got = self.exe.run_many("add", instances, errors="return")
        np.testing.assert_array_equal(got[0], X)
        self.assertIsInstance(got[1], nimble.InputError)
        self.assertTrue(got[1].message.startswith("error: @add takes 2 inputs, got 1"))
        self.assertIsInstance(got[2], nimble.ExecutionError)
        self.assertIn("error: 'add' operands are not broadcast-compatible", got[2].message)
        np.testing.assert_array_equal(got[3], X + 1)  # the others ran
        with self.assertRaises(nimble.InputError) as ctx:
            self.exe.run_many("add", instances)
        self.assertTrue(ctx.exception.message.startswith("instance 1: error: @add takes 2 inputs, got 1"))


if __name__ == "__main__":
    unittest.main()
