#!/bin/sh
# docs.sh - the commands README.md and docs/*.md show still exist
# (tools/check_docs.sh: every evictbench subcommand and option against its
# --help, every make target and variable against the Makefile; --help,
# --dry-run and info run; every relative link leads to a file and heading).  First the checker itself, on a page of commands
# that have gone stale, which it must reject one by one.  Runs from the
# repository root.
BIN=${EVICTBENCH_BIN:-./evictbench}
export EVICTBENCH_BIN="$BIN"
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
fail=0
cat > "$TMP/stale.md" <<'MD'
```sh
evictbench bench --contexts 1024,4096 --kv-type f16
evictbench bench --contexts 1024 --tsv
evictbench frobnicate --db x.db
make no-such-target
make exp NO_SUCH_VARIABLE=1
```
| command | |
|---|---|
| `evictbench report --no-such-option` | |

[gone](no-such-page.md), [moved](README.md#no-such-heading)
MD
cp README.md "$TMP/README.md"
out=$(sh tools/check_docs.sh "$TMP/stale.md" 2>&1) && { echo "FAIL: stale commands passed"; fail=1; }
for want in "option --kv-type is not in" "option --tsv is not in" "frobnicate: no such subcommand" \
            "make no-such-target: no such target" "variable NO_SUCH_VARIABLE" "option --no-such-option" \
            "no-such-page.md: no such file" "README.md#no-such-heading: no such heading"; do
    printf '%s\n' "$out" | grep -q -- "$want" || { echo "FAIL: the checker missed: $want"; fail=1; }
done
out=$(sh tools/check_docs.sh README.md docs/*.md 2>&1) || { printf '%s\n' "$out"; echo "FAIL: the docs show commands that do not exist"; fail=1; }
printf '%s\n' "$out" | tail -n 1
n=$(printf '%s\n' "$out" | sed -n 's/^check_docs: \([0-9]*\) documented.*/\1/p')
[ "${n:-0}" -ge 20 ] || { echo "FAIL: only ${n:-0} documented commands found (fenced blocks?)"; fail=1; }
exit $fail
