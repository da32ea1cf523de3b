#!/bin/sh
# grade.sh - `evictbench grade` on the committed grading cases: one verdict per
# line matching the reference's, the accuracy line, GSM8K references, and
# malformed input stopping before any output.  Runs from the repository root.
BIN=${EVICTBENCH_BIN:-./evictbench}
if [ ! -x "$BIN" ] || ! "$BIN" grade --help >/dev/null 2>&1; then
    echo "skip: $BIN has no grade command"
    exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for fx in tests/fixtures/grading_cases.jsonl tests/fixtures/grade_extra.jsonl; do
    "$BIN" grade "$fx" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; fail "grade $fx exited non-zero"; }
    n=$(grep -c . "$fx")
    [ "$(wc -l <"$tmp/out")" -eq "$n" ] || fail "$fx: expected $n output lines, got $(wc -l <"$tmp/out")"
    grep -o '"expected": *[a-z]*' "$fx" | sed 's/.*: *//' >"$tmp/want"
    grep -o '"correct": *[a-z]*' "$tmp/out" | sed 's/.*: *//' >"$tmp/got"
    cmp -s "$tmp/want" "$tmp/got" || fail "$fx: verdicts differ from the expected ones"
    right=$(grep -c true "$tmp/want")
    line=$(awk -v r="$right" -v n="$n" 'BEGIN { printf "accuracy: %d/%d = %.2f%%", r, n, 100 * r / n }')
    grep -qxF "$line" "$tmp/err" || fail "$fx: missing '$line' on stderr (got: $(cat "$tmp/err"))"
done

# pred is the normalised prediction
printf '{"model_output": "so \\\\boxed{\\\\dfrac{3}{4}}", "reference": "0.75"}\n' >"$tmp/one.jsonl"
"$BIN" grade "$tmp/one.jsonl" >"$tmp/out" 2>/dev/null || fail "one.jsonl"
grep -qF '{"pred":"\\frac{3}{4}","correct":true}' "$tmp/out" || fail "pred/correct line: $(cat "$tmp/out")"

# GSM8K: the reference after '####', by option, by field, from stdin
printf '{"model_output": "She earns $1,080 a week.", "reference": "9*120 = 1080\\n#### 1,080"}\n' >"$tmp/g.jsonl"
"$BIN" grade --dataset gsm8k "$tmp/g.jsonl" 2>/dev/null | grep -q '"correct":true' || fail "--dataset gsm8k"
"$BIN" grade "$tmp/g.jsonl" 2>/dev/null | grep -q '"correct":false' || fail "math rule on a #### reference"
printf '{"model_output": "It is 12.", "reference": "#### 12", "dataset": "gsm8k_test"}\n' |
    "$BIN" grade - 2>/dev/null | grep -q '"correct":true' || fail "dataset field from stdin"

# malformed input: FILE:LINE, non-zero exit, nothing on stdout
printf '{"model_output": "\\\\boxed{1}", "reference": "1"}\n\n{"model_output": "x"\n' >"$tmp/bad.jsonl"
if "$BIN" grade "$tmp/bad.jsonl" >"$tmp/out" 2>"$tmp/err"; then fail "malformed JSON accepted"; fi
[ ! -s "$tmp/out" ] || fail "output written before the error"
grep -q "^evictbench: $tmp/bad.jsonl:3: " "$tmp/err" || fail "no FILE:LINE in: $(cat "$tmp/err")"
printf '{"model_output": "x"}\n' >"$tmp/noref.jsonl"
if "$BIN" grade "$tmp/noref.jsonl" >/dev/null 2>"$tmp/err"; then fail "missing reference accepted"; fi
grep -q "noref.jsonl:1: .*reference" "$tmp/err" || fail "missing field message: $(cat "$tmp/err")"
# invalid UTF-8 (a stray 0xff byte) is refused with its line and byte
printf '{"model_output": "\\\\boxed{1}", "reference": "1"}\n{"model_output": "\\\\boxed{2}\377", "reference": "2"}\n' >"$tmp/utf8.jsonl"
if "$BIN" grade "$tmp/utf8.jsonl" >"$tmp/out" 2>"$tmp/err"; then fail "invalid UTF-8 accepted"; fi
grep -q "utf8.jsonl:2: not valid UTF-8" "$tmp/err" || fail "invalid UTF-8 message: $(cat "$tmp/err")"
[ ! -s "$tmp/out" ] || fail "output written before the UTF-8 error"
if "$BIN" grade "$tmp/none.jsonl" >/dev/null 2>&1; then fail "missing file accepted"; fi
if "$BIN" grade --dataset aime "$tmp/g.jsonl" >/dev/null 2>&1; then fail "bad --dataset accepted"; fi
echo "ok: grade CLI"
