#!/usr/bin/env python3
"""Golden keep-sets for the eviction policies, written from the formulas of
../shared/specs/policies.md (sections 1-5) in numpy float64, independently of
the C code.

Writes tests/fixtures/policies/keepsets.json (cases and expected keep-sets)
and tests/fixtures/policies/tensors.bin (the float32 tensors they use, little
endian, offsets in floats in the JSON).

Tie rule, here and in policies/score.c: among equal scores the lower slot
index wins.  Random draws whose keep-set would hinge on a difference smaller
than the float32 rounding of the C side (a score gap near the top-k boundary,
a cosine near the 0.5 threshold) are redrawn, so the comparison in
tests/test_policies.c can be exact.

Usage: python3 tools/golden/policies_ref.py [--out tests/fixtures/policies]
"""
import argparse
import json
import os

import numpy as np

HEAD_DIM = 8
N_LAYER = 2
BUDGET = 48
PAD_SCORE = 100.0
COS_GUARD = 1e-6     # cosines this close to the threshold are redrawn
REL_GUARD = 1e-5     # relative score gap at the top-k boundary that is redrawn


class Ambiguous(Exception):
    pass


# ---------------------------------------------------------------- primitives

def softmax(x):
    m = np.max(x)
    e = np.exp(x - m)
    return e / e.sum()


def window_importance(q, k, n_head, n_kv, kv_head, n_cand, softmax_all, gqa, pad):
    """Spec 1.3 steps 1-3 (and 4.1's softmax over all keys when softmax_all):
    logits of the last queries over the keys of one kv head, pooled over the
    GQA group before the softmax, softmax, mean over the query rows.  Also
    returns the per-candidate magnitude used for the ambiguity guard."""
    n_q = q.shape[0]
    L = k.shape[0]
    group = n_head // n_kv
    heads = range(kv_head * group, (kv_head + 1) * group)
    logits = np.stack([q[:, h, :] @ k.T for h in heads]) / np.sqrt(HEAD_DIM)  # [G][n_q][L]
    pooled = logits.max(axis=0) if gqa == "max" else logits.mean(axis=0)
    if pad is not None:
        pooled = pooled + np.where(pad, -1e9, 0.0)[None, :]
    acc = np.zeros(n_cand)
    for i in range(n_q):
        if softmax_all:
            visible = L - n_q + i + 1           # causal inside the window
            p = softmax(pooled[i, :visible])
            m = min(visible, n_cand)
            acc[:m] += p[:m]
        else:
            acc += softmax(pooled[i, :n_cand])
    return acc / n_q


def pool1d(x, kernel, mode):
    """Stride 1, padding kernel//2; max pads with -inf, avg counts the zero
    padding in the divisor (PyTorch's avg_pool1d default)."""
    half = kernel // 2
    n = len(x)
    if mode == "max":
        xp = np.concatenate([np.full(half, -np.inf), x, np.full(half, -np.inf)])
        return np.array([xp[j:j + kernel].max() for j in range(n)])
    xp = np.concatenate([np.zeros(half), x, np.zeros(half)])
    return np.array([xp[j:j + kernel].sum() / kernel for j in range(n)])


def redundancy(k, threshold, no_match_zero_col0, pad):
    """Spec 5.2: cosine of normalised keys, zero diagonal, per row zero the
    largest similar column (a row with no match zeroes column 0 under the
    quirk), column mean over all rows, softmax over all positions."""
    k = k.astype(np.float64).copy()
    if pad is not None:
        k[pad] = 0.0
    kn = k / (np.linalg.norm(k, axis=1, keepdims=True) + 1e-8)
    c = kn @ kn.T
    np.fill_diagonal(c, 0.0)
    near = np.abs(c - threshold) < COS_GUARD
    np.fill_diagonal(near, False)
    if near.any():
        raise Ambiguous("cosine at the threshold")
    L = len(k)
    for i in range(L):
        match = np.nonzero(c[i] > threshold)[0]
        if len(match):
            c[i, match.max()] = 0.0
        elif no_match_zero_col0:
            c[i, 0] = 0.0
    return softmax(c.mean(axis=0))


def topk(z, k, mag):
    """The k best of z: higher first, ties to the lower index.  Raises
    Ambiguous when a kept and a dropped score differ by less than the guard
    (relative to their magnitudes) without being exactly equal."""
    order = sorted(range(len(z)), key=lambda j: (-z[j], j))
    keep, drop = order[:k], order[k:]
    if keep and drop:
        zk = np.array([z[j] for j in keep])
        zd = np.array([z[j] for j in drop])
        mk = np.array([mag[j] for j in keep])
        md = np.array([mag[j] for j in drop])
        diff = np.abs(zk[:, None] - zd[None, :])
        tol = REL_GUARD * (mk[:, None] + md[None, :]) + 1e-300
        if ((diff < tol) & (diff != 0)).any():
            raise Ambiguous("score gap at the top-k boundary")
    return sorted(keep)


