"""The whole-tool bad-input matrix (issue 14): every file a tool reads or
writes, given each kind of bad file, must give exactly one `error:` line on
stderr, exit status 1, nothing on stdout and no output file (not even a
partial or temporary one). A crash, a second error line or a stray file fails.

usage: bad_input_matrix.py NIMBLE_OPT NIMBLEC NIMBLE_RUN WORK_DIR

Inputs (each of: missing, a directory, empty, binary garbage, truncated):
  nimble-opt X.nir, nimblec X.nir, nimblec's weights (`external(...)`
  safetensors), nimble-run X.nbc, nimble-run --input=@X.npy, nimble-run
  --input=@X.txt (an ADT value as text).
Outputs (each of: a directory, a path in a missing directory, /dev/full,
and standard output on /dev/full): nimble-opt -o, nimblec -o, nimble-run
--output=@, nimble-run's printed results.
An empty .nir is not bad input: it is the empty module (docs/LangRef.md), so
nimble-opt and nimblec accept it; the matrix checks that instead.
Prints one line per case and a total; exits 1 if any case fails.
"""
import json
import os
import struct
import subprocess
import sys

NIR = """module @m

type @List = Nil | Cons(tensor<?xf32>, @List)

const @w : tensor<2xf32> = external("w.safetensors", "w")

func @main(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %y = add %x, @w
  ret %y
}

func @len(%l: @List) -> tensor<i64> {
  match %l [Nil: ^nil, Cons: ^cons]
^nil:
  %z = constant 0 : tensor<i64>
  ret %z
^cons(%h: tensor<?xf32>, %t: @List):
  %n = call @len(%t)
  %one = constant 1 : tensor<i64>
  %r = add %n, %one
  ret %r
}
"""


def npy_bytes():
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }"
    pad = 64 - (10 + len(header) + 1) % 64
    header += " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + \
        struct.pack("<6f", 1, 2, 3, 4, 5, 6)


def safetensors_bytes():
    h = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    return struct.pack("<Q", len(h)) + h + struct.pack("<2f", 0.5, 0.25)


