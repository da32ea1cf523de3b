#!/bin/sh
# Run every test program given as an argument, then the shell-level CLI tests,
# and print one closing line with the totals.
passed=0; failed=0; skipped=0; bad=""
for t in "$@"; do
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out" | grep -E 'FAIL|SKIP|passed' | sed 's/^/  /'
    line=$(printf '%s\n' "$out" | grep -E '[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    p=$(printf '%s' "$line" | sed -n 's/.*: \([0-9]*\) passed.*/\1/p')
    f=$(printf '%s' "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
    s=$(printf '%s' "$line" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0})); skipped=$((skipped + ${s:-0}))
    if [ $rc -ne 0 ] || [ -z "$line" ]; then
        [ -z "$line" ] && { printf '%s\n' "$out" | tail -n 20; failed=$((failed + 1)); }
        bad="$bad $t"
    fi
done
for t in tests/cli/*.sh; do
    [ -f "$t" ] || continue
    if out=$(sh "$t" 2>&1); then passed=$((passed + 1)); echo "  ok   $t";
    else failed=$((failed + 1)); bad="$bad $t"; printf '  FAIL %s\n%s\n' "$t" "$out" | tail -n 20; fi
done
echo "$passed passed, $failed failed, $skipped skipped"
[ -n "$bad" ] && { echo "failing:$bad"; exit 1; }
exit 0
