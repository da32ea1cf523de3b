#!/bin/sh
# check_docs.sh - documented commands still exist.  Every line of a fenced
# code block in the given Markdown files (default: README.md docs/*.md) that
# runs `evictbench` or `make` is checked:
#   evictbench SUB --opt ...  (or ./evictbench-cuda: the same CLI) SUB is listed by `evictbench --help`, and every
#                             --opt by `evictbench SUB --help` (bench with
#                             --contexts or --max-batch: `bench --contexts 1
#                             --help`), as tools/devcheck.sh checks its options;
#   make TARGET VAR=...       TARGET is a rule of the Makefile, VAR a variable
#                             it reads.
# And every relative link leads to a file, and to a heading of it.
# The cheap ones run outright, when they hold no placeholder (an upper-case
# word, "...", brackets): --help, --dry-run and info.  Prints one line per
# problem, file:line first, and exits 1 if there was any.
# Usage: tools/check_docs.sh [FILE.md...]   (from the repository root;
# EVICTBENCH_BIN: the binary, default ./evictbench)
BIN=${EVICTBENCH_BIN:-./evictbench}
[ $# -gt 0 ] || set -- README.md docs/*.md
TMP=$(mktemp -d) || exit 2
trap 'rm -rf "$TMP"' EXIT
"$BIN" --help > "$TMP/help" 2>&1 || { echo "check_docs: $BIN --help failed"; exit 2; }
bad=0; n_lines=0; n_run=0

problem() { echo "$where: $*"; bad=1; }

# The help text of a subcommand (bench's long-context mode apart), cached.
sub_help() { # sub mode -> path of its help
    f="$TMP/help.$1.$2"
    if [ ! -f "$f" ]; then
        if [ "$2" = long ]; then "$BIN" bench --contexts 1 --help > "$f" 2>&1
        else "$BIN" "$1" --help > "$f" 2>&1; fi
    fi
    echo "$f"
}

# Words of a documented command with the usage punctuation dropped.
words_of() { printf '%s\n' "$1" | sed "s/\"[^\"]*\"/Q/g; s/'[^']*'/Q/g" | tr '[]()|' '     '; }

check_evictbench() { # command line from the binary's name on
    set -- $(words_of "$1")
    shift
    sub=""
    for w in "$@"; do case $w in -*) ;; *) sub=$w; break ;; esac; done
    case " $* " in *" --help "*|*" -h "*) [ -z "$sub" ] && return 0 ;; esac
    [ -n "$sub" ] || { problem "evictbench with no subcommand"; return; }
    grep -qE "^  $sub( |\$)" "$TMP/help" || { problem "evictbench $sub: no such subcommand"; return; }
    mode=plain
    [ "$sub" = bench ] && case " $* " in *" --contexts "*|*" --max-batch "*) mode=long ;; esac
    help=$(sub_help "$sub" "$mode")
    for w in "$@"; do
        case $w in
        --) break ;;
        --*) o=${w%%=*}
             grep -qE -- "(^|[^a-z0-9-])$o([^a-z0-9-]|\$)" "$help" ||
                 problem "evictbench $sub$([ $mode = long ] && echo " --contexts"): option $o is not in its --help" ;;
        esac
    done
}

check_make() { # command line from make on
    set -- $(words_of "$1")
    shift
    for w in "$@"; do
        case $w in
        -*) ;;
        *=*) v=${w%%=*}
             grep -qE "\\\$[({]$v[)}]" Makefile || problem "make: variable $v is not read by the Makefile" ;;
        *) grep -qE "^([A-Za-z0-9_.-]+ )*$w( [A-Za-z0-9_.-]+)*:" Makefile ||
               problem "make $w: no such target" ;;
        esac
    done
}

