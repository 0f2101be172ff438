"""The project's one error measure for floating-point outputs, and the check
that committed fixtures are still what a reference computes.

Error measure: max |got - want| / max |want|, i.e. relative to the output's
magnitude (an element-wise relative error is meaningless near zero, and an
absolute one depends on the model's scale). scripts/check_models.py and the
references' self-tests use it.

Fixtures were made on one machine and are checked on another. PyTorch and
numpy do their products in OpenBLAS, which picks kernels by CPU model (Zen 3
AVX2, Zen 4 AVX-512, Xeon AVX-512 + AMX), so the same float32 model gives
results that differ in the last bits: measured 5.2e-7 on BERT-small between
two machines of this project's kind. FIXTURE_TOLERANCE (1e-5) is what float32
arithmetic in another summation order always meets on these models, and far
below what a stale fixture (changed weights, inputs or model) produces:
test/models/reference/stale-fixture.test perturbs one value by 1e-3 and sees
the check fail.
"""

import glob
import os
import sys

import numpy as np

FIXTURE_TOLERANCE = 1e-5


def rel_err(got, want):
    """max |got - want| / max |want| in float64; inf on a shape mismatch or a
    non-finite value; 0 for two empty arrays."""
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return float("inf")
    if got.size == 0:
        return 0.0
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    if not (np.all(np.isfinite(g)) and np.all(np.isfinite(w))):
        return 0.0 if np.array_equal(g, w, equal_nan=True) else float("inf")
    diff = float(np.max(np.abs(g - w)))
    scale = float(np.max(np.abs(w)))
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / scale


def check_fixtures(model_name, fixtures_dir, input_glob, input_suffix, outputs, compute):
    """Recomputes every committed fixture of `model_name` and compares it with
    the stored outputs.

    fixtures_dir  directory holding INPUT files (input_glob, e.g. "seq_??.npy")
                  and their outputs BASE.<output>.npy
    compute(path) the reference's outputs for one input file, in `outputs` order

    Prints one line per input (its worst error) and a summary line
    "<model> fixtures: N inputs ok|MISMATCH"; returns True when every output
    is within FIXTURE_TOLERANCE and there was at least one input.
    """
    paths = sorted(glob.glob(os.path.join(fixtures_dir, input_glob)))
    ok = True
    for path in paths:
        base = path[: -len(input_suffix)]
        got = compute(path)
        worst = 0.0
        for name, g in zip(outputs, got):
            want_path = "%s.%s.npy" % (base, name)
            if not os.path.exists(want_path):
                print("fixture %s: %s is missing" % (os.path.basename(base), os.path.basename(want_path)))
                worst = float("inf")
                continue
            worst = max(worst, rel_err(g, np.load(want_path)))
        good = worst <= FIXTURE_TOLERANCE
        ok &= good
        print("fixture %s: %.2e %s" % (os.path.basename(base), worst,
                                       "ok" if good else "MISMATCH (tolerance %.0e)" % FIXTURE_TOLERANCE))
    good = ok and bool(paths)
    print("%s fixtures: %d inputs %s" % (model_name, len(paths), "ok" if good else "MISMATCH"))
    return good


def default_fixtures_dir(reference_file):
    """models/<m>/small/fixtures beside a model's reference.py."""
    return os.path.join(os.path.dirname(os.path.abspath(reference_file)), "small", "fixtures")


def reference_main(argv, doc, self_test, check_fixtures, compute, outputs):
    """The command line every models/<m>/reference.py has:
      --self-test                 self_test() and check_fixtures(), exit 0 if both hold
      --check-fixtures [DIR]      check_fixtures(DIR), exit 0 if it holds
      VARIANT INPUT [--out P]     compute(VARIANT, INPUT): printed as `name = value`,
                                  or saved to P.<name>.npy (to P itself when
                                  `outputs` is one unnamed output, None)
    """
    if argv[:1] == ["--self-test"]:
        ok = self_test()
        ok &= check_fixtures()
        return 0 if ok else 1
    if argv[:1] == ["--check-fixtures"]:
        return 0 if check_fixtures(argv[1] if len(argv) > 1 else None) else 1
    if len(argv) < 2:
        print(doc, file=sys.stderr)
        return 2
    outs = compute(argv[0], argv[1])
    prefix = argv[argv.index("--out") + 1] if "--out" in argv else None
    for name, v in zip(outputs, outs):
        if prefix is None:
            print(v if name is None else "%s = %s" % (name, v))
        else:
            np.save(prefix if name is None else "%s.%s.npy" % (prefix, name), v)
    return 0
