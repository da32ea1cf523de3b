#!/bin/sh
# gpu_bundle.sh - the build dependencies a lent GPU machine lacks (cJSON,
# SQLite, OpenBLAS and zlib headers and libraries: it has no network and none
# of their -dev packages), as Debian packages in one ignored folder that the
# device call carries.  tools/devcheck.sh unpacks them there, into a private
# prefix, only when the system's own headers are missing.
#
#   tools/gpu_bundle.sh [DIR]            fetch the .deb files into DIR (default
#                                        gpu-bundle, about 15 MB), check them
#                                        (unpack, build against them) and print
#                                        the path to carry
#   tools/gpu_bundle.sh unpack DIR DEST  unpack DIR's .deb files into DEST
#                                        (dpkg -x: no root needed) and print the
#                                        variables that build and run against it
#
# The libraries' runtime packages (libcjson1, libsqlite3-0, libopenblas0-*,
# libgfortran5, libquadmath0) come too: the machine may lack those as well.
# At run time only the ones the system lacks are put on LD_LIBRARY_PATH (a
# folder of links, DEST/rt), so python's own sqlite3 and the like still load
# the system's newer copies.
set -u

PKGS="libcjson-dev libcjson1 libsqlite3-dev libsqlite3-0 libopenblas-dev
libopenblas-pthread-dev libopenblas0-pthread libopenblas0 libgfortran5 libquadmath0
zlib1g-dev"
ARCH_DIR=x86_64-linux-gnu

die() { echo "gpu_bundle: $*" >&2; exit 1; }

# Prints the build and run variables of an unpacked prefix (sh syntax, for
# eval): headers first in CPATH (so a system copy, if any, is not used half),
# libraries on LIBRARY_PATH, runtime links on LD_LIBRARY_PATH.
unpack() { # dir dest
    dir=$1 dest=$2
    ls "$dir"/*.deb >/dev/null 2>&1 || die "no .deb files in $dir (run tools/gpu_bundle.sh first)"
    command -v dpkg >/dev/null 2>&1 || die "dpkg is not installed: cannot unpack $dir"
    mkdir -p "$dest" || die "cannot create $dest"
    dest=$(cd "$dest" && pwd) || die "cannot enter $dest"
    stamp=$dest/.unpacked
    # ls -l: names and sizes, so a changed bundle is unpacked again
    want=$(ls -l "$dir"/*.deb | awk '{ print $5, $NF }')
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        rm -rf "$dest/usr" "$dest/rt" "$stamp"
        for d in "$dir"/*.deb; do
            dpkg -x "$d" "$dest" || die "dpkg -x $d failed"
        done
        printf '%s\n' "$want" >"$stamp" || die "cannot write $stamp"
    fi
    lib=$dest/usr/lib/$ARCH_DIR
    blas=$lib/openblas-pthread
    inc=$dest/usr/include
    for h in cjson/cJSON.h sqlite3.h zlib.h $ARCH_DIR/openblas-pthread/cblas.h; do
        [ -f "$inc/$h" ] || die "$dir lacks $h"
    done
    # zlib1g-dev's libz.so is an absolute link to the packager's libz.so.1.x.y;
    # point it at this system's runtime (zlib itself is on every system).
    sysz=$(ldconfig -p 2>/dev/null | sed -n 's/^[[:space:]]*libz\.so\.1 (libc6,x86-64) => //p' | head -n 1)
    [ -n "$sysz" ] || sysz=/lib/$ARCH_DIR/libz.so.1
    [ -e "$sysz" ] || die "no libz.so.1 on this system"
    ln -sf "$sysz" "$lib/libz.so" || die "cannot link $lib/libz.so"
    # Runtime libraries the system lacks: links in rt/ (the system's own
    # otherwise, which are newer on a newer distribution).
    mkdir -p "$dest/rt" || die "cannot create $dest/rt"
    for so in libcjson.so.1 libsqlite3.so.0 libgfortran.so.5 libquadmath.so.0; do
        ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$so (libc6,x86-64)" && continue
        [ -e "$lib/$so" ] || die "$dir lacks $so"
        ln -sf "$lib/$so" "$dest/rt/$so" || die "cannot link $dest/rt/$so"
    done
    # OpenBLAS: always the bundle's, the one the build linked.
    ln -sf "$blas/libopenblas.so.0" "$dest/rt/libopenblas.so.0" || die "cannot link libopenblas.so.0"
    echo "CPATH='$inc:$inc/$ARCH_DIR/openblas-pthread${CPATH:+:$CPATH}'"
    echo "LIBRARY_PATH='$lib:$blas${LIBRARY_PATH:+:$LIBRARY_PATH}'"
    echo "LD_LIBRARY_PATH='$dest/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}'"
}

# Unpacks into a scratch prefix and builds and runs a program calling all four
# libraries against it alone (-M shows which headers were taken).
check() { # dir
    tmp=$(mktemp -d) || die "mktemp failed"
    vars=$(unpack "$1" "$tmp/root") || { rm -rf "$tmp"; exit 1; }
    cat >"$tmp/t.c" <<'EOF'
#include <cblas.h>
#include <cjson/cJSON.h>
#include <sqlite3.h>
#include <stdio.h>
#include <zlib.h>
int main(void)
{
    float x[2] = {3, 4};
    cJSON *j = cJSON_Parse("[1]");
    int ok = j && cblas_snrm2(2, x, 1) == 5.0f && sqlite3_libversion_number() > 0 &&
             zlibVersion()[0] != '\0';
    cJSON_Delete(j);
    printf("gpu_bundle: cblas, cJSON, SQLite %s and zlib %s link and run\n", sqlite3_libversion(),
           zlibVersion());
    return !ok;
}
EOF
    rc=0
    (
        eval "$vars"
        export CPATH LIBRARY_PATH LD_LIBRARY_PATH
        cc -M "$tmp/t.c" >"$tmp/deps" &&
            cc "$tmp/t.c" -o "$tmp/t" -lopenblas -lcjson -lsqlite3 -lz &&
            "$tmp/t" && ldd "$tmp/t" | grep -E 'openblas|cjson|sqlite|libz' &&
            for h in cblas.h cJSON.h sqlite3.h zlib.h; do
                grep -q "$tmp/root/usr/include/[^ ]*$h" "$tmp/deps" ||
                    { echo "gpu_bundle: $h was not taken from the bundle"; exit 1; }
            done
    ) || rc=1
    rm -rf "$tmp"
    [ $rc = 0 ] || die "the bundle in $1 does not build"
}

case "${1:-}" in
unpack)
    [ $# = 3 ] || die "usage: tools/gpu_bundle.sh unpack DIR DEST"
    unpack "$2" "$3" ;;
-h|--help)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' ;;
*)
    cd "$(dirname "$0")/.." || exit 1
    DIR=${1:-gpu-bundle}
    mkdir -p "$DIR" || die "cannot create $DIR"
    case "$DIR" in /*) ;; *) git check-ignore -q "$DIR/" ||
        die "$DIR is not ignored by git: the device call carries only an ignored folder whole" ;;
    esac
    rm -f "$DIR"/*.deb
    # shellcheck disable=SC2086 # the names are one word each
    (cd "$DIR" && apt-get download $PKGS) >"$DIR/download.log" 2>&1 ||
        { cat "$DIR/download.log" >&2; die "apt-get download failed (see $DIR/download.log)"; }
    rm -f "$DIR/download.log"
    check "$DIR"
    echo "gpu_bundle: $(ls "$DIR"/*.deb | wc -l) packages, $(du -sh "$DIR" | cut -f1) in $DIR"
    echo "carry: $DIR" ;;
esac
