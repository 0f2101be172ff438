#!/usr/bin/env bash
# Every .nir file tracked in the repository (tests, models, docs examples
# saved as files) must print and parse back to identical text:
#   nimble-opt --split-input-file F -o A; nimble-opt --split-input-file A -o B; A == B
# Files that are invalid on purpose (they use --verify-diagnostics or carry a
# `// NO-ROUNDTRIP` line) are skipped, as in the lit format.
#
# This test reads the source tree rather than declared inputs so that a new
# .nir file anywhere is covered without editing a BUILD file; it is tagged
# `local` in test/BUILD. It finds the tree by resolving a runfile symlink.
set -euo pipefail

opt="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
anchor="$(readlink -f "$2")"            # test/lit.cfg.py in the source tree
root="$(cd "$(dirname "$anchor")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if ! git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  echo "roundtrip_all: $root is not a git checkout; cannot list .nir files" >&2
  exit 1
fi

checked=0 skipped=0 failed=0
while IFS= read -r -d '' f; do
  path="$root/$f"
  [[ -f "$path" ]] || continue
  if grep -qE -- '--verify-diagnostics|NO-ROUNDTRIP' "$path"; then
    skipped=$((skipped + 1))
    continue
  fi
  if ! "$opt" --split-input-file "$path" -o "$tmp/a.nir" 2>"$tmp/err" ||
     ! "$opt" --split-input-file "$tmp/a.nir" -o "$tmp/b.nir" 2>>"$tmp/err"; then
    echo "FAIL: $f does not parse, or its printed form does not:" >&2
    cat "$tmp/err" >&2
    failed=$((failed + 1))
  elif ! diff -u "$tmp/a.nir" "$tmp/b.nir" >"$tmp/diff"; then
    echo "FAIL: $f: printed IR does not print back identically:" >&2
    cat "$tmp/diff" >&2
    failed=$((failed + 1))
  fi
  checked=$((checked + 1))
done < <(git -C "$root" ls-files -z --cached --others --exclude-standard -- '*.nir')

echo "roundtrip_all: $checked files checked, $skipped skipped (invalid on purpose), $failed failed"
[[ $checked -gt 0 && $failed -eq 0 ]]
