"""Differential testing of random programs (issue 14): nimble_gen.py programs
compiled every way nimblec can, run by nimble-run, compared with the oracle.

usage: difftest.py [options] NIMBLEC NIMBLE_RUN WORK_DIR
  --seeds=A:B        seeds A (inclusive) to B (exclusive); default 0:100
  --size=N           ops per program (nimble_gen.py); default 12
  --native           also compare --kernels=native at -O0..-O3 and
                     --kernels=library at -O0 and -O2 (slower), on stable
                     programs (nimble_gen.STABLE)
  --time-limit=S     stop starting new programs after S seconds (a CI bound)
  --time-scale=F     multiply the time limit by F (lit's %asan-time-scale:
                     1/3 under ASan, where each program costs ~4x)
  --no-reduce        write mismatches as generated, without delta reduction

The oracle is the reference kernels at -O0 (no inlining, fusion or memory
planning). Against it, as test/e2e/Inputs/differential.py does for the
hand-written programs:
  * reference kernels at -O1, -O2, -O3: the same exit status and the same
    printed outputs, bit for bit (our own code on the same machine, and the
    passes must not change a value);
  * native kernels (--native) at -O0..-O3, library kernels (oneDNN's
    matmul where it applies, native code elsewhere) at -O0 and -O2, and
    reference kernels at -O2 --fp-reassociate (matmul chains reordered): the
    same exit status and printed text, and every number within
    NATIVE_TOLERANCE of the oracle's, relative to the output's magnitude
    (differential.py's numbers_close). These run on stable programs
    (nimble_gen.STABLE: no discrete decision on a value rounding can
    straddle), since a tolerance cannot absorb a flipped comparison.
A program the oracle's nimblec rejects, or whose -O0 reference run fails, is
a generator bug (or a reference-kernel bug) and is reported as such: the
generator promises programs free of run-time errors (it fails the run too). A mismatch is reduced (delta debugging over the
program's lines: drop results, replace a value by one of its operands, delete
dead lines, drop unused functions, each kept only if the same mismatch
remains) and written to WORK_DIR/repro-SEED.nir with RUN lines that show it.
Prints one line per failing program and a summary; exits 1 on any failure.
"""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e", "Inputs"))
import nimble_gen  # noqa: E402
from differential import NATIVE_TOLERANCE, numbers_close  # noqa: E402

REF_LEVELS = ["-O1", "-O2", "-O3"]
NATIVE_LEVELS = ["-O0", "-O1", "-O2", "-O3"]
LIBRARY_LEVELS = ["-O0", "-O2"]
# Wall-clock bounds, generous: CI shares a loaded machine.
RUN_TIMEOUT = 120
COMPILE_TIMEOUT = 300


