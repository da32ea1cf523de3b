#!/bin/sh
# devcheck.sh - the one script a GPU machine runs: build the CPU harness and
# the CUDA backend, run the CUDA self-test (every backend op against the CPU
# backend), then time generation.
#
#   tools/devcheck.sh [DEVICE]          DEVICE: CUDA device index (default 0)
#
# Environment: MODEL (a registry name or GGUF path, default smollm2-135m, whose
# file is models/SmolLM2-135M-Instruct.Q4_1.gguf), NEW (tokens generated per
# timing, default 128), JOBS (make -j, default: all cores).
#
# The timing is CPU only until `evictbench generate` has a --backend option;
# once its --help lists one, the same generation is also timed with
# --backend cuda.  Timing steps are skipped, and say so, when the model file
# is absent (the file is not in git; `make deps` fetches it).  Exit status:
# 0 when every step that ran passed, 1 otherwise.
set -u
cd "$(dirname "$0")/.." || exit 1

DEVICE=${1:-0}
MODEL=${MODEL:-smollm2-135m}
NEW=${NEW:-128}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
MODEL_FILE=models/SmolLM2-135M-Instruct.Q4_1.gguf
[ "$MODEL" != smollm2-135m ] && MODEL_FILE=$MODEL
PROMPT="Explain in a few sentences why the sky is blue."
failed=0

step() { printf '\n== devcheck: %s\n' "$*"; }
fail() { echo "devcheck: FAILED: $*"; failed=1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# Runs "$@", prints its wall time; returns its status.
timed() {
    t0=$(now_ms)
    "$@"
    rc=$?
    echo "devcheck: $(( $(now_ms) - t0 )) ms: $*"
    return $rc
}

step "machine"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L
command -v nvcc >/dev/null 2>&1 && nvcc --version | tail -n 1
echo "cores: $JOBS"

step "build (CPU)"
timed make -j"$JOBS" evictbench || fail "make evictbench"

step "build (CUDA)"
if timed make -j"$JOBS" cuda; then
    step "cuda_selftest on device $DEVICE"
    timed kernels/cuda/build/cuda_selftest "$DEVICE" || fail "cuda_selftest"
else
    fail "make cuda"
fi

if [ ! -x ./evictbench ]; then
    fail "no ./evictbench: timing skipped"
elif [ ! -s "$MODEL_FILE" ]; then
    step "timing skipped: $MODEL_FILE is absent (make deps fetches it)"
else
    step "CPU: evictbench bench (prefill 512, decode at batch 1/4/16)"
    timed ./evictbench bench --model "$MODEL" --prompt-len 512 --new "$NEW" ||
        fail "evictbench bench"
    step "CPU: evictbench generate, $NEW tokens"
    timed ./evictbench generate --model "$MODEL" --prompt "$PROMPT" --max-new "$NEW" \
        --stats >/dev/null || fail "evictbench generate (cpu)"
    if ./evictbench generate --help 2>&1 | grep -q -- '--backend'; then
        step "CUDA: evictbench generate, $NEW tokens"
        timed ./evictbench generate --model "$MODEL" --prompt "$PROMPT" --max-new "$NEW" \
            --stats --backend cuda >/dev/null || fail "evictbench generate (cuda)"
    else
        step "CUDA generation skipped: evictbench generate has no --backend option yet"
    fi
fi

step "done"
if [ "$failed" -ne 0 ]; then
    echo "devcheck: some steps failed (see FAILED above)"
    exit 1
fi
echo "devcheck: all steps that ran passed"
