#!/bin/sh
# tests/cli/kv_type.sh - the KV cache element type from the command line:
# an unknown --kv-type (or config "kv_type") is one clear error naming the
# option; `run --kv-type f16` records f16 in its run row, under another run key
# than the f32 run of the same point, with half the f32 run's peak KV bytes;
# bench and generate --stats name the type.
BIN=${EVICTBENCH_BIN:-./evictbench}
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
fail=0
. tests/cli/lib/expect.sh

expect_error "run bad kv type" "--kv-type: expected f32, f16, bf16 or auto, got 'xyz'" \
    run --model smollm2-135m --dataset synthetic:1 --kv-type xyz --db "$TMP/r.db"
expect_error "generate bad kv type" "--kv-type: expected f32, f16, bf16 or auto, not 'xyz'" \
    generate --model smollm2-135m --prompt hi --kv-type xyz
expect_error "bench bad kv type" "--kv-type: expected f32, f16, bf16 or auto, not 'fp8'" \
    bench --model smollm2-135m --kv-type fp8
printf '{"name": "k", "models": "smollm2-135m", "datasets": "synthetic:1", "kv_type": "f8"}\n' \
    >"$TMP/bad.json"
expect_error "config bad kv type" '\$.kv_type: expected "f32", "f16", "bf16" or "auto"' \
    exp "$TMP/bad.json" --dry-run --db "$TMP/c.db"

if [ ! -f "$MODEL" ]; then
    echo "SKIP the model-backed checks: $MODEL absent (make deps downloads it)"
    exit $fail
fi
for t in f32 f16; do
    "$BIN" run --model smollm2-135m --dataset synthetic:1 --max-new 8 --weights native \
        --policy streamingllm --budget 16 --kv-type $t --db "$TMP/r.db" >"$TMP/out.$t" 2>&1 ||
        { cat "$TMP/out.$t"; echo "FAIL run --kv-type $t"; fail=1; }
done
q() { sqlite3 "$TMP/r.db" "$1"; }
rows=$(q "select kv_type from runs order by id" | tr '\n' ' ')
keys=$(q "select count(distinct run_key) from runs")
ratio=$(q "select (select peak_kv_bytes from runs where kv_type = 'f32') * 1.0 /
                  (select peak_kv_bytes from runs where kv_type = 'f16')")
if [ "$rows" = "f32 f16 " ] && [ "$keys" = 2 ] && [ "$ratio" = 2.0 ]; then
    echo "ok   run rows: kv_type $rows; 2 run keys; f32/f16 peak KV bytes $ratio"
else
    echo "FAIL run rows: kv_type '$rows', $keys run keys, f32/f16 peak KV ratio '$ratio'"; fail=1
fi
"$BIN" generate --model smollm2-135m --prompt hi --max-new 4 --kv-type bf16 --stats \
    >"$TMP/g.out" 2>"$TMP/g.err" && grep -q "^kv cache: peak [0-9]* bytes; .*; bf16 elements$" "$TMP/g.err" ||
    { cat "$TMP/g.err"; echo "FAIL generate --stats names the KV type"; fail=1; }
"$BIN" bench --model smollm2-135m --kv-type f16 --prompt-len 16 --new 4 --batches 1 --tsv \
    >"$TMP/b.out" 2>&1 && [ "$(awk -F'\t' 'NR > 1 {print $5}' "$TMP/b.out" | sort -u)" = f16 ] ||
    { cat "$TMP/b.out"; echo "FAIL bench --tsv names the KV type per row"; fail=1; }
[ $fail = 0 ] && echo "ok   generate and bench name the KV type"
exit $fail
