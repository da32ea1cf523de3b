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
# A budget at or below a policy's window is refused by the dry run itself
# (SnapKV keeps its 32 observation slots), not first when the policy is built.
printf '{"name": "win", "models": "smollm2-135m", "datasets": {"name": "gsm8k", "limit": 1},
 "policies": ["snapkv"], "budgets": [32]}\n' > "$TMP/win.json"
if env -u EVICTBENCH_DATA "$BIN" exp "$TMP/win.json" --dry-run >"$TMP/out" 2>"$TMP/err"; then
    echo "FAIL: snapkv at budget 32 passed the dry run"; fail=1
elif ! grep -q 'budget 32 must exceed the 32 slots policy snapkv always keeps' "$TMP/err"; then
    echo "FAIL: snapkv at budget 32:"; cat "$TMP/err"; fail=1
else
    echo "ok   snapkv at budget 32 refused by the dry run"
fi
sed 's/\[32\]/[33]/' "$TMP/win.json" > "$TMP/win33.json"
env -u EVICTBENCH_DATA "$BIN" exp "$TMP/win33.json" --dry-run >"$TMP/out" 2>"$TMP/err" ||
    { echo "FAIL: snapkv at budget 33:"; cat "$TMP/err"; fail=1; }
exit $fail
