#!/bin/sh
# Size limits for harness/: no file over 600 lines, no function over 80 lines.
# A function is counted from its opening line (a line at column 0 that is not
# a comment, preprocessor line or closing brace, followed by "{" at column 0 or
# ending in "{") to the next "}" at column 0.  The project's style (K&R with the
# function's brace on its own line) makes this exact enough for a limit.
# Usage: tools/check_size.sh [DIR...]   (default: harness)
set -u
cd "$(dirname "$0")/.." || exit 1
MAX_FILE=${MAX_FILE:-600}
MAX_FUNC=${MAX_FUNC:-80}
dirs=${*:-harness}
status=0
for f in $(find $dirs -name '*.c' -o -name '*.h' | sort); do
    n=$(wc -l < "$f")
    if [ "$n" -gt "$MAX_FILE" ]; then
        echo "$f: $n lines (limit $MAX_FILE)"
        status=1
    fi
    awk -v f="$f" -v max="$MAX_FUNC" '
        /^[A-Za-z_].*\(/ && !/;[ \t]*$/ && !/^(typedef|struct [a-z_]+ *\{|enum|static const|const)/ { head = $0; hl = NR }
        /^\{/ && hl { start = hl; name = head; hl = 0 }
        /^[A-Za-z_].*\)[ \t]*\{[ \t]*$/ && !/=/ { start = NR; name = $0; hl = 0 }
        /^\}/ && start {
            len = NR - start + 1
            if (len > max) { sub(/\(.*/, "", name); printf "%s:%d: %s: %d lines (limit %d)\n", f, start, name, len, max; bad = 1 }
            start = 0
        }
        END { exit bad }' "$f" || status=1
done
[ $status -eq 0 ] && echo "check_size: ok ($dirs: files <= $MAX_FILE lines, functions <= $MAX_FUNC lines)"
exit $status
