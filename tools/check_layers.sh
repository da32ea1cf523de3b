#!/bin/sh
# The layers' include rule for policies/: a policy sees the runtime only
# through its views (policies/policy.h), so its files include headers of
# policies/ itself ("select.h"), kernels/ and util/ ("../kernels/backend.h",
# "util/err.h") and system headers, never model/, datasets/ or harness/;
# harness/ wires the model to the policies.  Prints each upward include and
# fails.   Usage: tools/check_layers.sh [DIR]   (default: policies)
set -u
cd "$(dirname "$0")/.." || exit 1
dir=${1:-policies}
status=0
for f in $(find "$dir" -name '*.c' -o -name '*.h' | sort); do
    # every quoted include: its line number and target
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
    sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1 \2/' > "${TMPDIR:-/tmp}/check_layers.$$"
    while read -r line target; do
        case $target in
        kernels/*|util/*|../kernels/*|../util/*) continue ;;
        */*) ;;
        *) [ -f "$(dirname "$f")/$target" ] && continue ;;
        esac
        echo "$f:$line: includes \"$target\" (policies/ may include only policies/, kernels/ and util/ headers)"
        status=1
    done < "${TMPDIR:-/tmp}/check_layers.$$"
done
rm -f "${TMPDIR:-/tmp}/check_layers.$$"
[ $status -eq 0 ] && echo "check_layers: ok ($dir includes only its own, kernels/ and util/ headers)"
exit $status
