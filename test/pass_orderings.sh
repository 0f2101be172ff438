#!/usr/bin/env bash
# Runs pass_orderings.py (see there) over the source tree: every pair and
# seeded random orders of the registered passes, over the .nir files of the
# repository, each result compiled by nimblec -O0 and -O2 and run. Like
# roundtrip_all.sh it reads the tree through git (a new .nir file is covered
# without a BUILD edit), hence `local` in test/BUILD. The full sweep:
#   /usr/bin/python3 test/pass_orderings.py bazel-bin/tools/{nimble-opt,nimblec,nimble-run} . --full
set -euo pipefail
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
opt="$(abs "$1")" nimblec="$(abs "$2")" run="$(abs "$3")"
anchor="$(readlink -f "$4")"            # test/pass_orderings.py in the source tree
root="$(cd "$(dirname "$anchor")/.." && pwd)"
shift 4
exec /usr/bin/python3 "$anchor" "$opt" "$nimblec" "$run" "$root" "$@"
