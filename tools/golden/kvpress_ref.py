#!/usr/bin/env python3
"""Golden keep-sets for KNorm and TOVA (policies/knorm.c, policies/tova.c),
transcribed in numpy float64 from NVIDIA/kvpress @
8bb29b9c3078452a86d692f29123fa6c793e2b05, independently of the C code:

  - kvpress/presses/knorm_press.py: score = -keys.norm(dim=-1) for every slot
    of every kv head (no window);
  - kvpress/presses/tova_press.py + snapkv_press.py compute_window_attention
    (window 1): the last query's logits q.k / sqrt(d) per query head over all
    k_len keys (the causal mask hides nothing for the last query), softmax,
    the last column dropped, the mean over ALL query heads, repeated for every
    kv head (one set per layer); the last key gets max + 1 (always kept);
  - kvpress/presses/scorer_press.py: keep topk(scores, n_kept), n_kept = B
    (decoding_press.py picks the ratio that leaves target_size = B).

kvpress gathers the kept slots in topk order; ours stay in position order
(the keep-set is the same; neither score depends on the slot order).  Ties:
the lower slot first (policies/score.h); draws whose top-k boundary hinges on
a gap below float rounding are redrawn (policies_ref.Ambiguous).

Writes tests/fixtures/policies/kvpress.json.  Usage:
    python3 tools/golden/kvpress_ref.py [--out tests/fixtures/policies]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from policies_ref import Ambiguous, topk  # noqa: E402

N_LAYER, N_HEAD, N_KV, HEAD_DIM = 2, 4, 2, 8


def knorm_keep(k, budget):
    s = -np.linalg.norm(k.astype(np.float64), axis=-1)
    return sorted(topk(s, budget, np.abs(s)))


def tova_scores(q, keys):
    """q [n_head][d], keys [n_kv][L][d] -> the layer's scores of slots [0, L-1)."""
    group = N_HEAD // N_KV
    probs = []
    for hq in range(N_HEAD):
        k = keys[hq // group].astype(np.float64)
        logit = k @ q[hq].astype(np.float64) / np.sqrt(HEAD_DIM)
        p = np.exp(logit - logit.max())
        probs.append((p / p.sum())[:-1])
    return np.mean(probs, axis=0)


def tova_keep(q, keys, budget):
    s = tova_scores(q, keys)
    L = keys.shape[1]
    return sorted(topk(s, budget - 1, np.abs(s))) + [L - 1]


def f32_list(a):
    """float32 values in their shortest decimal form (read back exactly)."""
    return [float(str(v)) for v in np.asarray(a, dtype=np.float32).ravel()]


def draw(rng, policy, budget):
    layers = []
    for _ in range(N_LAYER):
        # TOVA keeps one set per layer: its heads hold one length
        lens = ([int(rng.integers(budget - 2, budget + 24))] * N_KV if policy == "tova" else
                [int(rng.integers(budget - 2, budget + 24)) for _ in range(N_KV)])
        q = rng.standard_normal((N_HEAD, HEAD_DIM)).astype(np.float32)
        # keys of uneven norms, as real caches have
        keys = [(rng.standard_normal((L, HEAD_DIM)) *
                 rng.uniform(0.2, 3.0, (L, 1))).astype(np.float32) for L in lens]
        if policy == "tova":
            stacked = np.stack(keys)
            keep = tova_keep(q, stacked, budget) if lens[0] >= budget else None
            keeps = [keep] * N_KV
        else:
            keeps = [knorm_keep(k, budget) if len(k) >= budget else None for k in keys]
        layers.append({"q": f32_list(q),
                       "heads": [{"k": f32_list(k), "keep": kp}
                                 for k, kp in zip(keys, keeps)]})
    return {"policy": policy, "budget": budget, "layers": layers}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/policies")
    args = ap.parse_args()
    rng = np.random.default_rng(27)
    cases = []
    for policy in ("knorm", "tova"):
        for budget in (8, 16, 24, 16, 24, 32):
            for _ in range(50):
                try:
                    cases.append(draw(rng, policy, budget))
                    break
                except Ambiguous:
                    continue
            else:
                raise SystemExit("no unambiguous draw")
    out = {"about": "tools/golden/kvpress_ref.py; NVIDIA/kvpress @ 8bb29b9",
           "n_layer": N_LAYER, "n_head": N_HEAD, "n_kv": N_KV, "head_dim": HEAD_DIM,
           "cases": cases}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "kvpress.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    n_sel = sum(1 for c in cases for L in c["layers"] for h in L["heads"] if h["keep"])
    print("wrote %s: %d cases, %d heads selected" % (path, len(cases), n_sel))


if __name__ == "__main__":
    main()
