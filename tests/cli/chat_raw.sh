#!/bin/sh
# tests/cli/chat_raw.sh - `--chat raw` gives the text as it is, special tokens
# included: `generate` encodes the prompt exactly as `tokenize` does
# ("<|im_start|>" is one token), and `--` ends the options of both.
# Runs from the repository root; EVICTBENCH_BIN names the binary.
BIN=${EVICTBENCH_BIN:-./evictbench}
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
. tests/cli/lib/expect.sh

[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }

# Argument errors found before the model is read.
expect_error "two arguments after --" "exactly one" generate --model smollm2-135m -- a b
expect_error "nothing after --" "exactly one" generate --model smollm2-135m --
expect_error "prompt twice" "twice" generate --model smollm2-135m --prompt a -- b
expect_error "tokenize: two after --" "exactly one" tokenize --model smollm2-135m -- a b

if [ ! -f "$MODEL" ]; then
    echo "SKIP the model-backed checks: $MODEL absent (make deps downloads it)"
    exit $fail
fi

TEXT='<|im_start|>user
What is 2+2?<|im_end|>
<|im_start|>assistant
'
count_of() { sed -n 's/^\([0-9]*\) tokens$/\1/p' "$1"; }

"$BIN" tokenize --model smollm2-135m --chat raw "$TEXT" >"$TMP/tok" 2>&1 || { echo "FAIL tokenize"; cat "$TMP/tok"; exit 1; }
"$BIN" tokenize --model smollm2-135m --chat raw --no-special "$TEXT" >"$TMP/plain" 2>&1 || { echo "FAIL tokenize --no-special"; exit 1; }
n_special=$(count_of "$TMP/tok"); n_plain=$(count_of "$TMP/plain")
# The special tokens are matched: 3 x <|im_start|>/<|im_end|> as one token each.
if [ "$(grep -c '^ *[0-9]*  <|im_start|>$' "$TMP/tok")" -ne 2 ] || [ "$n_special" -ge "$n_plain" ]; then
    echo "FAIL tokenize --chat raw: $n_special tokens (plain text: $n_plain)"; cat "$TMP/tok"; fail=1
else
    echo "ok   tokenize --chat raw: $n_special tokens, $n_plain as plain text"
fi

# generate --chat raw encodes the same tokens: prompt_tokens in its JSONL line.
for form in prompt dashdash; do
    if [ $form = prompt ]; then
        "$BIN" generate --model smollm2-135m --chat raw --greedy --max-new 1 --out "$TMP/g.jsonl" --prompt "$TEXT" >/dev/null 2>"$TMP/err"
    else
        "$BIN" generate --model smollm2-135m --chat raw --greedy --max-new 1 --out "$TMP/g.jsonl" -- "$TEXT" >/dev/null 2>"$TMP/err"
    fi
    got=$(sed -n 's/.*"prompt_tokens": *\([0-9]*\).*/\1/p' "$TMP/g.jsonl")
    if [ "$got" = "$n_special" ]; then echo "ok   generate --chat raw ($form): $got prompt tokens"
    else echo "FAIL generate --chat raw ($form): '$got' prompt tokens, tokenize says $n_special"; cat "$TMP/err"; fail=1; fi
done

# After --, a text that looks like an option is the text.
"$BIN" tokenize --model smollm2-135m --chat raw -- "--max-new" >"$TMP/dash" 2>&1
if grep -q '^round trip: exact' "$TMP/dash"; then echo "ok   tokenize -- --max-new"
else echo "FAIL tokenize -- --max-new"; cat "$TMP/dash"; fail=1; fi
exit $fail
