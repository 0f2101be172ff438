#!/usr/bin/env bash
# Installs every Debian package Nimble needs to build, test and benchmark.
#
# Idempotent: packages already installed are skipped (checked with
# dpkg-query), and when nothing is missing it touches neither the network nor
# apt's lists. Runs as root (CI) or through sudo (a developer's machine).
# Why each package is needed: /work/shared/design/BUILD-NOTES.md. Nothing may
# be installed by hand: if the project needs it, it is listed here.
# Last, the serving virtualenv (scripts/setup_serve.sh: Ray Serve from PyPI);
# without a network that step only warns, and test/serving says UNSUPPORTED.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(
  # Build: Bazel 4.2.3 and the @platforms repository it needs offline; the
  # C++20 compiler (and with it libasan/libubsan for --config=asan).
  bazel-bootstrap
  bazel-platforms
  g++
  # Libraries: LLVM 19 (CPU and NVPTX codegen), oneDNN, a JSON reader.
  llvm-19-dev
  # lld as a library: nimblec links kernel objects into a shared object in
  # process (codegen/llvm/NativeCodegen.cpp), without a linker on PATH.
  liblld-19-dev
  libdnnl-dev
  nlohmann-json3-dev
  # The compiler tools' malloc (third_party/jemalloc.BUILD).
  libjemalloc-dev
  # Tests: FileCheck, not, count, split-file, lit; GoogleTest.
  llvm-19-tools
  libgtest-dev
  googletest
  # Reference results and benchmarks against PyTorch. Without OpenBLAS,
  # PyTorch's matrix products fall back to reference BLAS (~45x slower).
  python3-numpy
  python3-torch
  # torchvision's CNNs, exported by torch.onnx (test/import-onnx/torchvision.test).
  python3-torchvision
  libopenblas0-pthread
  hyperfine
  # scripts/bench_models.py --plot (docs/perf.md's figures).
  python3-matplotlib
  # Fuzzing (test/fuzz, scripts/fuzz.sh): clang 19 and its runtimes
  # (libFuzzer, ASan, UBSan). The project keeps g++; only the fuzzers use clang.
  clang-19
  libclang-rt-19-dev
  # scripts/setup_peers.sh: the virtualenv of the optional peers (ONNX Runtime, IREE).
  python3-venv
  # The nimble Python module (python/, docs/python.md): CPython's headers for
  # Debian's /usr/bin/python3 and pybind11, header-only.
  python3-dev
  pybind11-dev
  # nimble-import-onnx (frontend/onnx, third_party/onnx.BUILD): the ONNX
  # schema's generated C++ and libonnx_proto.so ...
  libonnx-dev
  # ... over the protobuf runtime's headers and libprotobuf.so.
  libprotobuf-dev
  # test/tools/emit-dot.test: `dot -Tsvg` checks that --emit=dot output is
  # valid Graphviz.
  graphviz
  # test/import-onnx: the tests make their .onnx inputs with onnx.helper.
  python3-onnx
  # scripts/onnx_node_tests.py: ONNX's backend node tests (model.onnx and
  # test_data_set_*/ per test, under /usr/include/onnx/backend/test/data/node).
  libonnx-testdata
)

is_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

missing=()
for pkg in "${PACKAGES[@]}"; do
  is_installed "$pkg" || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  bash scripts/setup_serve.sh --if-online
  exit 0
fi

if ((EUID == 0)); then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "setup: need root (or sudo) to install: ${missing[*]}" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
# `env` because sudo does not pass DEBIAN_FRONTEND through; noninteractive
# keeps debconf from waiting on a prompt (CI has no stdin).
apt_get() {
  ${as_root[@]+"${as_root[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get "$@"
}
apt_get update -q
apt_get install -y -q --no-install-recommends "${missing[@]}"

# Verify, so a package that apt silently skipped fails here and not later
# in some confusing build step.
still_missing=()
for pkg in "${missing[@]}"; do
  is_installed "$pkg" || still_missing+=("$pkg")
done
if ((${#still_missing[@]} > 0)); then
  echo "setup: failed to install: ${still_missing[*]}" >&2
  exit 1
fi
bash scripts/setup_serve.sh --if-online
echo "setup: done"
