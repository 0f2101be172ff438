#!/bin/bash
# Runs the Python module's tests (test/python/*_test.py) with Debian's
# /usr/bin/python3 (the interpreter the module is built for), from the
# runfiles root, where Bazel has placed python/nimble (the built package),
# the tools and the models. unittest: Debian's python3-pytest is not among
# the project's packages.
set -euo pipefail
export PYTHONPATH="$PWD/python:$PWD/test/python:$PWD/models/common${PYTHONPATH:+:$PYTHONPATH}"
export NIMBLE_TEST_TOOLS="$PWD/tools"
export NIMBLE_TEST_ROOT="$PWD"
# Scratch files (compiled models, nimble-run's outputs) under the test's tmp.
export TMPDIR="${TEST_TMPDIR:-${TMPDIR:-/tmp}}"
exec /usr/bin/python3 -m unittest discover -s test/python -p '*_test.py' -v "$@"
