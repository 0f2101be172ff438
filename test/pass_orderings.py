"""Every pipeline nimble-opt accepts produces IR that nimblec accepts (issue 20).

usage: pass_orderings.py NIMBLE_OPT NIMBLEC NIMBLE_RUN REPO_ROOT [--full] [--seed=N]
                         [--max-files=N] [--pair-stride=K]

Over every .nir file tracked in the repository that nimblec compiles as it is
(files invalid on purpose, split files and models whose weights are not
generated are skipped), run pipelines of the registered passes
(`nimble-opt --list-passes`): every ordered pair, and seeded random orders of
up to six passes. Each result must be accepted by `nimblec -O0` and `-O2`,
and where the file's RUN lines give `nimble-run %t.nbc` inputs, each run of
the result must print what the original program prints at -O0 (same exit
status, same text: values print with full precision).

Default (CI): every pair on every sixth file (`--pair-stride=6`: pair i on
the files n with n % 6 == i % 6, so each pair runs on a sixth of the sample,
7-8 of the 47 files of 2026-11-30; stride 3 had grown to 12 minutes of one core)
and 4 random orders on every file, over a fixed sample of files (every e2e
program with inputs, the first of each other directory), a few minutes on
two cores. `--full`: every file, every pair, 30 random orders.
`--max-files=N` keeps the first N files of the sample (the ASan build, whose
tools run about four times slower, checks 4 with `--pair-stride=4`: each pair runs on one file).
nimblec runs with --kernels=reference and nimble-run with the reference
kernels: what is checked is the passes (their IR, compiled and run
bit for bit), not the native code generator, which would only add LLVM's
time to every one of the thousands of compilations.
Passes that change rounding on purpose (INEXACT: fuse-attention, whose op rounds once where the ops it replaces round each; matmul-reassociate and
linalg-fuse, which only nimblec --fp-reassociate runs) are held to a relative tolerance of
1e-5 on every printed number instead of the same text.
Under Bazel's test sharding (TEST_TOTAL_SHARDS), file n of the sample runs in
shard n % shards.
Exits 1 on any failure, printing the file, the pipeline and the error.
"""
import atexit
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

RUN = re.compile(r"^//\s*RUN:\s*(.*)$")
INEXACT = {"matmul-reassociate", "linalg-fuse", "fuse-attention"}
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)")


def same_output(got, want, inexact):
    """(status, text) pairs: equal, or for an inexact pipeline equal up to
    a relative 1e-5 on each number (the same text around the numbers)."""
    if got == want or not inexact or got[0] != want[0]:
        return got == want
    if NUMBER.sub("#", got[1]) != NUMBER.sub("#", want[1]):
        return False
    for a, b in zip(NUMBER.findall(got[1]), NUMBER.findall(want[1])):
        x, y = float(a), float(b)
        if x != y and not abs(x - y) <= 1e-5 * max(abs(x), abs(y)) + 1e-6:
            return False
    return True


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


def nimble_run_args(path):
    """The nimble-run argument lists of the file's RUN lines (literal inputs only)."""
    out = []
    d = os.path.dirname(path)
    with open(path) as f:
        for line in f:
            m = RUN.match(line.strip())
            if not m:
                continue
            cmd = re.sub(r"\s2>&1.*$", "", m.group(1).split("|")[0])
            try:
                words = shlex.split(cmd)
            except ValueError:
                continue
            while words and (words[0] in ("not", "%expect-exit") or words[0].isdigit()):
                words = words[1:]
            if len(words) < 2 or words[0] != "nimble-run" or words[1] != "%t.nbc":
                continue
            args = []
            for w in words[2:]:
                if w.startswith(("--expected-output", "--tolerance", "--output", "--benchmark",
                                 "--profile", "--trace")):
                    continue
                if "%t" in w:
                    args = None
                    break
                args.append(w.replace("%S", d))
            if args is not None:
                out.append(args)
    return out


