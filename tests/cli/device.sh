#!/bin/sh
# device.sh - --device on every command that runs a model: cpu is accepted,
# an unknown device is refused, and in a build without the CUDA backend
# (the plain `make`) --device cuda says so in one line instead of running on
# the CPU.  Nothing loads a model: the checks come first.
BIN=${EVICTBENCH_BIN:-./evictbench}
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
fail=0
. tests/cli/lib/expect.sh
no_cuda="this build has no CUDA backend (make cuda"
expect_error "generate cuda" "$no_cuda" generate --model smollm2-135m --prompt hi --device cuda
expect_error "run cuda" "$no_cuda" run --model smollm2-135m --dataset synthetic:2 --device cuda
expect_error "exp cuda" "$no_cuda" exp quickstart --device cuda:1
expect_error "calibrate cuda" "$no_cuda" calibrate --model smollm2-135m --data synthetic:2 --layer 5 --out "$TMP/v.bin" --device cuda
expect_error "bench cuda" "$no_cuda" bench --model smollm2-135m --device cuda
expect_error "unknown device" "--device tpu: expected cpu, cuda or cuda:N" generate --model smollm2-135m --prompt hi --device tpu
# cpu is the default and may be named; a dry run touches no backend
"$BIN" exp quickstart --device cpu --dry-run --db "$TMP/r.db" >"$TMP/out" 2>&1 || { cat "$TMP/out"; echo "FAIL --device cpu"; fail=1; }
exit $fail
