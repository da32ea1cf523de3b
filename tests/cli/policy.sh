#!/bin/sh
# tests/cli/policy.sh - `evictbench generate --policy ... --budget ... --stats`:
# bad policies and budgets give one "evictbench: ..." line and a non-zero exit
# before the weights load; a prompt longer than the budget is compressed at
# prefill and --stats reports it.  Runs from the repository root;
# EVICTBENCH_BIN names the binary.
BIN=${EVICTBENCH_BIN:-./evictbench}
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0

. tests/cli/lib/expect.sh

[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
expect_error "budget without policy" "needs --policy" generate --model smollm2-135m --prompt hi --budget 64
expect_error "budget 0" "budget" generate --model smollm2-135m --prompt hi --policy rkv --budget 0
expect_error "negative budget" "budget" generate --model smollm2-135m --prompt hi --policy rkv --budget -4
if [ ! -f "$MODEL" ]; then
    echo "SKIP the model-backed checks: $MODEL absent (make deps downloads it)"
    exit $fail
fi
expect_error "unknown policy" "unknown policy 'lru'" generate --model smollm2-135m --prompt hi --policy lru --budget 64
expect_error "unknown key" "valid: lambda, window" generate --model smollm2-135m --prompt hi --policy rkv:lamda=0.1 --budget 64
expect_error "out of range" "lambda=2" generate --model smollm2-135m --prompt hi --policy rkv:lambda=2 --budget 64
expect_error "budget <= window" "window" generate --model smollm2-135m --prompt hi --policy rkv --budget 8
expect_error "no budget" "budget > 0" generate --model smollm2-135m --prompt hi --policy h2o-rkv

# A chat prompt of ~40 tokens with budget 16: compressed once, at prefill.
"$BIN" generate --model smollm2-135m --prompt "What is 12*7? Answer briefly." --max-new 2 \
    --policy rkv --budget 16 --stats >"$TMP/out" 2>"$TMP/err"
if [ $? -ne 0 ] || ! grep -q "policy rkv:lambda=0.1.*budget 16: 1 compressions" "$TMP/err" ||
   ! grep -q "policy time: .* ms per batch step .*: score .*, select .*, compact .* ms per batch step" "$TMP/err" ||
   ! grep -q "backend calls per compression: [0-9]" "$TMP/err" || ! grep -q "policy kv: peak" "$TMP/err" ||
   ! grep -q "host vs device per decode step: no device clock on the cpu backend" "$TMP/err"; then
    echo "FAIL stats:"; cat "$TMP/err"; fail=1
else
    echo "ok   stats: $(grep compressions "$TMP/err")"
fi

# Sentence statistics: skipkv-sent prints its trace line; a missing vector fails.
"$BIN" generate --model smollm2-135m --prompt "Say two short sentences." --max-new 16 \
    --policy skipkv-sent --budget 16 --stats >"$TMP/out" 2>"$TMP/err"
if [ $? -ne 0 ] || ! grep -q "^trace: [0-9]* sentences, N_o [0-9]*.*redundant pairs of [0-9]* compared.*PSS mean" "$TMP/err"; then
    echo "FAIL trace stats:"; cat "$TMP/err"; fail=1
else
    echo "ok   trace stats: $(grep '^trace:' "$TMP/err")"
fi
expect_error "missing vector" "nope.bin" generate --model smollm2-135m --prompt hi --policy seal \
    --steer-vector "$TMP/nope.bin"
exit $fail
