#!/usr/bin/env python3
"""Runs a program in separate nimble-run processes and compares them
(test/models/reproducible.test).

    reproducible.py NIMBLE_RUN NBC IDS.npy THREADS WORKDIR [--vary]

Runs `NIMBLE_RUN NBC --threads=THREADS --input=@IDS.npy --output=@WORKDIR/i.npy
--profile` four times (the default --kernels=auto), each its own process, and
compares the output files byte for byte (as cmp does) and the sorted
kernel=implementation pairs of --profile's kernel table. Prints
`4 processes: outputs identical, kernel choices identical` and the choices,
or one `error:` line per difference (exit 1). --vary runs the second process
with --kernels=reference, to show that a difference is seen.
"""
import os
import re
import subprocess
import sys


def main():
    nimble_run, nbc, ids, threads, work = sys.argv[1:6]
    vary = "--vary" in sys.argv[6:]
    os.makedirs(work, exist_ok=True)
    outputs, choices = [], []
    for i in range(1, 5):
        out = os.path.join(work, "%d.npy" % i)
        args = [nimble_run, nbc, "--threads=" + threads, "--input=@" + ids, "--output=@" + out, "--profile"]
        if vary and i == 2:
            args.append("--kernels=reference")
        p = subprocess.run(args, capture_output=True, text=True)
        if p.returncode != 0:
            print("error: process %d: exit %d: %s" % (i, p.returncode, p.stderr.strip()))
            return 1
        with open(out, "rb") as f:
            outputs.append(f.read())
        rows = re.findall(r"^  (\S+)\s+(\S+)\s+\d+\s+[\d.]+\s+[\d.]+%", p.stderr, re.M)
        choices.append(" ".join(sorted("%s=%s" % kv for kv in rows if kv[0] != "kernel")))
    ok = True
    for i in range(1, 4):
        if outputs[i] != outputs[0]:
            print("error: process %d: output differs from process 1" % (i + 1))
            ok = False
        if choices[i] != choices[0]:
            print("error: process %d: kernel choices %s, process 1: %s" % (i + 1, choices[i], choices[0]))
            ok = False
    if not ok:
        return 1
    print("4 processes: outputs identical, kernel choices identical")
    print("choices: " + choices[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
