#!/bin/sh
# tests/cli/bench.sh - `evictbench bench --batches --tsv` (what tools/bench_peer.sh
# reads): bad lists give one "evictbench: ..." line; on SmolLM2 the table has one
# row per test with positive tokens/s.  tools/bench_peer.sh refuses bad settings
# before building anything.  Runs from the repository root; EVICTBENCH_BIN names the binary.
BIN=${EVICTBENCH_BIN:-./evictbench}
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0

. tests/cli/lib/expect.sh

[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }

expect_error "batch 0" "--batches" bench --batches 0
expect_error "batch list with a gap" "--batches" bench --batches 1,,4
expect_error "batch list not numbers" "--batches" bench --batches one
expect_error "batch too large" "--batches" bench --batches 1,257
expect_error "too many batches" "--batches" bench --batches 1,2,3,4,5,6,7,8,9

# The peer script checks its settings and models before it builds llama.cpp.
peer_error() {
    name=$1; pattern=$2; shift 2
    if env "$@" >"$TMP/out" 2>"$TMP/err" || ! grep -q "^bench-peer: .*$pattern" "$TMP/err"; then
        echo "FAIL peer $name:"; cat "$TMP/err"; fail=1
    else
        echo "ok   peer $name: $(cat "$TMP/err")"
    fi
}
peer_error "bad THREADS" "THREADS" THREADS=two EVICTBENCH="$BIN" PEER_DIR="$TMP/peer" tools/bench_peer.sh
peer_error "bad REPS" "REPS" REPS=0 EVICTBENCH="$BIN" PEER_DIR="$TMP/peer" tools/bench_peer.sh
peer_error "missing model" "not found" EVICTBENCH="$BIN" PEER_DIR="$TMP/peer" tools/bench_peer.sh "$TMP/none.gguf"
[ -e "$TMP/peer" ] && { echo "FAIL peer: a refused run created $TMP/peer"; fail=1; }

# bench_membw (bench-peer's plain read of memory): a rate above zero, bad
# arguments refused with the usage line.
MEMBW=${MEMBW_BIN:-$(dirname "$BIN")/tools/bench_membw}
if [ -x "$MEMBW" ]; then
    out=$("$MEMBW" 16 1 2) || { echo "FAIL membw: exit status $?"; fail=1; }
    rate=$(echo "$out" | sed -n 's/^memory read: 16 MiB, 1 threads, 2 passes: median \([0-9.]*\) GB\/s.*/\1/p')
    if [ -n "$rate" ] && awk -v r="$rate" 'BEGIN { exit !(r > 0) }'; then
        echo "ok   membw: $out"
    else
        echo "FAIL membw: '$out'"; fail=1
    fi
    if "$MEMBW" 8 >/dev/null 2>"$TMP/err" || ! grep -q "MIB: expected an integer" "$TMP/err"; then
        echo "FAIL membw: 8 MiB accepted or no message:"; cat "$TMP/err"; fail=1
    fi
else
    echo "FAIL membw: $MEMBW not built"; fail=1
fi

if [ ! -f "$MODEL" ]; then
    echo "SKIP the model-backed checks: $MODEL absent (make deps downloads it)"
    exit $fail
fi

if ! "$BIN" bench --model "$MODEL" --threads 1 --prompt-len 16 --new 4 --batches 1,2 --tsv \
        >"$TMP/tsv" 2>"$TMP/err"; then
    echo "FAIL tsv run:"; cat "$TMP/err"; exit 1
fi
# Header, then prefill 16, decode batch 1, decode batch 2; every rate positive; the KV
# type (auto: f32 on the CPU), then parallel jobs and barriers per decode step (none on
# one thread).
got=$(cut -f1 "$TMP/tsv" | tr '\n' '|')
if [ "$got" != "test|prefill 16|decode batch 1|decode batch 2|" ]; then
    echo "FAIL tsv rows: $got"; cat "$TMP/tsv"; fail=1
elif ! awk -F'\t' 'NR > 1 && !(NF == 7 && $2 > 0 && $3 > 0 && $4 > 0 && $5 == "f32" && $6 == 0 && $7 == 0) { bad = 1 } END { exit bad }' "$TMP/tsv"; then
    echo "FAIL tsv values:"; cat "$TMP/tsv"; fail=1
else
    echo "ok   tsv table: $(tail -n +2 "$TMP/tsv" | tr '\t\n' ' ;')"
fi

# On two threads a decode step runs parallel jobs, and never more barriers than jobs.
if [ "$(nproc)" -ge 2 ]; then
    if ! "$BIN" bench --model "$MODEL" --threads 2 --prompt-len 16 --new 4 --batches 1 --tsv \
            >"$TMP/tsv2" 2>"$TMP/err"; then
        echo "FAIL tsv run on 2 threads:"; cat "$TMP/err"; exit 1
    fi
    if ! awk -F'\t' '$1 == "decode batch 1" { seen = 1; if (!($6 > 0 && $7 <= $6)) bad = 1 }
                     END { exit bad || !seen }' "$TMP/tsv2"; then
        echo "FAIL jobs per step on 2 threads:"; cat "$TMP/tsv2"; fail=1
    else
        echo "ok   jobs per step on 2 threads: $(awk -F'\t' '$1 == "decode batch 1" { print $6 " jobs, " $7 " barriers" }' "$TMP/tsv2")"
    fi
else
    echo "SKIP jobs per step on 2 threads: one CPU here"
fi
exit $fail
