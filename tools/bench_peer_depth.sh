#!/bin/sh
# bench_peer_depth.sh - decode at depth, ours vs llama.cpp's llama-bench -d D -n 64:
# the depth rows of make bench-peer (tools/bench_peer.sh runs this last).
#
# Usage: tools/bench_peer_depth.sh MODEL.gguf ...
#   LLAMA_BENCH  the llama-bench binary (bench_peer.sh builds it)
#   EVICTBENCH   our binary (default ./evictbench)
#   THREADS, REPS  as bench_peer.sh; DEPTHS  the depths (default "4096 8192")
# Both runtimes decode 64 tokens after D tokens of context, f16 KV, batch 1, the
# same GGUF and threads.  llama-bench prefills the D tokens for real; ours fills
# the cache to D slots by repeating the K/V of a 256-token real prefill (bench
# --contexts), so each decode step reads the same D slots.  Ours: the median
# decode step of each run, then the median over REPS runs; llama.cpp: the median
# of its REPS samples.
set -eu

DEPTHS=${DEPTHS:-4096 8192}
THREADS=${THREADS:-$(nproc 2>/dev/null || echo 1)}
REPS=${REPS:-3}
EVICTBENCH=${EVICTBENCH:-./evictbench}
GEN=64

die() { echo "bench-peer-depth: $*" >&2; exit 1; }
[ -n "${LLAMA_BENCH:-}" ] && [ -x "$LLAMA_BENCH" ] || die "LLAMA_BENCH must name the llama-bench binary"
[ -x "$EVICTBENCH" ] || die "$EVICTBENCH not found (run make all first)"
[ $# -gt 0 ] || die "no models given"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
: >"$TMP/rows"
for m in "$@"; do
    [ -f "$m" ] || die "model $m not found"
    for d in $DEPTHS; do
        echo "bench-peer-depth: $m: llama-bench -d $d -n $GEN, $REPS repetitions" >&2
        "$LLAMA_BENCH" -m "$m" -p 0 -n "$GEN" -d "$d" -t "$THREADS" -r "$REPS" -ctk f16 -ctv f16 \
            -o json >"$TMP/peer.json" 2>"$TMP/peer.err" ||
            { cat "$TMP/peer.err" >&2; die "llama-bench failed on $m at depth $d"; }
        rm -f "$TMP/ours.db"
        r=0
        while [ $r -lt "$REPS" ]; do
            r=$((r + 1))
            echo "bench-peer-depth: $m: evictbench bench --contexts $d, run $r of $REPS" >&2
            "$EVICTBENCH" bench --contexts "$d" --model "$m" --threads "$THREADS" --batches 1 \
                --kv-types f16 --policies fullkv --new "$GEN" --db "$TMP/ours.db" >/dev/null ||
                die "evictbench bench --contexts $d failed on $m"
        done
        python3 - "$m" "$d" "$TMP/peer.json" "$TMP/ours.db" >>"$TMP/rows" <<'PY'
import json, os, sqlite3, statistics, sys
model, depth, peer_json, ours_db = sys.argv[1:5]
peer = [statistics.median(t["samples_ts"]) for t in json.load(open(peer_json))
        if t["n_gen"] > 0 and t.get("n_depth", 0) == int(depth)]
ours = [r[0] for r in sqlite3.connect(ours_db).execute(
        "SELECT decode_tok_s FROM bench WHERE status = 'ok' AND context = ?", (int(depth),))]
if not peer or not ours:
    sys.exit("bench-peer-depth: %s: missing a result at depth %s" % (model, depth))
o, p = statistics.median(ours), peer[0]
print("\t".join([os.path.basename(model), depth, "%.2f" % o, "%.2f" % p, "%.2fx" % (o / p)]))
PY
    done
done

echo "decode at depth, batch 1, f16 KV, $GEN new tokens: evictbench vs llama-bench -d, medians of $REPS runs, tokens/s"
python3 - "$TMP/rows" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
head = ["model", "depth", "decode ours", "llama.cpp", "ratio"]
widths = [max(len(r[c]) for r in rows + [head]) for c in range(len(head))]
for r in [head] + rows:
    print("  ".join(v.ljust(w) if c < 1 else v.rjust(w) for c, (v, w) in enumerate(zip(r, widths))))
PY
