"""The module imports and runs in a virtualenv made from /usr/bin/python3
(`python3 -m venv --system-site-packages`), as docs/python.md says."""

import os
import subprocess
import sys
import unittest

import nimble
from nimble_testing import scratch

PROGRAM = """
import numpy as np, nimble, sys
exe = nimble.load(sys.argv[1])
print(sys.prefix == sys.argv[2], exe.run("rnn", np.eye(3, 4, dtype=np.float32)).tobytes().hex())
"""


class VenvTest(unittest.TestCase):
    def test_virtualenv(self):
        d = scratch()
        venv = os.path.join(d, "venv")
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip", venv], check=True)
        nbc = os.path.join(d, "rnn.nbc")
        nimble.compile(os.path.join(os.environ.get("NIMBLE_TEST_ROOT", "."), "models/examples/rnn.nir"), output=nbc)
        package = os.path.dirname(os.path.dirname(nimble.__file__))
        env = dict(os.environ, PYTHONPATH=package)
        out = subprocess.run([os.path.join(venv, "bin", "python"), "-c", PROGRAM, nbc, venv], env=env,
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        import numpy as np
        want = nimble.load(nbc).run("rnn", np.eye(3, 4, dtype=np.float32)).tobytes().hex()
        self.assertEqual(out.stdout.split(), ["True", want])


if __name__ == "__main__":
    unittest.main()