def main():
    nimble_opt, nimblec, nimble_run = (os.path.abspath(p) for p in sys.argv[1:4])
    work = sys.argv[4]
    os.makedirs(work, exist_ok=True)
    os.chdir(work)
    good = {"nir": NIR.encode(), "npy": npy_bytes(), "safetensors": safetensors_bytes(),
            "txt": b"Cons(2xf32=1 2, Cons(1xf32=3, Nil))"}
    for ext, data in good.items():
        with open("good." + ext, "wb") as f:
            f.write(data)
    os.makedirs("wdir", exist_ok=True)
    with open("wdir/w.safetensors", "wb") as f:
        f.write(good["safetensors"])
    subprocess.run([nimblec, "good.nir", "-o", "good.nbc", "--weights-dir=wdir"], check=True)
    with open("good.nbc", "rb") as f:
        good["nbc"] = f.read()

    def bad_file(kind, ext, tag):
        """A path to a bad file of `kind` (fresh each time)."""
        path = "%s-%s.%s" % (tag, kind, ext)
        if kind == "missing":
            return path
        if kind == "directory":
            os.makedirs(path, exist_ok=True)
            return path
        data = {"empty": b"", "garbage": bytes((i * 167 + 13) % 256 for i in range(3000)),
                "truncated": good[ext][:len(good[ext]) * 2 // 3]}[kind]
        with open(path, "wb") as f:
            f.write(data)
        return path

    cases = []  # (name, argv, stdout file or None, output path that must not appear or None, want)
    kinds = ["missing", "directory", "empty", "garbage", "truncated"]
    for kind in kinds:
        want = 0 if kind == "empty" else 1
        p = bad_file(kind, "nir", "opt")
        cases.append(("nimble-opt %s .nir" % kind, [nimble_opt, p, "-o", "out/opt.nir"], None, "out/opt.nir", want))
        p = bad_file(kind, "nir", "c")
        cases.append(("nimblec %s .nir" % kind, [nimblec, p, "-o", "out/c.nbc"], None, "out/c.nbc", want))
        d = "weights-" + kind
        os.makedirs(d, exist_ok=True)
        src = bad_file(kind, "safetensors", "w")
        if kind != "missing":
            os.rename(src, os.path.join(d, "w.safetensors"))
        cases.append(("nimblec %s weights" % kind, [nimblec, "good.nir", "--weights-dir=" + d, "-o", "out/w.nbc"],
                      None, "out/w.nbc", 1))
        p = bad_file(kind, "nbc", "run")
        cases.append(("nimble-run %s .nbc" % kind, [nimble_run, p, "--function=main", "--input=1x2xf32=1 2"],
                      None, None, 1))
        p = bad_file(kind, "npy", "in")
        cases.append(("nimble-run %s input .npy" % kind,
                      [nimble_run, "good.nbc", "--function=main", "--input=@" + p], None, None, 1))
        p = bad_file(kind, "txt", "adt")
        cases.append(("nimble-run %s input ADT text" % kind,
                      [nimble_run, "good.nbc", "--function=len", "--input=@" + p], None, None, 1))
    os.makedirs("out", exist_ok=True)
    os.makedirs("out/adir", exist_ok=True)
    run_ok = [nimble_run, "good.nbc", "--function=main", "--input=@good.npy"]
    for what, path in (("a directory", "out/adir"), ("a missing directory", "nowhere/x"),
                       ("/dev/full", "/dev/full")):
        cases.append(("nimble-opt -o %s" % what, [nimble_opt, "good.nir", "-o", path], None, None, 1))
        cases.append(("nimblec -o %s" % what,
                      [nimblec, "good.nir", "--weights-dir=wdir", "-o", path], None, None, 1))
        cases.append(("nimble-run --output=@ %s" % what, run_ok + ["--output=@" + path], None, None, 1))
    cases.append(("nimble-opt stdout /dev/full", [nimble_opt, "good.nir"], "/dev/full", None, 1))
    cases.append(("nimblec --emit=asm stdout /dev/full",
                  [nimblec, "good.nir", "--weights-dir=wdir", "--emit=asm"], "/dev/full", None, 1))
    cases.append(("nimble-run stdout /dev/full", run_ok, "/dev/full", None, 1))

    failed = 0
    for name, argv, stdout_path, must_not_exist, want in cases:
        before = set(os.listdir("out"))
        if stdout_path:
            with open(stdout_path, "w") as out:
                p = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, text=True, errors="replace")
            stdout = ""
        else:
            p = subprocess.run(argv, capture_output=True, text=True, errors="replace")
            stdout = p.stdout
        problems = []
        err_lines = [l for l in p.stderr.splitlines() if "error:" in l]
        if p.returncode < 0:
            problems.append("died with signal %d" % -p.returncode)
        elif p.returncode != want:
            problems.append("exit %d, expected %d" % (p.returncode, want))
        if want == 1:
            if len(err_lines) != 1:
                problems.append("%d 'error:' lines" % len(err_lines))
            if stdout:
                problems.append("wrote to stdout: %r" % stdout[:200])
            new = set(os.listdir("out")) - before
            if new:
                problems.append("left output files: %s" % sorted(new))
        elif must_not_exist and os.path.exists(must_not_exist):
            os.remove(must_not_exist)
        if "Assertion" in p.stderr or "Sanitizer" in p.stderr or "runtime error" in p.stderr:
            problems.append("internal failure")
        first = err_lines[0] if err_lines else p.stderr.strip().split("\n")[0][:160]
        if problems:
            failed += 1
            print("FAIL: %s: %s\n  stderr: %s" % (name, "; ".join(problems), p.stderr.strip()[:600]))
        else:
            print("ok: %s: %s" % (name, first if want else "accepted (exit 0)"))
    print("bad-input matrix: %d/%d cases as required" % (len(cases) - failed, len(cases)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
