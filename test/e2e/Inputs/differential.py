"""Differential testing of every end-to-end program: -O0 against -O2.

usage: differential.py [--native] NIMBLEC NIMBLE_RUN E2E_DIR WORK_DIR

For each .nir in E2E_DIR: compile it at -O0 and -O2, then replay each of its
`RUN: nimble-run %t.nbc ...` lines whose inputs are literal or files beside
the test (lines that read files a test generates under %t are skipped), with
the expectations removed, against both executables: the exit status and the
printed outputs must be identical (bit for bit: values are printed with full
precision). Pipelines (`| FileCheck ...`) and redirections are cut off;
`%expect-exit N` / `not` prefixes are dropped (the two levels must simply
agree). Prints one line per program and a total; exits 1 on a difference.

--native: native kernels against the reference kernels instead. Each program
is compiled at -O0 and -O2 with --kernels=native, and each run compared with
the reference -O0 run: the same exit status and printed text, and numbers
within NATIVE_TOLERANCE (relative to the output's magnitude: the native
kernels reassociate reductions and approximate exp/tanh/sigmoid; the bound is
what docs/codegen.md promises). Native -O0 and -O2 are also compared with each
other, bit for bit (the same kernel code on the same machine), and counted.
"""
import glob
import os
import re
import shlex
import subprocess
import sys

RUN = re.compile(r"^//\s*RUN:\s*(.*)$")
NUMBER = re.compile(r"[-+]?(?:nan|inf|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
NATIVE_TOLERANCE = 1e-5


def numbers_close(a, b):
    """Same text with the numbers taken out, and each number of `a` within
    NATIVE_TOLERANCE * (1 + max |number of b|) of b's (NaN equal to NaN)."""
    if NUMBER.sub("#", a) != NUMBER.sub("#", b):
        return False
    xs = [float(t) for t in NUMBER.findall(a)]
    ys = [float(t) for t in NUMBER.findall(b)]
    scale = 1.0 + max([abs(y) for y in ys if y == y and abs(y) != float("inf")] or [0.0])
    for x, y in zip(xs, ys):
        if x != x or y != y:
            if not (x != x and y != y):
                return False
        elif x != y and abs(x - y) > NATIVE_TOLERANCE * scale:
            return False
    return True


def replayable(line):
    """The nimble-run arguments of a RUN line, or None."""
    cmd = line.split("|")[0]
    cmd = re.sub(r"\s2>&1.*$", "", cmd)
    cmd = re.sub(r"\s[12]?>\s*\S+", "", cmd)
    words = shlex.split(cmd)
    while words and (words[0] in ("not", "%expect-exit") or words[0].isdigit()):
        words = words[1:]
    if len(words) < 2 or words[0] != "nimble-run" or words[1] != "%t.nbc":
        return None
    args = []
    for w in words[2:]:
        if w.startswith(("--expected-output", "--tolerance", "--output", "--benchmark", "--profile",
                         "--trace")):
            continue
        if "%t" in w:
            return None
        args.append(w)
    return args


def main():
    argv = sys.argv[1:]
    native = argv[:1] == ["--native"]
    if native:
        argv = argv[1:]
    nimblec, nimble_run, e2e_dir, work = argv[:4]
    os.makedirs(work, exist_ok=True)
    total = same = 0
    failed = False
    for nir in sorted(glob.glob(os.path.join(e2e_dir, "*.nir"))):
        name = os.path.basename(nir)[:-4]
        runs = []
        with open(nir) as f:
            for line in f:
                m = RUN.match(line.strip())
                if m:
                    args = replayable(m.group(1))
                    if args is not None:
                        runs.append([a.replace("%S", e2e_dir) for a in args])
        if not runs:
            continue
        exes = {}
        variants = {"-O0": ["-O0"], "-O2": ["-O2"]}
        if native:
            variants = {"ref": ["-O0"], "-O0": ["-O0", "--kernels=native"], "-O2": ["-O2", "--kernels=native"]}
        for level, flags in variants.items():
            exes[level] = os.path.join(work, name + level + ".nbc")
            p = subprocess.run([nimblec, *flags, nir, "-o", exes[level]], capture_output=True, text=True)
            if p.returncode != 0:
                print("error: %s: nimblec %s failed: %s" % (name, level, p.stderr))
                return 1
        agree = 0
        for args in runs:
            out = {}
            for level, exe in exes.items():
                # Pinned paths: the reference kernels, or native code (never
                # the measured dispatch, whose choice may differ per run).
                kernels = "--kernels=native" if "--kernels=native" in variants[level] else "--kernels=reference"
                p = subprocess.run([nimble_run, exe, kernels] + args, capture_output=True, text=True, timeout=300)
                out[level] = (p.returncode, p.stdout)
            total += 1
            if native:
                for level in ("-O0", "-O2"):
                    if out[level][0] != out["ref"][0] or not numbers_close(out[level][1], out["ref"][1]):
                        failed = True
                        print("error: %s: native %s differs from reference on %s:\n  reference: %r\n  native: %r"
                              % (name, level, " ".join(args), out["ref"], out[level]))
            if out["-O0"] == out["-O2"]:
                agree += 1
            elif not native:
                failed = True
                print("error: %s: -O0 and -O2 differ on %s:\n  -O0: %r\n  -O2: %r" % (
                    name, " ".join(args), out["-O0"], out["-O2"]))
        same += agree
        print("%s: %d/%d runs agree%s" % (name, agree, len(runs), " bit for bit at native -O0 and -O2" if native else ""))
    if native:
        print("total: %d runs, native within %g of reference; %d/%d bit for bit at native -O0 and -O2"
              % (total, NATIVE_TOLERANCE, same, total))
    else:
        print("total: %d/%d runs agree at -O0 and -O2" % (same, total))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
