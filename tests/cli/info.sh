#!/bin/sh
# info.sh - `evictbench info` refuses what is not a model file without
# blocking on it: a FIFO (a read would wait for a writer forever) and a
# device file.  Runs from the repository root.
BIN=${EVICTBENCH_BIN:-./evictbench}
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
fail=0
. tests/cli/lib/expect.sh
mkfifo "$TMP/fifo" || { echo "FAIL: mkfifo"; exit 1; }
# timeout: the bug this guards against is a hang
expect_error "a FIFO" "not a regular file" info "$TMP/fifo"
expect_error "a device" "not a regular file" info /dev/null
expect_error "a missing file" "" info "$TMP/none.gguf"
# The bytes a batch-1 token reads, against the checkpoints' shapes (f32: 4
# bytes a value): every matrix once, the embedding table one row (untied;
# the LM head is output.weight) or whole (tied: it is the LM head).
for d in tiny-llama tiny-llama-tied; do
    dir=tests/fixtures/models/$d
    want=$(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
h, f, L, V = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
hd = c.get("head_dim") or h // c["num_attention_heads"]
q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
layer = h * q + 2 * h * kv + q * h + 3 * h * f
print(4 * (L * layer + V * h + (0 if c.get("tie_word_embeddings") else h)))' "$dir/config.json")
    got=$("$BIN" info "$dir" | sed -n 's/^read a token *\([0-9]*\) bytes.*/\1/p')
    [ -n "$want" ] && [ "$got" = "$want" ] ||
        { echo "FAIL: info $d: read a token '$got' bytes, expected $want"; fail=1; }
done
# A real GGUF: the matrices' in-memory layout is reported (SmolLM2's Q4_1 and
# Q8_0 matrices are all repacked 8 rows at a time where AVX2 runs).
SMOL=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -f "$SMOL" ]; then
    out=$("$BIN" info --tensors "$SMOL") || { echo "FAIL: info $SMOL"; fail=1; }
    echo "$out" | grep -q "^layout " || { echo "FAIL: info shows no layout line"; fail=1; }
    if grep -q avx2 /proc/cpuinfo 2>/dev/null; then
        echo "$out" | grep -q "^layout          211 of 211 matrices" ||
            { echo "FAIL: info: not every SmolLM2 matrix repacked"; fail=1; }
        echo "$out" | grep -q "Q4_1  -> Q4_1  8 rows interleaved" ||
            { echo "FAIL: info --tensors shows no interleaved matrix"; fail=1; }
    fi
    out=$(EVICTBENCH_CPU_SIMD=scalar "$BIN" info "$SMOL")
    echo "$out" | grep -q "^layout          0 of 211 matrices" ||
        { echo "FAIL: info: the scalar kernels must read the file in place"; fail=1; }
else
    echo "SKIP info layout: $SMOL not present (make deps)"
fi
exit $fail
