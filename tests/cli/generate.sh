#!/bin/sh
# tests/cli/generate.sh - `evictbench generate` end to end: bad input gives one
# "evictbench: ..." line and a non-zero exit; the chat answer matches
# transformers' greedy output; a batch gives the same lines as one at a time.
# Runs from the repository root; EVICTBENCH_BIN names the binary.
BIN=${EVICTBENCH_BIN:-./evictbench}
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0

# expect_error NAME PATTERN ARGS... (tests/cli/lib/expect.sh): one "evictbench: ..." line.
. tests/cli/lib/expect.sh

[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
"$BIN" generate --help >/dev/null 2>&1 || { echo "FAIL: $BIN has no generate command"; exit 1; }

# Input errors found before the model is read.
expect_error "max-new 0" "" generate --model smollm2-135m --prompt hi --max-new 0
expect_error "unknown chat template" "" generate --model smollm2-135m --chat llama9 --prompt hi
expect_error "empty prompt" "" generate --model smollm2-135m --prompt ""
expect_error "no prompt" "" generate --model smollm2-135m
expect_error "greedy with temperature" "" generate --model smollm2-135m --prompt hi --greedy --temperature 0.7
expect_error "missing prompts file" "" generate --model smollm2-135m --prompts "$TMP/none.jsonl"
expect_error "bad top-p" "" generate --model smollm2-135m --prompt hi --top-p 1.5

if [ ! -f "$MODEL" ]; then
    echo "SKIP the model-backed checks: $MODEL absent (make deps downloads it)"
    exit $fail
fi

printf '{"id": 1, "prompt": "ok"}\n{"id": 2, "prompt": "\377\376 broken"}\n' >"$TMP/bad_utf8.jsonl"
expect_error "non-UTF-8 prompt file" "" generate --model smollm2-135m --prompts "$TMP/bad_utf8.jsonl"
printf '{"id": 1, "prompt": ""}\n' >"$TMP/empty.jsonl"
expect_error "empty prompt in a file" "" generate --model smollm2-135m --prompts "$TMP/empty.jsonl"
printf '{"id": 1, "text": "no prompt field"}\n' >"$TMP/noprompt.jsonl"
expect_error "line without prompt" "" generate --model smollm2-135m --prompts "$TMP/noprompt.jsonl"
printf 'not json\n' >"$TMP/notjson.jsonl"
expect_error "line not JSON" "" generate --model smollm2-135m --prompts "$TMP/notjson.jsonl"

# A prompt longer than the 8192-token context.
awk 'BEGIN { printf "{\"id\": 1, \"prompt\": \""; for (i = 0; i < 9000; i++) printf "word%d ", i; print "\"}" }' >"$TMP/long.jsonl"
expect_error "prompt longer than the context" "" generate --model smollm2-135m --prompts "$TMP/long.jsonl" --max-new 4
# A batch that cannot fit: 2000 sequences x 8000 tokens of KV cache, and a tight explicit limit.
awk 'BEGIN { for (i = 0; i < 2000; i++) printf "{\"id\": %d, \"prompt\": \"hello %d\"}\n", i, i }' >"$TMP/many.jsonl"
expect_error "huge batch" "" generate --model smollm2-135m --prompts "$TMP/many.jsonl" --batch 2000 --max-new 8000
grep -q 'estimated' "$TMP/err" || { echo "FAIL huge batch: no estimate in the message"; fail=1; }
expect_error "memory limit" "" generate --model smollm2-135m --prompt hi --mem-limit 100
# --out is checked before generating: nothing is streamed, no time is spent
expect_error "unwritable --out" "--out $TMP/nodir/x.jsonl: cannot write" generate --model smollm2-135m --prompt hi --max-new 4 --out "$TMP/nodir/x.jsonl"
[ -s "$TMP/out" ] && { echo "FAIL unwritable --out: generated before failing"; fail=1; }
expect_error "--out a directory" "not a regular file" generate --model smollm2-135m --prompt hi --max-new 4 --out "$TMP"

# The chat answer equals transformers' greedy output (tools/golden/gen_models.py) in
# exact mode (--weights f32: weights dequantized as transformers computes).
want=$(cat tests/fixtures/models/smollm2-chat-answer.txt)
got=$("$BIN" generate --model smollm2-135m --weights f32 --chat chatml --prompt "What is 12*7? Answer briefly." --greedy --max-new 40 2>"$TMP/err")
if [ "$got" = "$want" ]; then echo "ok   chat answer: $got"
else echo "FAIL chat answer: got '$got', want '$want'"; cat "$TMP/err"; fail=1; fi

# A ragged batch writes the same lines as one prompt at a time (greedy and seeded sampling).
cat >"$TMP/p.jsonl" <<'EOF'
{"id": 1, "prompt": "What is 12*7? Answer briefly."}
{"id": "b", "prompt": "Name a color."}
{"id": 3, "prompt": "Write one sentence about the sea."}
EOF
for mode in "--greedy" "--temperature 0.8 --top-p 0.9 --top-k 40 --seed 7"; do
    # shellcheck disable=SC2086
    "$BIN" generate --model smollm2-135m --prompts "$TMP/p.jsonl" --max-new 24 --batch 1 $mode >"$TMP/one.jsonl" 2>"$TMP/err" || { cat "$TMP/err"; fail=1; }
    # shellcheck disable=SC2086
    "$BIN" generate --model smollm2-135m --prompts "$TMP/p.jsonl" --max-new 24 --batch 3 $mode --out "$TMP/all.jsonl" 2>"$TMP/err" || { cat "$TMP/err"; fail=1; }
    if [ "$(wc -l <"$TMP/one.jsonl")" -eq 3 ] && cmp -s "$TMP/one.jsonl" "$TMP/all.jsonl"; then
        echo "ok   batch == one at a time ($mode)"
    else
        echo "FAIL batch differs ($mode)"; diff "$TMP/one.jsonl" "$TMP/all.jsonl"; fail=1
    fi
done
grep -q '"finish":"eos"' "$TMP/one.jsonl" || grep -q '"finish":"length"' "$TMP/one.jsonl" || { echo "FAIL no finish field"; fail=1; }

# --ignore-eos: exactly --max-new tokens, for an answer that otherwise ends early.
printf '{"id": 1, "prompt": "What is 12*7? Answer briefly."}\n' >"$TMP/short.jsonl"
"$BIN" generate --model smollm2-135m --chat chatml --prompts "$TMP/short.jsonl" --max-new 40 --greedy >"$TMP/eos.jsonl" 2>"$TMP/err" || { cat "$TMP/err"; fail=1; }
"$BIN" generate --model smollm2-135m --chat chatml --prompts "$TMP/short.jsonl" --max-new 40 --ignore-eos --greedy >"$TMP/noeos.jsonl" 2>"$TMP/err" || { cat "$TMP/err"; fail=1; }
if grep -q '"finish":"eos"' "$TMP/eos.jsonl" && grep -q '"gen_tokens":40,"finish":"length"' "$TMP/noeos.jsonl"; then
    echo "ok   --ignore-eos generates exactly --max-new tokens"
else
    echo "FAIL --ignore-eos"; cat "$TMP/eos.jsonl" "$TMP/noeos.jsonl"; fail=1
fi
exit $fail
