#!/bin/sh
# bench_host.sh - tools/bench_host.c, the host's own work per decode step at
# the 7B shape with the compute taken away: a line per (policy, batch) with a
# rate, R-KV compresses (so the stand-in top-k's keep-sets pass the cache's
# checks and the compaction's bookkeeping ran), and bad options are refused.
BIN=${EVICTBENCH_BIN:-./evictbench}
HOST=${BENCH_HOST_BIN:-$(dirname "$BIN")/tools/bench_host}
fail=0
out=$("$HOST" --batches 1,4 --policies fullkv,rkv --prompt-len 256 --budget 128 --new 200 \
      --reps 1 2>&1) || { printf '%s\n' "$out"; echo "FAIL: bench_host exited non-zero"; exit 1; }
rows=$(printf '%s\n' "$out" | awk '$1 == "qwen7b" && $4 + 0 > 0 && $5 + 0 > 0' | wc -l)
[ "$rows" -eq 4 ] || { printf '%s\n' "$out"; echo "FAIL: $rows of 4 rows with a rate and calls"; fail=1; }
rkv4=$(printf '%s\n' "$out" | awk '$1 == "qwen7b" && $2 == "rkv" && $3 == 4 { print $6 }')
[ "${rkv4:-0}" -ge 4 ] || { echo "FAIL: rkv at batch 4 compressed ${rkv4:-no} times"; fail=1; }
if "$HOST" --shape gpt5 >/dev/null 2>&1 || "$HOST" --reps 0 >/dev/null 2>&1; then
    echo "FAIL: an unknown shape or --reps 0 was accepted"
    fail=1
fi
[ $fail = 0 ] && echo "ok   bench_host: 4 rows, rkv compressed $rkv4 times at batch 4"
exit $fail
