#!/bin/sh
# tests/cli/compat.sh - `evictbench run --policy rkv:compat=released` over two
# samples one after another: the step counter runs on from the first sample,
# so the second prompt (>= B) is left whole at prefill, where the default
# compresses it; both runs finish.  Runs from the repository root;
# EVICTBENCH_BIN names the binary.
BIN=${EVICTBENCH_BIN:-./evictbench}
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0

[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
if [ ! -f "$MODEL" ]; then
    echo "SKIP compat: $MODEL absent (make deps downloads it)"
    exit 0
fi
command -v sqlite3 >/dev/null 2>&1 || { echo "SKIP compat: no sqlite3 CLI"; exit 0; }

# synthetic prompts of 90 and 117 tokens, 4 new tokens each, B 16, divide 16:
# the first sample's count ends at 93 (not divisible), so under compat=released
# the second prompt is not compressed, and no decode step of it reaches a
# divisible count (93 + 117..119); the default compresses both prompts.
for pol in rkv:divide_length=16 rkv:divide_length=16,compat=released; do
    if ! timeout 600 "$BIN" run --model "$MODEL" --dataset synthetic:3 --limit 2 --max-new 4 \
        --budget 16 --policy "$pol" --db "$TMP/r.db" --quiet >"$TMP/out" 2>"$TMP/err"; then
        echo "FAIL run $pol:"; cat "$TMP/err"; fail=1
    fi
done
got=$(sqlite3 "$TMP/r.db" "select group_concat(n, ',') from (select s.run_id id, s.n_compressions n,
    r.params_json like '%compat%released%' compat from samples s join runs r on s.run_id = r.id
    where r.status = 'ok' order by s.run_id, s.sample_idx) group by id order by compat" 2>&1 | tr '\n' ' ')
if [ "$got" != "1,1 1,0 " ]; then
    echo "FAIL compat: compressions per sample (default, then compat=released): $got"; fail=1
else
    echo "ok   compat: compressions per sample: default 1,1; compat=released 1,0"
fi
exit $fail