# The cheap commands run: --help, --dry-run, info (without placeholders).
run_cheap() { # command line from the binary's name on
    case $1 in *...*|*'['*|*'<'*|*'*'*|*'"'*|*"'"*|*'$'*) return ;; esac
    for w in $1; do
        case $w in *[A-Z]*) [ "$w" = "$(printf '%s' "$w" | tr a-z A-Z)" ] && return ;; esac
    done
    case " $1 " in *" --help "*|*" --dry-run "*|*" info "*) ;; *) return ;; esac
    set -- $1
    shift
    if timeout 120 "$BIN" "$@" > "$TMP/out" 2>&1; then n_run=$((n_run + 1))
    elif grep -q "not found; obtain it with" "$TMP/out"; then echo "  (not run, its model is absent: $where: evictbench $*)"
    else problem "evictbench $*: failed: $(tail -n 1 "$TMP/out")"; fi
}

# One shell line: each part (&&, ||, ;, |) that runs the binary or make.
check_line() {
    printf '%s\n' "$1" | sed 's/&&/\n/g; s/||/\n/g; s/;/\n/g; s/ | /\n/g' > "$TMP/parts"
    while IFS= read -r part; do
        part=$(printf '%s' "$part" | sed 's/^[[:space:]]*//; s/^\$ //; s/^\([A-Za-z_][A-Za-z0-9_]*=[^ ]* \)*//')
        case $part in
        evictbench\ *|./evictbench\ *|build/evictbench\ *|evictbench|./evictbench)
            n_lines=$((n_lines + 1)); check_evictbench "$part"; run_cheap "$part" ;;
        ./evictbench-cuda\ *)   # the CUDA build: the same commands and options
            n_lines=$((n_lines + 1)); check_evictbench "$part" ;;
        make|make\ *) n_lines=$((n_lines + 1)); check_make "$part" ;;
        esac
    done < "$TMP/parts"
}

# A heading's anchor as the Markdown renderers make it: lower case, spaces to
# hyphens, punctuation other than hyphens and underscores dropped.
anchors() { sed -n 's/^#\{1,6\} //p' "$1" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'; }

# Every relative link [..](path#anchor) of md: the file exists, the anchor too.
check_links() { # md
    dir=$(dirname "$1")
    grep -n -o '\]([^)[:space:]]*)' "$1" | while IFS=: read -r at link; do
        target=${link#](}; target=${target%)}
        case $target in http*|mailto:*) continue ;; esac
        file=${target%%#*}; anchor=""
        case $target in *'#'*) anchor=${target#*#} ;; esac
        [ -n "$file" ] && path="$dir/$file" || path=$1
        if [ ! -e "$path" ]; then echo "$1:$at: link to $file: no such file"; continue; fi
        case $path in *.md) ;; *) continue ;; esac
        [ -z "$anchor" ] || anchors "$path" | grep -qx -- "$anchor" ||
            echo "$1:$at: link to $file#$anchor: no such heading"
    done
}

for md in "$@"; do
    [ -f "$md" ] || { echo "check_docs: $md: no such file"; bad=1; continue; }
    check_links "$md" > "$TMP/links"
    [ -s "$TMP/links" ] && { cat "$TMP/links"; bad=1; }
    # fenced lines, comments cut, continuations joined: "LINENO<tab>text"
    awk '/^[ \t]*```/ { fence = !fence; next }
         fence { sub(/(^|[ \t])#.*/, ""); if (cont != "") { line = cont " " $0 } else { line = $0; at = NR }
                 if (line ~ /\\[ \t]*$/) { sub(/\\[ \t]*$/, "", line); cont = line; next }
                 cont = ""; print at "\t" line; next }
         /^\|/ { row = $0   # a table row: its code spans that run a command
                 while (match(row, /`[^`]*`/)) { span = substr(row, RSTART + 1, RLENGTH - 2)
                     if (span ~ /^(\.\/)?(evictbench|make)( |$)/) print NR "\t" span
                     row = substr(row, RSTART + RLENGTH) } }' "$md" > "$TMP/lines"
    while IFS="$(printf '\t')" read -r at text; do
        where="$md:$at"
        check_line "$text"
    done < "$TMP/lines"
done
echo "check_docs: $n_lines documented commands checked, $n_run run$([ $bad = 0 ] && echo ', all exist')"
exit $bad
