#!/usr/bin/env python3
"""Golden whole generations for the schedule wrappers of policies/scheduled.c
(prefill, prefill-decoding) over KNorm and TOVA, transcribed in numpy float64
from NVIDIA/kvpress @ 8bb29b9c3078452a86d692f29123fa6c793e2b05, independently
of the C code:

  - kvpress/presses/prefill_decoding_press.py (PrefillDecodingPress): the
    prompt's forward goes to the prefilling press, every later one to the
    decoding press (decoding_press.py, as kvpress_ref.decoding_generate);
  - the prefilling press is the same scorer press (knorm_press.py,
    tova_press.py; kvpress_ref's scores) at the compression ratio that leaves
    the budget: _find_target_compression_ratio(prompt, B), 0 (the prompt
    whole) when prompt <= B.  kvpress's prefilling press takes a fixed ratio;
    a run here is given a budget, so the ratio is the budget's (the deviation
    policies/scheduled.c states).  TOVA's query at the prompt is its last
    token's;
  - when=prefill: the prefilling press alone (a press used on its own).
Kept slots in position order (kvpress_ref: the sets are the same as
kvpress's topk order).  Ties: the lower slot; near-ties redrawn
(released_ref.ranked_topk).

Writes tests/fixtures/policies/kvpress_sched.json + kvpress_sched.bin for
tests/test_kvpress.c.  Usage:
    python3 tools/golden/kvpress_sched_ref.py [--out tests/fixtures/policies]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import released_ref  # noqa: E402
from kvpress_ref import PRESSES, find_target_compression_ratio  # noqa: E402


def compress(policy, q_row, k, layer, held, budget):
    """One layer's scorer press to the budget: the positions kept per kv head."""
    k_len = len(held[0])
    ratio = find_target_compression_ratio(k_len, budget)
    if ratio == 0:
        return None
    n_kept = int(k_len * (1 - ratio))
    assert n_kept == budget
    kl = np.stack([k[layer, held[h], h, :] for h in range(len(held))])
    scores = PRESSES[policy](kl, q_row)
    out = []
    for h in range(len(held)):
        idx = sorted(released_ref.ranked_topk(scores[h], n_kept, np.abs(scores[h])))
        out.append([held[h][j] for j in idx])
    return out


def generate(policy, when, q, k, prompt, budget, interval):
    """The steps ("at": -1 for the prompt's forward) and the positions held."""
    n_layer, total = q.shape[0], q.shape[1]
    n_kv = k.shape[2]
    held = [[list(range(prompt)) for _ in range(n_kv)] for _ in range(n_layer)]
    steps, changed = [], False
    for layer in range(n_layer):
        res = compress(policy, q[layer, prompt - 1], k, layer, held[layer], budget)
        if res is not None:
            held[layer], changed = res, True
    if changed:
        steps.append({"at": -1, "held": [[list(x) for x in hl] for hl in held]})
    if when == "prefill":
        return steps
    count = [0] * n_layer
    for pos in range(prompt, total):
        changed = False
        for layer in range(n_layer):
            for h in range(n_kv):
                held[layer][h].append(pos)
            count[layer] += 1
            if count[layer] >= interval:
                count[layer] = 0
                assert len(held[layer][0]) != budget, "a scheduled forward with exactly B slots"
                res = compress(policy, q[layer, pos], k, layer, held[layer], budget)
                if res is not None:
                    held[layer], changed = res, True
        if changed:
            steps.append({"at": pos, "held": [[list(x) for x in hl] for hl in held]})
    return steps


# (n_head, n_kv, budget, interval, prompt, total): a prompt over the budget
# (compressed at prefill), one under it (left whole), MHA and GQA.
SETS = [
    (4, 2, 12, 6, 20, 20 + 6 * 7 + 2),
    (6, 2, 16, 7, 30, 30 + 7 * 6 + 3),
    (4, 4, 10, 5, 6, 6 + 5 * 8),
]
N_LAYER = 2
WHEN = {"prefill-decoding": "prefill+decoding", "prefill": "prefill"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/policies")
    args = ap.parse_args()
    blob, off, sets, runs, redraws = [], 0, [], [], 0
    for si, (n_head, n_kv, budget, interval, prompt, total) in enumerate(SETS):
        for attempt in range(400):
            rng = np.random.default_rng(5300 + 100 * si + attempt)
            q, k = released_ref.draw(rng, total, n_head, n_kv, N_LAYER)
            try:
                res = {(name, policy): generate(policy, when, q, k, prompt, budget, interval)
                       for name, when in WHEN.items() for policy in PRESSES}
                break
            except released_ref.Ambiguous:
                redraws += 1
        else:
            raise SystemExit(f"no unambiguous draw for set {si}")
        qa = np.ascontiguousarray(q, dtype="<f4").ravel()
        ka = np.ascontiguousarray(k, dtype="<f4").ravel()
        sets.append(dict(id=si, n_layer=N_LAYER, n_head=n_head, n_kv=n_kv,
                         head_dim=released_ref.HEAD_DIM, total=total, prompt=prompt,
                         budget=budget, interval=interval, q=off, k=off + qa.size))
        blob += [qa, ka]
        off += qa.size + ka.size
        for (name, policy), steps in res.items():
            runs.append(dict(set=si, spec=f"{name}:over={policy}", steps=steps))
    with open(os.path.join(args.out, "kvpress_sched.bin"), "wb") as f:
        for a in blob:
            f.write(a.tobytes())
    doc = {"generator": "tools/golden/kvpress_sched_ref.py; NVIDIA/kvpress @ 8bb29b9, "
                        "PrefillDecodingPress and a press on its own",
           "n_floats": off, "sets": sets, "runs": runs}
    with open(os.path.join(args.out, "kvpress_sched.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"{len(runs)} runs on {len(sets)} sets, {sum(len(r['steps']) for r in runs)} "
          f"compressions, {off} floats, {redraws} ambiguous draws redrawn")


if __name__ == "__main__":
    main()
