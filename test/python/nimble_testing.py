"""What the Python module's tests share: where things are, and running the
command-line tools (the oracle every Python result is compared with)."""

import os
import subprocess
import tempfile

import numpy as np

ROOT = os.environ.get("NIMBLE_TEST_ROOT") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOLS = os.environ.get("NIMBLE_TEST_TOOLS") or os.path.join(ROOT, "bazel-bin", "tools")
MODELS = os.path.join(ROOT, "models")


def path(*parts):
    return os.path.join(ROOT, *parts)


def scratch():
    """A fresh directory for one test's files."""
    return tempfile.mkdtemp(prefix="nimble-py-")


def nimblec(*args):
    """Runs nimblec; returns (exit status, stderr)."""
    p = subprocess.run([os.path.join(TOOLS, "nimblec"), *args], capture_output=True, text=True)
    return p.returncode, p.stderr


def nimble_run(*args):
    """Runs nimble-run; returns (exit status, stdout, stderr)."""
    p = subprocess.run([os.path.join(TOOLS, "nimble-run"), *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def cli_error(stderr, tool="nimble-run"):
    """The CLI's error message as the Python exception carries it: without
    the tool's name, without the final newline."""
    text = stderr.rstrip("\n")
    prefix = tool + ": "
    return text[len(prefix):] if text.startswith(prefix) else text


def cli_outputs(nbc, function, inputs, count, kernels, extra=()):
    """Runs nimble-run once with `inputs` (--input forms) and returns its
    `count` results, read back from the .npy files it wrote."""
    d = scratch()
    outs = [os.path.join(d, "out%d.npy" % i) for i in range(count)]
    rc, _, err = nimble_run(nbc, "--function=" + function, "--threads=1", "--kernels=" + kernels,
                            *["--input=" + i for i in inputs], *["--output=@" + o for o in outs], *extra)
    if rc != 0:
        raise AssertionError("nimble-run failed: " + err)
    return [np.load(o) for o in outs]


def assert_bitwise_equal(test, got, want, what=""):
    """Same dtype, shape and bytes (NaNs included)."""
    got = np.asarray(got)
    test.assertEqual(got.dtype, want.dtype, what)
    test.assertEqual(got.shape, want.shape, what)
    test.assertEqual(got.tobytes(), want.tobytes(), what + ": not bit for bit equal")
