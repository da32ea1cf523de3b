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

Part two simulates whole generations on kvpress's decoding schedule,
transcribed from kvpress/presses/decoding_press.py (DecodingPress, the same
commit): the prompt's forward is prefilling (base_press.is_prefilling), so
the hook returns at once (no compression, no count); every later forward of
one token appends its key, adds 1 to the layer's step count and, when the
count reaches compression_interval, compresses that layer and resets the
count to 0 (whether or not anything was evicted).  compress() asks for
target_size slots: _find_target_compression_ratio gives 0 when k_len <=
target_size (ScorerPress.compress then returns the cache as it is) and
otherwise a ratio whose int(k_len * (1 - ratio)) is target_size (checked
here).  TOVA's query is the current token's (compute_window_attention,
window 1: the last of the buffered hidden states, with the current
position's rotary embedding) over every key of the cache, the current key
included.  The kept slots are gathered in topk order (best first; TOVA's
newest slot, padded with max + 1, comes first), and the next compression's
tie rule (lower slot first) works on that order.  Ours keep position order:
the generator checks, step by step, that a run kept in position order holds
the same sets as kvpress's (persistent ties keep their position order under
a stable sort, so the set cannot differ), and writes the sets in position
order for tests/test_kvpress.c to compare slot for slot, with kvpress's
order beside them.  The harness (draws, the ranked top-k with its near-tie
redraw) is tools/golden/released_ref.py's.

Writes tests/fixtures/policies/kvpress.json (one select per case) and
kvpress_gen.json + kvpress_gen.bin (whole generations).  Usage:
    python3 tools/golden/kvpress_ref.py [--out tests/fixtures/policies]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from policies_ref import Ambiguous, topk  # noqa: E402
import released_ref  # noqa: E402
import vase_ref  # noqa: E402

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


# ------------------------------------------------------------ whole generations

def find_target_compression_ratio(k_len, target):
    """decoding_press.py _find_target_compression_ratio, in Python floats."""
    if k_len <= target:
        return 0.0
    ratio = 1.0 - target / k_len
    low, high = 0.0, 1.0
    for _ in range(20):
        n_kept = int(k_len * (1 - ratio))
        if n_kept == target:
            break
        if n_kept > target:
            low, ratio = ratio, (ratio + high) / 2
        else:
            high, ratio = ratio, (low + ratio) / 2
    return ratio


def knorm_press_scores(k, _q):
    """knorm_press.py: -|k| per slot, per kv head.  k [n_kv][L][d]."""
    return [-np.linalg.norm(k[h].astype(np.float64), axis=-1) for h in range(k.shape[0])]


