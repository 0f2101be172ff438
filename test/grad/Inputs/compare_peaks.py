#!/usr/bin/env python3
"""compare_peaks.py STORE.profile RECOMPUTE.profile: reads the `peak N bytes
live` of nimble-run --profile for the two checkpointing modes, prints them,
and exits 1 unless recompute's peak is below store's."""

import re
import sys


def peak(path):
    with open(path) as f:
        m = re.search(r"peak (\d+) bytes live", f.read())
    if not m:
        sys.exit("error: no 'peak N bytes live' in %s" % path)
    return int(m.group(1))


store, recompute = peak(sys.argv[1]), peak(sys.argv[2])
print("peak live bytes: store %d, recompute %d (%.0f%%)" % (store, recompute, 100.0 * recompute / store))
if not recompute < store:
    print("error: recompute does not lower the peak")
    sys.exit(1)
