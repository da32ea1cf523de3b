#!/bin/sh
# code_hash.sh - tools/code_hash.sh, which gives run keys their code hash: a
# changed policy source changes it, a changed plot file (harness/report) does
# not, an unchanged tree rewrites nothing.  The common hash (what every run
# key carries) stays when a policy is added (a new file of policies/ and a
# row in the registry table) or a policy's file edited: those change only the
# per-file table (tests/test_code_hash.c combines it per policy).  Works on a copy of the sources
# outside git (the find-based path), so the checkout is never touched.
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$tmp/src/tools" "$tmp/src/harness"
cp -r util model kernels policies datasets "$tmp/src/" || fail "copying sources"
cp -r harness/exp harness/grade harness/report "$tmp/src/harness/" || fail "copying harness"
cp tools/code_hash.sh "$tmp/src/tools/"
rm -rf "$tmp/src/kernels/cuda/build"
gen() { (cd "$tmp/src" && sh tools/code_hash.sh "$tmp/$1.c") || fail "code_hash.sh failed"; \
        sed -n 's/.*code_hash\[\] = "\([0-9a-f]*\)".*/\1/p' "$tmp/$1.c"; }
h0=$(gen a)
[ ${#h0} -eq 64 ] || fail "expected 64 hex digits, got '$h0'"
grep -q 'code_hash_dirty = 0' "$tmp/a.c" || fail "a tree outside git is not dirty"
[ "$(gen b)" = "$h0" ] || fail "the same tree gave another hash"
touch -d '2000-01-01' "$tmp/a.c"; before=$(stat -c %Y "$tmp/a.c")
(cd "$tmp/src" && sh tools/code_hash.sh "$tmp/a.c")
[ "$(stat -c %Y "$tmp/a.c")" = "$before" ] || fail "an unchanged hash rewrote the file"
echo "/* report only */" >> "$tmp/src/harness/report/plots.c"
[ "$(gen c)" = "$h0" ] || fail "a change in harness/report changed the code hash"
common() { sed -n 's/.*code_hash_common\[\] = "\([0-9a-f]*\)".*/\1/p' "$tmp/$1.c"; }
row() { grep "{\"policies/$2\"" "$tmp/$1.c"; }
c0=$(common a)
[ ${#c0} -eq 64 ] || fail "expected a 64-digit common hash, got '$c0'"
rkv0=$(row a rkv.c)
[ -n "$rkv0" ] && [ -n "$(row a snapkv.c)" ] || fail "no per-file rows for rkv.c and snapkv.c"
[ -z "$(row a registry.c)" ] || fail "the registry table has a per-file row"
printf '/* a new policy */\n' > "$tmp/src/policies/dummy_policy.c"
echo "/* its row */" >> "$tmp/src/policies/registry.c"
[ "$(gen n)" != "$h0" ] || fail "a new policy kept the build's hash"
[ "$(common n)" = "$c0" ] || fail "a new policy changed the common hash"
[ -n "$(row n dummy_policy.c)" ] || fail "the new policy's file has no row"
[ "$(row n rkv.c)" = "$rkv0" ] || fail "a new policy changed rkv.c's row"
rm "$tmp/src/policies/dummy_policy.c"
snap0=$(row a snapkv.c)
echo "/* a policy change */" >> "$tmp/src/policies/rkv.c"
h1=$(gen d)
[ "$h1" != "$h0" ] || fail "a changed policy source kept the code hash"
[ "$(common d)" = "$c0" ] || fail "a changed policy file changed the common hash"
[ "$(row d rkv.c)" != "$rkv0" ] || fail "a changed rkv.c kept its row"
[ "$(row d snapkv.c)" = "$snap0" ] || fail "a changed rkv.c changed snapkv.c's row"
echo "/* a dataset loader change */" >> "$tmp/src/datasets/load.c"
[ "$(gen e)" != "$h1" ] || fail "a changed dataset loader kept the code hash"
[ "$(common e)" != "$c0" ] || fail "a changed dataset loader kept the common hash"
echo "ok code_hash"
