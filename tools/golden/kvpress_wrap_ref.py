#!/usr/bin/env python3
"""Golden whole generations for the budget wrappers policies/adakv.c and
policies/pyramidkv.c, transcribed in numpy float64 from NVIDIA/kvpress @
8bb29b9c3078452a86d692f29123fa6c793e2b05, independently of the C code:

  - kvpress/presses/decoding_press.py (DecodingPress): the prompt's forward
    never compresses; every compression_interval-th decoding forward of a
    layer compresses it to target_size = B, through
    _find_target_compression_ratio (kvpress_ref.find_target_compression_ratio:
    ratio 0, nothing done, when k_len <= B);
  - kvpress/presses/adakv_press.py (AdaKVPress.compress): n_kept =
    int(k_len * (1 - ratio)), n_safe = int(n_kept * alpha_safeguard); each kv
    head's top n_safe scores set to the float maximum; the n_pruned =
    n_kv * (k_len - n_kept) lowest of the layer's flattened (kv head, slot)
    scores pruned.  kvpress masks them (the cache keeps every token, so k_len
    is every token so far; attention_patch.py gives them a fake key); the
    wrapper evicts them, so this simulation keeps per head the live slots, and
    prunes n_pruned minus the slots already masked (= the live slots over
    n_kv * n_kept) from the live ones, which is kvpress's rule over the cache
    attention sees;
  - kvpress/presses/pyramidkv_press.py (get_layer_budget, compress): the
    layer's budget from its own k_len and the ratio, Python's float
    arithmetic and round(); topk(scores, budget); kvpress gathers (removes).

The scores are the wrapped scorers' (SnapKVPress pads its window with the
layer's max + 1, so the window is kept and safe first; R-KV's window is
treated alike):
  - snapkv (kvpress's SnapKVPress settings: softmax of the last `window`
    queries over every key, causal inside the window, the non-window columns,
    mean over the queries, avg-pool 5), a GQA group's logits pooled (max)
    before the softmax as policies/snapkv.c does (kvpress averages the
    group's probabilities after the pooling: MHA sets agree);
  - rkv (released_ref.rkv_update's score: lambda 0.1, max-pool 7, the
    redundancy of cal_similarity);
  - knorm and keydiff (kvpress_ref's knorm_press.py and keydiff_press.py
    scores: no window), the wrappers over any scorer row.
Kept slots in position order (AdaKV: kvpress masks in place; PyramidKV:
kvpress gathers in top-k order, a deviation of the C side, documented there).
Ties: the lower (kv head, slot) kept; draws whose ranking hinges on a gap
below float32 rounding are redrawn (released_ref.ranked_topk).

Writes tests/fixtures/policies/kvpress_wrap.json + kvpress_wrap.bin for
tests/test_kvpress_wrap.c.  Usage:
    python3 tools/golden/kvpress_wrap_ref.py [--out tests/fixtures/policies]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import released_ref as rr  # noqa: E402
from kvpress_ref import (find_target_compression_ratio, keydiff_press_scores,  # noqa: E402
                         knorm_press_scores)

FMAX = float(np.finfo(np.float32).max)


# ------------------------------------------------------------ the inner scores

def snapkv_scores(k, qc, n_head, window):
    """k [n_kv][L][d], qc the last queries -> per kv head (z, mag) of the
    candidates [0, L - window)."""
    n_kv, L, _ = k.shape
    w = min(window, len(qc))
    logits = rr.attention_logits(qc[-w:], k, n_head, n_kv)
    mask = np.zeros((w, L))
    for i in range(w):
        mask[i, L - w + i + 1:] = -np.inf
    out = []
    for h in range(n_kv):
        p = rr.softmax_rows(logits[h] + mask)[:, :L - window]
        z = rr.avg_pool1d(rr.f32(p.mean(axis=0)), 5)
        out.append((z, np.abs(z)))
    return out


def rkv_scores(k, qc, n_head, window, lam=0.1):
    n_kv, L, _ = k.shape
    logits = rr.attention_logits(qc[-window:], k, n_head, n_kv)
    out = []
    for h in range(n_kv):
        imp = rr.f32(rr.softmax_rows(logits[h][:, :L - window]).mean(axis=0))
        imp = rr.max_pool1d(imp, 7)
        sim = rr.f32(rr.cal_similarity(k[h]))[:L - window]
        out.append((imp * lam - sim * (1 - lam), np.abs(imp) * lam + np.abs(sim) * (1 - lam)))
    return out


def knorm_scores(k, _qc, _n_head, _window):
    """knorm_press.py: -|k| per slot; no window."""
    return [(z, np.abs(z)) for z in knorm_press_scores(k, None)]


def keydiff_scores(k, _qc, _n_head, _window):
    """keydiff_press.py: -cos(k, the mean unit key); no window."""
    z, mag = keydiff_press_scores({"k": list(k)})
    return list(zip(z, mag))


INNER = {"snapkv": snapkv_scores, "rkv": rkv_scores, "knorm": knorm_scores,
         "keydiff": keydiff_scores}


def padded(scores, window):
    """SnapKVPress.score's F.pad(value=scores.max() + 1) over the layer."""
    top = max(z.max() for z, _ in scores if len(z)) + 1
    return [(np.append(z, [top] * window), np.append(m, [0.0] * window)) for z, m in scores]


