#!/bin/sh
# Fuzz smoke test: builds every fuzzer and runs each for ~3 seconds, starting
# from its regression corpus tests/fuzz_corpus/<name>/ (fuzz_gguf -> gguf).
# Fails on a crash; skips when clang with libFuzzer is not installed.
set -u
cd "$(dirname "$0")/../.." || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' > "$tmp/probe.c"
if ! command -v "${FUZZ_CC:-clang}" >/dev/null 2>&1 ||
   ! "${FUZZ_CC:-clang}" -fsanitize=fuzzer "$tmp/probe.c" -o "$tmp/probe" >/dev/null 2>&1; then
    echo "skip: clang with libFuzzer is not available"
    exit 0
fi

tools/fuzz/build.sh > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; echo "FAIL: fuzzer build"; exit 1; }

status=0
for src in tools/fuzz/fuzz_*.c; do
    [ -f "$src" ] || continue
    name=$(basename "$src" .c)
    corpus=tests/fuzz_corpus/${name#fuzz_}
    mkdir -p "$tmp/$name"            # new inputs go here, never into the committed corpus
    set -- "$tmp/$name"
    [ -d "$corpus" ] && set -- "$@" "$corpus"
    if tools/fuzz/out/"$name" -max_total_time=3 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$tmp/$name-" "$@" > "$tmp/$name.log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp/$name.log")
        echo "ok: $name, ${runs:-?} runs"
    else
        tail -n 40 "$tmp/$name.log"
        echo "FAIL: $name crashed (reproduce: tools/fuzz/out/$name <input>; inputs: $corpus)"
        status=1
    fi
done
exit $status
