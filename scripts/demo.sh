#!/usr/bin/env bash
# The main job, end to end on a fresh machine: install what the project needs,
# build the tools, then compile each of the paper's three dynamic models (the
# small variants, whose weights are committed) with nimblec and run it with
# nimble-run on inputs of different sizes, printing the result, checking it
# against PyTorch's output for the same weights (--expected-output), and
# printing the latency.
#
#   bash scripts/demo.sh            # setup + build + run
#   NIMBLE_SKIP_SETUP=1 bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ "${NIMBLE_SKIP_SETUP:-0}" != "1" ]]; then
  bash scripts/setup.sh
fi
echo "==> building nimblec and nimble-run"
if ! bazel build --config=ci //tools:nimblec //tools:nimble-run >/tmp/nimble-demo-build.log 2>&1; then
  cat /tmp/nimble-demo-build.log
  exit 1
fi
bin=bazel-bin/tools
out="$(mktemp -d "${TMPDIR:-/tmp}/nimble-demo.XXXXXX")"
trap 'rm -rf "$out"' EXIT

run() { # title, nbc, nimble-run args...
  local title="$1" nbc="$2"
  shift 2
  echo
  echo "==> $title"
  echo "    nimble-run $(basename "$nbc") $*"
  "$bin/nimble-run" "$nbc" "$@" --benchmark=20 | sed 's/^/    /'
}

echo "==> nimblec --kernels=native models/lstm/small/lstm_small.nir (a loop over a sequence of ? tokens)"
"$bin/nimblec" --kernels=native models/lstm/small/lstm_small.nir -o "$out/lstm.nbc"
f=models/lstm/small/fixtures
for s in seq_01 seq_03; do
  n=$(/usr/bin/python3 -c "import numpy; print(numpy.load('$f/$s.npy').shape[0])")
  run "LSTM (2 layers, hidden 16) on $n tokens: final (h, c), checked against PyTorch" "$out/lstm.nbc" \
    "--input=@$f/$s.npy" "--expected-output=@$f/$s.h.npy" "--expected-output=@$f/$s.c.npy" --tolerance=1e-4
done

echo
echo "==> nimblec --kernels=native models/treelstm/small/treelstm_small.nir (recursion over a binary-tree ADT)"
"$bin/nimblec" --kernels=native models/treelstm/small/treelstm_small.nir -o "$out/treelstm.nbc"
f=models/treelstm/small/fixtures
run "Tree-LSTM on $(grep -o Leaf "$f/tree_03.txt" | wc -l) leaves: root (h, c), checked against PyTorch" "$out/treelstm.nbc" \
  "--input=@$f/tree_03.txt" "--expected-output=@$f/tree_03.h.npy" "--expected-output=@$f/tree_03.c.npy" --tolerance=1e-4

echo
echo "==> nimblec --kernels=native models/bert/small/bert_small.nir (sequence length ?)"
"$bin/nimblec" --kernels=native models/bert/small/bert_small.nir -o "$out/bert.nbc"
f=models/bert/small/fixtures
n=$(/usr/bin/python3 -c "import numpy; print(numpy.load('$f/ids_01.npy').shape[0])")
run "BERT (2 layers, hidden 32) on $n tokens: hidden states, checked against PyTorch" "$out/bert.nbc" \
  "--input=@$f/ids_01.npy" "--expected-output=@$f/ids_01.out.npy" --tolerance=1e-4 "--output=@$out/bert_out.npy"
/usr/bin/python3 -c "import numpy; a = numpy.load('$out/bert_out.npy'); print('    output', a.shape, a.dtype, 'first row:', numpy.array2string(a[0, :6], precision=4), '...')"

echo
echo "==> auto-batching (docs/autobatch.md): 64 Tree-LSTM trees of mixed shape at once, then one at a time"
/usr/bin/python3 scripts/make_instances.py treelstm_small "$out/trees" --count 64 | sed 's/^/    /'
mkdir -p "$out/on" "$out/off"
for ab in on off; do
  echo "    nimble-run treelstm.nbc --instances=trees/instances.txt --auto-batch=$ab"
  "$bin/nimble-run" "$out/treelstm.nbc" "--instances=$out/trees/instances.txt" "--auto-batch=$ab" \
    --benchmark=20 "--output-dir=$out/$ab" | sed 's/^/    /'
done
/usr/bin/python3 scripts/compare_instances.py outputs "$out/on" "$out/off" --count 64 --results 2 | sed 's/^/    /'
/usr/bin/python3 scripts/compare_instances.py reference treelstm_small "$out/trees/instances.txt" "$out/on" | sed 's/^/    /'
echo "    (the small Tree-LSTM's states are 6 wide: its kernels cost less than the scheduling, so"
echo "    batching loses here; on the full-size models it wins: docs/perf.md, \"Auto-batching\")"

echo
echo "All outputs matched PyTorch within 1e-4."
