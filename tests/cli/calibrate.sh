#!/bin/sh
# tests/cli/calibrate.sh - `evictbench calibrate` end to end: bad options fail
# with one "evictbench: ..." line; on SmolLM2 with one MATH-train problem whose
# sampled response holds a reflection step, the vector file's header counts
# equal an independent count of the same response (tools/golden/seal_steps.py
# over `generate` with the same prompt and seed), its size is the header plus
# dim floats, and seal steers with it.  Needs the model and the shared
# datasets; says so and skips those checks when either is absent.
BIN=${EVICTBENCH_BIN:-./evictbench}
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
DATA=${EVICTBENCH_DATA:-../shared/datasets}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0

. tests/cli/lib/expect.sh

[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
expect_error "no layer" "required" calibrate --model smollm2-135m --data synthetic:2 --out "$TMP/v.bin"
expect_error "bad think" "--think maybe" calibrate --model smollm2-135m --data synthetic:2 --layer 20 \
    --out "$TMP/v.bin" --think maybe
expect_error "bad temperature" "temperature" calibrate --model smollm2-135m --data synthetic:2 \
    --layer 20 --out "$TMP/v.bin" --temperature -1
if [ ! -f "$MODEL" ] || [ ! -f "$DATA/math_train_1000.jsonl" ]; then
    echo "SKIP the calibration run: needs $MODEL (make deps) and $DATA/math_train_1000.jsonl"
    exit $fail
fi
expect_error "layer out of range" "outside" calibrate --model smollm2-135m --data synthetic:2 \
    --layer 30 --out "$TMP/v.bin"

# Problem 17 of the MATH training pool, sampled with seed 1 + 17: its 4 steps
# include one reflection step ("Step 3: Verify that ...").
SAMPLING="--temperature 0.8 --top-p 0.95 --max-new 256"
"$BIN" calibrate --model smollm2-135m --data math_train_1000 --data-dir "$DATA" --layer 20 \
    --out "$TMP/v.bin" --offset 17 --limit 1 --batch 1 --split pairs --think always \
    --seed 1 $SAMPLING >"$TMP/out" 2>"$TMP/err"
cal_rc=$?
python3 - "$DATA/math_train_1000.jsonl" >"$TMP/prompt.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
seal = ("Answer the following questions. You should think step-by-step and put your final "
        "answer within \\boxed{}.\nQuestion: ")
print(json.dumps({"id": rows[17]["id"], "prompt": seal + rows[17]["problem"]}))
PY
"$BIN" generate --model smollm2-135m --chat chatml --prompts "$TMP/prompt.jsonl" --seed 18 \
    $SAMPLING --out "$TMP/gen.jsonl" 2>"$TMP/gerr" || { echo "FAIL generate:"; cat "$TMP/gerr"; exit 1; }
want=$(python3 tools/golden/seal_steps.py "$TMP/gen.jsonl")
if [ $cal_rc -ne 0 ]; then
    # Sampling follows the float rounding of this CPU's BLAS kernels: where the
    # response differs and holds no reflection step, refusing is right.
    case "$want" in
    "reflection 0 transition 0 "*)
        if grep -q "no reflection/transition steps" "$TMP/err"; then
            echo "ok   calibrate refused a response without reflection steps ($want; the sampled"
            echo "     response differs on this CPU, so the vector checks below are skipped)"
            exit $fail
        fi;;
    esac
    echo "FAIL calibrate (reference: $want):"; cat "$TMP/err"; exit 1
fi
head -c 1024 "$TMP/v.bin" | sed '/^$/q' >"$TMP/header"
field() { sed -n "s/^$1: //p" "$TMP/header"; }
got="reflection $(field n_reflection) transition $(field n_transition) execution $(field n_execution)"
if [ "$got" != "$want" ] || [ "$(field n_reflection)" -lt 1 ]; then
    echo "FAIL counts: header '$got', reference '$want'"; fail=1
else
    echo "ok   counts: $got"
fi
kept=$(( $(field n_correct) + $(field n_incorrect) ))
size=$(wc -c <"$TMP/v.bin")
hsize=$(wc -c <"$TMP/header")
if [ "$kept" -ne 1 ] || [ "$(field dim)" != 576 ] || [ "$(field layer)" != 20 ] ||
   [ "$size" -ne $((hsize + 4 * 576)) ] || ! grep -q "^decoding: temperature=0.8 " "$TMP/header"; then
    echo "FAIL header (size $size, header $hsize bytes):"; cat "$TMP/header"; fail=1
else
    echo "ok   header: 1 response, layer 20, dim 576, $size bytes"
fi

# The vector steers: seal adds it at split tokens.
"$BIN" generate --model smollm2-135m --prompts "$TMP/prompt.jsonl" --max-new 96 --greedy \
    --policy seal --steer-vector "$TMP/v.bin" --stats --out "$TMP/out" 2>"$TMP/err"
if [ $? -ne 0 ] || ! grep -q "^steering: alpha -1.0000 at the end, [1-9][0-9]* rows\? steered" "$TMP/err"; then
    echo "FAIL seal with the vector:"; cat "$TMP/err"; fail=1
else
    echo "ok   seal: $(grep '^steering:' "$TMP/err")"
fi
expect_error "vector of another layer" "calibrated at layer 20" generate --model smollm2-135m \
    --prompt hi --policy seal:layer=10 --steer-vector "$TMP/v.bin"
exit $fail