class Tools:
    def __init__(self, nimblec, nimble_run, work):
        self.nimblec, self.nimble_run, self.work = nimblec, nimble_run, work

    def compile(self, nir_path, flags, out):
        try:
            p = subprocess.run([self.nimblec, *flags, nir_path, "-o", out], capture_output=True, text=True,
                               timeout=COMPILE_TIMEOUT)
        except subprocess.TimeoutExpired:
            return 124, "nimblec did not finish in %d s" % COMPILE_TIMEOUT
        return p.returncode, p.stderr

    def run(self, nbc, inputs, kernels="reference"):
        # A pinned kernel path: nimble-run's default (auto) measures and may
        # choose differently between runs, and the reference comparisons are
        # bit for bit.
        try:
            p = subprocess.run([self.nimble_run, nbc, "--function=main", "--max-instructions=1000000",
                                "--kernels=" + kernels] +
                               ["--input=" + i for i in inputs], capture_output=True, text=True,
                               timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            return ("timeout", "", "")
        # A run-time error names its .nir location, which the reducer moves:
        # compare the exit status and the printed outputs only.
        return (p.returncode, p.stdout, p.stderr)


def variants(native):
    """(name, nimblec flags, nimble-run --kernels) for each compared way."""
    out = [("ref" + lvl, [lvl], "reference") for lvl in REF_LEVELS]
    if native:
        out += [("native" + lvl, [lvl, "--kernels=native"], "native") for lvl in NATIVE_LEVELS]
        # oneDNN for the matmuls it takes (with their post-ops), native
        # code for the rest: the same executables, another dispatch.
        out += [("library" + lvl, [lvl, "--kernels=native"], "library") for lvl in LIBRARY_LEVELS]
        # matmul chains reordered (nimble_gen's g_chain): other sums of the
        # same products, so within the tolerance, on stable programs only.
        out.append(("reassoc-O2", ["-O2", "--fp-reassociate"], "reference"))
    return out


def outputs_match(name, got, want):
    if got[0] != want[0]:
        return False
    if name.startswith("ref"):
        return got[1] == want[1]
    return all(numbers_close(a, b) for a, b in zip(got[1].splitlines(), want[1].splitlines())) and \
        len(got[1].splitlines()) == len(want[1].splitlines())


def check(tools, text, inputs, native, tag):
    """Returns None when every variant agrees with the oracle, else
    (kind, detail) with kind 'generator' or the failing variant's name."""
    d = os.path.join(tools.work, tag)
    os.makedirs(d, exist_ok=True)
    nir = os.path.join(d, "p.nir")
    with open(nir, "w") as f:
        f.write(text)
    rc, err = tools.compile(nir, ["-O0"], os.path.join(d, "ref-O0.nbc"))
    if rc < 0:
        return ("ref-O0", "nimblec -O0 dies with signal %d: %s" % (-rc, err.strip()[:2000]))
    if rc != 0:
        return ("generator", "nimblec -O0 rejects the program: " + err.strip()[:2000])
    want = tools.run(os.path.join(d, "ref-O0.nbc"), inputs)
    if want[0] != 0:
        # Generated programs are free of run-time errors by construction; an
        # error here is a generator bug or a bug of the reference kernels.
        # (Were errors allowed, DCE could legally remove a failing dead op
        # and the levels would disagree.)
        return ("oracle-error", "the -O0 reference run fails (exit %s): %s" % (want[0], want[2][-2000:]))
    built = {}
    for name, flags, kernels in variants(native):
        key = " ".join(flags)
        if key not in built:
            nbc = built[key] = os.path.join(d, name + ".nbc")
            rc, err = tools.compile(nir, flags, nbc)
            if rc != 0:
                how = "dies with signal %d" % -rc if rc < 0 else "exits with %d" % rc
                return (name, "nimblec %s %s: %s" % (key, how, err.strip()[:2000]))
        got = tools.run(built[key], inputs, kernels)
        if not outputs_match(name, got, want):
            return (name, "-O0 reference: exit %s\n%s%s\n%s: exit %s\n%s%s" % (
                want[0], want[1], want[2][-1000:], name, got[0], got[1], got[2][-1000:]))
    return None


# ---- delta reduction ---------------------------------------------------------

DEF = re.compile(r"^\s+(%[\w.]+(?:, %[\w.]+)*) = ")
USE = re.compile(r"%[\w.]+")


def reduce_program(tools, text, inputs, native, kind, tag):
    """Greedy delta debugging over lines; keeps a candidate only when the
    same kind of mismatch remains."""

    def still_fails(candidate):
        r = check(tools, candidate, inputs, native, tag + "-reduce")
        return r is not None and r[0] == kind

    lines = text.split("\n")
    changed = True
    rounds = 0
    while changed and rounds < 8:
        changed = False
        rounds += 1
        # 1. One result of @main instead of several.
        for i, l in enumerate(lines):
            if l.startswith("func @main(") and "-> (" in l:
                ret_i = max(j for j, x in enumerate(lines) if x.startswith("  ret ") and j > i)
                rets = lines[ret_i].strip()[4:].split(", ")
                types = re.search(r"-> \((.*)\) \{$", l).group(1)
                tys = re.findall(r"tensor<[^>]*>|tuple<.*?>|@\w+", types)
                if len(rets) > 1 and len(tys) == len(rets):
                    for k in range(len(rets)):
                        cand = list(lines)
                        cand[i] = l[:l.index("-> (")] + "-> (%s) {" % tys[k]
                        cand[ret_i] = "  ret " + rets[k]
                        if still_fails("\n".join(cand)):
                            lines, changed = cand, True
                            break
                break
        # 2. Replace a value by one of its operands (then its line is dead).
        i = 0
        while i < len(lines):
            m = DEF.match(lines[i])
            if m and "," not in m.group(1):
                v = m.group(1)
                rhs = lines[i][m.end():]
                for op in dict.fromkeys(USE.findall(rhs)):
                    cand = lines[:i] + [re.sub(re.escape(v) + r"\b", op, x) for x in lines[i + 1:]]
                    if still_fails("\n".join(cand)):
                        lines, changed = cand, True
                        i -= 1
                        break
            i += 1
        # 3. Delete lines (dead values, whole functions' lines are tried one by one).
        i = len(lines) - 1
        while i >= 0:
            if lines[i].strip() and not lines[i].startswith(("module", "func", "}")) and \
                    not lines[i].strip().startswith(("ret", "br", "cond_br", "match")) and \
                    not lines[i].startswith("^"):
                cand = lines[:i] + lines[i + 1:]
                if still_fails("\n".join(cand)):
                    lines, changed = cand, True
            i -= 1
        # 4. Take one side of each branch, then delete blocks no branch names.
        for i, l in enumerate(lines):
            m = re.match(r"^(\s+)cond_br %[\w.]+, (\^\w+), (\^\w+)$", l)
            if m:
                for target in (m.group(2), m.group(3)):
                    cand = lines[:i] + ["%sbr %s" % (m.group(1), target)] + lines[i + 1:]
                    if still_fails("\n".join(cand)):
                        lines, changed = cand, True
                        break
        i = 0
        while i < len(lines):
            m = re.match(r"^(\^\w+)[(:]", lines[i])
            if m and not re.search(re.escape(m.group(1)) + r"\b", "\n".join(lines[:i] + lines[i + 1:])):
                e = i + 1
                while e < len(lines) and not lines[e].startswith(("^", "}")):
                    e += 1
                cand = lines[:i] + lines[e:]
                if still_fails("\n".join(cand)):
                    lines, changed = cand, True
                    continue
            i += 1
        # 5. Merge a block into its only predecessor when that ends by
        # jumping to it just above it: `br ^b(%a)` / `^b(%x: T):` go, %x
        # becomes %a.
        i = 0
        while i + 1 < len(lines):
            m = re.match(r"^\s+br (\^\w+)(?:\((.*)\))?$", lines[i])
            h = re.match(r"^(\^\w+)(?:\((.*)\))?:$", lines[i + 1])
            if m and h and m.group(1) == h.group(1) and \
                    len(re.findall(re.escape(h.group(1)) + r"\b", "\n".join(lines))) == 2:
                args = [a.strip() for a in (m.group(2) or "").split(",") if a.strip()]
                params = re.findall(r"(%[\w.]+):", h.group(2) or "")
                if len(args) == len(params):
                    rest = lines[i + 2:]
                    for prm, arg in zip(params, args):
                        rest = [re.sub(re.escape(prm) + r"\b", arg, x) for x in rest]
                    cand = lines[:i] + rest
                    if still_fails("\n".join(cand)):
                        lines, changed = cand, True
                        continue
            i += 1
        # 6. Drop whole functions and types nobody names any more.
        for name in re.findall(r"^func @(\w+)\(", "\n".join(lines), re.M):
            if name == "main":
                continue
            s = next(j for j, x in enumerate(lines) if x.startswith("func @%s(" % name))
            e = next(j for j in range(s, len(lines)) if lines[j] == "}")
            outside = "\n".join(lines[:s] + lines[e + 1:])
            if not re.search("@%s\\b" % name, outside):
                cand = lines[:s] + lines[e + 2:]
                if still_fails("\n".join(cand)):
                    lines, changed = cand, True
    return "\n".join(lines)


def write_repro(path, text, inputs, kind, detail, seed, size):
    inp = " ".join("--input='%s'" % i for i in inputs)
    flags, kernels = ["-O0"], "reference"
    for name, f, k in variants(True):
        if name == kind:
            flags, kernels = f, k
    head = [
        "// Reproducer written by test/gen/difftest.py: nimble_gen.py seed %d, --size=%d." % (seed, size),
        "// The -O0 reference (the oracle) and %s disagree:" % kind,
    ] + ["//   " + x for x in detail.splitlines()[:30]] + [
        "//",
        "// RUN: nimblec -O0 %s -o %t.O0.nbc",
        "// RUN: nimblec " + " ".join(flags) + " %s -o %t.nbc",
        "// RUN: nimble-run %t.O0.nbc --function=main " + inp,
        "// RUN: nimble-run %t.nbc --function=main --kernels=" + kernels + " " + inp,
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(head) + text)


def main():
    argv = sys.argv[1:]
    opts = {"seeds": "0:100", "size": "12", "time-limit": "0"}
    flags = set()
    pos = []
    for a in argv:
        if a.startswith("--") and "=" in a:
            k, v = a[2:].split("=", 1)
            opts[k] = v
        elif a.startswith("--"):
            flags.add(a[2:])
        else:
            pos.append(a)
    nimblec, nimble_run, work = pos
    os.makedirs(work, exist_ok=True)
    tools = Tools(os.path.abspath(nimblec), os.path.abspath(nimble_run), work)
    native = "native" in flags
    lo, hi = map(int, opts["seeds"].split(":"))
    size = int(opts["size"])
    limit = float(opts["time-limit"]) * float(opts.get("time-scale", "1"))
    start = time.time()
    done = failed = errors_in_oracle = 0
    for seed in range(lo, hi):
        if limit and time.time() - start > limit:
            break
        # Native and library kernels round differently from the reference
        # ones: compare them on stable programs (nimble_gen.STABLE).
        text, inputs = nimble_gen.generate(seed, size, stable=native)
        r = check(tools, text, inputs, native, "s%d" % seed)
        done += 1
        if r is None:
            # Count programs whose oracle run ended in a run-time error.
            continue
        failed += 1
        kind, detail = r
        if "no-reduce" not in flags and kind not in ("generator", "oracle-error"):
            text = reduce_program(tools, text, inputs, native, kind, "s%d" % seed)
            detail = check(tools, text, inputs, native, "s%d-final" % seed)[1]
        path = os.path.join(work, "repro-%d.nir" % seed)
        write_repro(path, text, inputs, kind, detail, seed, size)
        print("error: seed %d: %s disagrees with the -O0 reference; reproducer %s" % (seed, kind, path))
        sys.stdout.flush()
    secs = time.time() - start
    print("difftest: %d programs (seeds %d..%d, size %d%s) in %.0f s: %d agree, %d fail" % (
        done, lo, lo + done - 1, size, ", native -O0..-O3, library -O0 -O2" if native else "", secs, done - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
