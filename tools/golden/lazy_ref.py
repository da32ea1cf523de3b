#!/usr/bin/env python3
"""Golden whole generations for LazyEviction (policies/lazyeviction.c),
transcribed in numpy float64 from the released code, independently of the C
code.  The code of Halo-949/LazyEviction is read as imported in
WeianMao/triattention @ e7a0eb18d056659570035708cda25f6bb6cda333, folder
LazyEviction/:

  - model/qwen_model.py (qwen2_*_attn_forward_Window_LAZY): the kv heads are
    repeated to the query heads (repeat_kv) before the cache, so each query
    head has a cache of its own; a forward of more than one token (the
    prompt) goes through update_kv, which keeps everything and records
    nothing, and resets observation_counter to 0; each later forward appends
    its token, adds 1 to the counter (m: 1 at the first decoding forward) and
    calls update_kv_in_decoding on the whole cache;
  - model/kv_utils.py (Window_LAZYKVCluster.update_kv_in_decoding): the
    current query's attention softmax(q K^T / sqrt(d)) over every key (its
    own included, no mask), TempCache.record_recurrence(attn, layer, m); then
    nothing while k_len <= max_kv_capacity (B) or m % obs_size != 0; else
    importance = 2 / (1 + exp(1 + (m - last) / (MRI + 1e-5))) + s, s = 0
    where MRI == 0 and 2 / (1 + exp(MRI - 1)) elsewhere; topk(importance of
    all but the last obs_size slots, B - obs_size), gathered in topk order,
    then the last obs_size slots; the state gathered the same way;
  - model/temp_cacheobs.py (TempCache.record_recurrence): at the first
    decoding forward last = MRI = 0 for every slot; later, the new slot gets
    last = m - 1 and MRI = 0; then last = m where attn >= alpha, and
    MRI = max(MRI, last - last_before);
  - evaluation.py: obs_size = decoding_recent_size (W), alpha from --alpha
    (1e-4), TempCache.reset() before each batch (eval/utils.py).

Ours (the deviations, policies/README.md): one keep-set per kv head, the
mean of its query heads' importance (with MHA, as released); kept slots in
position order.  The generator also runs the released topk order (ties: the
lower slot first in that order) and counts the compressions whose sets
differ from ours; the two part only at a cut between exactly equal scores,
whose order torch.topk leaves unspecified (checked), and may go their own
ways after it.  Draws
whose top-k cut hinges on a gap below 1e-12 (relative), or whose attention
lies within 1e-5 (relative) of alpha, are redrawn.

Writes tests/fixtures/policies/lazy.json + lazy.bin (tests/test_lazy.c,
driver tests/replay.h).  Usage:
    python3 tools/golden/lazy_ref.py [--out tests/fixtures/policies]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import released_ref  # noqa: E402

HEAD_DIM = released_ref.HEAD_DIM
N_LAYER = 2
TIE_GUARD = 1e-12     # relative gap at the top-k cut that C and numpy might order differently
ALPHA_GUARD = 1e-5    # relative distance of a probability from alpha (f32 probabilities in C)


class Ambiguous(Exception):
    pass


def importance(m, last, mri):
    """update_kv_in_decoding's score, per query head and slot."""
    with np.errstate(over="ignore"):
        s = np.where(mri == 0, 0.0, 2.0 / (1.0 + np.exp(mri - 1.0)))
        return 2.0 / (1.0 + np.exp(1.0 + (m - last) / (mri + 1e-5))) + s


def ranked(z, k):
    """The k best of z in topk order: higher first, ties to the lower slot.
    Raises Ambiguous on a near tie at the cut; returns (indices, cut between
    exactly equal scores)."""
    order = sorted(range(len(z)), key=lambda j: (-z[j], j))
    if 0 < k < len(z):
        a, b = z[order[k - 1]], z[order[k]]
        if a != b and a - b < TIE_GUARD * (abs(a) + abs(b)) + 1e-300:
            raise Ambiguous("near tie at the top-k cut")
        return order[:k], bool(a == b)
    return order[:k], False


