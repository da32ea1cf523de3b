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
exit $fail
