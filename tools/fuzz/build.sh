#!/bin/sh
# Builds every tools/fuzz/fuzz_*.c (or only the names given, e.g. "fuzz_gguf")
# into tools/fuzz/out/ with libFuzzer, ASan and UBSan.
#
# Each fuzzer lists the library sources it needs in one comment line:
#     // fuzz-sources: model/gguf.c kernels/quant.c util/err.c
# and, if it needs system libraries, another:
#     // fuzz-libs: -lcjson
# Sources are compiled directly (not from build/libevictbench.a) so that all
# of them carry the fuzzer's coverage instrumentation.
set -u
cd "$(dirname "$0")/../.." || exit 1
CC=${FUZZ_CC:-clang}
OUT=tools/fuzz/out
mkdir -p "$OUT"

if [ $# -gt 0 ]; then
    srcs=""
    for n in "$@"; do srcs="$srcs tools/fuzz/${n%.c}.c"; done
else
    srcs=$(ls tools/fuzz/fuzz_*.c 2>/dev/null)
fi

status=0
for src in $srcs; do
    name=$(basename "$src" .c)
    if [ ! -f "$src" ]; then echo "build.sh: $src: no such fuzzer" >&2; status=1; continue; fi
    deps=$(sed -n 's|^// fuzz-sources:||p' "$src" | head -n 1)
    libs=$(sed -n 's|^// fuzz-libs:||p' "$src" | head -n 1)
    if [ -z "$deps" ]; then
        echo "build.sh: $src: missing a '// fuzz-sources: ...' line" >&2
        status=1
        continue
    fi
    echo "fuzz: $OUT/$name <- $src$deps"
    # shellcheck disable=SC2086  # deps and libs are word lists
    if ! $CC -g -O1 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unknown-pragmas \
            -I. -I/usr/include/openblas \
            -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
            -fno-omit-frame-pointer "$src" $deps $libs -lm -o "$OUT/$name"; then
        echo "build.sh: $src: build failed" >&2
        status=1
    fi
done
exit $status
