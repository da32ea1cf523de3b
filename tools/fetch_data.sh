#!/bin/sh
# fetch_data.sh - what `make data` runs: download the official evaluation files,
# check their sha256, rebuild our normalised JSON Lines from them (the format of
# datasets/README and ../shared/datasets) and check the result's sha256 as well.
#
#   tools/fetch_data.sh [DIR]     DIR: $EVICTBENCH_DATA, else datasets/data
#
# Needs curl, sha256sum and python3.  Offline, it stops at the first failed
# download with a message and exits 1; files already present with the right
# checksum are kept.  EVICTBENCH_FETCH_MIRROR=DIR reads the same paths from a
# local copy instead of https://raw.githubusercontent.com/ (used to test this).
# LiveCodeBench is not fetched: see datasets/registry.c for the file it reads.
#
# Keep the table in sync with datasets/registry.c (tests/test_datasets.c checks).
set -u

DIR=${1:-${EVICTBENCH_DATA:-datasets/data}}
HERE=$(cd "$(dirname "$0")" && pwd)
RAW=https://raw.githubusercontent.com/

# name  our file  upstream URL  upstream sha256 (- : many files)  sha256 of our file
TABLE="
aime24 aime24.jsonl https://raw.githubusercontent.com/Zefan-Cai/R-KV/d15c9767e67c2bd9807128fecc35223fa2484a69/data/aime24.jsonl af2b8bd2aa911b6333ad0df32f3ca05c7ae8ed10f1731f4372c8ae26990bf7ac ae00cbec51adbd4d9def03410c729c875a07f5850e14909ccd864425278e3d4b
aime25 aime25.jsonl https://raw.githubusercontent.com/armenjeddi/mcd/76771f969048ebd77a1b4261b0a3469192c6f92a/evaluation/data/aime25/test.jsonl 19a9f25a12e89abaeea9f7e214f8b6f6eae43285e9d8df7a3818ca0408df4b07 212aa7fef901ed0da7a31359ffd2c7eeaa04a95aeb57db346b0813ba5fa074cb
math500 math500.jsonl https://raw.githubusercontent.com/Zefan-Cai/R-KV/d15c9767e67c2bd9807128fecc35223fa2484a69/data/math.jsonl 35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132 680cfd5f6d38b444f5ae6662c0da445210a362f6826b5a2d27df98c92ab42b67
gsm8k gsm8k_test.jsonl https://raw.githubusercontent.com/openai/grade-school-math/3101c7d5072418e28b9008a6636bde82a006892c/grade_school_math/data/test.jsonl 3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14 5a9e7e6e09cc1a16d32a9f375100e7ed86357e1ae84bd6a8cfacf1725b08f0f1
math_train_1000 math_train_1000.jsonl https://raw.githubusercontent.com/aiwaves-cn/agents/e8c4e3c2d19739d3dff59e577d1c97090cc15f59/src/agents/datasets/data/math/train/ - 772e7fe2d87453d92f299d90b9587980c13bafa469b3d899dc266c7e1e6df6aa
"

die() { echo "fetch_data: $*" >&2; exit 1; }

for tool in curl sha256sum python3; do
    command -v "$tool" >/dev/null 2>&1 || die "needs $tool"
done
mkdir -p "$DIR" || die "cannot create $DIR"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/evictbench-data.XXXXXX") || die "cannot create a temporary directory"
trap 'rm -rf "$TMP"' EXIT INT TERM

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# URL -> what curl reads (the local mirror when one is given)
source_of() {
    if [ -n "${EVICTBENCH_FETCH_MIRROR:-}" ]; then
        echo "file://$(cd "$EVICTBENCH_FETCH_MIRROR" && pwd)/${1#"$RAW"}"
    else
        echo "$1"
    fi
}

get() {  # get URL OUT
    curl -fsSL --retry 2 --connect-timeout 15 -o "$2" "$(source_of "$1")" ||
        die "cannot download $1 (offline? run 'make data' again when online, or set EVICTBENCH_DATA to a directory that has the files)"
}

# The normalisation that made the shared files (see datasets/README in the
# shared data): ids, field names, answers; python3 with json only.
normalise() {  # normalise NAME SRC DST
    python3 - "$1" "$2" "$3" <<'PY'
import json, os, re, sys

name, src, dst = sys.argv[1:4]

def rows_of(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]

def aime_key(url):
    m = re.search(r"(\d{4})_AIME_(I+)_Problems/Problem_(\d+)", url)
    return m.group(1), m.group(2), int(m.group(3))

def last_boxed(s):
    at = max(s.rfind("\\boxed"), s.rfind("\\fbox"))
    if at < 0:
        return None
    i = at + (6 if s.startswith("\\boxed", at) else 5)
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s) or s[i] != "{":
        return None
    depth = 0
    for j in range(i, len(s)):
        depth += {"{": 1, "}": -1}.get(s[j], 0)
        if depth == 0:
            return s[i + 1:j]
    return None

