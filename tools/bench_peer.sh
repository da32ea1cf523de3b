#!/bin/sh
# bench_peer.sh - evictbench vs llama.cpp's llama-bench on the same GGUF files and threads:
# prefill 512 and decode batch 1 tokens/s, with the ratio ours / llama.cpp.
#
# Usage: tools/bench_peer.sh [MODEL.gguf ...]      (make bench-peer [PEER_MODELS=...])
#   THREADS   threads for both runtimes (default: the number of CPUs)
#   REPS      repetitions per measurement; the table shows medians (default 3)
#   PEER_DIR  build folder for llama.cpp (default build-peer, ignored by git)
# Default models: models/SmolLM2-135M-Instruct.Q4_1.gguf, plus the Qwen2.5-Coder
# 0.5B and 1.5B Q4_K_M GGUFs in models/ where present.
#
# A second table: decode at batch 16 (16 sequences of 32 prompt tokens, GEN new
# tokens each) beside llama.cpp's llama-batched-bench, with our batch-16 / batch-1
# speedup; n/a where llama-batched-bench does not build.
#
# llama-bench is built from the llama.cpp source that the llama-cpp-python sdist
# vendors (the version pinned below, the same one tools/golden/gen_tokens.py uses),
# CPU only, once: a rerun finds the binary and skips the build.
set -eu

PEER_VERSION=0.3.36
PEER_DIR=${PEER_DIR:-build-peer}
THREADS=${THREADS:-$(nproc 2>/dev/null || echo 1)}
REPS=${REPS:-3}
PROMPT=512
GEN=128
EVICTBENCH=${EVICTBENCH:-./evictbench}

die() { echo "bench-peer: $*" >&2; exit 1; }

case $THREADS in ''|*[!0-9]*|0) die "THREADS must be a positive integer, got '$THREADS'";; esac
case $REPS in ''|*[!0-9]*|0) die "REPS must be a positive integer, got '$REPS'";; esac
[ -x "$EVICTBENCH" ] || die "$EVICTBENCH not found (run make all first)"
command -v python3 >/dev/null 2>&1 || die "python3 not found (it reads llama-bench's JSON)"

SRC_DIR=$PEER_DIR/llama_cpp_python-$PEER_VERSION/vendor/llama.cpp
CMAKE_DIR=$PEER_DIR/llama.cpp-$PEER_VERSION
LLAMA_BENCH=$CMAKE_DIR/bin/llama-bench

build_llama_bench() {
    command -v cmake >/dev/null 2>&1 || die "cmake not found (apt-get install cmake)"
    command -v c++ >/dev/null 2>&1 || die "no C++ compiler (c++) found (apt-get install g++)"
    command -v cc >/dev/null 2>&1 || die "no C compiler (cc) found (apt-get install gcc)"
    mkdir -p "$PEER_DIR"
    sdist=$PEER_DIR/llama_cpp_python-$PEER_VERSION.tar.gz
    if [ ! -f "$sdist" ]; then
        echo "bench-peer: downloading the llama-cpp-python $PEER_VERSION source package" >&2
        python3 -m pip download --quiet --no-deps --no-binary :all: \
            "llama-cpp-python==$PEER_VERSION" -d "$PEER_DIR" >&2 ||
            die "cannot download llama-cpp-python==$PEER_VERSION with pip (no network or no package index?)"
        [ -f "$sdist" ] || die "pip did not produce $sdist"
    fi
    if [ ! -f "$SRC_DIR/CMakeLists.txt" ]; then
        tar -xzf "$sdist" -C "$PEER_DIR" "llama_cpp_python-$PEER_VERSION/vendor/llama.cpp" ||
            die "cannot unpack $sdist"
    fi
    # CPU only, tuned for this CPU, nothing fetched at configure or run time:
    # no CUDA, no OpenSSL/HTTP (this llama.cpp has no curl option any more), no
    # tests, examples, server or unified app.
    echo "bench-peer: building llama-bench (CPU, Release, native; once)" >&2
    cmake -S "$SRC_DIR" -B "$CMAKE_DIR" -DCMAKE_BUILD_TYPE=Release \
        -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF \
        -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON \
        -DBUILD_SHARED_LIBS=OFF >"$CMAKE_DIR.configure.log" 2>&1 ||
        die "cmake configure failed; see $CMAKE_DIR.configure.log"
    cmake --build "$CMAKE_DIR" --target llama-bench -j "${PEER_JOBS:-2}" \
        >"$CMAKE_DIR.build.log" 2>&1 || die "llama-bench build failed; see $CMAKE_DIR.build.log"
    [ -x "$LLAMA_BENCH" ] || die "the build did not produce $LLAMA_BENCH"
}

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
    echo "bench-peer: $m: llama-bench, $REPS repetitions" >&2
    "$LLAMA_BENCH" -m "$m" -p "$PROMPT" -n "$GEN" -t "$THREADS" -r "$REPS" -o json \
        >"$TMP/peer$i.json" 2>"$TMP/peer$i.err" ||
        { cat "$TMP/peer$i.err" >&2; die "llama-bench failed on $m"; }
    # Each run of ours loads the model afresh; its prefill is the better of two passes.
    # KV in f16, as llama-bench keeps it by default (like for like).
    r=0
    while [ $r -lt "$REPS" ]; do
        r=$((r + 1))
        echo "bench-peer: $m: evictbench bench, run $r of $REPS" >&2
        "$EVICTBENCH" bench --model "$m" --threads "$THREADS" --prompt-len "$PROMPT" \
            --new "$GEN" --batches 1 --kv-type f16 --tsv >"$TMP/ours$i.$r.tsv" ||
            die "evictbench bench failed on $m"
    done
    python3 - "$m" "$THREADS" "$PROMPT" "$GEN" "$TMP/peer$i.json" "$TMP"/ours$i.*.tsv \
        >>"$TMP/rows" <<'EOF'
