# tests/cli/lib/expect.sh - sourced by the CLI tests (not a test itself).
# expect_error NAME PATTERN CMD...: run "$BIN" CMD...; it must fail with exactly
# one stderr line "evictbench: ...PATTERN..." (PATTERN "" matches any).  Sets
# fail=1 otherwise.  Needs BIN and TMP.
expect_error() {
    name=$1; pattern=$2; shift 2
    timeout 600 "$BIN" "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    lines=$(wc -l <"$TMP/err")
    if [ $rc -eq 0 ] || [ "$lines" -ne 1 ] || ! grep -q "^evictbench: .*$pattern" "$TMP/err"; then
        echo "FAIL $name: rc=$rc, stderr:"; cat "$TMP/err"; fail=1
    else
        echo "ok   $name: $(cat "$TMP/err")"
    fi
}
