#!/bin/sh
# tests/cli/slurm.sh - a sweep across a real Slurm cluster of one node.
#
# First the checks that need no Slurm: --help, bad usage, the script
# `slurm --dry-run` writes.  Then, where it can (root, SmolLM2 in models/,
# sqlite3; Debian's slurm-wlm and munge, installed with apt-get when
# missing): writes a one-node slurm.conf for this machine (2 CPUs, its memory
# from `slurmd -C`), starts munged, slurmctld and slurmd itself (no systemd),
# submits a 4-shard array of a small config with `evictbench slurm`, merges
# the shards while they are still being written, cancels one array task after
# its first point, checks that the merge lacks that shard's rest, resubmits
# the task with `sbatch --array=I`, merges again and checks that the merged
# database holds exactly the rows of a single-process run of the same config
# (same run keys, same texts under greedy decoding, same sentences).  Every
# daemon it started is stopped on exit.  EVICTBENCH_SLURM_TEST=0 skips the
# Slurm part.  Runs from the repository root; EVICTBENCH_BIN names the binary.
BIN=${EVICTBENCH_BIN:-./evictbench}
ROOT=$(pwd)
MODEL=$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf
TMP=$(mktemp -d /tmp/ebslurm.XXXXXX)   # short: munge's socket path must fit 108 bytes
STARTED=""                             # pid files of the daemons this test started
fail=0

