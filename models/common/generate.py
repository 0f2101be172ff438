"""The command line every models/<m>/gen_<m>.py shares.

    gen_<m>.py            write each variant's .nir
    gen_<m>.py --check    write nothing; exit 1 if a committed .nir differs
                          from what the generator produces (a stale file)
"""

import os
import sys


def write_or_check(argv, variants, nir_path, generate, script):
    check = "--check" in argv
    stale = []
    for name in variants:
        path = nir_path(name)
        text = generate(name)
        if check:
            try:
                with open(path) as f:
                    if f.read() != text:
                        stale.append(path)
            except FileNotFoundError:
                stale.append(path)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        print("wrote", os.path.relpath(path))
    if stale:
        print("out of date (re-run %s): %s" % (script, " ".join(stale)), file=sys.stderr)
        return 1
    return 0
