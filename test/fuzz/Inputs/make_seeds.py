"""Seed corpora made from the repository's own files (test/fuzz/README.md).

usage: make_seeds.py nir OUT_DIR NIR_FILE...
       make_seeds.py nbc OUT_DIR NIMBLEC NIR_FILE...

nir: copies each .nir file (the fuzzer splits lit files at `// -----`).
nbc: compiles each .nir with nimblec at -O0 and -O2 with reference kernels
(bytecode only) and at -O2 with native kernels (nimblec's default: the
native-code section, its symbol table and the shared object are input to the
fuzzer's reader too; the fuzzer never maps the code) and keeps the
executables up to MAX_NBC bytes (models with big weights would only
slow the fuzzer); files nimblec rejects (negative tests, external weights)
are skipped, chunk by chunk for split files. Prints how many seeds it wrote.
"""
import os
import subprocess
import sys

MAX_NBC = 64 * 1024


def chunks(text):
    out, cur = [], []
    for line in text.splitlines(keepends=True):
        if line.rstrip("\n") == "// -----":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(line)
    out.append("".join(cur))
    return out


def main():
    kind, out = sys.argv[1], os.path.abspath(sys.argv[2])  # nimblec runs in each .nir's directory
    os.makedirs(out, exist_ok=True)
    written = 0
    if kind == "nir":
        for path in sys.argv[3:]:
            with open(path, "rb") as f:
                data = f.read()
            name = path.strip("/").replace("/", "_")
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)
            written += 1
    elif kind == "nbc":
        nimblec = os.path.abspath(sys.argv[3])
        for path in sys.argv[4:]:
            with open(path) as f:
                parts = chunks(f.read())
            base = path.strip("/").replace("/", "_")
            for i, text in enumerate(parts):
                for level, kernels in (("-O0", "reference"), ("-O2", "reference"), ("-O2", "native")):
                    dst = os.path.join(out, "%s.%d%s-%s.nbc" % (base, i, level, kernels))
                    p = subprocess.run([nimblec, level, "--kernels=" + kernels, "-", "-o", dst], input=text.encode(),
                                       capture_output=True, cwd=os.path.dirname(os.path.abspath(path)))
                    if p.returncode != 0 or not os.path.exists(dst):
                        continue
                    if os.path.getsize(dst) > MAX_NBC:
                        os.remove(dst)
                        continue
                    written += 1
    else:
        sys.exit("make_seeds.py: unknown kind '%s'" % kind)
    print("%s seeds: %d" % (kind, written))


if __name__ == "__main__":
    main()
