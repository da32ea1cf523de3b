#!/bin/sh
# report_shot.sh - the README's picture of the report: DB rendered by
# `evictbench report` into a scratch folder, the top of its index page shot
# in headless Chromium at 1400 x 860 pixels, reduced to a 64-colour palette
# when ImageMagick's convert is here.  Refuses a result over 200 KB.
# Usage: tools/report_shot.sh DB OUT.png   (EVICTBENCH_BIN, EVICTBENCH_CHROMIUM)
BIN=${EVICTBENCH_BIN:-./evictbench}
[ $# -eq 2 ] || { echo "usage: tools/report_shot.sh DB OUT.png" >&2; exit 2; }
db=$1 out=$2
[ -f "$db" ] || { echo "report_shot: $db not found (make exp writes it)" >&2; exit 1; }
browser=${EVICTBENCH_CHROMIUM:-}
for b in chromium chromium-browser google-chrome; do
    [ -n "$browser" ] && break
    command -v $b > /dev/null 2>&1 && browser=$b
done
[ -n "$browser" ] || { echo "report_shot: no chromium (Debian package chromium; make deps installs it)" >&2; exit 1; }
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
"$BIN" report --db "$db" --out "$TMP/site" > /dev/null || exit 1
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --window-size=1400,860 --screenshot="$TMP/shot.png" "file://$(cd "$TMP/site" && pwd)/index.html" \
    > /dev/null 2> "$TMP/err" || { cat "$TMP/err" >&2; exit 1; }
if command -v convert > /dev/null 2>&1; then
    convert "$TMP/shot.png" -colors 64 "PNG8:$TMP/small.png" && mv "$TMP/small.png" "$TMP/shot.png"
fi
bytes=$(wc -c < "$TMP/shot.png")
[ "$bytes" -le 204800 ] || { echo "report_shot: $bytes bytes, over 200 KB" >&2; exit 1; }
mkdir -p "$(dirname "$out")" && cp "$TMP/shot.png" "$out" || exit 1
echo "$out: $bytes bytes, the report of $db"
