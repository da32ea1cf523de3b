#!/bin/sh
# devcheck.sh - tools/devcheck.sh, the script a lent GPU runs, kept from
# rotting on a machine without one: --check-only must pass against this
# build's CLI (every option it passes exists, every output it parses parses,
# the table states the three targets), and must fail, loudly, when the CLI
# loses an option it uses.  Runs from the repository root.
BIN=${EVICTBENCH_BIN:-./evictbench}
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
fail=0
case "$BIN" in /*) ;; *) BIN=$(pwd)/$BIN ;; esac

if LOGS="$TMP/logs" EVICTBENCH_BIN="$BIN" tools/devcheck.sh --check-only >"$TMP/ok.log" 2>&1; then
    echo "ok   devcheck --check-only: $(tail -n 1 "$TMP/ok.log")"
else
    tail -n 30 "$TMP/ok.log"
    echo "FAIL devcheck --check-only against $BIN"
    fail=1
fi
# LOGS=DIR: the console and the run's logs land there, the logits files do not.
if cmp -s "$TMP/ok.log" "$TMP/logs/devcheck.out" && [ -f "$TMP/logs/devcheck/rows.tsv" ] &&
   [ -z "$(find "$TMP/logs" -name '*.bin')" ]; then
    echo "ok   LOGS: console and logs copied, no logits files"
else
    echo "FAIL: LOGS=DIR did not get the console and the logs (or got logits files)"
    fail=1
fi
for target in "1\. qwen7b batch-1 decode .*HBM roofline" "2\. qwen7b rkv budget batch 64" \
              "3\. qwen7b batch 1 vs transformers"; do
    grep -q "$target" "$TMP/ok.log" || { echo "FAIL: the table lacks target '$target'"; fail=1; }
done

# The batched compression's timing line, parsed from the stand-in's output.
grep -q "^batched R-KV compression, 7B shape, 16 sequences: window 8.0 ms, redundancy 60.0 ms as tiles; 30.0 and 975.0 ms without (3.8x, 16.2x)" "$TMP/ok.log" ||
    { echo "FAIL: the table lacks the batched compression's timing"; fail=1; }
# ... and the stand-in's 68 ms of scores lets max-batch measure up to 1,024 sequences.
grep -q "^max-batch: at most 1024 sequences measured" "$TMP/ok.log" ||
    { echo "FAIL: max-batch's sequence cap did not follow the redundancy's time"; fail=1; }

# The whole-decode comparison's verdict: the stand-in passes, perturbed ones fail.
grep -q "^judge: 256 steps, top-1 agreement" "$TMP/ok.log" ||
    { echo "FAIL: the stand-in whole-decode comparison was not judged"; fail=1; }
for why in agree_pre agree decisive_pre margin_ulps_median kl_pre_max nonfinite compressions \
           sched_mismatch overlap sample_mismatch; do
    grep -q "^$why=.*: judge: FAILED: " "$TMP/ok.log" ||
        { echo "FAIL: a comparison perturbed in $why was not failed"; fail=1; }
done
[ $fail = 0 ] && echo "ok   whole-decode comparison: judged, and perturbed inputs fail it"
# The experiment's database judge, where the CPU exp ran (smollm2-135m present).
if grep -q "^judge_exp: 2 runs" "$TMP/ok.log"; then
    n=$(grep -c "^perturbed (.*): judge_exp: FAILED: " "$TMP/ok.log")
    if [ "$n" -eq 8 ]; then echo "ok   exp: judged on its database, and 8 perturbed databases fail it"
    else echo "FAIL: $n of 8 perturbed exp databases failed the judge"; fail=1; fi
elif ! grep -q "SKIP: smollm2-135m is not present" "$TMP/ok.log"; then
    echo "FAIL: the exp step was neither judged nor skipped"
    fail=1
fi

# A failed self-test case of a feature not yet run on a GPU: the run fails,
# the feature is switched back for the rows after it, and the table says so.
if DEVCHECK_CPU_RUN=0 DRY_SELFTEST_FAIL="rope + kv append 28/4 hd128 bf16" \
        EVICTBENCH_BIN="$BIN" tools/devcheck.sh --check-only >"$TMP/switch.log" 2>&1; then
    echo "FAIL: devcheck --check-only passed with a failed self-test case"
    fail=1
elif ! grep -q "^switched back after failed self-test cases (rows above ran without them): EVICTBENCH_CUDA_ROPE_APPEND=0$" "$TMP/switch.log" ||
     grep "switched back" "$TMP/switch.log" | grep -q "EVICTBENCH_CUDA_TILES=0\|EVICTBENCH_CUDA_FUSED=0"; then
    tail -n 20 "$TMP/switch.log"
    echo "FAIL: a failed rope + kv append case did not switch that feature (alone) back"
    fail=1
else
    echo "ok   a failed self-test case switches its feature back: $(grep -m1 'switched back for the rest' "$TMP/switch.log")"
fi

# A CLI that lost --ignore-eos (its help no longer lists it): check-only fails and names it.
cat >"$TMP/evictbench" <<EOS
#!/bin/sh
if [ "\$2" = --help ]; then "$BIN" "\$@" 2>&1 | grep -v -- '--ignore-eos'; exit 0; fi
exec "$BIN" "\$@"
EOS
chmod +x "$TMP/evictbench"
if DEVCHECK_CPU_RUN=0 EVICTBENCH_BIN="$TMP/evictbench" tools/devcheck.sh --check-only >"$TMP/bad.log" 2>&1; then
    echo "FAIL: devcheck --check-only passed a CLI without --ignore-eos"
    fail=1
elif ! grep -q "FAILED: evictbench generate lacks --ignore-eos" "$TMP/bad.log"; then
    tail -n 20 "$TMP/bad.log"
    echo "FAIL: devcheck --check-only did not name the missing option"
    fail=1
else
    echo "ok   a missing option fails devcheck: $(grep -m1 'lacks --ignore-eos' "$TMP/bad.log")"
fi

# --emulate (the rehearsal on the CPU emulator, docs/gpu.md) needs torch and
# transformers: without them it says so before building anything.
if HF_PYTHON=false CKPT="$TMP/emu" tools/devcheck.sh --emulate >"$TMP/emu.log" 2>&1; then
    echo "FAIL: devcheck --emulate passed without torch"
    fail=1
elif ! grep -q "FAILED: --emulate needs torch and transformers in false" "$TMP/emu.log" ||
     grep -q "== devcheck .*: build" "$TMP/emu.log"; then
    tail -n 10 "$TMP/emu.log"
    echo "FAIL: devcheck --emulate without torch did not stop at once, saying why"
    fail=1
else
    echo "ok   devcheck --emulate without torch: $(grep -m1 'needs torch' "$TMP/emu.log")"
fi
exit $fail
