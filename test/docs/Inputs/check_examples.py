#!/usr/bin/env python3
"""Runs every ```nir example of the Markdown documentation through nimble-opt.

    check_examples.py --nimble-opt=PATH (DOC.md | DIR)...

(a directory stands for the *.md files in it)

Documentation examples rot unless something runs them. This script extracts
the fenced code blocks whose info string starts with `nir` and checks each one:

  * a plain block must be a complete, valid module: `nimble-opt
    --split-input-file` accepts it, and printing is a fixed point (the printed
    text parses and prints back to itself, the round trip every .nir lit test
    gets);
  * with --nimblec, a plain block must also compile: `nimblec -O0` and `-O2`
    accept each of its `// -----` pieces (unless it is marked `{.nocompile}`,
    for examples that name weights the docs do not ship);
  * a block marked `{.invalid}` (or `{.verify}`), or whose first line is a
    `// expected-...` comment, must contain its expected diagnostics:
    `nimble-opt --verify-diagnostics --split-input-file` must succeed on it.

Pandoc-style attributes after the language name refine a block:

  ```nir {#name}                 names the block (its file is `name.nir`, so
                                 diagnostics in pasted output read `name.nir:3:5`)
  ```nir {args="--passes=cse"}   extra nimble-opt arguments for this block
  ```nir {.output from=name passes=type-infer}
  ```text {.stderr from=name passes="type-infer{remarks=true}"}
                                 the exact standard output (.output) or
                                 standard error (.stderr) of nimble-opt run on
                                 block `name` with --passes (and `args`); pasted
                                 tool output in the docs stays true this way

Blocks of other languages are ignored unless they carry `.output`/`.stderr`.
Every failure is reported as `FILE:LINE: error: ...` with the line of the
block's opening fence, and the script exits with status 1.
"""

import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>```+|~~~+)\s*(?P<info>.*)$")


class Block:
    def __init__(self, path, line, lang, attrs, text):
        self.path, self.line, self.lang, self.text = path, line, lang, text
        self.id = None
        self.classes = set()
        self.kv = {}
        for item in attrs:
            if item.startswith("#"):
                self.id = item[1:]
            elif item.startswith("."):
                self.classes.add(item[1:])
            elif "=" in item:
                k, v = item.split("=", 1)
                self.kv[k] = v
            else:
                raise ValueError("unknown block attribute '%s'" % item)

    def where(self):
        return "%s:%d" % (self.path, self.line)


def parse_info(info):
    """`nir {#a .b k=v}` -> ("nir", ["#a", ".b", "k=v"])."""
    info = info.strip()
    m = re.match(r"^(\S*?)\s*(\{.*\})?\s*$", info)
    if not m:
        return info.split()[0] if info else "", []
    lang, attrs = m.group(1), m.group(2)
    if lang.startswith("{"):  # only attributes
        lang, attrs = "", lang
    return lang, shlex.split(attrs[1:-1]) if attrs else []


def extract(path):
    blocks = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start = m.group("fence"), i + 1
        lang, attrs = parse_info(m.group("info"))
        body = []
        i += 1
        while i < len(lines):
            close = re.match(r"^ {0,3}(```+|~~~+)\s*$", lines[i])
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence):
                break
            body.append(lines[i])
            i += 1
        else:
            raise ValueError("%s:%d: unterminated code block" % (path, start))
        i += 1
        indent = len(m.group("indent"))
        body = [l[indent:] if l[:indent].strip() == "" else l for l in body]
        blocks.append(Block(path, start, lang, attrs, "\n".join(body) + "\n"))
    return blocks