# ---------------------------------------------------------------- policies

def keep_window(z, mag, L, w, budget):
    return topk(z, budget - w, mag) + list(range(L - w, L))


def pads_apply(z, mag, pad, pad_policy):
    if pad is None:
        return z, mag
    z = z.copy()
    mag = mag.copy()
    n = len(z)
    z[pad[:n]] = PAD_SCORE if pad_policy == "keep" else -PAD_SCORE
    mag[pad[:n]] = PAD_SCORE
    return z, mag


def select_streamingllm(t, budget, opts):
    sinks = opts.get("sinks", 4)
    out = []
    for layer in range(N_LAYER):
        row = []
        for h in range(t["n_kv"]):
            L = t["len"]
            row.append(None if L < budget else
                       list(range(sinks)) + list(range(L - (budget - sinks), L)))
        out.append(row)
    return out


def select_windowed(t, budget, opts):
    """snapkv, snapkv-decode and rkv: per kv head."""
    w = opts["window"]
    lam = opts.get("lambda", 1.0)
    out = []
    for layer in range(N_LAYER):
        row = []
        for h in range(t["n_kv"]):
            L = t["len"]
            if L < budget:
                row.append(None)
                continue
            n_cand = L - w
            q = t["q"][layer][-w:]
            k = t["k"][layer][h]
            imp = window_importance(q, k, t["n_head"], t["n_kv"], h, n_cand,
                                    opts["softmax"] == "all", opts["gqa"], t["pad"])
            if opts["kernel"] > 1:
                imp = pool1d(imp, opts["kernel"], opts["pool"])
            if lam < 1.0:
                r = redundancy(k, opts.get("threshold", 0.5),
                               opts.get("no_match_zero_col0", 1), t["pad"])[:n_cand]
                z = lam * imp - (1 - lam) * r
                mag = lam * np.abs(imp) + (1 - lam) * np.abs(r)
            else:
                z, mag = imp, np.abs(imp)
            z, mag = pads_apply(z, mag, t["pad"], opts.get("pad_policy", "keep"))
            row.append(keep_window(z, mag, L, w, budget))
        out.append(row)
    return out


def select_h2o_rkv(t, budget, opts):
    """Spec 3.2: last query, GQA max over the group, softmax over keys
    [0, L-1), mean over kv heads, one set per layer; topk(B-1) + last."""
    out = []
    for layer in range(N_LAYER):
        L = t["len"]
        if L < budget:
            out.append([None] * t["n_kv"])
            continue
        q = t["q"][layer][-1:]
        z = np.zeros(L - 1)
        for h in range(t["n_kv"]):
            z += window_importance(q, t["k"][layer][h], t["n_head"], t["n_kv"], h, L - 1,
                                   False, opts.get("gqa", "max"), t["pad"])
        z /= t["n_kv"]
        z, mag = pads_apply(z, np.abs(z), t["pad"], opts.get("pad_policy", "keep"))
        keep = keep_window(z, mag, L, 1, budget)
        out.append([keep] * t["n_kv"])
    return out


POLICIES = {
    # spec string -> (selector, options as the spec defines them)
    "streamingllm": (select_streamingllm, {}),
    "h2o-rkv": (select_h2o_rkv, {}),
    "snapkv": (select_windowed, dict(window=32, kernel=5, pool="avg", softmax="all", gqa="max")),
    "snapkv-decode": (select_windowed,
                      dict(window=8, kernel=7, pool="max", softmax="candidates", gqa="max")),
    "snapkv:gqa=mean": (select_windowed,
                        dict(window=32, kernel=5, pool="avg", softmax="all", gqa="mean")),
    "rkv": (select_windowed, dict(window=8, kernel=7, pool="max", softmax="candidates",
                                  gqa="max", **{"lambda": 0.1})),
    "rkv-code": (select_windowed, dict(window=8, kernel=7, pool="max", softmax="candidates",
                                       gqa="max", **{"lambda": 0.07})),
    "rkv:gqa=mean": (select_windowed, dict(window=8, kernel=7, pool="max",
                                           softmax="candidates", gqa="mean",
                                           **{"lambda": 0.1})),
    "rkv:no_match_zero_col0=0": (select_windowed,
                                 dict(window=8, kernel=7, pool="max", softmax="candidates",
                                      gqa="max", no_match_zero_col0=0, **{"lambda": 0.1})),
    "rkv:lambda=0.5,window=4,kernel=3": (select_windowed,
                                         dict(window=4, kernel=3, pool="max",
                                              softmax="candidates", gqa="max",
                                              **{"lambda": 0.5})),
}
PAD_POLICIES = {
    "rkv": POLICIES["rkv"],
    "rkv:pad_policy=evict-first": (select_windowed,
                                   dict(window=8, kernel=7, pool="max", softmax="candidates",
                                        gqa="max", pad_policy="evict-first", **{"lambda": 0.1})),
    "snapkv-decode": POLICIES["snapkv-decode"],
    "h2o-rkv:pad_policy=evict-first": (select_h2o_rkv, dict(pad_policy="evict-first")),
}


