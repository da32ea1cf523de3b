#!/bin/sh
# exp_bench.sh - the short bench `make exp` ends with, so that its report has
# the bench tables and figures: decode tokens/s at 1k and 4k slots, FullKV
# against R-KV at 256, and the largest batch under a small KV cap (4 FullKV
# sequences of 2,048 tokens), on the model of the experiment.  About a minute
# on 2 cores.  Skipped when DB already holds this short bench for the model
# (make bench-long measures the full curves).
# Usage: tools/exp_bench.sh MODEL DB   (EVICTBENCH_BIN: default ./evictbench)
BIN=${EVICTBENCH_BIN:-./evictbench}
[ $# -eq 2 ] || { echo "usage: tools/exp_bench.sh MODEL DB" >&2; exit 2; }
model=$1 db=$2
if [ -f "$db" ] && command -v sqlite3 > /dev/null 2>&1; then
    n=$(sqlite3 "$db" "SELECT COUNT(*) FROM bench WHERE model = '$model' AND n_new = 8 AND fill = 'repeat:gsm8k:64'" 2>/dev/null)
    if [ "${n:-0}" -gt 0 ]; then
        echo "exp-bench: $db already holds the short bench of $model ($n rows); make bench-long for the full curves"
        exit 0
    fi
fi
# the cap: 4 FullKV sequences of 64 + 1,984 tokens, in the model's f16 K+V bytes
"$BIN" bench --contexts 1024,4096 --model "$model" --batches 1 --kv-types f16 \
    --policies rkv --budgets 256 --new 8 --fill-len 64 --db "$db" || exit 1
# f16 K+V bytes per token: 2 (K, V) x 2 bytes x layers x kv heads x head dim
kv=$("$BIN" info "$model" 2>/dev/null | awk '/^layers /{l=$2} /^kv heads /{k=$3} /^head dim /{d=$3}
                                          END {if (l && k && d) print 4 * l * k * d}')
[ -n "$kv" ] || { echo "exp-bench: evictbench info $model gave no dimensions" >&2; exit 1; }
"$BIN" bench --max-batch --max-kv-bytes $((kv * 2048 * 4)) --model "$model" --kv-types f16 \
    --policies rkv --budgets 256 --gen-len 1984 --fill-len 64 --new 8 --db "$db"
