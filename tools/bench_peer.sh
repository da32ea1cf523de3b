#!/bin/sh
# bench_peer.sh - evictbench vs llama.cpp's llama-bench on the same GGUF files and threads:
# prefill 512 and decode batch 1 tokens/s, with the ratio ours / llama.cpp.
#
# Usage: tools/bench_peer.sh [MODEL.gguf ...]      (make bench-peer [PEER_MODELS=...])
#   THREADS   threads for both runtimes (default: the number of CPUs)
#   REPS      repetitions per measurement; the table shows medians (default 3)
#   PEER_DIR  build folder for llama.cpp (default build-peer, ignored by git)
#   MEMBW     the host's memory read probe (default build/tools/bench_membw; make
#             bench-peer builds it; absent: that column is n/a)
# The first table's last column: each runtime's batch-1 tokens/s times the bytes
# a token reads (`evictbench info`, "read a token"), and the range of what a plain
# read of memory got in the same rounds (MEMBW, once after each round).
# Default models: models/SmolLM2-135M-Instruct.Q4_1.gguf, plus the Qwen2.5-Coder
# 0.5B and 1.5B Q4_K_M GGUFs in models/ where present.
#
# A second table: decode at batch 16 and 64 (BATCHES; sequences of 32 prompt
# tokens, GEN new tokens each) beside llama.cpp's llama-batched-bench from the
# same release, with our batch-B / batch-1 speedup and the range of the runs on
# each side; n/a where llama-batched-bench does not build.
#
# llama-bench is built from the llama.cpp source that the llama-cpp-python sdist
# vendors (the version pinned below, the same one tools/golden/gen_tokens.py uses),
# CPU only, once: a rerun finds the binary and skips the build.
set -eu

PEER_DIR=${PEER_DIR:-build-peer}
THREADS=${THREADS:-$(nproc 2>/dev/null || echo 1)}
REPS=${REPS:-3}
BATCHES=${BATCHES:-16 64}
PROMPT=512
GEN=128
EVICTBENCH=${EVICTBENCH:-./evictbench}
MEMBW=${MEMBW:-build/tools/bench_membw}

die() { echo "bench-peer: $*" >&2; exit 1; }

case $THREADS in ''|*[!0-9]*|0) die "THREADS must be a positive integer, got '$THREADS'";; esac
case $REPS in ''|*[!0-9]*|0) die "REPS must be a positive integer, got '$REPS'";; esac
[ -x "$EVICTBENCH" ] || die "$EVICTBENCH not found (run make all first)"
command -v python3 >/dev/null 2>&1 || die "python3 not found (it reads llama-bench's JSON)"

. "$(dirname "$0")/peer_build.sh"