# ---------------------------------------------------------------- tensors

def draw_keys(rng, L, n_kv):
    """Keys with structure: clusters of near-duplicates (so redundancy and its
    threshold matter), plus loners with no similar key (so the no-match quirk
    matters)."""
    keys = np.zeros((n_kv, L, HEAD_DIM))
    for h in range(n_kv):
        bases = rng.standard_normal((5, HEAD_DIM)) * 1.5
        for j in range(L):
            if rng.random() < 0.35:
                keys[h, j] = rng.standard_normal(HEAD_DIM) * 2.0
            else:
                keys[h, j] = bases[rng.integers(5)] + 0.6 * rng.standard_normal(HEAD_DIM)
    return keys.astype(np.float32)


def make_tensors(seed, n_head, n_kv, L, n_pad):
    rng = np.random.default_rng(seed)
    n_q = 32
    q = [rng.standard_normal((n_q, n_head, HEAD_DIM)).astype(np.float32) for _ in range(N_LAYER)]
    k = [draw_keys(rng, L, n_kv) for _ in range(N_LAYER)]
    pad = None
    if n_pad:
        pad = np.zeros(L, dtype=bool)
        pad[:n_pad] = True
    return dict(n_head=n_head, n_kv=n_kv, len=L, n_q=n_q, q=q, k=k, pad=pad)


def as64(t):
    t = dict(t)
    t["q"] = [x.astype(np.float64) for x in t["q"]]
    t["k"] = [x.astype(np.float64) for x in t["k"]]
    return t


# ---------------------------------------------------------------- h2o (accumulated)

def h2o_case(seed, n_head, n_kv, prompt, steps, budget, heavy_ratio):
    """Spec 3.1 simulated step by step: each forward appends its tokens to
    every head, its queries' causal softmax attention (per query head, over
    the slots held) is added to the slots' scores (mean over the GQA group,
    summed over rows), then a head holding more than B slots keeps
    topk(score[:L - recent], heavy) + the recent slots."""
    rng = np.random.default_rng(seed)
    total = prompt + steps
    heavy = int(budget * heavy_ratio)
    recent = budget - heavy
    group = n_head // n_kv
    qs = rng.standard_normal((N_LAYER, total, n_head, HEAD_DIM)).astype(np.float32)
    ks = rng.standard_normal((N_LAYER, total, n_kv, HEAD_DIM)).astype(np.float32)
    slots = [[[] for _ in range(n_kv)] for _ in range(N_LAYER)]   # positions held
    score = [[np.zeros(0) for _ in range(n_kv)] for _ in range(N_LAYER)]
    forwards = []
    fed = 0
    for n_new in [prompt] + [1] * steps:
        fw = {"n_new": n_new, "probs": [], "expect": []}
        new = list(range(fed, fed + n_new))
        for layer in range(N_LAYER):
            for h in range(n_kv):
                slots[layer][h] += new
                score[layer][h] = np.concatenate([score[layer][h], np.zeros(n_new)])
            L = len(slots[layer][0])
            probs = np.zeros((n_head, n_new, L), dtype=np.float32)
            for qh in range(n_head):
                g = qh // group
                kk = ks[layer, slots[layer][g], g, :].astype(np.float64)
                pos = np.array(slots[layer][g])
                for r, t in enumerate(new):
                    vis = pos <= t
                    lg = kk[vis] @ qs[layer, t, qh].astype(np.float64) / np.sqrt(HEAD_DIM)
                    probs[qh, r, :vis.sum()] = softmax(lg)  # visible slots come first
            fw["probs"].append(probs)
            for h in range(n_kv):
                hs = range(h * group, (h + 1) * group)
                add = sum(probs[qh].astype(np.float64).sum(axis=0) for qh in hs) / group
                score[layer][h] = score[layer][h] + add
        for layer in range(N_LAYER):
            row = []
            for h in range(n_kv):
                L = len(slots[layer][h])
                if L <= budget:
                    row.append(None)
                    continue
                sc = score[layer][h]
                keep = topk(sc[:L - recent], heavy, np.abs(sc[:L - recent]) * 1e-3) + \
                    list(range(L - recent, L))
                slots[layer][h] = [slots[layer][h][j] for j in keep]
                score[layer][h] = sc[keep]
                row.append(keep)
            fw["expect"].append(row)
        fed += n_new
        forwards.append(fw)
    return forwards


