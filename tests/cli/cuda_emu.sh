#!/bin/sh
# cuda_emu.sh - the CUDA backend's own kernels, run on the CPU emulator
# (kernels/cuda/emu/README.md), so what has not yet run on a GPU runs in
# every `make test`:
#   - cuda_selftest's groups for the fused layer blocks and the fused KV
#     append, the step graphs, the layer ops and the batched compression
#     ops at a few hundred slots (batch-small: the tiles, pads, per-layer
#     runs, bf16 scores), each against the CPU backend (the self-test's
#     tolerances; the full batch group takes about 11 minutes here);
#   - the fixture models' logits against transformers' (gpu_check
#     fixtures, 1e-4, as devcheck's step 3);
#   - decode steps replayed as step graphs against the same steps op by op
#     (gpu_check graph: bit for bit);
#   - `generate --device cuda` on SmolLM2 with R-KV compressing: the same
#     text with all of them off, with the fused blocks and the fused append
#     on, and with the step graphs on too (which must really replay);
#   - a whole R-KV decode against the CPU backend in lockstep (gpu_check
#     compare on the tiny Qwen2 fixture: every decisive step agrees, the
#     keep-sets overlap fully);
#   - the main job on the device: `exp --device cuda` with devcheck's
#     two-point config (SmolLM2, one AIME-24 problem, 4 tokens), its rows
#     (device cuda, status ok, R-KV compressing) and its report.
# Skips, saying so, where the emulator was not built (no CUDA headers).
EMU=${EVICTBENCH_EMU_BIN:-build/evictbench-emu}
CHECK=${EVICTBENCH_EMU_CHECK:-build/tools/gpu_check-emu}
SELFTEST=${EVICTBENCH_EMU_SELFTEST:-kernels/cuda/build-emu/cuda_selftest}
if [ ! -x "$EMU" ] || [ ! -x "$CHECK" ] || [ ! -x "$SELFTEST" ]; then
    echo "SKIP cuda_emu.sh: the CUDA emulator is not built (make cuda-emu; it needs the CUDA headers)"
    exit 0
fi
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
fail=0
# One thread: OpenBLAS then sums every product in one order, run after run.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

if ! "$SELFTEST" --only fused,graph,layer,batch-small >"$TMP/selftest" 2>&1; then
    grep -v '^  ok' "$TMP/selftest" | tail -n 20
    echo "FAIL: cuda_selftest on the emulator"; fail=1
fi
grep -q 'cuda_selftest: [1-9][0-9]* passed, 0 failed' "$TMP/selftest" ||
    { echo "FAIL: no self-test case ran"; fail=1; }

if ! "$CHECK" fixtures cuda >"$TMP/fixtures" 2>&1; then
    grep -v '^  ok' "$TMP/fixtures" | tail -n 20
    echo "FAIL: gpu_check fixtures on the emulator"; fail=1
fi

"$CHECK" compare --model tests/fixtures/models/tiny-qwen2 --policy rkv --budget 32 --new 64 \
    --prompt-len 48 --device cuda >"$TMP/compare" 2>&1
grep -q '"agree": 1.000000.*"compressions": [1-9].*"overlap_min": 1.000000' "$TMP/compare" ||
    { tail -n 3 "$TMP/compare"; echo "FAIL: the R-KV decode on the emulated GPU left the CPU's"; fail=1; }

MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$MODEL" ]; then
    echo "SKIP cuda_emu.sh model checks: no $MODEL (make deps fetches it)"
    exit $fail
fi
"$CHECK" graph --model "$MODEL" --batch 3 --prompt-len 16 --steps 6 --device cuda >"$TMP/graph" 2>&1
grep -q '"worst_rel": 0,.*"replays": [1-9].*"ok": true' "$TMP/graph" ||
    { tail -n 5 "$TMP/graph"; echo "FAIL: step graphs differ from the ops one by one"; fail=1; }

prompt="Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether?"
run() { # name, then the environment's switches
    name=$1; shift
    env "$@" "$EMU" generate --model smollm2-135m --device cuda --weights native --prompt "$prompt" \
        --max-new 24 --policy rkv --budget 48 --stats >"$TMP/$name.txt" 2>"$TMP/$name.err" ||
        { tail -n 5 "$TMP/$name.err"; echo "FAIL: generate --device cuda ($name)"; fail=1; }
}
run plain EVICTBENCH_CUDA_FUSED=0 EVICTBENCH_CUDA_ROPE_APPEND=0 EVICTBENCH_CUDA_GRAPH=0
run fused EVICTBENCH_CUDA_GRAPH=0
run graphs EVICTBENCH_CUDA_GRAPH=1
grep -Eq ' [1-9][0-9]* compressions' "$TMP/plain.err" || { echo "FAIL: R-KV did not compress"; fail=1; }
grep -q 'fused layer blocks per decode step: 30.0 attention inputs' "$TMP/fused.err" ||
    { grep fused "$TMP/fused.err"; echo "FAIL: the fused blocks did not serve every layer"; fail=1; }
grep -q 'fused layer blocks per decode step: 0.0 attention inputs' "$TMP/plain.err" ||
    { echo "FAIL: EVICTBENCH_CUDA_FUSED=0 still fused"; fail=1; }
grep -Eq 'step graphs: 0\.[1-9][0-9]* graph launches' "$TMP/graphs.err" ||
    { grep graphs "$TMP/graphs.err"; echo "FAIL: no step graph replayed"; fail=1; }
[ -s "$TMP/plain.txt" ] || { echo "FAIL: no text"; fail=1; }
for v in fused graphs; do
    cmp -s "$TMP/plain.txt" "$TMP/$v.txt" ||
        { echo "FAIL: $v: another text"; cat "$TMP/plain.txt" "$TMP/$v.txt"; fail=1; }
done

python3 tools/devcheck/exp_check.py config experiments/devcheck_aime24.json "$TMP/exp.json" \
    smollm2-135m 4 1
if "$EMU" exp "$TMP/exp.json" --device cuda --db "$TMP/exp.db" --data-dir datasets/data >"$TMP/exp.log" 2>&1 &&
   "$EMU" report --db "$TMP/exp.db" --out "$TMP/report" --data datasets/data >>"$TMP/exp.log" 2>&1; then
    # devcheck's judge: 2 runs of device cuda, status ok, the sample's tokens,
    # R-KV compressing and FullKV not, the report written
    python3 tools/devcheck/exp_check.py judge "$TMP/exp.db" cuda 2 1 "$TMP/report" >"$TMP/judge" ||
        { cat "$TMP/judge"; echo "FAIL: exp --device cuda on the emulator"; fail=1; }
else
    tail -n 5 "$TMP/exp.log"; echo "FAIL: exp --device cuda on the emulator"; fail=1
fi
exit $fail
