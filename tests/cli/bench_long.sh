#!/bin/sh
# tests/cli/bench_long.sh - `evictbench bench --contexts` and `bench --max-batch`:
# bad input gives one "evictbench: ..." line; a context past the model's
# positions is refused naming the limit; a KV cap too small for batch 1 and a
# batch that cannot fit in memory are 'oom' rows (with the estimate), not
# crashes; a small real run writes ok rows that `tables` and `plots` render.  Runs from
# the repository root; EVICTBENCH_BIN names the binary.
BIN=${EVICTBENCH_BIN:-./evictbench}
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0

. tests/cli/lib/expect.sh

[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }

expect_error "contexts not numbers" "--contexts" bench --contexts 1k
expect_error "contexts and max-batch" "either" bench --contexts 1024 --max-batch
expect_error "max-batch without a cap" "--max-kv-bytes" bench --max-batch
expect_error "bad kv type" "--kv-types" bench --contexts 1024 --kv-types f8
expect_error "unknown option" "unknown option" bench --contexts 1024 --nope 1

if [ ! -f "$MODEL" ]; then
    echo "SKIP the model-backed checks, tables and figures: $MODEL absent (make deps downloads it)"
    exit $fail
fi
M="--model $MODEL --threads 1 --kv-types f16 --fill-len 16 --new 2"
# shellcheck disable=SC2086
expect_error "context past the model's positions" "maximum of 8192 positions" \
    bench --contexts 1024,9000 $M --no-db
# shellcheck disable=SC2086
expect_error "context shorter than the prefill" "shorter than the 16-token prefill" \
    bench --contexts 8 $M --no-db
# shellcheck disable=SC2086
expect_error "unknown policy" "" bench --contexts 64 $M --policies nosuch --no-db

q() { sqlite3 "$TMP/b.db" "$1"; }
check() { # NAME EXPECTED SQL
    got=$(q "$3")
    if [ "$got" != "$2" ]; then echo "FAIL $1: got '$got', want '$2'"; fail=1; else echo "ok   $1"; fi
}

# A cap below one sequence: batch 1 is an oom row for every policy.
# shellcheck disable=SC2086
if ! "$BIN" bench --max-batch --max-kv-bytes 1000 $M --policies rkv --budgets 32 --gen-len 64 \
        --db "$TMP/b.db" >"$TMP/out" 2>"$TMP/err"; then
    echo "FAIL tiny cap run:"; cat "$TMP/err"; fail=1
fi
check "tiny cap: oom rows at batch 1" "2" \
    "SELECT COUNT(*) FROM bench WHERE kind = 'max_batch' AND status = 'oom' AND batch_size = 1 AND est_bytes > 1000"

# A batch far beyond the memory: an oom row with the estimate, nothing run.
# shellcheck disable=SC2086
if ! "$BIN" bench --contexts 4096 $M --batches 4096 --policies streamingllm --budgets 32 \
        --db "$TMP/b.db" >"$TMP/out" 2>"$TMP/err"; then
    echo "FAIL huge batch run:"; cat "$TMP/err"; fail=1
fi
check "huge batch: oom rows with the estimate" "2" \
    "SELECT COUNT(*) FROM bench WHERE kind = 'context' AND status = 'oom' AND batch_size = 4096 AND est_bytes > 100000000000 AND decode_tok_s IS NULL"

# A real run: FullKV and R-KV at 128 slots, batch 1 and 2.
# shellcheck disable=SC2086
if ! "$BIN" bench --contexts 128 $M --batches 1,2 --policies rkv --budgets 32 \
        --db "$TMP/b.db" >"$TMP/out" 2>"$TMP/err"; then
    echo "FAIL real run:"; cat "$TMP/err"; fail=1
fi
check "real run: ok rows" "4" \
    "SELECT COUNT(*) FROM v_bench_context WHERE context = 128 AND status = 'ok' AND decode_tok_s > 0 AND fill = 'repeat:gsm8k:16'"
check "real run: R-KV compressed the whole context" "2" \
    "SELECT COUNT(*) FROM v_bench_context WHERE policy = 'rkv' AND compress_first_ms > 0 AND speedup > 0 AND compressions >= 1 AND kv_bytes < fullkv_kv_bytes"
if "$BIN" tables --db "$TMP/b.db" --out "$TMP/tables" >/dev/null 2>&1 &&
        grep -q "R-KV 32" "$TMP/tables/bench_context.md" && grep -q "oom" "$TMP/tables/bench_max_batch.md"; then
    echo "ok   tables: bench_context.md, bench_max_batch.md"
else
    echo "FAIL tables:"; ls "$TMP/tables"; fail=1
fi
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "SKIP figures: no gnuplot"
elif "$BIN" plots --db "$TMP/b.db" --out "$TMP/plots" >"$TMP/out" 2>"$TMP/err" &&
        ls "$TMP/plots"/bench_throughput_vs_context__*.png "$TMP/plots"/bench_speedup_vs_context__*.svg \
            "$TMP/plots"/bench_max_batch__*.png >/dev/null 2>&1; then
    echo "ok   figures: $(ls "$TMP/plots" | grep -c '^bench_.*png') bench figures"
else
    echo "FAIL figures:"; cat "$TMP/err"; fail=1
fi
exit $fail
