#!/bin/sh
# bench_shared.sh - decode on a shared machine: batch 1 and batch 16 with one
# busy process per core (`yes`, as a Slurm neighbour or a second job would
# be), for evictbench and for llama.cpp (llama-bench at batch 1,
# llama-batched-bench at 16, both from tools/peer_build.sh's release), each
# beside its own quiet rate on the same model and threads.
#
# Usage: tools/bench_shared.sh [MODEL.gguf]        (make bench-shared [SHARED_MODEL=...])
#   THREADS  threads for both runtimes (default: the number of CPUs)
#   HOGS     busy processes while loaded (default: the number of CPUs)
#   REPS     runs per measurement; medians (default 3)
#   GEN      new tokens per sequence (default 64; prompts of 32 tokens)
# Default model: the 1.5B quickstart GGUF.  Prints, per runtime and batch: the
# quiet rate, the loaded rate and the share kept; then ours / llama.cpp under load.
set -eu

THREADS=${THREADS:-$(nproc 2>/dev/null || echo 1)}
HOGS=${HOGS:-$(nproc 2>/dev/null || echo 1)}
REPS=${REPS:-3}
GEN=${GEN:-64}
PROMPT=32
PEER_DIR=${PEER_DIR:-build-peer}
EVICTBENCH=${EVICTBENCH:-./evictbench}

die() { echo "bench-shared: $*" >&2; exit 1; }

for v in "$THREADS" "$HOGS" "$REPS" "$GEN"; do
    case $v in ''|*[!0-9]*|0) die "THREADS, HOGS, REPS and GEN must be positive integers";; esac
done
[ -x "$EVICTBENCH" ] || die "$EVICTBENCH not found (run make all first)"
command -v python3 >/dev/null 2>&1 || die "python3 not found (it reads llama.cpp's JSON)"
MODEL=${1:-models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf}
[ -f "$MODEL" ] || die "model $MODEL not found (make deps)"

. "$(dirname "$0")/peer_build.sh"
[ -x "$LLAMA_BENCH" ] || build_llama_bench
build_llama_batched

TMP=$(mktemp -d)
HOG_PIDS=""
stop_hogs() {
    for p in $HOG_PIDS; do kill "$p" 2>/dev/null || true; done
    for p in $HOG_PIDS; do wait "$p" 2>/dev/null || true; done
    HOG_PIDS=""
}
trap 'stop_hogs; rm -rf "$TMP"' EXIT INT TERM

start_hogs() {
    h=0
    while [ $h -lt "$HOGS" ]; do
        yes >/dev/null &
        HOG_PIDS="$HOG_PIDS $!"
        h=$((h + 1))
    done
}

# One condition (quiet or loaded): REPS runs of each side at batch 1 and 16.
measure() {
    cond=$1
    r=0
    while [ $r -lt "$REPS" ]; do
        r=$((r + 1))
        echo "bench-shared: $cond: evictbench, run $r of $REPS" >&2
        "$EVICTBENCH" bench --model "$MODEL" --threads "$THREADS" --prompt-len "$PROMPT" \
            --decode-prompt "$PROMPT" --new "$GEN" --batches 1,16 --kv-type f16 --tsv \
            >"$TMP/ours.$cond.$r.tsv" || die "evictbench bench failed"
        echo "bench-shared: $cond: llama-batched-bench, run $r of $REPS" >&2
        if [ -x "$LLAMA_BATCHED" ]; then
            "$LLAMA_BATCHED" -m "$MODEL" -c $((16 * (PROMPT + GEN))) -b 2048 -ub 512 \
                -npp "$PROMPT" -ntg "$GEN" -npl 16 -t "$THREADS" --output-format jsonl \
                >"$TMP/peerb.$cond.$r.jsonl" 2>"$TMP/peer.err" ||
                { cat "$TMP/peer.err" >&2; die "llama-batched-bench failed"; }
        fi
    done
    echo "bench-shared: $cond: llama-bench, $REPS repetitions" >&2
    "$LLAMA_BENCH" -m "$MODEL" -p 0 -n "$GEN" -t "$THREADS" -r "$REPS" -o json \
        >"$TMP/peer1.$cond.json" 2>"$TMP/peer.err" ||
        { cat "$TMP/peer.err" >&2; die "llama-bench failed"; }
}

measure quiet
start_hogs
sleep 1
measure loaded
stop_hogs

echo "decode with $HOGS busy processes (yes) beside $THREADS threads: $(basename "$MODEL"), prompts of $PROMPT tokens, $GEN new, medians of $REPS runs, tokens/s"
python3 - "$TMP" <<'PY'
import glob, json, statistics, sys
tmp = sys.argv[1]
def med(v):
    return statistics.median(v) if v else None
def ours(cond, batch):
    vals = []
    for p in glob.glob("%s/ours.%s.*.tsv" % (tmp, cond)):
        for line in open(p):
            f = line.rstrip("\n").split("\t")
            if f[0] == "decode batch %d" % batch:
                vals.append(float(f[1]))
    return med(vals)
def peer1(cond):
    for t in json.load(open("%s/peer1.%s.json" % (tmp, cond))):
        if t["n_prompt"] == 0:
            return med(t["samples_ts"])
def peerb(cond):
    vals = []
    for p in glob.glob("%s/peerb.%s.*.jsonl" % (tmp, cond)):
        for line in open(p):
            if line.startswith("{"):
                vals.append(float(json.loads(line)["speed_tg"]))
    return med(vals)
rows = [("evictbench", 1, ours("quiet", 1), ours("loaded", 1)),
        ("llama.cpp", 1, peer1("quiet"), peer1("loaded")),
        ("evictbench", 16, ours("quiet", 16), ours("loaded", 16)),
        ("llama.cpp", 16, peerb("quiet"), peerb("loaded"))]
fmt = lambda x: "%.1f" % x if x else "n/a"
print("%-11s %6s %12s %12s %6s" % ("runtime", "batch", "quiet", "loaded", "kept"))
for name, b, q, l in rows:
    kept = "%.0f%%" % (100 * l / q) if q and l else "n/a"
    print("%-11s %6d %12s %12s %6s" % (name, b, fmt(q), fmt(l), kept))
for b, o, p in ((1, rows[0][3], rows[1][3]), (16, rows[2][3], rows[3][3])):
    print("under load, batch %d: ours / llama.cpp %s" % (b, "%.2fx" % (o / p) if o and p else "n/a"))
PY