class Checker:
    def __init__(self, nimble_opt, tmp, nimblec=None):
        self.nimble_opt = nimble_opt
        self.nimblec = nimblec
        self.tmp = tmp
        self.failures = 0
        self.checked = 0

    def fail(self, block, msg, detail=""):
        self.failures += 1
        sys.stdout.write("%s: error: %s\n" % (block.where(), msg))
        if detail:
            sys.stdout.write(detail if detail.endswith("\n") else detail + "\n")

    def run(self, block, text, args):
        """Writes `text` as the block's file and runs nimble-opt on it."""
        name = (block.id or "example") + ".nir"
        with open(os.path.join(self.tmp, name), "w", encoding="utf-8") as f:
            f.write(text)
        cmd = [self.nimble_opt, name] + args
        proc = subprocess.run(cmd, cwd=self.tmp, capture_output=True, text=True)
        if proc.returncode < 0:
            self.fail(block, "nimble-opt died with signal %d: %s"
                      % (-proc.returncode, " ".join(cmd)), proc.stderr)
            return None
        return proc

    def check_nir(self, block):
        extra = shlex.split(block.kv.get("args", ""))
        first = block.text.lstrip().split("\n", 1)[0]
        verify = bool({"invalid", "verify"} & block.classes) or re.match(
            r"^//\s*expected-(error|warning|note|remark)", first)
        if verify:
            proc = self.run(block, block.text,
                            ["--verify-diagnostics", "--split-input-file"] + extra)
            if proc and proc.returncode != 0:
                self.fail(block, "the diagnostics of this example do not match its "
                          "expected-* comments (nimble-opt --verify-diagnostics)",
                          proc.stderr)
            return
        proc = self.run(block, block.text, ["--split-input-file"] + extra)
        if not proc:
            return
        if proc.returncode != 0:
            self.fail(block, "nimble-opt rejects this example (mark blocks that are "
                      "meant to be invalid with {.invalid} and expected-error "
                      "comments)", proc.stderr)
            return
        again = self.run(block, proc.stdout, ["--split-input-file"])
        if again and (again.returncode != 0 or again.stdout != proc.stdout):
            self.fail(block, "the printed form of this example does not print back "
                      "to itself", again.stderr + diff(proc.stdout, again.stdout))
        if self.nimblec and "nocompile" not in block.classes:
            self.check_compiles(block)

    def check_compiles(self, block):
        """A valid example must compile too, not only parse: nimblec -O0 and
        -O2 on each of its `// -----` pieces. A block that cannot compile
        for a stated reason (weights that are not in the docs) is marked
        {.nocompile}."""
        for k, piece in enumerate(re.split(r"(?m)^// -----\s*$", block.text)):
            if not piece.strip():
                continue
            name = "%s_%d.nir" % (block.id or "example", k)
            with open(os.path.join(self.tmp, name), "w", encoding="utf-8") as f:
                f.write(piece)
            write_weights(piece, self.tmp)
            for level in ("-O0", "-O2"):
                proc = subprocess.run([self.nimblec, level, name, "-o", "example.nbc"],
                                      cwd=self.tmp, capture_output=True, text=True)
                if proc.returncode != 0:
                    self.fail(block, "nimblec %s rejects this example (piece %d); "
                              "mark it {.nocompile} only if it cannot compile by design"
                              % (level, k), proc.stderr)
                    return

    def check_output(self, block, named):
        source = named.get(block.kv.get("from"))
        if source is None:
            self.fail(block, "from=%r names no ```nir {#...} block"
                      % block.kv.get("from"))
            return
        args = shlex.split(block.kv.get("args", ""))
        if "passes" in block.kv:
            args.append("--passes=" + block.kv["passes"])
        proc = self.run(source, source.text, args)
        if not proc:
            return
        stream = "stderr" if "stderr" in block.classes else "stdout"
        got = getattr(proc, stream)
        if got != block.text:
            self.fail(block, "this is not what `%s` prints on %s (exit status %d); "
                      "diff from the documented text to the real:"
                      % (" ".join(["nimble-opt", source.id + ".nir"] + args), stream,
                         proc.returncode),
                      diff(block.text, got))

    def check(self, blocks):
        named = {}
        for b in blocks:
            if b.id:
                if b.id in named:
                    self.fail(b, "block name #%s is also used at %s"
                              % (b.id, named[b.id].where()))
                named[b.id] = b
        for b in blocks:
            if "output" in b.classes or "stderr" in b.classes:
                self.checked += 1
                self.check_output(b, named)
                # Printed IR is itself an example that must parse.
                if b.lang == "nir" and "stderr" not in b.classes:
                    self.check_nir(b)
            elif b.lang == "nir":
                self.checked += 1
                self.check_nir(b)


EXTERNAL = re.compile(r'const\s+@[\w.]+\s*:\s*tensor<([^>]*)>\s*=\s*external\(\s*"([^"]+)"\s*,\s*"([^"]+)"')
ST_DTYPE = {"f32": ("F32", 4), "f64": ("F64", 8), "f16": ("F16", 2), "bf16": ("BF16", 2),
            "i8": ("I8", 1), "i32": ("I32", 4), "i64": ("I64", 8), "i1": ("BOOL", 1)}


def write_weights(text, tmp):
    """Zero-filled safetensors files for the example's external constants, so
    an example that names model weights compiles like any other."""
    import json
    import struct
    files = {}
    for m in EXTERNAL.finditer(text):
        parts = m.group(1).split("x")
        dims, dt = [int(d) for d in parts[:-1]], parts[-1]
        files.setdefault(m.group(2), []).append((m.group(3), dims, dt))
    for fname, tensors in files.items():
        header, offset = {}, 0
        for key, dims, dt in tensors:
            name, size = ST_DTYPE[dt]
            n = size
            for d in dims:
                n *= d
            header[key] = {"dtype": name, "shape": dims, "data_offsets": [offset, offset + n]}
            offset += n
        h = json.dumps(header).encode()
        with open(os.path.join(tmp, fname), "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + bytes(offset))


def diff(expected, got):
    return "".join(difflib.unified_diff(
        expected.splitlines(True), got.splitlines(True), "documented", "actual"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nimble-opt", required=True)
    ap.add_argument("--nimblec", help="also compile every valid example at -O0 and -O2")
    ap.add_argument("docs", nargs="+")
    a = ap.parse_args()
    paths = []
    for path in a.docs:  # a directory stands for its *.md files
        if os.path.isdir(path):
            paths += sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".md"))
        else:
            paths.append(path)
    a.docs = paths
    blocks = []
    for path in a.docs:
        try:
            blocks += extract(path)
        except ValueError as e:
            sys.stdout.write("error: %s\n" % e)
            return 1
    with tempfile.TemporaryDirectory() as tmp:
        def tool(p):
            return os.path.abspath(p) if p and os.sep in p else p
        c = Checker(tool(a.nimble_opt), tmp, tool(a.nimblec))
        try:
            c.check(blocks)
        except ValueError as e:
            sys.stdout.write("error: %s\n" % e)
            return 1
    if c.checked == 0:
        sys.stdout.write("error: no ```nir examples found in %s\n" % " ".join(a.docs))
        return 1
    sys.stdout.write("checked %d examples in %d files: %d failed\n"
                     % (c.checked, len(a.docs), c.failures))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