if [ $# -eq 0 ]; then
    set -- models/SmolLM2-135M-Instruct.Q4_1.gguf
    for m in models/qwen2.5-coder-0.5b-instruct.gguf models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf; do
        [ -f "$m" ] && set -- "$@" "$m"
    done
fi
for m in "$@"; do [ -f "$m" ] || die "model $m not found"; done

[ -x "$LLAMA_BENCH" ] || build_llama_bench

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM

# One line per model: name, weight type, threads, then the two medians of each runtime.
i=0
for m in "$@"; do
    i=$((i + 1))
    # The two runtimes take turns, each run a fresh process (llama-bench -r 1,
    # then ours): a host whose speed drifts between processes (a shared VM's
    # memory bandwidth moves by 10-25% from one minute to the next) then
    # shows in both ranges alike, not in one side's only.  Each run of ours
    # loads the model afresh; its prefill is the better of two passes.  KV in
    # f16, as llama-bench keeps it by default (like for like).
    r=0
    while [ $r -lt "$REPS" ]; do
        r=$((r + 1))
        echo "bench-peer: $m: llama-bench, then evictbench bench, run $r of $REPS" >&2
        "$LLAMA_BENCH" -m "$m" -p "$PROMPT" -n "$GEN" -t "$THREADS" -r 1 -o json \
            >"$TMP/peer$i.$r.json" 2>"$TMP/peer$i.err" ||
            { cat "$TMP/peer$i.err" >&2; die "llama-bench failed on $m"; }
        "$EVICTBENCH" bench --model "$m" --threads "$THREADS" --prompt-len "$PROMPT" \
            --new "$GEN" --batches 1 --kv-type f16 --tsv >"$TMP/ours$i.$r.tsv" ||
            die "evictbench bench failed on $m"
        # Batch 1 reads every weight once a token: what a plain read of memory
        # gets in the same minutes says how much the host's memory gave.
        if [ -x "$MEMBW" ]; then
            "$MEMBW" 1024 "$THREADS" 3 >"$TMP/bw$i.$r.txt" || die "$MEMBW failed"
        fi
    done
    # the bytes a batch-1 token reads (every matrix once, the embedding table
    # one row unless it is the LM head): tokens/s times this is GB/s
    read=$("$EVICTBENCH" info "$m" | sed -n 's/^read a token *\([0-9]*\) bytes.*/\1/p')
    [ -n "$read" ] || die "evictbench info $m printed no 'read a token' line"
    python3 - "$m" "$THREADS" "$PROMPT" "$GEN" "$TMP" "$i" "$read" >>"$TMP/rows" <<'EOF'
import glob, json, os, re, statistics, sys
model, threads, prompt, gen, tmp, i, token_bytes = sys.argv[1:8]
prompt, gen = int(prompt), int(gen)
peer = {}
weight_type = "?"
peer_runs = {"pp": [], "tg": []}
for path in sorted(glob.glob(os.path.join(tmp, "peer%s.*.json" % i))):
    for t in json.load(open(path)):
        # model_type reads e.g. "qwen2 1B Q4_K - Medium": the file's weight type follows the size.
        weight_type = t["model_type"].split(" ", 2)[-1]
        if t["n_prompt"] == prompt and t["n_gen"] == 0:
            peer_runs["pp"] += t["samples_ts"]
        elif t["n_gen"] == gen and t["n_prompt"] == 0:
            peer_runs["tg"] += t["samples_ts"]
for k, v in list(peer_runs.items()):
    if not v:
        del peer_runs[k]
        continue
    peer[k] = statistics.median(v)
ours = {"pp": [], "tg": []}
for path in sorted(glob.glob(os.path.join(tmp, "ours%s.*.tsv" % i))):
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if f[0] == "prefill %d" % prompt:
            ours["pp"].append(float(f[1]))
        elif f[0] == "decode batch 1":
            ours["tg"].append(float(f[1]))
for k in ("pp", "tg"):
    if k not in peer or not ours[k]:
        sys.exit("bench-peer: %s: missing %s result" % (model, k))
tg_spread = "%.1f-%.1f / %.1f-%.1f" % (min(ours["tg"]), max(ours["tg"]), min(peer_runs["tg"]),
                                       max(peer_runs["tg"]))
for k in ("pp", "tg"):
    ours[k] = statistics.median(ours[k])
read = []
for path in glob.glob(os.path.join(tmp, "bw%s.*.txt" % i)):
    m = re.search(r"median ([0-9.]+) GB/s", open(path).read())
    if m:
        read.append(float(m.group(1)))
gb = int(token_bytes) / 1e9   # the KV cache's reads come on top
bw = "%.0f / %.0f / %s" % (ours["tg"] * gb, peer["tg"] * gb,
                           "%.0f-%.0f" % (min(read), max(read)) if read else "n/a")
print("\t".join([os.path.basename(model), weight_type, threads] +
                ["%.1f\t%.1f\t%.2fx" % (ours[k], peer[k], ours[k] / peer[k]) for k in ("pp", "tg")] +
                [tg_spread, bw]))
EOF
done

# --- decode at BATCHES (default 16 and 64) vs llama-batched-bench (a separate table) ---
BATCH_PROMPT=32
build_llama_batched
i=0
for m in "$@"; do
    i=$((i + 1))
    for BATCH in $BATCHES; do
        r=0
        while [ $r -lt "$REPS" ]; do
            r=$((r + 1))
            echo "bench-peer: $m: decode batch $BATCH, run $r of $REPS" >&2
            "$EVICTBENCH" bench --model "$m" --threads "$THREADS" --prompt-len "$BATCH_PROMPT" \
                --decode-prompt "$BATCH_PROMPT" --new "$GEN" --batches "$BATCH" --kv-type f16 \
                --tsv >"$TMP/oursb$i.$BATCH.$r.tsv" || die "evictbench bench failed on $m"
            if [ -x "$LLAMA_BATCHED" ]; then
                "$LLAMA_BATCHED" -m "$m" -c $((BATCH * (BATCH_PROMPT + GEN))) -b 2048 -ub 512 \
                    -npp "$BATCH_PROMPT" -ntg "$GEN" -npl "$BATCH" -t "$THREADS" \
                    --output-format jsonl >"$TMP/peerb$i.$BATCH.$r.jsonl" 2>"$TMP/peerb$i.err" ||
                    { cat "$TMP/peerb$i.err" >&2; die "llama-batched-bench failed on $m"; }
            fi
        done
        python3 - "$m" "$BATCH" "$TMP" "$i" >>"$TMP/brows" <<'EOF'
import glob, json, os, statistics, sys
model, batch, tmp, i = sys.argv[1:5]
def runs(pattern, pick):
    vals = []
    for path in glob.glob(pattern):
        for line in open(path):
            v = pick(line)
            if v is not None:
                vals.append(v)
    return vals
def tsv_row(name):
    def pick(line):
        f = line.rstrip("\n").split("\t")
        return float(f[1]) if f[0] == name else None
    return pick
def spread(v):
    return "%.0f-%.0f" % (min(v), max(v)) if v else "n/a"
ours = runs("%s/oursb%s.%s.*.tsv" % (tmp, i, batch), tsv_row("decode batch %s" % batch))
bs1 = runs("%s/ours%s.*.tsv" % (tmp, i), tsv_row("decode batch 1"))
peer = runs("%s/peerb%s.%s.*.jsonl" % (tmp, i, batch),
            lambda l: float(json.loads(l)["speed_tg"]) if l.startswith("{") else None)
if not ours:
    sys.exit("bench-peer: %s: missing decode batch %s result" % (model, batch))
o, p = statistics.median(ours), statistics.median(peer) if peer else None
b1 = statistics.median(bs1) if bs1 else None
print("\t".join([os.path.basename(model), batch, "%.1f" % o, spread(ours),
                 "%.1f" % p if p else "n/a", spread(peer), "%.2fx" % (o / p) if p else "n/a",
                 "%.2fx" % (o / b1) if b1 else "n/a"]))
EOF
    done
done

echo "evictbench vs llama.cpp llama-bench ($PEER_VERSION sdist), medians of $REPS runs, tokens/s"
python3 - "$TMP/rows" "$PROMPT" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
head = ["model", "weight type", "threads",
        "prefill %s ours" % sys.argv[2], "llama.cpp", "ratio",
        "decode bs1 ours", "llama.cpp", "ratio", "bs1 range ours / llama.cpp",
        "bs1 GB/s ours / llama.cpp / plain read"]
widths = [max(len(r[c]) for r in rows + [head]) for c in range(len(head))]
for r in [head] + rows:
    print("  ".join(v.ljust(w) if c < 2 else v.rjust(w) for c, (v, w) in enumerate(zip(r, widths))))
EOF
echo
echo "decode at batch $BATCHES (sequences of $BATCH_PROMPT prompt tokens, $GEN new each) vs llama-batched-bench, medians (and ranges) of $REPS runs, tokens/s"
python3 - "$TMP/brows" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
head = ["model", "batch", "decode ours", "range", "llama.cpp", "range", "ratio", "ours / bs1"]
widths = [max(len(r[c]) for r in rows + [head]) for c in range(len(head))]
for r in [head] + rows:
    print("  ".join(v.ljust(w) if c < 1 else v.rjust(w) for c, (v, w) in enumerate(zip(r, widths))))
EOF
