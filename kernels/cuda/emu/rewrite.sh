#!/bin/sh
# rewrite.sh IN.cu OUT.cpp - a CUDA source of this backend as C++ for the
# CPU emulator (emu.h): each `kernel<<<config>>>(args)` becomes
# `emu::launch(config).call(a call of kernel, args)`, and each `extern __shared__ T name[];`
# a pointer to the launch's dynamic shared memory.  Only the two forms nvcc
# alone parses are touched; the rest compiles as C++ as it is.
set -eu
[ $# -eq 2 ] || { echo "usage: rewrite.sh IN.cu OUT.cpp" >&2; exit 2; }
perl -0777 -pe '
    s/(\b\w+(?:<[^<>;()]*>)?)\s*<<<(.*?)>>>\s*\(/emu::launch($2).call([](auto... emu_p) { $1(emu_p...); }, /gs;
    s/extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?(\w+)\s+(\w+)\[\];/$1 *$2 = ($1 *)emu::dynamic_shared();/g;
' "$1" > "$2.tmp"
if grep -n -e '<<<' -e 'extern __shared__' "$2.tmp" >&2; then
    rm -f "$2.tmp"
    echo "rewrite.sh: $1: a launch or shared declaration in a form it does not know" >&2
    exit 1
fi
mv "$2.tmp" "$2"