# ------------------------------------------------------------ the wrappers

def adakv_layer(held, k_len, scores, budget, alpha, window):
    """adakv_press.py compress over one layer's live slots: per head the kept
    indices into held[h], or None (ratio 0)."""
    ratio = find_target_compression_ratio(k_len, budget)
    if ratio == 0:
        return None
    n_kv = len(held)
    n_kept = int(k_len * (1 - ratio))
    assert n_kept == budget
    n_safe = int(n_kept * alpha)
    zs = []
    for z, m in padded(scores, window):
        z = z.copy()
        z[rr.ranked_topk(z, n_safe, m)] = FMAX
        zs.append((z, m))
    n_masked = n_kv * k_len - sum(len(x) for x in held)
    n_pruned = n_kv * (k_len - n_kept) - n_masked
    flat = np.concatenate([z for z, _ in zs])
    mag = np.concatenate([m for _, m in zs])
    keep = set(rr.ranked_topk(flat, len(flat) - n_pruned, mag))
    out, off = [], 0
    for h in range(n_kv):
        out.append([j for j in range(len(held[h])) if off + j in keep])
        off += len(held[h])
    return out


def pyramid_layer_budget(layer, q_len, ratio, window, beta, n_layers):
    """pyramidkv_press.py get_layer_budget, line for line."""
    max_capacity_prompt = window + q_len * (1 - ratio)
    min_num = (max_capacity_prompt - window) / beta
    max_num = (max_capacity_prompt - window) * 2 - min_num
    if max_num >= q_len - window:
        max_num = q_len - window
        min_num = (max_capacity_prompt - window) * 2 - max_num
    if not (q_len >= max_num >= min_num >= window):
        return round(q_len * (1 - ratio)), "fallback"
    steps = (max_num - min_num) / (n_layers - 1)
    return round(max_num - layer * steps), "pyramid"


def pyramid_layer(layer, n_layers, held, scores, budget, beta, window, stats):
    k_len = len(held[0])
    ratio = find_target_compression_ratio(k_len, budget)
    if ratio == 0:
        return None
    n_kept, how = pyramid_layer_budget(layer, k_len, ratio, window, beta, n_layers)
    stats[how] += 1
    stats["over_b"] += int(n_kept > budget)
    return [sorted(rr.ranked_topk(z, n_kept, m)) for z, m in padded(scores, window)]


