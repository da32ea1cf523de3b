#!/bin/sh
# check_stack.sh LOG PATTERN - fails when a kernel whose (mangled) name
# matches the extended regex PATTERN has a stack frame or spill stores in
# LOG, the `ptxas -v` output of a build (`make cuda` runs it on the
# attention kernels: accumulators indexed at run time go to local memory,
# which on the hot path costs more than the whole softmax).  Also fails when
# no kernel matches (the pattern no longer names anything).
log=$1 pattern=$2
if [ ! -r "$log" ] || [ -z "$pattern" ]; then
    echo "usage: check_stack.sh LOG PATTERN" >&2
    exit 2
fi
awk -v pat="$pattern" '
/Function properties for / { name = $NF; next }
/bytes stack frame/ {
    if (name !~ pat) next
    seen++
    frame = $1; spill = $5
    for (i = 1; i <= NF; i++) {
        if ($(i+1) == "bytes" && $(i+2) == "stack") frame = $i
        if ($(i+1) == "bytes" && $(i+2) == "spill" && $(i+3) ~ /^stores/) spill = $i
    }
    if (frame + 0 > 0 || spill + 0 > 0) {
        printf "check_stack: %s: %d bytes stack frame, %d bytes spill stores\n", name, frame, spill
        bad++
    }
}
END {
    if (!seen) { printf "check_stack: no kernel matches /%s/\n", pat; exit 1 }
    if (bad) { printf "check_stack: %d of %d hot kernels use local memory\n", bad, seen; exit 1 }
    printf "check_stack: %d hot kernels, no stack frame, no spills\n", seen
}' "$log"
