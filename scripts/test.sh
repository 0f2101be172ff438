#!/usr/bin/env bash
# Runs every test: the one command for developers and CI (.ci/run).
#
#   scripts/test.sh [BAZEL_FLAG=VALUE]... [TARGET_PATTERN]...
#
# 1. `bazel test //...`                (plain build: -O2, assertions on)
# 2. `bazel test --config=asan //...`  (AddressSanitizer + UBSan), skipped
#    when NIMBLE_SKIP_ASAN=1
#
# Extra arguments starting with `-` are passed to both runs (write flags as
# --flag=value); any other argument (including negative patterns such as
# -//models/...) replaces the default pattern //... .
# Both runs happen even if the first fails, so one CI run shows everything.
# The last line of output is always `N passed, N failed`, counting Bazel test
# targets over both runs; the exit status is non-zero if any test failed or
# Bazel could not build something.
#
# The asan run keeps its outputs apart (see .bazelrc), so alternating the two
# runs does not rebuild either one from scratch.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

flags=()
targets=()
for arg in "$@"; do
  case "$arg" in
    -//* | -@* | -:*) targets+=("$arg") ;; # negative pattern: -//foo/...
    -*) flags+=("$arg") ;;
    *) targets+=("$arg") ;;
  esac
done
((${#targets[@]})) || targets=(//...)

common=(--test_output=errors --test_summary=short --keep_going)
if [[ "${CI:-}" == "true" ]]; then
  common+=(--config=ci)
fi

# //:all_tests (the root BUILD) must name every test target, so that
# `bazel test //:all_tests` is the whole suite; a test added without it fails
# the run here, before anything is built.
missing_tests=$(bazel query --noshow_progress 'tests(//...) except tests(//:all_tests)' 2>/dev/null)
if [[ -n "$missing_tests" ]]; then
  echo "==> test targets missing from //:all_tests in the root BUILD:" >&2
  echo "$missing_tests" | sed 's/^/      /' >&2
  echo "0 passed, 1 failed"
  exit 1
fi

logdir="$(mktemp -d "${TMPDIR:-/tmp}/nimble-test.XXXXXX")"
trap 'rm -rf "$logdir"' EXIT

total_passed=0
total_failed=0
build_broken=0

# run_bazel NAME [BAZEL_TEST_FLAGS]...
run_bazel() {
  local name="$1"
  shift
  local log="$logdir/$name.log"
  local start=$SECONDS
  echo "==> [$name] bazel test $* ${common[*]} ${flags[*]} ${targets[*]}"
  bazel test "$@" "${common[@]}" ${flags[@]+"${flags[@]}"} -- "${targets[@]}" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}

  # Bazel's per-target summary lines look like
  #   //ir:parser_test          (cached) PASSED in 0.4s
  #   //test/ir:lit                      FAILED in 2.1s
  #   //vm:vm_test                       NO STATUS
  # Only lines starting with a label count, so test logs printed in
  # between (--test_output=errors) cannot be mistaken for them.
  local passed failed
  passed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?(PASSED|FLAKY)( in|,|$)' "$log")
  failed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|REMOTE FAILURE|FAILED TO BUILD)' "$log")
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))

  # Exit codes: 0 all passed, 3 some test failed (counted above), 4 no test
  # targets (fine while the tree is young); anything else means Bazel itself
  # or the build failed, which no per-target line may show.
  case "$rc" in
    0 | 3) ;;
    4) echo "==> [$name] no test targets matched ${targets[*]}" ;;
    *)
      echo "==> [$name] bazel failed (exit code $rc): build or configuration error above"
      build_broken=1
      ;;
  esac
  echo "==> [$name] $passed passed, $failed failed in $((SECONDS - start))s"
}

run_bazel plain
if [[ "${NIMBLE_SKIP_ASAN:-0}" == "1" ]]; then
  echo "==> [asan] skipped (NIMBLE_SKIP_ASAN=1)"
else
  run_bazel asan --config=asan
fi

# A CI machine is thrown away afterwards; do not leave the server behind.
if [[ "${CI:-}" == "true" ]]; then
  bazel shutdown >/dev/null 2>&1 || true
fi

echo "$total_passed passed, $total_failed failed"
if ((total_failed > 0 || build_broken)); then
  exit 1
fi
exit 0