def generate(run, q, k, prompt, budget, interval, n_head):
    """DecodingPress over one sequence (kvpress_ref.decoding_generate's flow):
    the steps (the position whose forward compressed, the positions held per
    layer and kv head) and the run's statistics."""
    n_layer, total = q.shape[0], q.shape[1]
    n_kv = k.shape[2]
    wrapper, inner, window = run["wrapper"], run["over"], run["window"]
    held = [[list(range(prompt)) for _ in range(n_kv)] for _ in range(n_layer)]
    count = [0] * n_layer
    steps = []
    stats = {"uneven": 0, "pyramid": 0, "fallback": 0, "over_b": 0}
    for pos in range(prompt, total):
        rec, changed = {"at": pos, "held": []}, False
        for layer in range(n_layer):
            for h in range(n_kv):
                held[layer][h].append(pos)
            count[layer] += 1
            if count[layer] >= interval:
                count[layer] = 0
                hl = held[layer]
                kl = [k[layer, hl[h], h, :] for h in range(n_kv)]
                qc = q[layer, max(0, pos + 1 - window):pos + 1]
                lens = {len(x) for x in hl}
                if wrapper == "adakv":
                    # per head: the live slots of unequal counts
                    scores = [INNER[inner](kl[h][None], qc[:, h * (n_head // n_kv):
                                           (h + 1) * (n_head // n_kv)], n_head // n_kv,
                                           window)[0] for h in range(n_kv)]
                    res = adakv_layer(hl, pos + 1, scores, budget, run["alpha"], window)
                else:
                    assert len(lens) == 1
                    scores = INNER[inner](np.stack(kl), qc, n_head, window)
                    res = pyramid_layer(layer, n_layer, hl, scores, budget, run["beta"],
                                        window, stats)
                if res is not None:
                    changed = True
                    for h in range(n_kv):
                        hl[h] = [hl[h][j] for j in res[h]]
                    if wrapper == "adakv":
                        assert sum(len(x) for x in hl) == n_kv * budget
                        stats["uneven"] += int(len({len(x) for x in hl}) > 1)
            rec["held"].append([list(x) for x in held[layer]])
        if changed:
            steps.append(rec)
    return steps, stats


# (n_head, n_kv, budget, interval, prompt, total): GQA 2:1 and MHA; three
# layers (a pyramid); a short prompt, one over B, an odd interval.
SETS = [
    (4, 2, 12, 6, 4, 4 + 6 * 8 + 2),
    (4, 2, 16, 5, 20, 20 + 5 * 7 + 1),
    (4, 4, 14, 7, 16, 16 + 7 * 6 + 3),
]
N_LAYER = 3

# spec (tests append divide_length) -> the simulation's options
RUNS = {
    "adakv-snapkv:window=3": dict(wrapper="adakv", over="snapkv", window=3, alpha=0.2),
    "adakv-snapkv:window=3,alpha_safeguard=0.5": dict(wrapper="adakv", over="snapkv", window=3,
                                                      alpha=0.5),
    "adakv-snapkv:window=2,alpha_safeguard=0": dict(wrapper="adakv", over="snapkv", window=2,
                                                    alpha=0.0),
    "adakv-rkv:window=4": dict(wrapper="adakv", over="rkv", window=4, alpha=0.2),
    "adakv-rkv:window=4,alpha_safeguard=0.75": dict(wrapper="adakv", over="rkv", window=4,
                                                    alpha=0.75),
    "pyramidkv:window=2,beta=2": dict(wrapper="pyramid", over="snapkv", window=2, beta=2),
    "pyramidkv:window=2,beta=4": dict(wrapper="pyramid", over="snapkv", window=2, beta=4),
    "pyramidkv:window=2": dict(wrapper="pyramid", over="snapkv", window=2, beta=20),
    # any scorer row: kvpress's AdaKVPress / PyramidKVPress over KnormPress, KeyDiffPress
    "adakv-snapkv:over=knorm": dict(wrapper="adakv", over="knorm", window=0, alpha=0.2),
    "adakv-rkv:over=keydiff,alpha_safeguard=0.5": dict(wrapper="adakv", over="keydiff",
                                                       window=0, alpha=0.5),
    "pyramidkv:over=knorm,beta=4": dict(wrapper="pyramid", over="knorm", window=0, beta=4),
    "pyramidkv:over=keydiff": dict(wrapper="pyramid", over="keydiff", window=0, beta=20),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/policies")
    args = ap.parse_args()
    blob, off, sets, runs, redraws = [], 0, [], [], 0
    for si, (n_head, n_kv, budget, interval, prompt, total) in enumerate(SETS):
        for attempt in range(400):
            rng = np.random.default_rng(9100 + 100 * si + attempt)
            q, k = rr.draw(rng, total, n_head, n_kv, N_LAYER)
            try:
                res = {spec: generate(o, q, k, prompt, budget, interval, n_head)
                       for spec, o in RUNS.items()}
                break
            except rr.Ambiguous:
                redraws += 1
        else:
            raise SystemExit(f"no unambiguous draw for set {si}")
        qa = np.ascontiguousarray(q, dtype="<f4").ravel()
        ka = np.ascontiguousarray(k, dtype="<f4").ravel()
        sets.append(dict(id=si, n_layer=N_LAYER, n_head=n_head, n_kv=n_kv,
                         head_dim=rr.HEAD_DIM, total=total, prompt=prompt, budget=budget,
                         interval=interval, q=off, k=off + qa.size))
        blob += [qa, ka]
        off += qa.size + ka.size
        for spec, (steps, stats) in res.items():
            assert len(steps) >= 5, (spec, si, len(steps))
            runs.append(dict(set=si, spec=spec, steps=steps, **stats))
    with open(os.path.join(args.out, "kvpress_wrap.bin"), "wb") as f:
        for a in blob:
            f.write(a.tobytes())
    doc = {"generator": "tools/golden/kvpress_wrap_ref.py; NVIDIA/kvpress @ 8bb29b9, "
                        "AdaKVPress and PyramidKVPress under DecodingPress",
           "n_floats": off, "sets": sets, "runs": runs}
    with open(os.path.join(args.out, "kvpress_wrap.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    tot = {key: sum(r[key] for r in runs) for key in ("uneven", "pyramid", "fallback", "over_b")}
    print(f"{len(runs)} runs on {len(sets)} sets, {sum(len(r['steps']) for r in runs)} "
          f"compressions, {off} floats, {redraws} ambiguous draws redrawn; {tot}")


if __name__ == "__main__":
    main()
