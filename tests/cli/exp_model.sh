#!/bin/sh
# exp_model.sh - any sweep on any model (`exp --model NAME`) and budgets given
# as fractions of FullKV's mean generation length.  Without the model: the
# dry run names the model used in every point and changes every run key, a
# missing model's message names --model and the download command, bad
# budgets are refused with their JSON path.  With SmolLM2 (make deps): a
# config written for another model runs on it; the runs, the stored config and
# the report name it; the fractions become round(f x FullKV's mean length)
# slots and stay fractions on a rerun.  Runs from the repository root.
BIN=${EVICTBENCH_BIN:-./evictbench}
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
fail=0
no() { echo "FAIL: $*"; fail=1; }

# --model in a dry run: every point on the model given, other run keys
"$BIN" exp aime24_budget_sweep --dry-run --db "$TMP/none.db" > "$TMP/as_written" 2>&1 || no "dry run as written"
"$BIN" exp aime24_budget_sweep --model smollm2-135m --dry-run --db "$TMP/none.db" > "$TMP/moved" 2>&1 ||
    no "dry run with --model: $(tail -n 1 "$TMP/moved")"
n_pts=$(grep -c ' new ' "$TMP/moved")
[ "$n_pts" -gt 0 ] && [ "$(grep ' new ' "$TMP/moved" | grep -c 'smollm2-135m aime24')" = "$n_pts" ] ||
    no "--model: not every point names smollm2-135m"
grep -q 'deepseek' "$TMP/moved" && no "--model: the config's model is still listed"
awk '$3 == "new" {print $2}' "$TMP/as_written" | sort > "$TMP/k1"
awk '$3 == "new" {print $2}' "$TMP/moved" | sort > "$TMP/k2"
[ -s "$TMP/k2" ] && [ -z "$(comm -12 "$TMP/k1" "$TMP/k2")" ] || no "--model: run keys shared with the config's own model"

# the missing model: its download command and --model
if [ ! -e models/DeepSeek-R1-Distill-Qwen-7B ]; then
    "$BIN" exp aime24_budget_sweep --db "$TMP/aime.db" 2> "$TMP/err" && no "a missing model did not stop the sweep"
    grep -q 'huggingface-cli download deepseek-ai/DeepSeek-R1-Distill-Qwen-7B' "$TMP/err" ||
        no "the missing model's message lacks the download command: $(cat "$TMP/err")"
    grep -q -- '--model NAME' "$TMP/err" && grep -q 'MODEL=NAME' "$TMP/err" ||
        no "the missing model's message does not name --model: $(cat "$TMP/err")"
fi

# budgets: slots or fractions in (0, 1), nothing else
for b in 1.5 0 -0.25 '"x"' '[0.5, 0.5]'; do
    printf '{"models": "smollm2-135m", "datasets": "synthetic:2", "budgets": %s}\n' "$b" > "$TMP/b.json"
    "$BIN" exp "$TMP/b.json" --dry-run --db "$TMP/none.db" > /dev/null 2> "$TMP/err" &&
        no "budgets $b accepted"
    grep -q '\$\.budgets' "$TMP/err" || no "budgets $b: the message does not name \$.budgets: $(cat "$TMP/err")"
done

SMOL=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$SMOL" ] || ! command -v sqlite3 > /dev/null 2>&1; then
    echo "SKIP the runs on another model: $SMOL or the sqlite3 CLI absent (make deps)"
    exit $fail
fi
cat > "$TMP/f.json" <<'JSON'
{"name": "fractions", "models": "qwen3-8b", "datasets": "synthetic:3", "prompt": "chatml-boxed",
 "policies": ["fullkv", {"name": "streamingllm", "divide_length": 4}],
 "budgets": [0.5, 0.75], "batch_sizes": [3], "max_new_tokens": 16}
JSON
DB="$TMP/f.db"
"$BIN" exp "$TMP/f.json" --model smollm2-135m --db "$DB" --threads 1 --quiet 2> "$TMP/log" ||
    no "exp --model smollm2-135m: $(tail -n 3 "$TMP/log")"
q() { sqlite3 "$DB" "$1"; }
[ "$(q "SELECT COUNT(*) FROM runs WHERE status = 'ok'")" = 3 ] || no "$(q 'SELECT COUNT(*) FROM runs') runs, want 3"
[ "$(q "SELECT COUNT(*) FROM runs WHERE model <> 'smollm2-135m'")" = 0 ] || no "a run names another model"
q "SELECT config_json FROM experiments" | grep -q 'qwen3-8b' && no "the stored config still names qwen3-8b"
len=$(q "SELECT mean_gen_tokens FROM runs WHERE policy = 'fullkv'")
want=$(awk -v l="$len" 'BEGIN { a = int(0.5 * l + 0.5); b = int(0.75 * l + 0.5); if (a < 1) a = 1;
                                if (b < 1) b = 1; print a (a == b ? "" : " " b) }')
got=$(q "SELECT budget FROM runs WHERE policy = 'streamingllm' ORDER BY budget" | tr '\n' ' ' | sed 's/ $//')
[ "$got" = "$want" ] || no "budgets $got, want $want (0.5 and 0.75 of FullKV's $len tokens)"
"$BIN" exp "$TMP/f.json" --model smollm2-135m --db "$DB" --threads 1 2> "$TMP/log2" || no "rerun failed"
grep -q '0 run, .* skipped' "$TMP/log2" && ! grep -q ' [1-9][0-9]* run,' "$TMP/log2" ||
    no "a rerun ran points again: $(grep 'point(s)' "$TMP/log2")"
"$BIN" report --db "$DB" --out "$TMP/site" > /dev/null || no "report"
grep -q 'smollm2-135m' "$TMP/site/index.html" || no "the report does not name smollm2-135m"
[ $fail = 0 ] && echo "ok   --model: $n_pts points moved; fractions 0.5, 0.75 of $len tokens -> $want slots"
exit $fail
