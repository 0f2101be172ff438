#!/usr/bin/env bash
# Creates the virtualenv of Nimble's serving (python/src/nimble/serve.py,
# docs/serving.md): Ray Serve from PyPI, pinned, on Debian's /usr/bin/python3.
#
#   bash scripts/setup_serve.sh            # -> .serve-venv/ (git-ignored)
#   NIMBLE_SERVE_VENV=DIR bash scripts/setup_serve.sh
#   bash scripts/setup_serve.sh --if-online   # what scripts/setup.sh runs
#
# Why a virtualenv made from /usr/bin/python3 with --system-site-packages:
# the nimble module is built for Debian's CPython 3.11 (docs/python.md) and
# serving needs Debian's numpy beside it. numpy is held at Debian's version
# (a constraint, not an install), so no wheel can pull numpy 2 over it.
# The virtualenv's site-packages gets a nimble.pth naming this checkout's
# bazel-bin/python, so `.serve-venv/bin/python -m nimble.serve` imports the
# built module after `bazel build //python:nimble` (a PYTHONPATH, as the
# tests set, comes first).
#
# RAY_VERSION is the one the serving tests and docs/serving.md's figures were
# made with; change it only together with a run of test/serving.
#
# Idempotent and quick when the pinned Ray is already there (no network).
# With --if-online a failure to reach PyPI is a warning, exit 0: CI then runs
# the serving tests as UNSUPPORTED, each saying why (test/serving/lit.local.cfg).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

RAY_VERSION=2.60.0
PY=/usr/bin/python3
VENV="${NIMBLE_SERVE_VENV:-$PWD/.serve-venv}"
if_online=0
[[ "${1:-}" == "--if-online" ]] && if_online=1

fail() {
  if ((if_online)); then
    echo "setup_serve: warning: $* (the serving tests will be UNSUPPORTED)" >&2
    exit 0
  fi
  echo "setup_serve: $*" >&2
  exit 1
}

if ! "$PY" -c "import venv, ensurepip" 2>/dev/null; then
  fail "$PY cannot create virtualenvs: install python3-venv (bash scripts/setup.sh)"
fi
if ! "$PY" -c "import numpy" 2>/dev/null; then
  fail "$PY lacks numpy: run bash scripts/setup.sh first"
fi

check() {
  "$VENV/bin/python" - "$RAY_VERSION" <<'EOF' 2>/dev/null
import sys
import numpy, ray
from ray import serve
assert ray.__version__ == sys.argv[1], ray.__version__
print("setup_serve: ok: ray[serve] %s, numpy %s" % (ray.__version__, numpy.__version__))
EOF
}

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "setup_serve: creating $VENV"
  "$PY" -m venv --system-site-packages "$VENV" || fail "cannot create $VENV"
fi
site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$PWD/bazel-bin/python" >"$site/nimble.pth"

if check; then
  exit 0
fi

constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
"$PY" -c "import numpy; print('numpy==' + numpy.__version__)" >"$constraints"
echo "setup_serve: installing ray[serve]==$RAY_VERSION (numpy held at $(cat "$constraints"))"
# A short timeout and few retries: without a network CI should not wait long.
if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check --timeout 30 --retries 2 \
  --constraint "$constraints" "ray[serve]==$RAY_VERSION"; then
  fail "pip could not install ray[serve]==$RAY_VERSION (no network to PyPI?)"
fi
check || fail "ray[serve]==$RAY_VERSION installed but does not import"
echo "setup_serve: done"
