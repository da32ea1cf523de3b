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
