#!/bin/sh
# tests/cli/configs_dry_run.sh - every shipped config in experiments/ expands
# (`exp --dry-run`) offline, with the datasets shipped in datasets/data; its
# note would name a missing dataset (or, before it, a missing model: so
# tests/test_datasets.c loads every config's datasets itself).  Runs from the
# repository root.
BIN=${EVICTBENCH_BIN:-./evictbench}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0; n=0
[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
for f in experiments/*.json; do
    n=$((n + 1))
    # The shipped data, whatever EVICTBENCH_DATA says.
    if ! env -u EVICTBENCH_DATA "$BIN" exp "$f" --dry-run >"$TMP/out" 2>"$TMP/err"; then
        echo "FAIL $f: exit $?"; cat "$TMP/err"; fail=1; continue
    fi
    points=$(sed -n 's/^\([0-9]*\) point(s).*$/\1/p' "$TMP/out")
    if grep -q 'dataset .* is not available' "$TMP/err" || [ -z "$points" ] || [ "$points" -lt 1 ]; then
        echo "FAIL $f:"; cat "$TMP/out" "$TMP/err" | tail -n 5; fail=1
    else
        echo "ok   $f: $points point(s)"
    fi
done
[ $n -ge 10 ] || { echo "FAIL: only $n configs"; fail=1; }
exit $fail
