#!/usr/bin/env bash
# Generates everything the full-size models need that is not committed:
# their weights (.safetensors next to each .nir; BERT-base alone is 436 MB)
# and the seeded check/benchmark inputs (models/<m>/inputs/, 12 per model).
# Idempotent: weights already up to date (same tensors, same generator
# metadata) are kept; inputs are seeded, so rewriting them changes nothing.
# Also checks that the committed .nir match their generators.
#
#   bash models/make_all.sh            # then: scripts/check_models.py, scripts/bench_models.py
#
# The small variants' weights and fixtures are committed; regenerate them with
#   /usr/bin/python3 models/<m>/make_weights.py <m>_small --force
#   /usr/bin/python3 models/<m>/make_inputs.py --small
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=/usr/bin/python3  # Debian's: it has numpy and torch

for m in lstm treelstm bert; do
  echo "== $m"
  "$PY" "models/$m/gen_$m.py" --check
  "$PY" "models/$m/make_weights.py"
  "$PY" "models/$m/make_inputs.py"
done
echo "done: weights and inputs are in place"