out = []
if name in ("aime24", "aime25"):
    keyed = []
    for d in rows_of(src):
        y, ex, n = aime_key(d["url"])
        r = {"id": "%s-%s-%s-%d" % (name, y, ex, n), "problem": d["problem"]}
        if name == "aime24":
            r.update(answer=str(int(d["answer"])), answer_original=d["answer"],
                     solution=d["solution"])
        else:
            r.update(answer=d["answer"])
        r.update(url=d["url"], source_id=int(d["id"]))
        keyed.append(((ex, n), r))
    out = [r for _, r in sorted(keyed, key=lambda t: t[0])]
elif name == "math500":
    for d in rows_of(src):
        out.append({"id": d["unique_id"], "problem": d["problem"], "answer": d["answer"],
                    "solution": d["solution"], "subject": d["subject"],
                    "level": int(d["level"]), "unique_id": d["unique_id"]})
elif name == "gsm8k":
    for i, d in enumerate(rows_of(src)):
        out.append({"id": "gsm8k-test-%04d" % i, "question": d["question"],
                    "problem": d["question"],
                    "answer": d["answer"].split("####")[-1].strip().replace(",", ""),
                    "answer_full": d["answer"]})
elif name == "math_train_1000":
    ids = sys.argv[4] if len(sys.argv) > 4 else os.environ["IDS"]
    for rel in open(ids, encoding="utf-8").read().split():
        subj, num = rel.split("/")
        with open(os.path.join(src, subj, num + ".json"), encoding="utf-8") as f:
            d = json.load(f)
        out.append({"id": "train/%s/%s.json" % (subj, num), "problem": d["problem"],
                    "answer": last_boxed(d["solution"]), "solution": d["solution"],
                    "subject": d["type"], "level": int(d["level"].split()[-1]),
                    "level_original": d["level"]})
else:
    sys.exit("unknown dataset " + name)

with open(dst, "w", encoding="utf-8") as f:
    for r in out:
        f.write(json.dumps(r, ensure_ascii=False) + "\n")
PY
}

echo "$TABLE" | while read -r name file url src_sha sha; do
    [ -n "$name" ] || continue
    if [ -f "$DIR/$file" ] && [ "$(sha_of "$DIR/$file")" = "$sha" ]; then
        echo "fetch_data: $name: $DIR/$file is already there"
        continue
    fi
    echo "fetch_data: $name: downloading"
    if [ "$name" = math_train_1000 ]; then
        # 1000 per-problem files of MATH train, named in tools/math_train_1000.ids
        ids="$HERE/math_train_1000.ids"
        [ -f "$ids" ] || die "missing $ids"
        src="$TMP/math_train"
        while read -r rel; do
            mkdir -p "$src/${rel%/*}"
            printf '%s\n' "$rel"
        done < "$ids" > "$TMP/list"
        first=$(head -n 1 "$TMP/list")
        get "$url$first.json" "$src/$first.json"  # fail fast when offline
        while read -r rel; do
            printf 'url = "%s"\noutput = "%s"\n' "$(source_of "$url$rel.json")" "$src/$rel.json"
        done < "$TMP/list" > "$TMP/curl.cfg"
        curl -fsSL --no-progress-meter --retry 2 --connect-timeout 15 --parallel --parallel-max 8 -K "$TMP/curl.cfg" ||
            die "cannot download the MATH train files under $url (offline?)"
        IDS="$ids" normalise "$name" "$src" "$TMP/$file" || die "$name: normalisation failed"
    else
        get "$url" "$TMP/source"
        got=$(sha_of "$TMP/source")
        [ "$got" = "$src_sha" ] ||
            die "$name: $url has sha256 $got, expected $src_sha (the upstream file changed?)"
        normalise "$name" "$TMP/source" "$TMP/$file" || die "$name: normalisation failed"
    fi
    got=$(sha_of "$TMP/$file")
    [ "$got" = "$sha" ] || die "$name: normalised file has sha256 $got, expected $sha"
    mv "$TMP/$file" "$DIR/$file" || die "cannot write $DIR/$file"
    echo "fetch_data: $name: wrote $DIR/$file"
done || exit 1
echo "fetch_data: done; livecodebench is not fetched (see datasets/registry.c)"