def generate(q, k, prompt, budget, window, alpha, order):
    """One sequence.  q [n_layer][total][n_head][d], k [n_layer][total][n_kv][d].
    order "position" (ours) or "released" (topk order, then the window).
    Returns the compressions: the position whose forward compressed and the
    positions held per layer and kv head, in cache order; and how many cut
    between equal scores."""
    n_layer, total, n_head, d = q.shape
    n_kv = k.shape[2]
    group = n_head // n_kv
    held = [[list(range(prompt)) for _ in range(n_kv)] for _ in range(n_layer)]
    last = [None] * n_layer     # [n_head][k_len] per layer: TempCache.layer_last_recurrent
    mri = [None] * n_layer      # TempCache.layer_max_period
    steps, tie_cuts = [], 0
    for m, pos in enumerate(range(prompt, total), start=1):
        rec, changed = {"at": pos, "held": []}, False
        for layer in range(n_layer):
            for g in range(n_kv):
                held[layer][g].append(pos)
            k_len = len(held[layer][0])
            attn = np.zeros((n_head, k_len))
            for h in range(n_head):
                keys = k[layer, held[layer][h // group], h // group].astype(np.float64)
                logits = keys @ q[layer, pos, h].astype(np.float64) / np.sqrt(d)
                e = np.exp(logits - logits.max())
                attn[h] = e / e.sum()
            if np.any(np.abs(attn - alpha) <= ALPHA_GUARD * alpha):
                raise Ambiguous("attention at alpha")
            if last[layer] is None:
                last[layer] = np.zeros((n_head, k_len))
                mri[layer] = np.zeros((n_head, k_len))
            else:
                last[layer] = np.concatenate([last[layer], np.full((n_head, 1), m - 1.0)], axis=1)
                mri[layer] = np.concatenate([mri[layer], np.zeros((n_head, 1))], axis=1)
            before = last[layer].copy()
            last[layer][attn >= alpha] = m
            mri[layer] = np.maximum(mri[layer], last[layer] - before)
            if k_len > budget and m % window == 0:
                imp = importance(m, last[layer], mri[layer])
                keep_all = []
                for g in range(n_kv):
                    z = sum(imp[h, :k_len - window] for h in range(g * group, (g + 1) * group))
                    z = z / group
                    top, tie = ranked(list(z), budget - window)
                    tie_cuts += int(tie)
                    rec["tie"] = rec.get("tie", False) or tie
                    if order == "position":
                        top = sorted(top)
                    keep = top + list(range(k_len - window, k_len))
                    held[layer][g] = [held[layer][g][j] for j in keep]
                    keep_all.append(keep)
                rows = [keep_all[h // group] for h in range(n_head)]
                last[layer] = np.stack([last[layer][h, rows[h]] for h in range(n_head)])
                mri[layer] = np.stack([mri[layer][h, rows[h]] for h in range(n_head)])
                changed = True
            rec["held"].append([list(x) for x in held[layer]])
        if changed:
            steps.append(rec)
    return steps, tie_cuts


# (n_head, n_kv, budget, window, prompt, total): MHA (the released code
# exactly), GQA 2:1 and 3:1, MQA; a prompt under the budget, one over it
# (evicted at the first W-th forward), one at it, an odd W and a tail after
# the last compression.
SETS = [
    (4, 4, 16, 4, 6, 6 + 4 * 12),
    (4, 2, 16, 4, 24, 24 + 4 * 10),
    (6, 2, 20, 5, 12, 12 + 5 * 10 + 3),
    (2, 1, 12, 3, 12, 12 + 3 * 14),
]
ALPHAS = [1e-4, 0.05, 0.12]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/policies")
    out_dir = ap.parse_args().out
    blob, off, sets, runs, redraws = [], 0, [], [], 0
    for si, (n_head, n_kv, budget, window, prompt, total) in enumerate(SETS):
        for attempt in range(400):
            rng = np.random.default_rng(5900 + 100 * si + attempt)
            q, k = released_ref.draw(rng, total, n_head, n_kv, N_LAYER)
            try:
                res = [(a,) + generate(q, k, prompt, budget, window, a, "position") +
                       generate(q, k, prompt, budget, window, a, "released") for a in ALPHAS]
            except Ambiguous:
                redraws += 1
                continue
            break
        else:
            raise SystemExit(f"no unambiguous draw for set {si}")
        qa = np.ascontiguousarray(q, dtype="<f4").ravel()
        ka = np.ascontiguousarray(k, dtype="<f4").ravel()
        sets.append(dict(id=si, n_layer=N_LAYER, n_head=n_head, n_kv=n_kv, head_dim=HEAD_DIM,
                         total=total, prompt=prompt, budget=budget, window=window,
                         q=off, k=off + qa.size))
        blob += [qa, ka]
        off += qa.size + ka.size
        for alpha, ours, cuts, rel, _ in res:
            assert len(ours) == len(rel) >= 8, (si, alpha, len(ours))
            differ = 0
            for a, b in zip(ours, rel):
                assert a["at"] == b["at"]
                same = all(sorted(x) == sorted(y) for la, lb in zip(a["held"], b["held"])
                           for x, y in zip(la, lb))
                # the two orders part only at a cut between exactly equal scores
                assert same or differ or (a["tie"] and b["tie"]), "orders part without a tie"
                differ += int(not same)
                for la in a["held"]:
                    for x in la:
                        assert len(x) == budget and x == sorted(x)
            runs.append(dict(set=si, alpha=alpha, tie_cuts=cuts, released_order_differs=differ,
                             steps=ours))
    with open(os.path.join(out_dir, "lazy.bin"), "wb") as f:
        for a in blob:
            f.write(a.tobytes())
    doc = {"generator": "tools/golden/lazy_ref.py; Halo-949/LazyEviction as imported in "
                        "WeianMao/triattention @ e7a0eb18d056659570035708cda25f6bb6cda333",
           "n_floats": off, "sets": sets, "runs": runs}
    with open(os.path.join(out_dir, "lazy.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    n_steps = sum(len(r["steps"]) for r in runs)
    print(f"{len(runs)} runs on {len(sets)} sets, {n_steps} compressions "
          f"(min {min(len(r['steps']) for r in runs)} a run), {off} floats, "
          f"{sum(r['tie_cuts'] for r in runs)} cuts between equal scores, "
          f"{sum(r['released_order_differs'] for r in runs)} compressions whose sets the "
          f"released topk order changes, {redraws} ambiguous draws redrawn")


if __name__ == "__main__":
    main()