import json, os, statistics, sys
model, threads, prompt, gen, peer_json = sys.argv[1:6]
prompt, gen = int(prompt), int(gen)
peer = {}
weight_type = "?"
for t in json.load(open(peer_json)):
    # model_type reads e.g. "qwen2 1B Q4_K - Medium": the file's weight type follows the size.
    weight_type = t["model_type"].split(" ", 2)[-1]
    if t["n_prompt"] == prompt and t["n_gen"] == 0:
        peer["pp"] = statistics.median(t["samples_ts"])
    elif t["n_gen"] == gen and t["n_prompt"] == 0:
        peer["tg"] = statistics.median(t["samples_ts"])
ours = {"pp": [], "tg": []}
for path in sys.argv[6:]:
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if f[0] == "prefill %d" % prompt:
            ours["pp"].append(float(f[1]))
        elif f[0] == "decode batch 1":
            ours["tg"].append(float(f[1]))
for k in ("pp", "tg"):
    if k not in peer or not ours[k]:
        sys.exit("bench-peer: %s: missing %s result" % (model, k))
    ours[k] = statistics.median(ours[k])
print("\t".join([os.path.basename(model), weight_type, threads] +
                ["%.1f\t%.1f\t%.2fx" % (ours[k], peer[k], ours[k] / peer[k]) for k in ("pp", "tg")]))
EOF
done

# --- decode batch 16 vs llama-batched-bench (a separate table) ---
BATCH=16
BATCH_PROMPT=32
LLAMA_BATCHED=$CMAKE_DIR/bin/llama-batched-bench
if [ ! -x "$LLAMA_BATCHED" ]; then
    echo "bench-peer: building llama-batched-bench (once)" >&2
    cmake --build "$CMAKE_DIR" --target llama-batched-bench -j "${PEER_JOBS:-2}" \
        >"$CMAKE_DIR.batched.log" 2>&1 ||
        echo "bench-peer: llama-batched-bench did not build (see $CMAKE_DIR.batched.log): n/a" >&2
