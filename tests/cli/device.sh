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
expect_error "unknown device" "--device tpu: expected cpu, cuda or cuda:N" generate --model smollm2-135m --prompt hi --device tpu
# Every command that takes --device, in one list: the plain build refuses
# --device cuda in one line, and so does the CUDA build (./evictbench-cuda)
# on a machine with no usable GPU (CUDA_VISIBLE_DEVICES empty hides every GPU,
# so this holds on a GPU machine too), before loading anything: the model
# named here does not exist, so only the device check can answer.
each_command() { # name-prefix pattern
    expect_error "$1 generate" "$2" generate --model no-such-model --prompt hi --device cuda
    expect_error "$1 run" "$2" run --model no-such-model --dataset synthetic:2 --device cuda --db "$TMP/r.db"
    expect_error "$1 exp" "$2" exp quickstart --device cuda:1 --db "$TMP/r.db"
    expect_error "$1 calibrate" "$2" calibrate --model no-such-model --data synthetic:2 --layer 5 --out "$TMP/v.bin" --device cuda
    expect_error "$1 bench" "$2" bench --model no-such-model --device cuda
}
each_command "plain build:" "$no_cuda"
CUDA_BIN=${EVICTBENCH_CUDA_BIN:-./evictbench-cuda}
if [ -x "$CUDA_BIN" ]; then
    BIN_SAVED=$BIN
    BIN=$CUDA_BIN
    CUDA_VISIBLE_DEVICES= each_command "CUDA build, no GPU:" "no usable driver or device"
    BIN=$BIN_SAVED
    [ -e "$TMP/r.db" ] && { echo "FAIL: a refused run wrote $TMP/r.db"; fail=1; }
else
    echo "SKIP device.sh CUDA build: no $CUDA_BIN (make cuda builds it)"
fi
# cpu is the default and may be named; a dry run touches no backend
"$BIN" exp quickstart --device cpu --dry-run --db "$TMP/r.db" >"$TMP/out" 2>&1 || { cat "$TMP/out"; echo "FAIL --device cpu"; fail=1; }
exit $fail