cleanup() {
    if [ -n "$STARTED" ]; then
        scancel --name="eb-slurm_smoke" >/dev/null 2>&1
        i=0
        while [ $i -lt 50 ] && [ -n "$(squeue -h --name=eb-slurm_smoke 2>/dev/null)" ]; do
            sleep 0.2; i=$((i + 1))
        done
        for f in $STARTED; do
            [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
        done
        sleep 1
        for f in $STARTED; do
            [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
        done
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

case $BIN in /*) ;; *) BIN=$ROOT/$BIN ;; esac
[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
. "$ROOT/tests/cli/lib/expect.sh"

check() { # NAME GOT WANT
    if [ "$2" != "$3" ]; then echo "FAIL $1: got '$2', want '$3'"; fail=1; else echo "ok   $1"; fi
}

# ---- no Slurm needed ----
for c in slurm slurm-status merge; do
    if "$BIN" $c --help | grep -q "usage: evictbench $c"; then echo "ok   $c --help"
    else echo "FAIL $c --help"; fail=1; fi
done
if "$BIN" exp --help | grep -q -- "--shard I/N"; then echo "ok   exp --help lists --shard"
else echo "FAIL exp --help lacks --shard"; fail=1; fi

mkdir -p "$TMP/work"
cd "$TMP/work" || exit 1
cat >s.json <<EOF
{"name": "slurm_smoke", "models": "$MODEL", "datasets": "synthetic:2", "prompt": "chatml-boxed",
 "policies": ["fullkv", "fullkv-pss", {"name": "streamingllm", "budgets": [24, 32], "divide_length": 8}],
 "batch_sizes": [1, 2], "batching": "ragged", "max_new_tokens": 8}
EOF
POINTS=8
expect_error "slurm without --shards" "missing --shards" slurm s.json
expect_error "slurm --shards 0" "--shards" slurm s.json --shards 0
expect_error "slurm bad --array" "--array" slurm s.json --shards 4 --array "1;rm"
expect_error "exp --shard 0/4" "--shard: I must be in" exp s.json --shard 0/4
expect_error "exp --shard x" "--shard: expected I/N" exp s.json --shard 2of4
expect_error "merge nothing" "no shard database" merge --into x.db
expect_error "merge a missing shard" "no-such.db: no such results database" merge no-such.db --into x.db
expect_error "slurm-status before submitting" "no submission recorded" slurm-status s.json

"$BIN" slurm s.json --shards 4 --gpus-per-task 1 --partition gpu --time 1:00:00 --mem 8G --dry-run \
    >"$TMP/dry" 2>"$TMP/err"
if grep -q '^#SBATCH --array=1-4$' "$TMP/dry" && grep -q '^#SBATCH --gpus-per-task=1$' "$TMP/dry" &&
   grep -q '^#SBATCH --partition=gpu$' "$TMP/dry" && grep -q '^#SBATCH --time=1:00:00$' "$TMP/dry" &&
   grep -q '^#SBATCH --mem=8G$' "$TMP/dry" && grep -q -- '--shard "$I/4"' "$TMP/dry" &&
   grep -q -- '--device cuda' "$TMP/dry" && [ ! -e results ]; then
    echo "ok   slurm --dry-run prints the array script and writes nothing"
else
    echo "FAIL slurm --dry-run:"; cat "$TMP/dry" "$TMP/err"; fail=1
fi
"$BIN" slurm s.json --shards 4 --dry-run >"$TMP/dry" 2>/dev/null
if grep -q -- '--device' "$TMP/dry"; then echo "FAIL: --device without GPUs"; fail=1; fi

# Submission and status through stand-ins for sbatch, squeue and sacct (the
# real ones below, where they can run): what evictbench passes them and how it
# reads their answers.
mkdir -p "$TMP/fake"
cat >"$TMP/fake/sbatch" <<EOF
#!/bin/sh
echo "\$@" >>"$TMP/fake/sbatch.args"
echo 4242
EOF
cat >"$TMP/fake/squeue" <<EOF
#!/bin/sh
echo "\$@" >"$TMP/fake/squeue.args"
printf '4242_1|RUNNING\n4242_2|PENDING\n4243_3|PENDING\n'
EOF
cat >"$TMP/fake/sacct" <<EOF
#!/bin/sh
printf '4242_3|CANCELLED by 0\n4242_4|COMPLETED\n4243_3|PENDING\n'
EOF
chmod +x "$TMP/fake/sbatch" "$TMP/fake/squeue" "$TMP/fake/sacct"
cat >fake.json <<EOF
{"name": "fake_smoke", "models": "$ROOT/tests/fixtures/tiny.gguf", "datasets": "synthetic:2",
 "policies": ["fullkv", {"name": "streamingllm", "budgets": [24, 32, 48]}], "max_new_tokens": 4}
EOF
FAKEDIR=results/slurm/fake_smoke
if PATH=$TMP/fake:$PATH "$BIN" slurm fake.json --shards 4 --cpus-per-task 2 >"$TMP/out" 2>"$TMP/err" &&
   [ "$(cat "$TMP/out")" = 4242 ] && [ "$(cat "$TMP/fake/sbatch.args")" = "--parsable $TMP/work/$FAKEDIR/job.sbatch" ] &&
   grep -q '^#SBATCH --cpus-per-task=2$' $FAKEDIR/job.sbatch && [ -f $FAKEDIR/fake_smoke.json ] &&
   [ "$(cut -f1-3 $FAKEDIR/jobs.tsv)" = "$(printf '4242\t1-4\t4')" ]; then
    echo "ok   slurm: script, config copy, sbatch call and job record"
else
    echo "FAIL slurm submit (stand-in sbatch):"; cat "$TMP/out" "$TMP/err" "$TMP/fake/sbatch.args"; fail=1
fi
PATH=$TMP/fake:$PATH "$BIN" slurm fake.json --shards 4 --array 3 >/dev/null 2>&1
check "resubmission passes --array" "$(tail -n 1 "$TMP/fake/sbatch.args")" \
    "--parsable --array=3 $TMP/work/$FAKEDIR/job.sbatch"
PATH=$TMP/fake:$PATH "$BIN" slurm-status fake.json >"$TMP/status" 2>"$TMP/err"
check "status: newest task states" \
    "$(awk 'NR > 1 && $1 != "total" { printf "%s %s %s %s;", $1, $2, $3, $(NF-1) }' "$TMP/status")" \
    "1/4 4242_1 RUNNING 1;2/4 4242_2 PENDING 0;3/4 4243_3 PENDING 0;4/4 4242_4 COMPLETED 0;"
grep -q -- "--user=$(id -u) --name=eb-fake_smoke" "$TMP/fake/squeue.args" ||
    { echo "FAIL squeue arguments: $(cat "$TMP/fake/squeue.args")"; fail=1; }

# ---- the real cluster ----
skip() { echo "SKIP the Slurm checks: $*"; exit $fail; }
[ "${EVICTBENCH_SLURM_TEST:-1}" = 0 ] && skip "EVICTBENCH_SLURM_TEST=0"
[ -f "$MODEL" ] || skip "$MODEL absent (make deps downloads it)"
command -v sqlite3 >/dev/null 2>&1 || skip "no sqlite3 CLI"
[ "$(id -u)" = 0 ] || skip "not root (the test runs slurmctld, slurmd and munged as root)"
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 ||
   ! command -v sbatch >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || skip "slurm-wlm and munge are not installed and there is no apt-get"
    echo "     installing slurm-wlm and munge (apt-get)"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge \
            >"$TMP/apt.log" 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get update >>"$TMP/apt.log" 2>&1
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge \
            >>"$TMP/apt.log" 2>&1 || skip "apt-get could not install slurm-wlm munge: $(tail -n 1 "$TMP/apt.log")"
    fi
fi

# Two free TCP ports (another copy of this test may run at the same time).
port_used() { grep -qi ":$(printf '%04X' "$1") " /proc/net/tcp /proc/net/tcp6 2>/dev/null; }
pick_port() {
    p=$(( ($$ * 7 + $1 * 7919) % 20000 + 30000 ))
    while port_used $p || [ "$p" = "${2:-}" ]; do p=$((p + 1)); done
    echo $p
}
CTLD_PORT=$(pick_port 1)
SLURMD_PORT=$(pick_port 2 "$CTLD_PORT")
HOST=$(hostname -s)
NODE=eb$$
# The node as slurmd sees it; declare at most 2 CPUs and what memory it has.
HW=$(slurmd -C 2>/dev/null | head -n 1)
CPUS=$(printf '%s\n' "$HW" | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p')
MEM=$(printf '%s\n' "$HW" | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
[ -n "$CPUS" ] && [ -n "$MEM" ] || skip "slurmd -C did not describe this node: $HW"
[ "$CPUS" -gt 2 ] && CPUS=2

S=$TMP/slurm
mkdir -p "$S/munge" "$S/state" "$S/spool" "$S/log"
chmod 755 "$TMP" "$S" "$S/munge"
dd if=/dev/urandom of="$S/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 600 "$S/munge/munge.key"
cat >"$S/slurm.conf" <<EOF
ClusterName=evictbench
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
AuthInfo=socket=$S/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=600
NodeName=$NODE NodeHostname=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=test Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
SLURM_CONF=$S/slurm.conf
export SLURM_CONF

logs() { tail -n 5 "$S/log/munged.log" "$S/log/slurmctld.log" "$S/log/slurmd.log" 2>/dev/null; }
STARTED="$S/munge/munged.pid"
munged --force --socket="$S/munge/socket" --key-file="$S/munge/munge.key" \
    --pid-file="$S/munge/munged.pid" --seed-file="$S/munge/seed" --log-file="$S/log/munged.log" \
    || { logs; skip "munged did not start"; }
STARTED="$STARTED $S/slurmctld.pid"
slurmctld -f "$SLURM_CONF" || { logs; skip "slurmctld did not start"; }
STARTED="$STARTED $S/slurmd.pid"
slurmd -f "$SLURM_CONF" -N "$NODE" || { logs; skip "slurmd did not start"; }
i=0
until sinfo -h -N -o '%T' 2>/dev/null | grep -q '^idle'; do
    i=$((i + 1))
    [ $i -gt 100 ] && { logs; skip "the node did not come up in 20 s: $(sinfo -h -N -o '%T %E' 2>&1)"; }
    sleep 0.2
done
echo "ok   munged, slurmctld and slurmd up (node $NODE: $CPUS CPUs, $MEM MB; ports $CTLD_PORT, $SLURMD_PORT)"

# The reference: the same config in one process (meanwhile the array runs).
"$BIN" exp s.json --db single.db --threads 1 --quiet 2>"$TMP/single.log" &
SINGLE=$!

JOBDIR=results/slurm/slurm_smoke
JOB=$("$BIN" slurm s.json --shards 4 2>"$TMP/err")
case $JOB in
    ''|*[!0-9]*) echo "FAIL slurm submit: '$JOB'"; cat "$TMP/err"; logs; exit 1 ;;
esac
check "job id recorded" "$(cut -f1-3 $JOBDIR/jobs.tsv)" "$(printf '%s\t1-4\t4' "$JOB")"

# Cancel the task of shard $K once its first point is in its database (the
# first of its two points: the shards hold 2 points each).
K=3
KDB=$JOBDIR/shard-$K-of-4.db
runs_in() { sqlite3 "$1" "select count(*) from runs where status in ('ok','oom')" 2>/dev/null || echo 0; }
task_state() { squeue -h -j "${JOB}_$1" -o '%T' 2>/dev/null; }
i=0; at_cancel=""
while [ $i -lt 900 ]; do    # 180 s
    n=$( [ -f "$KDB" ] && runs_in "$KDB" || echo 0)
    [ "$n" -ge 2 ] && { at_cancel="too late: both points done"; break; }
    if [ "$n" -ge 1 ] && [ "$(task_state $K)" = RUNNING ]; then
        scancel "${JOB}_$K"
        at_cancel=$(runs_in "$KDB")
        break
    fi
    sleep 0.2; i=$((i + 1))
done
check "task $K cancelled after its first point" "$at_cancel" "1"
"$BIN" slurm-status s.json >"$TMP/status" 2>"$TMP/err"
echo "     slurm-status while the array runs:"; sed 's/^/       /' "$TMP/status"

# Merge while the other tasks are still writing.
"$BIN" merge $JOBDIR/shard-*-of-4.db --into live.db 2>"$TMP/err" ||
    { echo "FAIL merge while running:"; cat "$TMP/err"; fail=1; }
echo "     merged while running: $(sqlite3 live.db 'select count(*) from runs') run(s)"

wait_done() { # wait for job $1 to leave the queue (bounded)
    i=0
    while [ -n "$(squeue -h -j "$1" 2>/dev/null)" ]; do
        i=$((i + 1)); [ $i -gt 900 ] && { echo "FAIL: job $1 still queued after 180 s"; squeue; logs; exit 1; }
        sleep 0.2
    done
}
wait_done "$JOB"
"$BIN" merge $JOBDIR/shard-*-of-4.db --into merged.db 2>"$TMP/err" ||
    { echo "FAIL merge:"; cat "$TMP/err"; fail=1; }
check "merge lacks the cancelled point" "$(sqlite3 merged.db 'select count(*) from runs')" "$((POINTS - 1))"
"$BIN" slurm-status s.json >"$TMP/status" 2>&1
check "status: shard $K has one point left" \
    "$(awk -v s="$K/4" '$1 == s { print $(NF-4) "/" $NF }' "$TMP/status")" "1/1"

# Resubmit the cancelled task as a user would: sbatch --array=K.
JOB2=$(sbatch --parsable --array=$K $JOBDIR/job.sbatch 2>"$TMP/err")
[ -n "$JOB2" ] || { echo "FAIL resubmit:"; cat "$TMP/err"; exit 1; }
wait_done "$JOB2"
check "shard $K complete, no duplicate" \
    "$(sqlite3 "$KDB" "select count(*), count(distinct run_key) from runs where status = 'ok'")" "2|2"
grep -q "1 run, 1 skipped" $JOBDIR/shard-$K.job-"$JOB2".log ||
    { echo "FAIL: the resubmitted task did not continue its shard:"; cat $JOBDIR/shard-$K.job-"$JOB2".log; fail=1; }
"$BIN" merge $JOBDIR/shard-*-of-4.db live.db --into merged.db 2>"$TMP/err" ||
    { echo "FAIL merge after the resubmission:"; cat "$TMP/err"; fail=1; }
grep -q "shard-$K-of-4.db: 1 run(s) copied, 1 already there" "$TMP/err" ||
    { echo "FAIL merge counts:"; cat "$TMP/err"; fail=1; }
"$BIN" slurm-status s.json >"$TMP/status" 2>&1
check "status: all done" "$(awk '$1 == "total" { print $2 "/" $3 }' "$TMP/status")" "$POINTS/$POINTS"

wait $SINGLE || { echo "FAIL: the single-process run failed"; cat "$TMP/single.log"; exit 1; }
# Every stored value that does not measure time or place.
cat >rows.sql <<'EOF'
.mode list
.nullvalue NULL
SELECT 'E', name, config_json, code_version FROM experiments ORDER BY name;
SELECT 'R', run_key, model, dataset, data_offset, data_limit, policy, params_json, budget, batch_size,
       batching, sampling_json, seed, max_new_tokens, status, error, n_samples, accuracy,
       mean_gen_tokens, gen_tokens, peak_kv_bytes, mean_kv_bytes
FROM runs ORDER BY run_key;
SELECT 'S', r.run_key, s.sample_idx, s.item_id, s.prompt_tokens, s.gen_tokens, s.think_tokens,
       s.finished, s.correct, s.pred_answer, s.ref_answer, s.n_compressions, s.peak_kv_bytes,
       s.mean_kv_bytes, s.n_sentences, s.n_redundant_pairs, s.pss_max, s.pss_mean, s.n_nonexec,
       s.steer_alpha_final, s.kl_mean, s.top1_agree, s.first_divergence, s.text
FROM samples s JOIN runs r ON r.id = s.run_id ORDER BY r.run_key, s.sample_idx;
SELECT 'T', r.run_key, x.sample_idx, x.sent_idx, x.start_tok, x.end_tok, x.kind, x.max_sim,
       x.evicted_step
FROM sentences x JOIN runs r ON r.id = x.run_id ORDER BY r.run_key, x.sample_idx, x.sent_idx;
EOF
sqlite3 single.db <rows.sql >single.txt
sqlite3 merged.db <rows.sql >merged.txt
check "reference: points, samples, sentences" \
    "$(grep -c '^R' single.txt) $(grep -c '^S' single.txt) $( [ "$(grep -c '^T' single.txt)" -gt 0 ] && echo some)" \
    "$POINTS 16 some"
if cmp -s single.txt merged.txt; then
    echo "ok   merged database = single-process run, row for row ($(wc -l <single.txt) rows)"
else
    echo "FAIL merged database differs from the single-process run:"; diff single.txt merged.txt | head -n 20; fail=1
fi
check "integrity" "$(sqlite3 merged.db 'pragma integrity_check')" "ok"
exit $fail
