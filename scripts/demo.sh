#!/usr/bin/env bash
# The main job, end to end on a fresh machine: install what the project needs,
# build the tools, and run the example model through the optimizer, printing
# the optimized IR and how long each pass took.
#
#   bash scripts/demo.sh [model.nir]
#
# (Once the VM lands, this compiles the model with nimblec and runs it with
# nimble-run, printing its output and latency.)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

model="${1:-models/examples/rnn.nir}"
bash scripts/setup.sh
bazel build --config=ci //tools:nimble-opt
echo "==> nimble-opt $model --passes=type-infer,canonicalize,cse,dce --time-passes"
./bazel-bin/tools/nimble-opt "$model" --passes=type-infer,canonicalize,cse,dce --time-passes
