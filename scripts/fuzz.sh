#!/usr/bin/env bash
# Runs one libFuzzer target of test/fuzz (issue 14).
#
#   scripts/fuzz.sh TARGET SECONDS [LIBFUZZER_FLAG]...   fuzz for SECONDS
#   scripts/fuzz.sh --regress [TARGET]...                replay every committed
#                                                        regression input
#   scripts/fuzz.sh --list                               the targets
#
# TARGET is nir, nbc, input, npy, safetensors or onnx. The fuzzers are built by
# Bazel with clang-19 (//test/fuzz:fuzzers; build_defs/fuzz.bzl says why not
# a Bazel toolchain). One process, one core (-jobs is never used: the
# machine's two cores are shared). State lives in .fuzz/ (git-ignored, or
# $NIMBLE_FUZZ_DIR):
#
#   .fuzz/corpus/TARGET/    the growing corpus (libFuzzer writes new inputs here)
#   .fuzz/seeds/TARGET/     seeds made from the repository (every .nir, and
#                           every .nir compiled to .nbc at -O0 and -O2)
#   .fuzz/crashes/TARGET/   crash-*, leak-*, timeout-*, oom-* inputs
#   .fuzz/logs/TARGET-DATE.log
#
# A crash input, once fixed, is committed to test/fuzz/regressions/TARGET/
# with a name saying what it was (CI replays them all: test/fuzz/*.test).
# The exit status is libFuzzer's: 0 when nothing was found.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo="$PWD"
work="${NIMBLE_FUZZ_DIR:-$repo/.fuzz}"
targets=(nir nbc input npy safetensors onnx)

usage() {
  sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

is_target() {
  local t
  for t in "${targets[@]}"; do [[ "$t" == "$1" ]] && return 0; done
  return 1
}

# Campaigns run the fuzzers at -O1 (--define=nimble_fuzz_opt=1, fuzz.bzl):
# more executions a second than CI's -O0 build, which only smoke-tests them.
build() {
  bazel build --jobs=2 --noshow_progress --define=nimble_fuzz_opt=1 //test/fuzz:fuzzers "$@" >&2
}

# Largest input libFuzzer may generate, per target.
max_len() {
  case "$1" in
    nir) echo 4096 ;;
    nbc) echo 65536 ;;
    *) echo 4096 ;;
  esac
}

make_seeds() {
  local t="$1" dir="$work/seeds/$1"
  [[ -d "$dir" ]] && return 0
  case "$t" in
    nir)
      git ls-files -z '*.nir' | xargs -0 /usr/bin/python3 test/fuzz/Inputs/make_seeds.py nir "$dir" >&2 ;;
    nbc)
      build //tools:nimblec
      git ls-files -z '*.nir' | xargs -0 /usr/bin/python3 test/fuzz/Inputs/make_seeds.py nbc "$dir" \
        "$repo/bazel-bin/tools/nimblec" >&2 ;;
    npy)
      mkdir -p "$dir"
      git ls-files -z '*.npy' | xargs -0 -I{} sh -c 'f="{}"; [ $(stat -c %s "$f") -le 4096 ] && cp "$f" "'"$dir"'/$(echo "$f" | tr / _)" || true' ;;
    onnx)
      # ONNX's node tests (Debian's libonnx-testdata): small valid models.
      mkdir -p "$dir"
      for f in /usr/include/onnx/backend/test/data/node/*/model.onnx; do
        [[ -f "$f" && $(stat -c %s "$f") -le 4096 ]] && cp "$f" "$dir/$(basename "$(dirname "$f")").onnx"
      done ;;
    *) mkdir -p "$dir" ;;
  esac
}

regress() {
  (($#)) || set -- "${targets[@]}"
  build
  local t status=0 dir
  for t in "$@"; do
    is_target "$t" || { echo "fuzz.sh: unknown target '$t'" >&2; exit 2; }
    dir="test/fuzz/regressions/$t"
    [[ -d "$dir" ]] || continue
    echo "== $t: $(ls "$dir" | wc -l) regression inputs" >&2
    "bazel-bin/test/fuzz/$t-fuzzer" -runs=0 "$dir" >/dev/null 2>"$work/regress-$t.log" || {
      echo "fuzz.sh: $t regression inputs fail; see $work/regress-$t.log" >&2
      status=1
    }
  done
  return $status
}

(($#)) || usage
mkdir -p "$work"
case "$1" in
  --list) printf '%s\n' "${targets[@]}"; exit 0 ;;
  --regress) shift; regress "$@"; exit $? ;;
  -h | --help) usage ;;
esac
(($# >= 2)) || usage
target="$1" seconds="$2"
shift 2
is_target "$target" || { echo "fuzz.sh: unknown target '$target' (try --list)" >&2; exit 2; }
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2; }

build
make_seeds "$target"
mkdir -p "$work/corpus/$target" "$work/crashes/$target" "$work/logs"
log="$work/logs/$target-$(date -u +%Y%m%dT%H%M%S).log"
seeds=("$work/seeds/$target")
[[ -d "test/fuzz/corpus/$target" ]] && seeds+=("test/fuzz/corpus/$target")
[[ -d "test/fuzz/regressions/$target" ]] && seeds+=("test/fuzz/regressions/$target")
echo "fuzz.sh: $target for ${seconds}s; log $log" >&2
set +e
"bazel-bin/test/fuzz/$target-fuzzer" \
  -max_total_time="$seconds" \
  -max_len="$(max_len "$target")" \
  -timeout=30 \
  -rss_limit_mb=2048 \
  -dict="test/fuzz/dicts/$target.dict" \
  -artifact_prefix="$work/crashes/$target/" \
  -print_final_stats=1 \
  "$@" \
  "$work/corpus/$target" "${seeds[@]}" 2>&1 | tee "$log" | grep -E '^#[0-9]+ +(pulse|DONE)|ERROR|SUMMARY|^stat::' >&2
status=${PIPESTATUS[0]}
exit "$status"