def tova_press_scores(k, q):
    """tova_press.py: the current query's softmax over all L keys per query
    head (GQA: head hq reads kv head hq // group), the last column dropped,
    the mean over the query heads, the same row for every kv head, the last
    slot padded with the maximum + 1.  q [n_head][d]."""
    n_kv, L, d = k.shape
    group = q.shape[0] // n_kv
    probs = []
    for hq in range(q.shape[0]):
        logit = k[hq // group].astype(np.float64) @ q[hq].astype(np.float64) / np.sqrt(d)
        p = np.exp(logit - logit.max())
        probs.append((p / p.sum())[:-1])
    row = np.mean(probs, axis=0)
    row = np.append(row, row.max() + 1)
    return [row.copy() for _ in range(n_kv)]


PRESSES = {"knorm": knorm_press_scores, "tova": tova_press_scores}


def decoding_generate(policy, q, k, prompt, budget, interval, order):
    """DecodingPress over one sequence.  q [n_layer][total][n_head][d], k
    [n_layer][total][n_kv][d].  order "kvpress": the cache as kvpress leaves
    it (topk order); "position": kept slots sorted back into position order.
    Returns the steps (the position whose forward compressed, the positions
    held per layer and kv head in cache order) and how many compressions cut
    between exactly equal scores."""
    n_layer, total, _, _ = q.shape
    n_kv = k.shape[2]
    held = [[list(range(prompt)) for _ in range(n_kv)] for _ in range(n_layer)]
    count = [0] * n_layer            # layer_step_counts: decoding forwards only
    steps, tie_cuts = [], 0
    for pos in range(prompt, total):
        rec, changed = {"at": pos, "held": []}, False
        for layer in range(n_layer):
            for h in range(n_kv):
                held[layer][h].append(pos)
            count[layer] += 1
            if count[layer] >= interval:     # q_len (1) >= target_size never: budget > 1
                k_len = len(held[layer][0])
                # kvpress keeps a cache of exactly B as it is; ours selects all
                # B slots (the same cache): the draws avoid the case
                assert k_len != budget, "a scheduled forward with exactly B slots"
                ratio = find_target_compression_ratio(k_len, budget)
                if ratio != 0:
                    n_kept = int(k_len * (1 - ratio))
                    assert n_kept == budget
                    kl = np.stack([k[layer, held[layer][h], h, :] for h in range(n_kv)])
                    scores = PRESSES[policy](kl, q[layer, pos])
                    for h in range(n_kv):
                        z = scores[h]
                        idx = released_ref.ranked_topk(z, n_kept, np.abs(z))
                        tie_cuts += int(z[idx[-1]] == max(z[j] for j in range(k_len) if j not in idx))
                        if order == "position":
                            idx = sorted(idx)
                        held[layer][h] = [held[layer][h][j] for j in idx]
                    changed = True
                count[layer] = 0
            rec["held"].append([list(x) for x in held[layer]])
        if changed:
            steps.append(rec)
    return steps, tie_cuts


def tie_keys(rng, k, n_layer, total, n_kv):
    """Ties on purpose: a third of the tokens repeat an earlier token's keys
    in every kv head (equal TOVA and KNorm scores), another sixth hold an
    earlier key with its coordinates permuted and signs flipped (an equal
    norm: a KNorm tie between different keys; multiples of 1/8, so the sums
    of squares are exact)."""
    for layer in range(n_layer):
        for t in range(4, total):
            u = rng.random()
            src = int(rng.integers(0, t))
            if u < 0.33:
                k[layer, t] = k[layer, src]
            elif u < 0.5:
                for h in range(n_kv):
                    perm = rng.permutation(k.shape[3])
                    k[layer, t, h] = k[layer, src, h, perm] * rng.choice([-1.0, 1.0], k.shape[3])
    return k


# (n_head, n_kv, budget, interval, prompt, total, ties): GQA throughout; the
# first prompt is short (its first scheduled compression finds the cache
# under the budget), the second longer than the budget (kvpress leaves a
# prompt whole), the third at the budget with an odd interval.
GEN_SETS = [
    (4, 2, 12, 6, 4, 4 + 6 * 8 + 2, False),
    (4, 2, 12, 5, 20, 20 + 5 * 7 + 1, False),
    (6, 2, 16, 7, 16, 16 + 7 * 6 + 3, False),
    (4, 1, 10, 6, 12, 12 + 6 * 7, False),
    (4, 2, 12, 6, 10, 10 + 6 * 8, True),
]


def main_gen(out_dir):
    n_layer = 2
    blob, off, sets, runs, redraws = [], 0, [], [], 0
    for si, (n_head, n_kv, budget, interval, prompt, total, ties) in enumerate(GEN_SETS):
        for attempt in range(400):
            rng = np.random.default_rng(2700 + 100 * si + attempt)
            q, k = released_ref.draw(rng, total, n_head, n_kv, n_layer)
            if ties:
                k = tie_keys(rng, k, n_layer, total, n_kv)
            try:
                res = {}
                for policy in PRESSES:
                    a, cuts = decoding_generate(policy, q, k, prompt, budget, interval, "kvpress")
                    b, _ = decoding_generate(policy, q, k, prompt, budget, interval, "position")
                    res[policy] = (a, b, cuts)
            except released_ref.Ambiguous:
                redraws += 1
                continue
            # the tie case must cut between equal scores often, for both policies
            if ties and min(r[2] for r in res.values()) < 3:
                continue
            break
        else:
            raise SystemExit(f"no unambiguous draw for set {si}")
        qa = np.ascontiguousarray(q, dtype="<f4").ravel()
        ka = np.ascontiguousarray(k, dtype="<f4").ravel()
        sets.append(dict(id=si, n_layer=n_layer, n_head=n_head, n_kv=n_kv,
                         head_dim=released_ref.HEAD_DIM, total=total, prompt=prompt,
                         budget=budget, interval=interval, ties=ties, q=off, k=off + qa.size))
        blob += [qa, ka]
        off += qa.size + ka.size
        for policy, (kv_steps, pos_steps, cuts) in res.items():
            assert len(kv_steps) == len(pos_steps) >= 5, (policy, si, len(kv_steps))
            for a, b in zip(kv_steps, pos_steps):
                assert a["at"] == b["at"]
                for la, lb in zip(a["held"], b["held"]):
                    for ha, hb in zip(la, lb):
                        assert sorted(ha) == hb, "kvpress order changed a kept set"
                        assert len(hb) == budget
            steps = [dict(at=b["at"], held=b["held"], held_kvpress=a["held"])
                     for a, b in zip(kv_steps, pos_steps)]
            runs.append(dict(set=si, policy=policy, tie_cuts=cuts, steps=steps))
    with open(os.path.join(out_dir, "kvpress_gen.bin"), "wb") as f:
        for a in blob:
            f.write(a.tobytes())
    doc = {"generator": "tools/golden/kvpress_ref.py; NVIDIA/kvpress @ 8bb29b9, DecodingPress",
           "n_floats": off, "sets": sets, "runs": runs}
    with open(os.path.join(out_dir, "kvpress_gen.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    n_steps = sum(len(r["steps"]) for r in runs)
    print(f"generations: {len(runs)} runs on {len(sets)} sets, {n_steps} compressions "
          f"(min {min(len(r['steps']) for r in runs)} a run), {off} floats, "
          f"{sum(r['tie_cuts'] for r in runs)} cuts between equal scores, "
          f"{redraws} ambiguous draws redrawn")


# ------------------------------------------------ RandomPress, KeyDiff, LagKV
#
# Part three: whole generations of policies/random.c, keydiff.c, lagkv.c and
# expected_attention.c on the same DecodingPress schedule, with values of their
# own (LagKV and Expected Attention read them), written to kvpress_more.json +
# kvpress_more.bin.

def random_press_scores(seed, keep_prompt):
    """random_press.py: torch.rand over (batch, kv heads, slots), one uniform
    per slot.  The numbers are ours (policies/random.c): the eviction streams
    of vase_ref.Stream (Philox4x32-10) keyed by (seed, sequence 0, layer, the
    compressing forward's next position, kv head), slot j's the j-th uniform
    of its head's stream; keep_prompt adds 1 to every prompt slot."""
    def score(ctx):
        out = []
        for h in range(len(ctx["held"])):
            st = vase_ref.Stream(seed, 0, ctx["layer"], ctx["next_pos"], h)
            out.append(np.array([st.uniform() + float(keep_prompt and p < ctx["prompt"])
                                 for p in ctx["held"][h]]))
        return out, [np.zeros(len(x)) for x in out]   # exact in C too: no near-tie guard
    return score


def keydiff_press_scores(ctx):
    """keydiff_press.py: anchor = F.normalize(keys, p=2, dim=-1).mean(dim=2)
    (norms clamped at 1e-12), score = -F.cosine_similarity(keys, anchor,
    dim=-1) (each norm clamped at 1e-8), per kv head over every slot."""
    out = []
    for kk in ctx["k"]:
        kk = kk.astype(np.float64)
        n = np.linalg.norm(kk, axis=-1, keepdims=True)
        anchor = (kk / np.maximum(n, 1e-12)).mean(axis=0)
        an = max(np.linalg.norm(anchor), 1e-8)
        out.append(-((kk / np.maximum(n, 1e-8)) * (anchor / an)).sum(axis=-1))
    return out, [np.abs(z) for z in out]


def lag_states_score(x, lag):
    """lagkv_press.py _get_states_score: x [P][lag][d] -> [P-1][lag]: each
    partition against the next one's per-channel min and max, the unbiased
    std over the channels (torch.std), softmax over the partition."""
    ref, v = x[1:], x[:-1]
    mn = ref.min(axis=-2, keepdims=True)
    mx = ref.max(axis=-2, keepdims=True)
    if (mx == mn).any():
        raise released_ref.Ambiguous("a constant channel in a reference partition")
    s = ((v - mn) / (mx - mn)).std(axis=-1, ddof=1)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def lagkv_press_scores(n_sink, lag, cross):
    """lagkv_press.py LagKVPress.score, per kv head of a cache of L slots:
    under n_sink + 2 lag slots the sinks score 1 and slot j >= n_sink
    (j - n_sink) / (L - n_sink); else the partitions of [n_sink, end) but
    the last get (key score + value score) / 2, ranked in their partition
    (argsort().argsort() / lag; a stable sort: the lower slot the lower
    rank on exact ties) unless cross_scoring; sinks and the tail (the last
    partition and the rest) score 1."""
    def score(ctx):
        k, v = ctx["k"], ctx["v"]
        n_kv, L, d = k.shape
        if L < n_sink + 2 * lag:
            s = np.ones((n_kv, L))
            if L > n_sink:
                s[:, n_sink:] = np.arange(L - n_sink) / (L - n_sink)
            return list(s), [np.abs(x) for x in s]
        end = n_sink + ((L - n_sink) // lag) * lag
        tail = lag + L - end
        out = []
        for h in range(n_kv):
            parts = [x[h, n_sink:end].astype(np.float64).reshape(-1, lag, d) for x in (k, v)]
            sc = (lag_states_score(parts[0], lag) + lag_states_score(parts[1], lag)) / 2
            for row in sc:   # ranks that hinge on a gap below rounding: redraw
                srt = np.sort(row)
                gap = np.diff(srt)
                if ((gap != 0) & (gap < 1e-12 * (np.abs(srt[1:]) + np.abs(srt[:-1])))).any():
                    raise released_ref.Ambiguous("near tie in a partition")
            if not cross:
                sc = np.argsort(np.argsort(sc, axis=-1, kind="stable"), axis=-1) / lag
            out.append(np.concatenate([np.ones(n_sink), sc.ravel(), np.ones(tail)]))
        return out, [np.abs(x) for x in out]
    return score


def decoding_generate_more(score, q, k, v, prompt, budget, interval, order):
    """DecodingPress over one sequence as decoding_generate, for a score
    function of the whole cache (keys, values, positions held) and of the
    hidden-states buffer (here the positions whose queries stand for them:
    each decoding forward appends its own, a compression clears it, and it
    keeps the last BUFFER_SIZE): order "kvpress" leaves the kept slots in
    topk order, "position" sorts them."""
    n_layer, total = q.shape[0], q.shape[1]
    n_kv = k.shape[2]
    held = [[list(range(prompt)) for _ in range(n_kv)] for _ in range(n_layer)]
    count = [0] * n_layer
    buffer = [[] for _ in range(n_layer)]
    steps = []
    for pos in range(prompt, total):
        rec, changed = {"at": pos, "held": []}, False
        for layer in range(n_layer):
            for h in range(n_kv):
                held[layer][h].append(pos)
            buffer[layer].append(pos)
            count[layer] += 1
            if count[layer] >= interval:
                k_len = len(held[layer][0])
                assert k_len != budget, "a scheduled forward with exactly B slots"
                ratio = find_target_compression_ratio(k_len, budget)
                if ratio != 0:
                    n_kept = int(k_len * (1 - ratio))
                    assert n_kept == budget
                    ctx = {"layer": layer, "next_pos": pos + 1, "prompt": prompt,
                           "held": held[layer], "buffer": list(buffer[layer]), "q": q[layer],
                           "k": np.stack([k[layer, held[layer][h], h, :] for h in range(n_kv)]),
                           "v": np.stack([v[layer, held[layer][h], h, :] for h in range(n_kv)])}
                    zs, mags = score(ctx)
                    for h in range(n_kv):
                        idx = released_ref.ranked_topk(zs[h], n_kept, mags[h])
                        if order == "position":
                            idx = sorted(idx)
                        held[layer][h] = [held[layer][h][j] for j in idx]
                    changed = True
                count[layer] = 0
                buffer[layer] = []
            buffer[layer] = buffer[layer][-BUFFER_SIZE:]
            rec["held"].append([list(x) for x in held[layer]])
        if changed:
            steps.append(rec)
    return steps


BUFFER_SIZE = 256   # DecodingPress.hidden_states_buffer_size


def half_layout(d, pairing):
    """perm[x]: where rotate_half's dimension x lives in the model's layout
    (pairing 1: the same; 0: RoPE pairs (2i, 2i+1), as GGUF llama stores
    them)."""
    half = d // 2
    return np.array(list(range(d)) if pairing == 1 else
                    [2 * i for i in range(half)] + [2 * i + 1 for i in range(half)])


def expected_attention_press_scores(n_future, n_sink, use_cov, use_vnorm, eps, released,
                                    inv_freq, pairing):
    """expected_attention_press.py under DecodingPress.  get_query_statistics:
    the buffered forwards' pre-RoPE queries (kvpress: q_proj of the buffered
    hidden states; here the recorded post-RoPE queries rotated back by their
    positions, as policies/expected_attention.c does), the first n_sink left
    out, their mean and covariance (einsum / count); apply_avg_rope: R =
    mean over positions q_len .. q_len + n_future - 1 of cos I + sin P
    (rotary_emb's cos and sin: the frequencies twice over, rotate_half's
    layout), mu R^T, R C R^T, with q_len the buffer's length under
    compat=released, else the next token's position; score: keys after the
    sinks, k.mu / sqrt(d) + k C k / d / 2, softmax over those keys, the mean
    over the group's query heads (repeat_kv: query head h reads kv head
    h // group), times (+ epsilon) the value norms, the sinks padded with
    the maximum over the layer + 1."""
    f = np.asarray(inv_freq, dtype=np.float32).astype(np.float64)

    def rotary(t):   # rotary_emb: cos, sin [T][d]
        ang = np.asarray(t, dtype=np.float64)[:, None] * f[None, :]
        return (np.concatenate([np.cos(ang)] * 2, axis=1),
                np.concatenate([np.sin(ang)] * 2, axis=1))

    def score(ctx):
        k, v, buf = ctx["k"], ctx["v"], ctx["buffer"]
        n_kv, L, d = k.shape
        n_head = ctx["q"].shape[1]
        group = n_head // n_kv
        perm = half_layout(d, pairing)
        # rotate the recorded queries back (in rotate_half's layout): x cos - rotate_half(x) sin
        x = ctx["q"][buf].astype(np.float64)[:, :, perm]
        cos, sin = rotary(buf)
        rh = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
        pre = x * cos[:, None, :] - rh * sin[:, None, :]
        h = pre[n_sink:]
        mu = h.mean(axis=0)
        cen = h - mu
        cov = np.einsum("shi,shj->hij", cen, cen) / h.shape[0]
        q_len = len(buf) if released else ctx["next_pos"]
        cos, sin = rotary(np.arange(q_len, q_len + n_future))
        P = np.zeros((d, d))
        P[d // 2:, :d // 2] = np.eye(d // 2)
        P[:d // 2, d // 2:] = -np.eye(d // 2)
        R = (cos[:, None, :] * np.eye(d) + sin[:, None, :] * P).mean(axis=0)
        mu = mu @ R.T
        cov = R @ cov @ R.T
        inv = np.argsort(perm)   # back to the model's layout
        mu, cov = mu[:, inv], cov[:, inv][:, :, inv]
        rows = []
        for hq in range(n_head):
            kk = k[hq // group, n_sink:].astype(np.float64)
            sc = kk @ mu[hq] / np.sqrt(d)
            if use_cov:
                sc = sc + np.einsum("ni,ij,nj->n", kk, cov[hq], kk) / d / 2
            e = np.exp(sc - sc.max())
            rows.append(e / e.sum())
        out = []
        for h in range(n_kv):
            sc = np.mean(rows[h * group:(h + 1) * group], axis=0)
            if use_vnorm:
                sc = (sc + eps) * np.linalg.norm(v[h, n_sink:].astype(np.float64), axis=-1)
            out.append(sc)
        top = max(x.max() for x in out) + 1
        out = [np.concatenate([np.full(n_sink, top), x]) for x in out]
        # the C side's logits come from an f32 gemm: a guard 100 times wider
        return out, [100 * np.abs(x) for x in out]
    return score


def draw_more(rng, n_layer, total, n_head, n_kv, d):
    """Continuous f32 draws (no constant channel for LagKV): queries normal;
    keys a per-head mean direction plus noise of uneven scale (KeyDiff's
    anchor then means something); values normal of uneven scale."""
    q = rng.standard_normal((n_layer, total, n_head, d))
    base = rng.standard_normal((n_layer, 1, n_kv, d)) * 1.5
    k = base + rng.standard_normal((n_layer, total, n_kv, d)) * rng.uniform(
        0.3, 2.0, (n_layer, total, n_kv, 1))
    v = rng.standard_normal((n_layer, total, n_kv, d)) * rng.uniform(
        0.5, 2.0, (n_layer, total, n_kv, 1))
    return tuple(a.astype(np.float32) for a in (q, k, v))


# (n_head, n_kv, budget, interval, prompt, total, RoPE pairing); runs:
# (spec, score, order; the score of a set's inv_freq and pairing).
MORE_SETS = [
    (4, 2, 12, 6, 4, 4 + 6 * 8 + 2, 1),
    (4, 2, 16, 7, 20, 20 + 7 * 7 + 1, 0),
    (6, 3, 16, 5, 10, 10 + 5 * 9, 1),
]
INV_FREQ = (1.0 / 1000.0 ** (np.arange(4) / 4)).astype(np.float32)   # head_dim 8, base 1000
def more_runs(pairing):
    def ea(*a):
        return expected_attention_press_scores(*a, INV_FREQ, pairing)
    return [
        ("random:seed=7", random_press_scores(7, True), "position"),
        ("random:seed=123456,keep_prompt=0", random_press_scores(123456, False), "position"),
        ("keydiff", keydiff_press_scores, "position"),
        ("lagkv:n_sink=4,lag_size=4", lagkv_press_scores(4, 4, False), "position"),
        ("lagkv:n_sink=2,lag_size=3", lagkv_press_scores(2, 3, False), "position"),
        ("lagkv:n_sink=2,lag_size=3,cache_order=score", lagkv_press_scores(2, 3, False),
         "kvpress"),
        ("lagkv:n_sink=1,lag_size=5,cross_scoring=1", lagkv_press_scores(1, 5, True), "position"),
        ("lagkv:n_sink=4,lag_size=16", lagkv_press_scores(4, 16, False), "position"),
        ("expected-attention", ea(512, 4, True, True, 0.0, False), "position"),
        ("expected-attention:n_sink=2,n_future_positions=16", ea(16, 2, True, True, 0.0, False),
         "position"),
        ("expected-attention:n_sink=1,use_covariance=0,epsilon=0.01",
         ea(512, 1, False, True, 0.01, False), "position"),
        ("expected-attention:n_sink=2,use_vnorm=0,compat=released",
         ea(512, 2, True, False, 0.0, True), "position"),
    ]


def main_more(out_dir):
    n_layer, d = 2, 8
    blob, off, sets, runs, redraws = [], 0, [], [], 0
    for si, (n_head, n_kv, budget, interval, prompt, total, pairing) in enumerate(MORE_SETS):
        run_list = more_runs(pairing)
        for attempt in range(400):
            rng = np.random.default_rng(3100 + 100 * si + attempt)
            q, k, v = draw_more(rng, n_layer, total, n_head, n_kv, d)
            try:
                res = [decoding_generate_more(score, q, k, v, prompt, budget, interval, order)
                       for _, score, order in run_list]
            except released_ref.Ambiguous:
                redraws += 1
                continue
            break
        else:
            raise SystemExit(f"no unambiguous draw for set {si}")
        arrs = [np.ascontiguousarray(a, dtype="<f4").ravel() for a in (q, k, v)]
        sets.append(dict(id=si, n_layer=n_layer, n_head=n_head, n_kv=n_kv, head_dim=d,
                         total=total, prompt=prompt, budget=budget, interval=interval,
                         q=off, k=off + arrs[0].size, v=off + arrs[0].size + arrs[1].size,
                         inv_freq=f32_list(INV_FREQ), pairing=pairing))
        blob += arrs
        off += sum(a.size for a in arrs)
        for (spec, _, order), steps in zip(run_list, res):
            assert len(steps) >= 5, (spec, si, len(steps))
            for st in steps:
                for lh in st["held"]:
                    for hh in lh:
                        assert len(hh) == budget
                        assert order == "kvpress" or hh == sorted(hh)
            runs.append(dict(set=si, spec=spec, steps=steps))
    with open(os.path.join(out_dir, "kvpress_more.bin"), "wb") as f:
        for a in blob:
            f.write(a.tobytes())
    doc = {"generator": "tools/golden/kvpress_ref.py; NVIDIA/kvpress @ 8bb29b9, DecodingPress "
                        "with RandomPress, KeyDiffPress, LagKVPress, ExpectedAttentionPress",
           "n_floats": off, "sets": sets, "runs": runs}
    with open(os.path.join(out_dir, "kvpress_more.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    n_steps = sum(len(r["steps"]) for r in runs)
    print(f"more generations: {len(runs)} runs on {len(sets)} sets, {n_steps} compressions "
          f"(min {min(len(r['steps']) for r in runs)} a run), {off} floats, "
          f"{redraws} ambiguous draws redrawn")


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
    main_gen(args.out)
    main_more(args.out)


if __name__ == "__main__":
    main()
