#!/usr/bin/env bash
# Creates the virtualenv of the benchmark's optional peers: ONNX Runtime and
# IREE (compiler + runtime), from PyPI. scripts/bench_models.py runs each
# peer in its own process with this virtualenv's python; without it the
# benchmark says which peers are missing and times Nimble and PyTorch only.
# No test needs it; CI does not create it.
#
#   bash scripts/setup_peers.sh            # -> .peers-venv/ (git-ignored)
#   NIMBLE_PEERS_VENV=DIR bash scripts/setup_peers.sh
#
# Why a virtualenv built on Debian's /usr/bin/python3 with
# --system-site-packages: the peers are checked against the PyTorch reference
# and fed the ONNX file torch.onnx.export writes, so the peer processes need
# Debian's torch 1.13 and numpy. PyTorch from PyPI would be a second, different
# PyTorch (and a 700 MB download); a plain virtualenv would not see Debian's.
# numpy is pinned to Debian's version (a constraint, not an install): a wheel
# asking for numpy 2 would otherwise shadow it and break Debian's torch.
#
# Needs python3-venv (scripts/setup.sh installs it). Idempotent: re-running
# upgrades nothing that is already there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY=/usr/bin/python3
VENV="${NIMBLE_PEERS_VENV:-$PWD/.peers-venv}"
# onnx with a floor: the venv sees Debian's python3-onnx (1.12 on bookworm),
# which satisfies a bare "onnx" but lacks the float8 types that IREE 3.x's
# iree-import-onnx names at import (it failed with "Enum DataType has no value
# defined for name 'FLOAT8E4M3FN'").
PEERS=("onnx>=1.16" onnxruntime iree-base-compiler iree-base-runtime)

if ! "$PY" -c "import venv, ensurepip" 2>/dev/null; then
  echo "setup_peers: $PY cannot create virtualenvs: install python3-venv (bash scripts/setup.sh)" >&2
  exit 1
fi
if ! "$PY" -c "import numpy, torch" 2>/dev/null; then
  echo "setup_peers: $PY lacks numpy or torch: run bash scripts/setup.sh first" >&2
  exit 1
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "setup_peers: creating $VENV"
  "$PY" -m venv --system-site-packages "$VENV"
fi

constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
"$PY" -c "import numpy; print('numpy==' + numpy.__version__)" >"$constraints"

echo "setup_peers: installing ${PEERS[*]} (numpy held at $(cat "$constraints"))"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check \
  --constraint "$constraints" "${PEERS[@]}"

# Check what the benchmark will import and run.
"$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
import numpy, onnx, onnxruntime, torch
import iree.compiler, iree.runtime
import iree.compiler.extras.onnx_importer  # what iree-import-onnx runs: needs onnx's float8 types
print("setup_peers: ok: numpy %s, torch %s, onnx %s, onnxruntime %s, iree-base-compiler %s, iree-base-runtime %s"
      % (numpy.__version__, torch.__version__, onnx.__version__, onnxruntime.__version__,
         md.version("iree-base-compiler"), md.version("iree-base-runtime")))
EOF
for tool in iree-import-onnx iree-compile; do
  [[ -x "$VENV/bin/$tool" ]] || { echo "setup_peers: $VENV/bin/$tool missing" >&2; exit 1; }
done
echo "setup_peers: done; scripts/bench_models.py finds $VENV by itself (or --peers-venv DIR)"
