#!/bin/sh
# check_layers.sh - tools/check_layers.sh (part of make lint): policies/ as
# it stands passes; a copy with an include of model/ or harness/ fails and
# names the file and line; its own, kernels/ and util/ headers pass.
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
tools/check_layers.sh policies >/dev/null || fail "policies/ has an upward include"
mkdir -p "$tmp/p"
printf '#include "own.h"\n#include "../kernels/backend.h"\n#include "util/err.h"\n#include <stdio.h>\n' \
    > "$tmp/p/ok.c"
printf '/* own */\n' > "$tmp/p/own.h"
tools/check_layers.sh "$tmp/p" >/dev/null || fail "allowed includes were refused"
printf '#include "own.h"\n#include "../model/tokenizer.h"\n' > "$tmp/p/bad.c"
out=$(tools/check_layers.sh "$tmp/p") && fail "an include of model/ passed"
printf '%s\n' "$out" | grep -q 'bad.c:2: includes "../model/tokenizer.h"' || fail "no location: $out"
printf '#include "harness/exp/point.h"\n' > "$tmp/p/bad.c"
tools/check_layers.sh "$tmp/p" >/dev/null && fail "an include of harness/ passed"
echo "ok check_layers"
