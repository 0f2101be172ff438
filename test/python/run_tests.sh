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
# Under --config=asan the extension modules need the sanitizers' runtimes
# loaded first, before the interpreter (which is not instrumented) starts;
# Python's own allocations are not freed at exit, so no leak checking.
sanitizers=$(ldd python/nimble/_runtime.so | awk '/lib(asan|ubsan)\.so/ {print $3}' | tr '\n' ' ')
if [[ -n "$sanitizers" ]]; then
  export LD_PRELOAD="${sanitizers% }"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
exec /usr/bin/python3 -m unittest discover -s test/python -p '*_test.py' -v "$@"
