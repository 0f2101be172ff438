#!/usr/bin/env bash
# The GPU check of issue 15: on a machine with an NVIDIA GPU, runs the e2e
# suite and the three small models with --target=cuda / --device=cuda against
# the CPU results, and prints a table (correctness and latency, beside PyTorch
# CUDA when torch sees a GPU).
#
# IT HAS NEVER RUN: it was written on machines without a GPU, where the CUDA
# back end could only be compiled and assembled, and nimble-run's device
# runtime (vm/cuda/CudaRuntime.h) could only run against a fake driver
# (docs/codegen.md#cuda). On such a machine it stops at the first step with
# nimble-run's one-line reason and exit 1; it never reports a GPU figure it
# did not measure (docs/perf.md).
#
#   bash scripts/gpu_check.sh            # build, check the device, run, table
#   NIMBLE_CUDA_ARCH=sm_90 bash scripts/gpu_check.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
arch="${NIMBLE_CUDA_ARCH:-sm_80}"
py=/usr/bin/python3

echo "==> building nimblec and nimble-run"
bazel build --jobs=2 //tools:nimblec //tools:nimble-run >/tmp/nimble-gpu-check-build.log 2>&1 ||
  { cat /tmp/nimble-gpu-check-build.log; exit 1; }
bin=bazel-bin/tools
out="$(mktemp -d "${TMPDIR:-/tmp}/nimble-gpu-check.XXXXXX")"
trap 'rm -rf "$out"' EXIT

# 1. Is there a device this runtime can execute on? (One line of nimble-run
# says what is missing: the driver, a device, cuBLAS.)
"$bin/nimblec" test/cuda/Inputs/scale.nir --target=cuda --cuda-arch="$arch" -o "$out/probe.nbc"
if ! "$bin/nimble-run" "$out/probe.nbc" --input=1x4xf32=1 --input=4x4xf32=1 >"$out/probe.txt" 2>&1; then
  echo "==> no GPU run is possible here:"
  sed 's/^/    /' "$out/probe.txt"
  exit 1
fi

# 2. The e2e suite with every nimblec call for cuda and every nimble-run call
# on the device (the kernel-path matrix of test/e2e/BUILD, another column).
echo "==> e2e suite, --target=cuda --device=cuda"
e2e="not run"
if /usr/bin/python3 /usr/lib/llvm-19/build/utils/lit/lit.py -q test/e2e \
    --param "nimblec_flags=--target=cuda --cuda-arch=$arch" --param nimble_run_flags=--device=cuda \
    >"$out/e2e.txt" 2>&1; then
  e2e="pass"
else
  e2e="FAIL (see below)"
fi

# 3. The three models: CPU and CUDA against the PyTorch fixtures, latency of each.
latency() { sed -n 's/^latency: min [0-9.]* ms, median \([0-9.]*\) ms.*/\1/p'; }
row() { # model, nir, inputs and expected outputs...
  local name="$1" nir="$2"
  shift 2
  "$bin/nimblec" "$nir" -o "$out/$name.cpu.nbc"
  "$bin/nimblec" "$nir" --target=cuda --cuda-arch="$arch" -o "$out/$name.cuda.nbc"
  local ok_cpu=ok ok_cuda=ok t_cpu t_cuda
  t_cpu=$("$bin/nimble-run" "$out/$name.cpu.nbc" "$@" --tolerance=1e-4 --benchmark=20 2>&1 | latency) || ok_cpu=FAIL
  t_cuda=$("$bin/nimble-run" "$out/$name.cuda.nbc" --device=cuda "$@" --tolerance=1e-4 --benchmark=20 2>&1 | latency) ||
    ok_cuda=FAIL
  printf '| %-9s | %-4s | %8s | %-4s | %8s |\n' "$name" "$ok_cpu" "${t_cpu:--}" "$ok_cuda" "${t_cuda:--}"
}
echo
echo "| model     | cpu  | cpu ms   | cuda | cuda ms  |"
echo "|---|---|---|---|---|"
f=models/lstm/small/fixtures
row lstm models/lstm/small/lstm_small.nir "--input=@$f/seq_01.npy" "--expected-output=@$f/seq_01.h.npy" "--expected-output=@$f/seq_01.c.npy"
f=models/treelstm/small/fixtures
row treelstm models/treelstm/small/treelstm_small.nir "--input=@$f/tree_03.txt" "--expected-output=@$f/tree_03.h.npy" "--expected-output=@$f/tree_03.c.npy"
f=models/bert/small/fixtures
row bert models/bert/small/bert_small.nir "--input=@$f/ids_01.npy" "--expected-output=@$f/ids_01.out.npy"
echo
echo "e2e suite on cuda: $e2e"
[[ "$e2e" == pass ]] || sed 's/^/    /' "$out/e2e.txt" | tail -30

# 4. PyTorch CUDA, when torch sees a GPU (the models' reference.py scripts
# time their eager forward passes; see docs/perf.md for the CPU figures).
if "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "torch sees $("$py" -c 'import torch; print(torch.cuda.get_device_name(0))'); time its models with"
  echo "  $py scripts/bench_models.py (CUDA column: not automated yet)"
else
  echo "PyTorch CUDA: not available on this machine (no latency beside it)"
fi
