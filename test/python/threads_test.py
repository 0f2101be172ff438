"""One Executable shared by many Python threads: the same results as one
thread, and the GIL released while the VM runs."""

import os
import threading
import time
import unittest

import numpy as np

import nimble
import nimble_io
from nimble_testing import MODELS, assert_bitwise_equal


class ThreadsTest(unittest.TestCase):
    def test_eight_threads_share_one_executable(self):
        lstm = nimble.load(nimble.compile(os.path.join(MODELS, "lstm/small/lstm_small.nir")))
        tree = nimble.load(nimble.compile(os.path.join(MODELS, "treelstm/small/treelstm_small.nir")))
        rng = np.random.default_rng(3)
        seqs = [rng.normal(0, 0.4, (int(n), 8)).astype(np.float32) for n in rng.integers(0, 40, 24)]
        trees = [nimble_io.random_tree(rng, int(n), lambda: rng.normal(0, 0.4, (1, 8)).astype(np.float32))
                 for n in rng.integers(1, 12, 24)]
        for kernels in ("native", "reference", "auto"):
            with self.subTest(kernels=kernels):
                serial = [(lstm.run("main", s, kernels=kernels), tree.run("main", t, kernels=kernels))
                          for s, t in zip(seqs, trees)]
                batched = tree.run_many("main", [(t,) for t in trees], kernels=kernels)
                results = [[None] * len(seqs) for _ in range(8)]
                many = [None] * 8
                errors = []

                def work(k):
                    try:
                        for rep in range(3):
                            order = list(range(len(seqs)))[k % 5:] + list(range(len(seqs)))[: k % 5]
                            for i in order:
                                results[k][i] = (lstm.run("main", seqs[i], kernels=kernels),
                                                 tree.run("main", trees[i], kernels=kernels))
                            many[k] = tree.run_many("main", [(t,) for t in trees], kernels=kernels)
                    except BaseException as e:  # reported below, on the test's thread
                        errors.append(e)

                threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                self.assertEqual(errors, [])
                for k in range(8):
                    for i, ((h, c), (th, tc)) in enumerate(serial):
                        (gh, gc), (gth, gtc) = results[k][i]
                        # "auto" may pick another implementation in another
                        # thread's VM only before the shared decision exists.
                        if kernels == "auto":
                            np.testing.assert_allclose(gh, h, rtol=1e-5, atol=1e-6)
                            np.testing.assert_allclose(gth, th, rtol=1e-5, atol=1e-6)
                            continue
                        for g, w in ((gh, h), (gc, c), (gth, th), (gtc, tc)):
                            assert_bitwise_equal(self, g, w, "thread %d instance %d" % (k, i))
                    for (gh, gc), (h, c) in zip(many[k], batched):
                        if kernels == "auto":
                            np.testing.assert_allclose(gh, h, rtol=1e-5, atol=1e-6)
                        else:
                            assert_bitwise_equal(self, gh, h, "run_many h, thread %d" % k)
                            assert_bitwise_equal(self, gc, c, "run_many c, thread %d" % k)

    def test_gil_released_while_running(self):
        # While one thread runs a long sequence, another Python thread goes
        # on counting at (a good part of) its own pace; with the GIL held
        # it would count only in the 5 ms switch intervals around the run.
        lstm = nimble.load(nimble.compile(os.path.join(MODELS, "lstm/small/lstm_small.nir")))
        xs = np.zeros((30000, 8), np.float32)
        ticks = [0]
        stop = threading.Event()

        def count():
            while not stop.is_set():
                ticks[0] += 1

        counter = threading.Thread(target=count)
        counter.start()
        time.sleep(0.2)
        alone = ticks[0] / 0.2  # counts per second, alone
        try:
            before = ticks[0]
            t0 = time.perf_counter()
            lstm.run("main", xs)
            took = time.perf_counter() - t0
            during = ticks[0] - before
        finally:
            stop.set()
            counter.join()
        self.assertGreater(took, 0.05)
        self.assertGreater(during, 0.2 * alone * took, "the counter stalled: the GIL was held during the run")

if __name__ == "__main__":
    unittest.main()
