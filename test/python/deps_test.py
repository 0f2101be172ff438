"""The runtime half of the module links no compiler code and no LLVM (the
rule nimble-run follows, test/tools/runtime-deps.test): a process that loads
and runs executables never maps libLLVM; only nimble.compile does."""

import os
import subprocess
import sys
import unittest

import nimble
from nimble_testing import ROOT, scratch

PROGRAM = """
import sys, numpy as np, nimble
exe = nimble.load(sys.argv[1])
exe.run("rnn", np.eye(3, 4, dtype=np.float32), kernels="native")
maps = open("/proc/self/maps").read()
print("LLVM" in maps, "nimble/_compiler" in maps)
nimble.compile(sys.argv[2])
maps = open("/proc/self/maps").read()
print("LLVM" in maps, "nimble/_compiler" in maps)
"""


class DepsTest(unittest.TestCase):
    def test_runtime_module_links_no_llvm(self):
        runtime = os.path.join(os.path.dirname(nimble.__file__), "_runtime.so")
        ldd = subprocess.run(["ldd", runtime], capture_output=True, text=True, check=True).stdout
        self.assertNotIn("LLVM", ldd)
        self.assertNotIn("lld", ldd)
        self.assertIn("libdnnl", ldd)  # the runtime's own libraries are there
        compiler = os.path.join(os.path.dirname(nimble.__file__), "_compiler.so")
        ldd = subprocess.run(["ldd", compiler], capture_output=True, text=True, check=True).stdout
        self.assertIn("LLVM", ldd)

    def test_running_maps_no_llvm(self):
        nir = os.path.join(ROOT, "models", "examples", "rnn.nir")
        nbc = os.path.join(scratch(), "rnn.nbc")
        nimble.compile(nir, output=nbc)
        out = subprocess.run([sys.executable, "-c", PROGRAM, nbc, nir], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split(), ["False", "False", "True", "True"])


if __name__ == "__main__":
    unittest.main()