def main():
    opt, nimblec, nimble_run, root = sys.argv[1:5]
    full = "--full" in sys.argv
    seed = next((int(a.split("=")[1]) for a in sys.argv if a.startswith("--seed=")), 20)
    max_files = next((int(a.split("=")[1]) for a in sys.argv if a.startswith("--max-files=")),
                     None)
    # Each ordered pair runs on every `stride`-th file of the sample (pair i
    # on the files n with n % stride == i % stride): with a dozen passes, all
    # pairs on every file no longer fit the test's time, and every pair still
    # runs on several files. --full and --pair-stride=1 run them all.
    stride = 1 if full else next((int(a.split("=")[1]) for a in sys.argv if a.startswith("--pair-stride=")), 6)
    rng = random.Random(seed)
    passes = [l.split()[0] for l in run([opt, "--list-passes"]).stdout.splitlines()
              if l.startswith("  ")]
    if len(passes) < 2:
        print("error: nimble-opt --list-passes listed %r" % passes)
        return 1
    files = run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard",
                 "--", "*.nir"]).stdout.split()
    # Removed at exit: each run compiles programs up to the models' size, and
    # a directory left behind per run (up to 1.6 GB) filled the disk of a
    # machine that ran the suite many times.
    tmp = tempfile.mkdtemp(prefix="pass_orderings.")
    atexit.register(shutil.rmtree, tmp, True)
    # The sample (unless --full): programs with inputs (they are run), and
    # the first file of each other directory that nimblec compiles. A file
    # is compiled to see whether it qualifies only when the sample would
    # take it, and no more once --max-files are in: compiling all 140 files
    # of the tree first cost minutes under ASan, more where the full-size
    # models' weights are generated (BERT-base then compiles).
    candidates, seen = [], set()
    for rel in sorted(files):
        if max_files is not None and len(candidates) >= max_files:
            break
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            continue
        text = open(path).read()
        if "--verify-diagnostics" in text or "// -----" in text or "NO-ROUNDTRIP" in text:
            continue
        runs = nimble_run_args(path)
        d = os.path.dirname(rel)
        if not full and not runs and d in seen:
            continue
        if run([nimblec, "-O0", "--kernels=reference", path, "-o", os.path.join(tmp, "probe.nbc")]).returncode:
            continue  # invalid on purpose, or needs generated weights
        candidates.append((rel, path, runs if full else runs[:3]))
        seen.add(d)
    pipelines = [[a, b] for a in passes for b in passes]
    nrandom = 30 if full else 4
    # Bazel's test sharding (shard_count in test/BUILD): file n runs in
    # shard n % TEST_TOTAL_SHARDS; every shard draws the same random orders.
    shards = int(os.environ.get("TEST_TOTAL_SHARDS", "1"))
    shard = int(os.environ.get("TEST_SHARD_INDEX", "0"))
    if os.environ.get("TEST_SHARD_STATUS_FILE"):
        open(os.environ["TEST_SHARD_STATUS_FILE"], "w").close()
    failures = total = 0
    for n, (rel, path, runs) in enumerate(candidates):
        mine = [pl for i, pl in enumerate(pipelines) if i % stride == n % stride]
        for _ in range(nrandom):
            mine.append([rng.choice(passes) for _ in range(rng.randint(3, 6))])
        if n % shards != shard:
            continue
        # Optimized IR lands in a directory of its own beside links to the
        # original's neighbours, where its external weights resolve.
        work = os.path.join(tmp, str(n))
        os.makedirs(work)
        src_dir = os.path.dirname(os.path.abspath(path))
        for name in os.listdir(src_dir):
            if not name.endswith(".nir"):
                os.symlink(os.path.join(src_dir, name), os.path.join(work, name))
        ref = {}
        orig = os.path.join(tmp, "orig.nbc")
        run([nimblec, "-O0", "--kernels=reference", path, "-o", orig])
        for args in runs:
            p = run([nimble_run, orig, "--kernels=reference"] + args)
            ref[tuple(args)] = (p.returncode, p.stdout)
        for pl in mine:
            total += 1
            pipe = ",".join(pl)
            out = os.path.join(work, "out.nir")
            p = run([opt, path, "--passes=" + pipe, "-o", out])
            if p.returncode:
                continue  # nimble-opt refused the pipeline with an error: allowed
            problem = None
            for level in ("-O0", "-O2"):
                exe = os.path.join(work, "out%s.nbc" % level)
                # External weights resolve against the original's directory
                # (a path like ../lstm/small/x.safetensors leaves `work`).
                q = run([nimblec, level, "--kernels=reference", out, "--weights-dir=" + src_dir, "-o", exe])
                if q.returncode:
                    problem = "nimblec %s failed: %s" % (level, q.stderr.strip()[:400])
                    break
                for args in runs:
                    r = run([nimble_run, exe, "--kernels=reference"] + args)
                    if not same_output((r.returncode, r.stdout), ref[tuple(args)], INEXACT & set(pl)):
                        problem = "nimblec %s: nimble-run %s differs: %r vs original %r" % (
                            level, " ".join(args), (r.returncode, r.stdout[:200]),
                            (ref[tuple(args)][0], ref[tuple(args)][1][:200]))
                        break
                if problem:
                    break
            if problem:
                failures += 1
                print("error: %s: --passes=%s: %s" % (rel, pipe, problem))
        print("%s: %d pipelines" % (rel, len(mine)))
    print("pass orderings: %d files, %d pipelines, %d failed%s" % (
        len(candidates), total, failures, " (shard %d of %d)" % (shard + 1, shards) if shards > 1 else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
