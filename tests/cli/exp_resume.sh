#!/bin/sh
# tests/cli/exp_resume.sh - `evictbench exp` survives SIGKILL: a small sweep on
# SmolLM2 is killed with kill -9 at random moments several times, then rerun
# to the end; the database must hold every point exactly once, every run with
# all its samples, and pass PRAGMA integrity_check.  Also: config errors name
# the JSON path, a missing model stops the sweep before anything runs.
# Runs from the repository root; EVICTBENCH_BIN names the binary.
BIN=${EVICTBENCH_BIN:-./evictbench}
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0

[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
if ! "$BIN" exp --help >/dev/null 2>&1; then
    echo "SKIP: this build has no 'exp' command"
    exit 0
fi

# Errors found before anything runs: one "evictbench: ..." line, non-zero exit.
cat >"$TMP/bad.json" <<'EOF'
{"models": "smollm2-135m", "datasets": "synthetic:2", "policies": ["fullkv", {"name": "rkv", "budget": "x"}]}
EOF
"$BIN" exp "$TMP/bad.json" --db "$TMP/bad.db" 2>"$TMP/err"
if [ $? -eq 0 ] || ! grep -q '\$\.policies\[1\]\.budget' "$TMP/err" || [ -e "$TMP/bad.db" ]; then
    echo "FAIL bad config:"; cat "$TMP/err"; fail=1
else
    echo "ok   bad config: $(cat "$TMP/err")"
fi
if [ ! -e models/DeepSeek-R1-Distill-Qwen-7B ]; then
    "$BIN" exp aime24_budget_sweep --db "$TMP/aime.db" 2>"$TMP/err"
    if [ $? -eq 0 ] || ! grep -q 'deepseek-r1-distill-qwen-7b' "$TMP/err" || [ -e "$TMP/aime.db" ]; then
        echo "FAIL missing model:"; cat "$TMP/err"; fail=1
    else
        echo "ok   missing model: $(cat "$TMP/err")"
    fi
fi

if [ ! -f "$MODEL" ]; then
    echo "SKIP the kill-and-resume checks: $MODEL absent (make deps downloads it)"
    exit $fail
fi
command -v sqlite3 >/dev/null 2>&1 || { echo "SKIP the kill-and-resume checks: no sqlite3 CLI"; exit $fail; }

cat >"$TMP/k.json" <<'EOF'
{"name": "kill_resume", "models": "smollm2-135m", "datasets": "synthetic:4", "prompt": "chatml-boxed",
 "policies": ["fullkv", {"name": "streamingllm", "budget": 48, "divide_length": 8}],
 "batch_sizes": [1, 3], "batching": "ragged", "max_new_tokens": 12}
EOF
DB="$TMP/k.db"
POINTS=4
SAMPLES=4

# Kill -9 at random moments (0.5 .. 6 s after start), several times; each
# start resumes where the last left off.
for i in 1 2 3 4 5; do
    "$BIN" exp "$TMP/k.json" --db "$DB" --threads 1 --quiet 2>>"$TMP/log" &
    pid=$!
    ms=$(awk -v s="$$$i" 'BEGIN { srand(s); printf "%d", 500 + rand() * 5500 }')
    sleep "$(awk -v m="$ms" 'BEGIN { printf "%.3f", m / 1000 }')"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    done_now=$(sqlite3 "$DB" 'select count(*) from runs' 2>/dev/null || echo 0)
    echo "     kill $i after ${ms} ms: $done_now run(s) recorded"
done

# Run to the end.
if ! "$BIN" exp "$TMP/k.json" --db "$DB" --threads 1 --quiet 2>>"$TMP/log"; then
    echo "FAIL: the resumed sweep failed"; tail -n 5 "$TMP/log"; fail=1
fi

check() { # NAME SQL EXPECTED
    got=$(sqlite3 "$DB" "$2" 2>&1)
    if [ "$got" != "$3" ]; then echo "FAIL $1: got '$got', want '$3'"; fail=1; else echo "ok   $1"; fi
}
check "integrity" "pragma integrity_check" "ok"
check "one run per point" "select count(*), count(distinct run_key) from runs" "$POINTS|$POINTS"
check "all ok" "select count(*) from runs where status = 'ok'" "$POINTS"
check "all samples" "select count(*) from samples" "$((POINTS * SAMPLES))"
check "no duplicate samples" "select count(*) from (select run_id, sample_idx from samples group by 1, 2 having count(*) > 1)" "0"
check "runs complete" "select count(*) from runs r where n_samples != (select count(*) from samples s where s.run_id = r.id) or n_samples != $SAMPLES" "0"
check "accuracy view" "select count(*) from v_accuracy_by_budget" "$POINTS"

# A rerun has nothing left to do.
"$BIN" exp "$TMP/k.json" --db "$DB" --threads 1 2>"$TMP/err"
if ! grep -q "0 run, $POINTS skipped" "$TMP/err"; then echo "FAIL rerun:"; cat "$TMP/err"; fail=1; else echo "ok   rerun skips"; fi
exit $fail
