#!/usr/bin/env python3
"""devcheck's two-point experiment (experiments/devcheck_aime24.json), shared
by tools/devcheck.sh (step 4c and --check-only) and tests/cli/cuda_emu.sh.

  exp_check.py config SRC OUT MODEL NEW LIMIT
      SRC with another model, max_new_tokens and problem count, into OUT.
  exp_check.py judge DB DEVICE POINTS PROBLEMS REPORT_DIR
      Exit 1 unless the database holds POINTS runs, each of device DEVICE and
      status ok with PROBLEMS samples, every sample generated tokens, every
      budgeted policy compressed and FullKV never did, and REPORT_DIR holds a
      non-empty index.html.  Prints "judge_exp: ..." lines (FAILED: why).
"""
import json
import os
import sqlite3
import sys


def config(src, out, model, new, limit):
    c = json.load(open(src))
    c["models"], c["max_new_tokens"] = [model], int(new)
    for d in c["datasets"]:
        d["limit"] = int(limit)
    json.dump(c, open(out, "w"), indent=1)
    return 0


def judge(db, dev, n_pts, n_prob, rep):
    n_pts, n_prob = int(n_pts), int(n_prob)
    bad = []
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        runs = con.execute("SELECT id, policy, budget, device, status, error, n_samples FROM runs "
                           "ORDER BY id").fetchall()
        samples = {r[0]: con.execute("SELECT count(*), min(gen_tokens), max(n_compressions) FROM "
                                     "samples WHERE run_id = ?", (r[0],)).fetchone() for r in runs}
        con.close()
    except sqlite3.Error as e:
        print(f"judge_exp: FAILED: {db}: {e}")
        return 1
    if len(runs) != n_pts:
        bad.append(f"{len(runs)} runs in the database (want {n_pts})")
    for rid, pol, budget, device, status, err, n in runs:
        name = f"{pol}" + (f" at {budget}" if budget else "")
        cnt, min_gen, max_comp = samples[rid]
        if device != dev:
            bad.append(f"{name}: device {device!r} (want {dev!r})")
        if status != "ok":
            bad.append(f"{name}: status {status} ({err})")
        if n != n_prob or cnt != n_prob:
            bad.append(f"{name}: {n} samples recorded, {cnt} rows (want {n_prob})")
        if cnt and not min_gen:
            bad.append(f"{name}: a sample generated nothing")
        if pol != "fullkv" and cnt and not max_comp:
            bad.append(f"{name}: never compressed")
        if pol == "fullkv" and max_comp:
            bad.append(f"{name}: compressed {max_comp} times (FullKV keeps everything)")
    index = os.path.join(rep, "index.html")
    if not os.path.isfile(index) or os.path.getsize(index) == 0:
        bad.append(f"no report at {index}")
    print(f"judge_exp: {len(runs)} runs, " + "; ".join(
        f"{r[1]}{'@' + str(r[2]) if r[2] else ''} {r[3]} {r[4]} {samples[r[0]][0]} samples"
        for r in runs))
    for b in bad:
        print(f"judge_exp: FAILED: {b}")
    return 1 if bad else 0


if __name__ == "__main__":
    cmds = {"config": (config, 5), "judge": (judge, 5)}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds or len(sys.argv) != 2 + cmds[sys.argv[1]][1]:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    fn = cmds[sys.argv[1]][0]
    sys.exit(fn(*sys.argv[2:]))