fi
i=0
for m in "$@"; do
    i=$((i + 1))
    r=0
    while [ $r -lt "$REPS" ]; do
        r=$((r + 1))
        echo "bench-peer: $m: decode batch $BATCH, run $r of $REPS" >&2
        "$EVICTBENCH" bench --model "$m" --threads "$THREADS" --prompt-len "$BATCH_PROMPT" \
            --decode-prompt "$BATCH_PROMPT" --new "$GEN" --batches "$BATCH" --kv-type f16 --tsv \
            >"$TMP/oursb$i.$r.tsv" || die "evictbench bench failed on $m"
        if [ -x "$LLAMA_BATCHED" ]; then
            "$LLAMA_BATCHED" -m "$m" -c $((BATCH * (BATCH_PROMPT + GEN))) -b 2048 -ub 512 \
                -npp "$BATCH_PROMPT" -ntg "$GEN" -npl "$BATCH" -t "$THREADS" \
                --output-format jsonl >"$TMP/peerb$i.$r.jsonl" 2>"$TMP/peerb$i.err" ||
                { cat "$TMP/peerb$i.err" >&2; die "llama-batched-bench failed on $m"; }
        fi
    done
    python3 - "$m" "$BATCH" "$TMP" "$i" >>"$TMP/brows" <<'EOF'
import glob, json, os, statistics, sys
model, batch, tmp, i = sys.argv[1:5]
def medians(pattern, pick):
    vals = []
    for path in glob.glob(pattern):
        for line in open(path):
            v = pick(line)
            if v is not None:
                vals.append(v)
    return statistics.median(vals) if vals else None
def tsv_row(name):
    def pick(line):
        f = line.rstrip("\n").split("\t")
        return float(f[1]) if f[0] == name else None
    return pick
ours = medians("%s/oursb%s.*.tsv" % (tmp, i), tsv_row("decode batch %s" % batch))
bs1 = medians("%s/ours%s.*.tsv" % (tmp, i), tsv_row("decode batch 1"))
peer = medians("%s/peerb%s.*.jsonl" % (tmp, i),
               lambda l: float(json.loads(l)["speed_tg"]) if l.startswith("{") else None)
if ours is None:
    sys.exit("bench-peer: %s: missing decode batch %s result" % (model, batch))
print("\t".join([os.path.basename(model), "%.1f" % ours,
                 "%.1f" % peer if peer else "n/a", "%.2fx" % (ours / peer) if peer else "n/a",
                 "%.2fx" % (ours / bs1) if bs1 else "n/a"]))
EOF
done

echo "evictbench vs llama.cpp llama-bench ($PEER_VERSION sdist), medians of $REPS runs, tokens/s"
python3 - "$TMP/rows" "$PROMPT" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
head = ["model", "weight type", "threads",
        "prefill %s ours" % sys.argv[2], "llama.cpp", "ratio",
        "decode bs1 ours", "llama.cpp", "ratio"]
widths = [max(len(r[c]) for r in rows + [head]) for c in range(len(head))]
for r in [head] + rows:
    print("  ".join(v.ljust(w) if c < 2 else v.rjust(w) for c, (v, w) in enumerate(zip(r, widths))))
EOF
echo
echo "decode batch $BATCH ($BATCH sequences of $BATCH_PROMPT prompt tokens, $GEN new each) vs llama-batched-bench, medians of $REPS runs, tokens/s"
python3 - "$TMP/brows" "$BATCH" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
head = ["model", "decode bs%s ours" % sys.argv[2], "llama.cpp", "ratio", "ours bs%s / bs1" % sys.argv[2]]
widths = [max(len(r[c]) for r in rows + [head]) for c in range(len(head))]
for r in [head] + rows:
    print("  ".join(v.ljust(w) if c < 1 else v.rjust(w) for c, (v, w) in enumerate(zip(r, widths))))
EOF

# --- decode at depth vs llama-bench -d (a separate table; tools/bench_peer_depth.sh) ---
# On the Qwen2.5-Coder GGUFs given (the default set's 0.5B and 1.5B); DEPTHS="" skips it.
DEPTH_MODELS=
for m in "$@"; do
    case $(basename "$m") in qwen2.5-coder-*) DEPTH_MODELS="$DEPTH_MODELS $m";; esac
done
if [ -n "${DEPTHS-4096 8192}" ] && [ -n "$DEPTH_MODELS" ]; then
    echo
    # shellcheck disable=SC2086 # the model list splits on spaces
    LLAMA_BENCH=$LLAMA_BENCH EVICTBENCH=$EVICTBENCH THREADS=$THREADS REPS=$REPS \
        DEPTHS="${DEPTHS-4096 8192}" tools/bench_peer_depth.sh $DEPTH_MODELS
fi
