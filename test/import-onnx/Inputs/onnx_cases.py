#!/usr/bin/python3
"""The .onnx inputs of test/import-onnx, made at test time with onnx.helper
(Debian's python3-onnx; nothing is downloaded and no binary model is
committed), and the end-to-end check of the importer against numpy.

    onnx_cases.py make NAME OUT.onnx     write one model (external data beside it)
    onnx_cases.py e2e [NAME...]          for each numeric case (default: all):
                                         import | nimblec -O0 / -O2 | nimble-run on
                                         the case's inputs, compared with numpy
    onnx_cases.py list                   the case names

Each case builds a graph and, where it is numeric, feeds and the numpy
reference of its outputs. The tools are found on PATH (lit puts ours first).
"""

import importlib
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

CASES = {}
# Cases saved with their initializers in a file beside the model: the file's
# length (None: as written; a number: truncated to it).
EXTERNAL = {"external-data": None, "short-external": 100}


def case(fn):
    CASES[fn.__name__.replace("_", "-")] = fn
    return fn


# The case modules beside this file, in the order `list` and `e2e` show their
# cases; each passes its cases to case() (onnx_case_lib.family). A new module
# joins with one line here.
for module in (
    "onnx_cases_ops",
    "onnx_cases_rnn",
    "onnx_cases_issue47",
    "onnx_cases_errors",
    "onnx_cases_seq",
):
    importlib.import_module(module).register(case)


def write(name, path):
    m, feeds, expected = CASES[name]()
    if name in EXTERNAL:
        d = os.path.dirname(os.path.abspath(path))
        data = os.path.basename(path) + ".data"
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location=data,
                        size_threshold=0)
        if EXTERNAL[name] is not None:
            with open(os.path.join(d, data), "r+b") as f:
                f.truncate(EXTERNAL[name])
    else:
        onnx.save_model(m, path)
    return feeds, expected


def e2e(names):
    """import | nimblec -O0/-O2 | nimble-run, each output against numpy."""
    failures = 0
    runs = 0
    with tempfile.TemporaryDirectory() as d:
        for name in names:
            onnx_path = os.path.join(d, name + ".onnx")
            feeds, expected = write(name, onnx_path)
            if feeds is None:
                continue
            nir = os.path.join(d, name + ".nir")
            subprocess.run(["nimble-import-onnx", onnx_path, "-o", nir], check=True)
            ins = []
            for k, v in enumerate(feeds):
                p = os.path.join(d, "%s.in%d.npy" % (name, k))
                np.save(p, np.asarray(v))
                ins.append("--input=@" + p)
            for level in ("-O0", "-O2"):
                nbc = os.path.join(d, name + level + ".nbc")
                subprocess.run(["nimblec", level, nir, "-o", nbc], check=True)
                outs = [os.path.join(d, "%s%s.out%d.npy" % (name, level, k)) for k in range(len(expected))]
                subprocess.run(["nimble-run", nbc] + ins + ["--output=@" + p for p in outs], check=True,
                               stdout=subprocess.DEVNULL)
                runs += 1
                before = failures
                for k, (p, want) in enumerate(zip(outs, expected)):
                    got = np.load(p)
                    want = np.asarray(want)
                    ok = got.shape == want.shape and got.dtype == want.dtype and np.allclose(
                        got, want, rtol=1e-4, atol=1e-5, equal_nan=True)
                    if not ok:
                        failures += 1
                        print("MISMATCH %s %s output %d: got %s %s, want %s %s" % (
                            name, level, k, got.dtype, got.shape, want.dtype, want.shape))
                        print("  got  %s\n  want %s" % (got.ravel()[:8], want.ravel()[:8]))
                if failures == before:
                    print("%s %s: %d outputs match" % (name, level, len(expected)))
    print("e2e: %d runs, %d mismatches" % (runs, failures))
    return 1 if failures else 0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "make":
        write(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] == "e2e":
        names = sys.argv[2:] or [n for n in CASES if CASES[n]()[1] is not None]
        return e2e(names)
    if len(sys.argv) == 2 and sys.argv[1] == "list":
        print("\n".join(CASES))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
