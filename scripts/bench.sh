#!/usr/bin/env bash
# Reproduces docs/perf.md: generates the full-size weights and inputs (BERT-base
# is 436 MB; skipped when already there), checks every model against PyTorch
# (scripts/check_models.py: 12 inputs each, worst relative error, fails above
# 1e-4), then prints the side-by-side latency table of Nimble and PyTorch eager
# at 1 and 2 threads (scripts/bench_models.py), then the memory table
# (scripts/bench_memory.py). BERT-base runs fewer
# repetitions: the reference kernels make one 128-token run take seconds.
#
#   bash scripts/bench.sh          (after scripts/setup.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=/usr/bin/python3

bazel build --config=ci //tools:nimblec //tools:nimble-run //tools:nimble-opt
bash models/make_all.sh
echo "==> correctness: Nimble vs PyTorch, full-size models"
"$PY" scripts/check_models.py
echo "==> latency: LSTM and Tree-LSTM"
"$PY" scripts/bench_models.py --models lstm_1l,lstm_2l,treelstm \
  --reps 10 --warmup 2 --count 6 --profile-reps 2
echo "==> latency: BERT-base"
"$PY" scripts/bench_models.py --models bert_base --reps 3 --warmup 1 --count 3 --profile-reps 1
echo "==> memory: allocations, allocation time and peak memory, with and without planning"
"$PY" scripts/bench_memory.py --count 3 --reps 3
