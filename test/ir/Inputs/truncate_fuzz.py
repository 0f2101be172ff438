#!/usr/bin/env python3
"""Robustness check for the .nir front end: feed nimble-opt every byte-length
prefix of a valid file and require a clean answer each time.

    truncate_fuzz.py NIMBLE_OPT SEED.nir [--jobs N] [--save FILE] [-- ARGS...]

Each prefix (lengths 0 .. size, so the whole file too) goes to `NIMBLE_OPT -
ARGS...` on standard input. A prefix passes when the tool exits 0, or exits 1
after printing an `error:` diagnostic. It fails when the tool dies by a signal
(an assert or a crash: the tests build with assertions on), prints a
sanitizer report (under --config=asan), exits with any other status, exits 1
silently, or runs for more than 10 s (a hang).

Truncation is a cheap but effective fuzzer for a recursive-descent parser: it
cuts every token, string, tensor type and block at every position, and ends
the input at every state of the parser, where unfinished placeholders, forward
references and half-built ops must all be cleaned up without asserting.

On failure the first failing prefix is reported (its length, its last line and
the tool's stderr), optionally written to --save for reproduction, and the exit
status is 1. Prefixes run in parallel (--jobs, default: the CPU count).
"""

import argparse
import concurrent.futures
import os
import shlex
import subprocess
import sys

TIMEOUT_S = 10


def run_prefix(tool, args, data):
    """Returns None when the prefix passed, else (why, stderr)."""
    try:
        proc = subprocess.run(
            tool + ["-"] + args,
            input=data,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return "timed out after %d s (hang?)" % TIMEOUT_S, b""
    if proc.returncode < 0:
        return "killed by signal %d (crash or assertion)" % -proc.returncode, proc.stderr
    # Sanitizers exit with status 1 by default, and UBSan's "runtime error:"
    # would pass for a diagnostic: look for their reports explicitly.
    if b"Sanitizer" in proc.stderr or b"runtime error:" in proc.stderr:
        return "sanitizer report (exit status %d)" % proc.returncode, proc.stderr
    if proc.returncode == 1 and b"error:" not in proc.stderr:
        return "exit status 1 without an error: diagnostic", proc.stderr
    if proc.returncode not in (0, 1):
        return "exit status %d (expected 0 or 1)" % proc.returncode, proc.stderr
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tool", help="path of nimble-opt (a command: split like a shell would)")
    parser.add_argument("seed", help="a valid .nir file")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--save", help="write the first failing prefix here")
    # Everything after `--` goes to the tool untouched.
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    opts = parser.parse_args(argv[:len(argv) - len(extra) - (1 if "--" in argv else 0)])
    opts.args = extra

    with open(opts.seed, "rb") as f:
        text = f.read()
    lengths = range(len(text) + 1)

    failures = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        tool = shlex.split(opts.tool)
        futures = {n: pool.submit(run_prefix, tool, opts.args, text[:n]) for n in lengths}
        for n, fut in futures.items():
            result = fut.result()
            if result is not None:
                failures[n] = result
    total = len(lengths)

    if not failures:
        print("truncate_fuzz: %d prefixes of %s (0..%d bytes): no crash, every "
              "rejection diagnosed" % (total, os.path.basename(opts.seed), len(text)))
        return 0

    first = min(failures)
    why, stderr = failures[first]
    prefix = text[:first]
    last_line = prefix.rsplit(b"\n", 1)[-1]
    sys.stderr.write(
        "truncate_fuzz: %d of %d prefixes failed; the first is %d bytes long\n"
        "  failure:   %s\n"
        "  ends with: %r (line %d)\n"
        % (len(failures), total, first, why, last_line.decode("utf-8", "replace"),
           prefix.count(b"\n") + 1))
    if stderr:
        tail = stderr.decode("utf-8", "replace").strip().splitlines()[-8:]
        sys.stderr.write("  stderr:\n" + "".join("    %s\n" % l for l in tail))
    if opts.save:
        with open(opts.save, "wb") as f:
            f.write(prefix)
        sys.stderr.write("  prefix saved to %s; reproduce with: %s - %s< %s\n"
                         % (opts.save, opts.tool, "".join(a + " " for a in opts.args),
                            opts.save))
    for n in sorted(failures)[1:6]:
        sys.stderr.write("  also failing: %d bytes: %s\n" % (n, failures[n][0]))
    if len(failures) > 6:
        sys.stderr.write("  ... and %d more\n" % (len(failures) - 6))
    return 1


if __name__ == "__main__":
    sys.exit(main())
