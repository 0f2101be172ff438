"""A digest of nimble_gen.py's programs over a range of seeds, for
seed-stability.test: a seed named in a bug report, a commit or a regression
test must keep giving the same program, so a feature added to the generator
draws from a random stream of its own (Gen.dispatch_rng, linalg_rng,
phase_rng) and leaves every program as it was once its own text is removed.

usage: seed_digest.py A:B [--size=N] [--stable] [--without=phase]
    prints `seeds A..B-1 size N: SHA-256 of the programs and inputs`, and how
    many programs carry a `phase` attribute; --without=phase first removes
    every `phase = N` from the function attributes (an emptied `attributes
    {}` clause with it), giving the programs as they were before phases.
"""
import hashlib
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nimble_gen  # noqa: E402


def without_phase(text):
    text = re.sub(r" attributes \{phase = \d+\} \{", " {", text)
    return re.sub(r", phase = \d+\} \{", "} {", text)


def main(argv):
    a, b = (int(x) for x in argv[0].split(":"))
    size, stable, strip = 12, False, False
    for arg in argv[1:]:
        if arg.startswith("--size="):
            size = int(arg[7:])
        elif arg == "--stable":
            stable = True
        elif arg == "--without=phase":
            strip = True
        else:
            sys.exit(__doc__)
    h = hashlib.sha256()
    phases = 0
    for seed in range(a, b):
        text, inputs = nimble_gen.generate(seed, size, stable)
        phases += "phase = " in text
        if strip:
            text = without_phase(text)
        h.update(text.encode() + b"\0" + "\n".join(inputs).encode() + b"\0")
    print("seeds %d..%d size %d%s: %s" % (a, b - 1, size, " stable" if stable else "", h.hexdigest()))
    print("programs with a phase attribute: %d of %d" % (phases, b - a))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
