"""The paper's three models (small variants) from Python against nimble-run:
the same .nbc bytes from nimble.compile as from nimblec, and the same results
bit for bit on the same kernels (reference and native, one thread), single
runs and auto-batched instances."""

import glob
import os
import unittest

import numpy as np

import nimble
import nimble_io
from nimble_testing import MODELS, assert_bitwise_equal, cli_outputs, nimble_run, nimblec, scratch

MODELS_SMALL = {
    # name: (.nir, fixture inputs, fixture outputs per input)
    "lstm": ("lstm/small/lstm_small.nir", "lstm/small/fixtures/seq_0?.npy", (".h.npy", ".c.npy")),
    "treelstm": ("treelstm/small/treelstm_small.nir", "treelstm/small/fixtures/tree_0?.txt", (".h.npy", ".c.npy")),
    "bert": ("bert/small/bert_small.nir", "bert/small/fixtures/ids_0?.npy", (".out.npy",)),
}


def fixture_inputs(model):
    """[(the --input text, the Python value, [PyTorch's outputs])]."""
    _, pattern, suffixes = MODELS_SMALL[model]
    out = []
    for f in sorted(glob.glob(os.path.join(MODELS, pattern))):
        stem = f[: -len(".npy")] if f.endswith(".npy") else f[: -len(".txt")]
        value = nimble_io.read_tree_file(f) if f.endswith(".txt") else np.load(f)
        out.append(("@" + f, value, [np.load(stem + s) for s in suffixes]))
    return out


class ModelsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = scratch()
        cls.nbc = {}
        for model, (nir, _, _) in MODELS_SMALL.items():
            for kernels in ("reference", "native"):
                path = os.path.join(cls.dir, "%s-%s.nbc" % (model, kernels))
                rc, err = nimblec(os.path.join(MODELS, nir), "--kernels=" + kernels, "-o", path)
                assert rc == 0, err
                cls.nbc[model, kernels] = path

    def test_compile_matches_nimblec(self):
        # The same bytes: nimble.compile runs nimblec's stages (tools/driver).
        for model, (nir, _, _) in MODELS_SMALL.items():
            for kernels in ("reference", "native"):
                with self.subTest(model=model, kernels=kernels):
                    data = nimble.compile(os.path.join(MODELS, nir), kernels=kernels)
                    with open(self.nbc[model, kernels], "rb") as f:
                        self.assertEqual(data, f.read())

    def test_compile_to_file_and_opt_levels(self):
        nir = os.path.join(MODELS, MODELS_SMALL["lstm"][0])
        for level in (0, 1, 3):
            with self.subTest(opt_level=level):
                out = os.path.join(self.dir, "lstm-O%d.nbc" % level)
                self.assertIsNone(nimble.compile(nir, opt_level=level, kernels="reference", output=out))
                cli = out + ".cli"
                rc, err = nimblec(nir, "-O%d" % level, "--kernels=reference", "-o", cli)
                self.assertEqual(rc, 0, err)
                with open(out, "rb") as a, open(cli, "rb") as b:
                    self.assertEqual(a.read(), b.read())

    def check_model(self, model, kernels):
        exe = nimble.load(self.nbc[model, kernels])
        nres = len(exe.functions["main"].results)
        for text, value, expected in fixture_inputs(model):
            with self.subTest(model=model, kernels=kernels, input=os.path.basename(text)):
                got = exe.run("main", value, kernels=kernels, threads=1)
                got = got if isinstance(got, tuple) else (got,)
                self.assertEqual(len(got), nres)
                want = cli_outputs(self.nbc[model, kernels], "main", [text], nres, kernels)
                for i, (g, w) in enumerate(zip(got, want)):
                    assert_bitwise_equal(self, g, w, "result %d" % i)
                for g, e in zip(got, expected):  # and PyTorch's, as scripts/demo.sh checks
                    np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)

    def test_lstm(self):
        for kernels in ("reference", "native"):
            self.check_model("lstm", kernels)

    def test_treelstm(self):
        for kernels in ("reference", "native"):
            self.check_model("treelstm", kernels)

    def test_bert(self):
        for kernels in ("reference", "native"):
            self.check_model("bert", kernels)

    def test_auto_kernels_and_threads(self):
        # kernels="auto" (the default) picks oneDNN or native code by a fixed
        # rule: equal within rounding, the same bits on every call (issue
        # 52), and nothing measured or stored.
        exe = nimble.load(self.nbc["bert", "native"])
        for _, ids, (want,) in fixture_inputs("bert"):
            got = exe.run("main", ids, threads=2)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
            again = nimble.load(self.nbc["bert", "native"]).run("main", ids, threads=2)
            self.assertTrue(np.array_equal(got, again))
        self.assertEqual(exe.tuning_decisions, 0)
        # kernels="tune" measures; its decisions stay with the Executable.
        for _, ids, (want,) in fixture_inputs("bert"):
            got = exe.run("main", ids, threads=2, kernels="tune")
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        decided = exe.tuning_decisions
        self.assertGreater(decided, 0)
        exe.run("main", fixture_inputs("bert")[1][1], threads=2, kernels="tune")
        self.assertEqual(exe.tuning_decisions, decided)
        path = os.path.join(self.dir, "bert.tuning")
        exe.save_tuning(path)
        again = nimble.load(self.nbc["bert", "native"])
        again.load_tuning(path)
        self.assertEqual(again.tuning_decisions, decided)

    def test_run_many_matches_instances(self):
        # run_many is nimble-run --instances: the same results bit for bit
        # (reference kernels), auto-batched or one after another.
        trees = [value for _, value, _ in fixture_inputs("treelstm")]
        rng = np.random.default_rng(5)
        leaf = lambda: rng.normal(0, 0.4, (1, 8)).astype(np.float32)
        for n in (1, 3, 9, 17):
            trees.append(nimble_io.random_tree(rng, n, leaf))
        d = scratch()
        lines = []
        for i, t in enumerate(trees):
            nimble_io.write_text_atomic(os.path.join(d, "t%d.txt" % i), nimble_io.format_tree(t) + "\n")
            lines.append("@t%d.txt" % i)
        with open(os.path.join(d, "instances.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        nbc = self.nbc["treelstm", "reference"]
        exe = nimble.load(nbc)
        for auto_batch in (True, False):
            with self.subTest(auto_batch=auto_batch):
                outdir = os.path.join(d, "out-%s" % auto_batch)
                os.mkdir(outdir)
                rc, _, err = nimble_run(nbc, "--instances=" + os.path.join(d, "instances.txt"),
                                        "--kernels=reference", "--threads=1", "--output-dir=" + outdir,
                                        "--auto-batch=" + ("on" if auto_batch else "off"))
                self.assertEqual(rc, 0, err)
                got = exe.run_many("main", [(t,) for t in trees], kernels="reference", auto_batch=auto_batch)
                self.assertEqual(len(got), len(trees))
                for i, (h, c) in enumerate(got):
                    assert_bitwise_equal(self, h, np.load(os.path.join(outdir, "%d.0.npy" % i)), "h %d" % i)
                    assert_bitwise_equal(self, c, np.load(os.path.join(outdir, "%d.1.npy" % i)), "c %d" % i)
        # The window (nimble-run --batch-window) changes the schedule, not the
        # results: on the reference kernels every window gives the bits of
        # the default, and the profile shows how many were in flight.
        default = exe.run_many("main", [(t,) for t in trees], kernels="reference")
        for window in (0, 1, 4, 1000):
            with self.subTest(batch_window=window):
                got, prof = exe.run_many("main", [(t,) for t in trees], kernels="reference",
                                         batch_window=window, profile=True)
                self.assertEqual(prof["batch"]["in_flight"], min(window, len(trees)) if window else len(trees))
                for i, ((h, c), (h0, c0)) in enumerate(zip(got, default)):
                    assert_bitwise_equal(self, h, h0, "h %d" % i)
                    assert_bitwise_equal(self, c, c0, "c %d" % i)
        # Native kernels, batched against one at a time: within rounding.
        exe = nimble.load(self.nbc["treelstm", "native"])
        batched = exe.run_many("main", [(t,) for t in trees], kernels="native")
        for t, (h, c) in zip(trees, batched):
            h1, c1 = exe.run("main", t, kernels="native")
            np.testing.assert_allclose(h, h1, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(c, c1, rtol=1e-5, atol=1e-6)

    def test_profile(self):
        exe = nimble.load(self.nbc["lstm", "native"])
        xs = fixture_inputs("lstm")[2][1]
        (h, c), prof = exe.run("main", xs, profile=True, kernels="native")
        self.assertGreater(prof["instructions"], 0)
        self.assertGreater(prof["total_seconds"], 0)
        self.assertTrue(prof["kernels"])
        self.assertTrue(any("native" in k["impl"] for k in prof["kernels"]))
        for k in prof["kernels"]:
            self.assertIn(k["impl"], ("native", "reference", "native+reference"))
            self.assertGreater(k["calls"], 0)
        self.assertIn("Kernel profile (1 run):", prof["text"])
        self.assertIn("Time split: kernels", prof["text"])
        results, prof = exe.run_many("main", [(xs,), (xs[:3],)], profile=True)
        self.assertEqual(len(results), 2)
        self.assertEqual(prof["batch"]["instances"], 2)
        self.assertIn("Auto-batching (1 run of 2 instances)", prof["text"])


if __name__ == "__main__":
    unittest.main()