# ---------------------------------------------------------------- main

class Blob:
    def __init__(self):
        self.parts = []
        self.size = 0

    def add(self, a):
        a = np.ascontiguousarray(a, dtype="<f4").ravel()
        off = self.size
        self.parts.append(a)
        self.size += a.size
        return off


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/policies")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    blob = Blob()
    sets, cases = [], []
    shapes = [(4, 4), (8, 2), (7, 1)]              # GQA 1:1, 4:1, 7:1
    lengths = [40, BUDGET, 100, BUDGET + 128]      # below, at, above budget
    layouts = [(s, L, 0, POLICIES) for s in shapes for L in lengths]
    layouts += [((8, 2), 120, 5, PAD_POLICIES), ((7, 1), BUDGET + 20, 30, PAD_POLICIES)]
    redraws = 0
    for si, ((n_head, n_kv), L, n_pad, pols) in enumerate(layouts):
        for attempt in range(200):
            seed = 1000 * si + attempt
            t = make_tensors(seed, n_head, n_kv, L, n_pad)
            try:
                expects = {spec: fn(as64(t), BUDGET, opts) for spec, (fn, opts) in pols.items()}
                break
            except Ambiguous:
                redraws += 1
        else:
            raise SystemExit(f"no unambiguous draw for set {si}")
        entry = dict(id=si, seed=seed, n_layer=N_LAYER, n_head=n_head, n_kv=n_kv,
                     head_dim=HEAD_DIM, len=L, n_q=t["n_q"],
                     q=[blob.add(x) for x in t["q"]], k=[blob.add(x) for x in t["k"]],
                     pad=[int(x) for x in t["pad"]] if t["pad"] is not None else None)
        sets.append(entry)
        for spec, keep in expects.items():
            cases.append(dict(set=si, policy=spec, budget=BUDGET, expect=keep))

    # The primitives themselves, for a numeric check (layer 0, every kv head).
    prims = []
    for si in (2, 6, 10, 12):
        e = sets[si]
        t = as64(make_tensors(e["seed"], e["n_head"], e["n_kv"], e["len"],
                              sum(e["pad"]) if e["pad"] else 0))
        L = t["len"]
        for h in range(t["n_kv"]):
            k = t["k"][0][h]
            cand = window_importance(t["q"][0][-8:], k, t["n_head"], t["n_kv"], h, L - 8, False,
                                     "max", t["pad"])
            allk = window_importance(t["q"][0][-32:], k, t["n_head"], t["n_kv"], h, L - 32, True,
                                     "mean", t["pad"])
            vecs = {"cand_w8_max": cand, "all_w32_mean": allk,
                    "cand_w8_max_maxpool7": pool1d(cand, 7, "max"),
                    "all_w32_mean_avgpool5": pool1d(allk, 5, "avg"),
                    "redundancy_quirk": redundancy(k, 0.5, 1, t["pad"]),
                    "redundancy_noquirk": redundancy(k, 0.5, 0, t["pad"])}
            prims.append(dict(set=si, layer=0, kv_head=h,
                              **{name: blob.add(v) for name, v in vecs.items()}))

    h2o = []
    for i, (n_head, n_kv) in enumerate(shapes):
        for attempt in range(200):
            try:
                fws = h2o_case(500 + 10 * i + attempt, n_head, n_kv, prompt=24, steps=16,
                               budget=20, heavy_ratio=0.5)
                break
            except Ambiguous:
                redraws += 1
        for fw in fws:
            fw["probs"] = [blob.add(p) for p in fw["probs"]]
        h2o.append(dict(policy="h2o", budget=20, n_layer=N_LAYER, n_head=n_head, n_kv=n_kv,
                        head_dim=HEAD_DIM, forwards=fws))

    with open(os.path.join(args.out, "tensors.bin"), "wb") as f:
        for p in blob.parts:
            f.write(p.tobytes())
    doc = {"generator": "tools/golden/policies_ref.py", "budget": BUDGET,
           "n_floats": blob.size, "sets": sets, "cases": cases, "primitives": prims,
           "h2o": h2o}
    with open(os.path.join(args.out, "keepsets.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"{len(cases)} keep-set cases on {len(sets)} tensor sets, {len(h2o)} h2o runs, "
          f"{blob.size} floats, {redraws} ambiguous draws redrawn")


if __name__ == "__main__":
    main()
