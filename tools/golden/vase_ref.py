#!/usr/bin/env python3
"""vase_ref.py - independent numpy transcription of the VaSE / CurDKV rules of
../shared/specs/vase_beaconkv.md (sections 2.2-2.6), and of RPC (section 5)
and the BeaconKV reconstruction (section 4.3), written from the spec's text,
not from the C code.  It writes tests/fixtures/vase/beacon_cases.json (FPS
cases and RPC / BeaconKV decode scenarios: kept positions after every
compression) and tests/fixtures/vase/vase_cases.json:

  * philox: the first uniforms of a few eviction RNG streams (Philox4x32-10,
    key = run seed, counter = (block, sequence, layer << 16 | stream,
    eviction)), so the C stream is checked bit for bit;
  * sample: Gumbel-top-k cases (weights, Gumbel draws, taken mask, fallback
    scores) with the expected draw order, including the fallback when too few
    items have positive weight;
  * attnv / dkv / curdkv: two evictions of a small random cache, emulated the
    way the original code lays out its cache (selected candidates written to
    the front in selection order, then the recent buffer; new tokens appended),
    with the expected kept positions of every (layer, kv head).

The C test replays the same streams (the draws are in the fixture too), so the
kept sets must match exactly.

Usage: python3 tools/golden/vase_ref.py  (from the repository root)
"""
import json
import math
import os

import numpy as np

MASK = 0xFFFFFFFF


# ---- Philox4x32-10 and the eviction streams ----

def philox4x32_10(ctr, key):
    c = list(ctr)
    k0, k1 = key
    for _ in range(10):
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        hi0, lo0 = p0 >> 32, p0 & MASK
        hi1, lo1 = p1 >> 32, p1 & MASK
        c = [(hi1 ^ c[1] ^ k0) & MASK, lo1, (hi0 ^ c[3] ^ k1) & MASK, lo0]
        k0 = (k0 + 0x9E3779B9) & MASK
        k1 = (k1 + 0xBB67AE85) & MASK
    return c


class Stream:
    LAYER = 0xFFFF

    def __init__(self, seed, seq, layer, eviction, stream):
        self.key = (seed & MASK, (seed >> 32) & MASK)
        self.ctr = [0, seq & MASK, ((layer & 0xFFFF) << 16) | (stream & 0xFFFF),
                    eviction & MASK]
        self.buf = []

    def u32(self):
        if not self.buf:
            self.buf = philox4x32_10(self.ctr, self.key)
            self.ctr[0] = (self.ctr[0] + 1) & MASK
        return self.buf.pop(0)

    def uniform(self):
        hi = self.u32() >> 5
        lo = self.u32() >> 6
        return ((hi << 26 | lo) + 0.5) / 2.0 ** 53

    def normal(self):
        u1 = self.uniform()
        u2 = self.uniform()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * u2)


def gumbel(u):
    return -math.log(-math.log(u))


# ---- sampling without replacement (Gumbel-top-k) ----

def rank_desc(scores, idx):
    """idx sorted by descending score; ties: lower index first."""
    return sorted(idx, key=lambda j: (-scores[j], j))


def sample_topk(w, g, taken, fallback, k):
    n = len(w)
    elig = [j for j in range(n) if not taken[j] and w[j] > 0 and math.isfinite(w[j])]
    keys = {j: math.log(w[j]) + g[j] for j in elig}
    drawn = sorted(elig, key=lambda j: (-keys[j], j))[:k]
    if len(drawn) < k:
        rest = [j for j in range(n) if not taken[j] and j not in drawn]
        fb = [fallback[j] if fallback is not None else 0.0 for j in range(n)]
        drawn += rank_desc(fb, rest)[:k - len(drawn)]
    return drawn


# ---- the VaSE rules ----

def avg_pool(x, kernel):
    """AvgPool1d(kernel, stride 1, padding kernel//2), zero padding counted."""
    half = kernel // 2
    xp = np.concatenate([np.zeros(half), x, np.zeros(half)])
    return np.array([xp[j:j + kernel].sum() / kernel for j in range(len(x))])


def window_score(q, k_cand, n_head, n_kv, h, kernel, temperature):
    """S_j of spec 2.3: per query head softmax over the candidates, mean over
    the window, smoothing (in slot order), then mean over the group."""
    group = n_head // n_kv
    d = k_cand.shape[1]
    total = np.zeros(k_cand.shape[0])
    for g in range(group):
        qh = q[:, (h * group + g) * d:(h * group + g + 1) * d].astype(np.float64)
        logits = qh @ k_cand.astype(np.float64).T / (math.sqrt(d) * temperature)
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        s = p.mean(axis=0)
        if kernel > 1:
            s = avg_pool(s, kernel)
        total += s
    return total / group


def attn_rkv_choose(q, k_cand, n_head, n_kv, h, kernel, lam, k):
    """VaSE's attn_rkv (terarachang/VaSE, mode attn_rkv with --smooth): the
    smoothed window score S, R_j = softmax_j(mean_i cos(k_i, k_j)) over the
    candidates with the diagonal zeroed and no similarity threshold, the
    deterministic top-k of lam * S - (1 - lam) * R (ties: lower slot)."""
    s = window_score(q, k_cand, n_head, n_kv, h, kernel, 1.0)
    kd = k_cand.astype(np.float64)
    kn = kd / (np.linalg.norm(kd, axis=1, keepdims=True) + 1e-8)
    c = kn @ kn.T
    np.fill_diagonal(c, 0.0)
    col = c.mean(axis=0)
    r = np.exp(col - col.max())
    r /= r.sum()
    z = lam * s - (1 - lam) * r
    return sorted(range(len(z)), key=lambda j: (-z[j], j))[:k]


def value_range(v):
    v = v.astype(np.float64)
    return v.max(axis=1) - v.min(axis=1)


def attnv_choose(rng, scores, n_sink, n_large, k, gumbels):
    n = len(rng)
    r = [math.inf if j < n_sink else float(rng[j]) for j in range(n)]
    protected = rank_desc(r, list(range(n)))[:min(n_large, k)]
    taken = [False] * n
    for j in protected:
        taken[j] = True
    w = [0.0 if taken[j] else float(scores[j]) for j in range(n)]
    return protected + sample_topk(w, gumbels, taken, r, k - len(protected))


def dkv_choose(lk, lv, n_sink, k):
    s = lk * lv
    s = s / s.sum()
    s = [1.0 if j < n_sink else float(s[j]) for j in range(len(s))]
    return rank_desc(s, list(range(len(s))))[:k]


def sketch(seed, seq, layer, eviction, d, r):
    st = Stream(seed, seq, layer, eviction, Stream.LAYER)
    g = np.zeros((d, r), dtype=np.float32)
    for i in range(d):
        for c in range(r):
            g[i, c] = np.float32(st.normal() / math.sqrt(r))
    return g


def sq_norms(x, g):
    y = x.astype(np.float64) @ g.astype(np.float64)
    return (y * y).sum(axis=1)


# ---- the scenario: two evictions of a small cache ----

def scenario(mode, rs, cfg):
    """Emulates the original's per-(layer, kv head) cache in its slot order."""
    L, H, HKV, D = cfg["n_layer"], cfg["n_head"], cfg["n_kv"], cfg["head_dim"]
    W, B, sinks, seed, seq = cfg["window"], cfg["budget"], cfg["sinks"], cfg["seed"], cfg["seq"]
    n0 = cfg["n_first"]
    rnd = lambda *s: rs.standard_normal(s).astype(np.float32)

    def values(n):
        v = rnd(L, HKV, n, D)
        big = rs.random((L, HKV, n)) < 0.15        # a few outlier value rows
        v[big] *= np.float32(8.0)
        return v

    steps = []
    k_new, v_new, pos_new = rnd(L, HKV, n0, D), values(n0), np.arange(n0)
    cache = [[None] * HKV for _ in range(L)]       # (k, v, pos) in slot order
    for l in range(L):
        for h in range(HKV):
            cache[l][h] = (k_new[l, h], v_new[l, h], pos_new)
    q = rnd(L, W, H * D)
    steps.append({"k": k_new, "v": v_new, "q": q, "n": n0})
    expected = []
    fixed = {}
    for ev in range(2):
        kept_ev = []
        for l in range(L):
            if mode in ("dkv", "curdkv"):
                g = fixed.get(l)
                if g is None or mode == "dkv":
                    g = sketch(seed, seq, l, 0 if mode == "curdkv" else ev, D, cfg["rank"])
                    fixed[l] = g
            row = []
            for h in range(HKV):
                kc, vc, pc = cache[l][h]
                n = len(pc)
                n_cand = n - W
                if mode == "attnv":
                    st = Stream(seed, seq, l, ev, h)
                    gum = [gumbel(st.uniform()) for _ in range(n_cand)]
                    s = window_score(q[l], kc[:n_cand], H, HKV, h, cfg["kernel"], 1.0)
                    sel = attnv_choose(value_range(vc[:n_cand]), s, sinks, int(0.25 * B),
                                       B - W, gum)
                elif mode == "attn_rkv":
                    sel = attn_rkv_choose(q[l], kc[:n_cand], H, HKV, h, cfg["kernel"], 0.5, B - W)
                else:
                    sel = dkv_choose(sq_norms(kc[:n_cand], g), sq_norms(vc[:n_cand], g), sinks,
                                     B - W)
                order = list(sel) + list(range(n_cand, n))
                cache[l][h] = (kc[order], vc[order], pc[order])
                row.append(sorted(int(p) for p in pc[order]))
            kept_ev.append(row)
        expected.append(kept_ev)
        if ev == 0:   # W new tokens, then the second eviction
            base = n0
            k_new, v_new = rnd(L, HKV, W, D), values(W)
            for l in range(L):
                for h in range(HKV):
                    kc, vc, pc = cache[l][h]
                    cache[l][h] = (np.concatenate([kc, k_new[l, h]]),
                                   np.concatenate([vc, v_new[l, h]]),
                                   np.concatenate([pc, np.arange(base, base + W)]))
            q = rnd(L, W, H * D)
            steps.append({"k": k_new, "v": v_new, "q": q, "n": W})
    return steps, expected


# ---- RPC and BeaconKV (spec sections 4.3 and 5) ----

def rope_inv_freq(d, theta=10000.0):
    return (theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)).astype(np.float32)


def rotate(x, pos, inv_freq, inverse=False):
    """RoPE of one head vector (pairing 'half': x[i] with x[i + d/2]); the
    angle is the f32 product pos * inv_freq[i], as the runtime computes it."""
    d = len(x)
    half = d // 2
    ang = (np.float32(pos) * inv_freq).astype(np.float64)
    c, s = np.cos(ang), np.sin(ang)
    if inverse:
        s = -s
    x = x.astype(np.float64)
    y = x.copy()
    y[:half] = x[:half] * c - x[half:] * s
    y[half:] = x[:half] * s + x[half:] * c
    return y


def fps_cosine(x, m):
    """Farthest point sampling, cosine distance, seed row 0, ties: lower index."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if m == 0:
        return []
    norms = np.linalg.norm(x, axis=1)
    u = np.where(norms[:, None] > 0, x / np.where(norms > 0, norms, 1)[:, None], 0.0)
    mind = np.full(n, np.inf)
    taken = np.zeros(n, dtype=bool)
    out, cur = [], 0
    for _ in range(m):
        out.append(cur)
        taken[cur] = True
        mind = np.minimum(mind, 1.0 - u @ u[cur])
        cand = np.where(taken, -np.inf, mind)
        cur = int(np.argmax(cand))
    return out


def attn_rows(qrows, keys, softmax):
    d = keys.shape[1]
    lg = np.asarray(qrows, dtype=np.float64) @ keys.astype(np.float64).T / math.sqrt(d)
    if softmax:
        lg = np.exp(lg - lg.max(axis=1, keepdims=True))
        lg /= lg.sum(axis=1, keepdims=True)
    return lg


def topk_sorted(score, k):
    return sorted(rank_desc(list(score), list(range(len(score))))[:k])


def pool_avg(x, kernel):
    return avg_pool(np.asarray(x, dtype=np.float64), kernel) if kernel > 1 else np.asarray(x)


def decode_scenario(policy, cfg, p, rs):
    """A prompt, then one token per decode step; after each step the policy
    may compress.  The cache is kept in position order.  Returns the data and
    the kept positions of every (layer, kv head) after every compression."""
    L, H, HKV, D = cfg["n_layer"], cfg["n_head"], cfg["n_kv"], cfg["head_dim"]
    NP, T = cfg["n_prompt"], cfg["steps"]
    G = H // HKV
    total = NP + T
    K = rs.standard_normal((L, HKV, total, D)).astype(np.float32)
    Q = rs.standard_normal((L, total, H * D)).astype(np.float32)
    inv = rope_inv_freq(D)
    cache = [[list(range(NP)) for _ in range(HKV)] for _ in range(L)]   # positions
    events = []
    n_comp = 0
    scope_head = p.get("beacon_scope") == "head"
    units = H if scope_head else HKV
    udim = D if scope_head else G * D
    qbuf = [[[] for _ in range(units)] for _ in range(L)]
    for t in range(T):
        P = NP + t                       # the token this step processed
        next_pos = P + 1
        for l in range(L):
            for h in range(HKV):
                cache[l][h].append(P)
        if policy == "beaconkv":
            for l in range(L):
                pre = np.concatenate([rotate(Q[l, P, g * D:(g + 1) * D], P, inv, True)
                                      for g in range(H)]).astype(np.float32)
                for u in range(units):
                    qbuf[l][u].append(pre[u * udim:(u + 1) * udim])
                    if len(qbuf[l][u]) >= p["buf_upper"]:
                        keep = sorted(fps_cosine(np.array(qbuf[l][u]), p["buf_lower"]))
                        qbuf[l][u] = [qbuf[l][u][i] for i in keep]
        R = p["selector"] if policy == "rpc" else p["recent"]
        ring = [list(range(max(0, next_pos - R), next_pos))]
        ring = ring[0]
        event = None
        if policy == "rpc":
            gen = next_pos - NP
            # released trigger (jiwonsong-dev/ReasoningPathCompression @ eb0b5fd,
            # rpc/qwen2_custom.py: compress in the forward where the generated
            # part beyond the kept n*T + R reaches P): at P + R generated tokens,
            # then every P; trigger=multiple (ours before) is every P
            first = p["interval"] + (R if p.get("trigger", "released") == "released" else 0)
            if gen >= first and (gen - first) % p["interval"] == 0:
                keep_n = int((n_comp + 1) * p["interval"] / p["ratio"])
                event = []
                for l in range(L):
                    row = []
                    scores = []
                    for h in range(HKV):
                        pos = cache[l][h]
                        cand = [x for x in pos if x >= NP][:-R] if R else []
                        sc = np.zeros(len(cand))
                        for g in range(G):
                            qh = Q[l][ring][:, (h * G + g) * D:(h * G + g + 1) * D]
                            sc += attn_rows(qh, K[l, h][cand], True).sum(axis=0) if cand else 0
                        scores.append((cand, sc))
                    if p["aggregation"] == "all":
                        tot = sum(sc for _, sc in scores) / (len(ring) * H)
                        scores = [(c, tot) for c, _ in scores]
                    else:
                        scores = [(c, sc / (len(ring) * G)) for c, sc in scores]
                    for h in range(HKV):
                        cand, sc = scores[h]
                        if len(cand) > keep_n:
                            sc = pool_avg(sc, p["kernel"])
                            kept = [cand[i] for i in topk_sorted(sc, keep_n)]
                            pos = cache[l][h]
                            cache[l][h] = [x for x in pos if x < NP] + kept + \
                                [x for x in pos if x >= NP][-R:]
                        row.append(list(cache[l][h]))
                    event.append(row)
                n_comp += 1
        else:
            event = []
            fired = False
            for l in range(L):
                row = []
                for h in range(HKV):
                    pos = cache[l][h]
                    npr = sum(1 for x in pos if x < NP)
                    target = cfg["budget"]
                    n = len(pos) - npr - R
                    keep_n = max(0, target - npr - R)
                    if len(pos) >= target + p["buffer"] and n > keep_n:
                        fired = True
                        rows = []
                        us = [h * G + g for g in range(G)] if scope_head else [h]
                        for u in us:
                            buf = np.array(qbuf[l][u]) if qbuf[l][u] else np.zeros((0, udim))
                            nb = min(p["beacons"], len(buf))
                            for b in fps_cosine(buf, nb):
                                vec = buf[b]
                                for g in range(1 if scope_head else G):
                                    rows.append(rotate(vec[g * D:(g + 1) * D].astype(np.float32),
                                                       next_pos - 1, inv))
                        for r in ring:
                            for g in range(G):
                                rows.append(Q[l, r, (h * G + g) * D:(h * G + g + 1) * D])
                        cand = pos[npr:npr + n]
                        sc = attn_rows(np.array(rows), K[l, h][cand], p["softmax"]).max(axis=0)
                        sc = pool_avg(sc, p["kernel"])
                        kept = [cand[i] for i in topk_sorted(sc, keep_n)]
                        cache[l][h] = pos[:npr] + kept + pos[npr + n:]
                    row.append(list(cache[l][h]))
                event.append(row)
            if not fired:
                event = None
        if event is not None:
            events.append({"step": t, "kept_positions": event})
    return K, Q, events


def beacon_fixture():
    out = {"note": "generated by tools/golden/vase_ref.py; do not edit"}
    rs = np.random.default_rng(5)
    fps = []
    for n, dim, m in [(9, 6, 4), (12, 8, 12), (5, 3, 1)]:
        x = rs.standard_normal((n, dim)).astype(np.float32)
        x[2] = 0.0                                     # a zero row
        fps.append({"x": flat(x), "n": n, "dim": dim, "m": m, "want": fps_cosine(x, m)})
    out["fps"] = fps
    cfg = {"n_layer": 2, "n_head": 4, "n_kv": 2, "head_dim": 8, "n_prompt": 10, "steps": 80,
           "budget": 24}
    out["config"] = cfg
    runs = [
        ("rpc", "rpc:interval=8,selector=4,ratio=2,kernel=3",
         {"interval": 8, "selector": 4, "ratio": 2, "kernel": 3, "aggregation": "all"}),
        ("rpc", "rpc:interval=8,selector=4,ratio=2,kernel=3,aggregation=group",
         {"interval": 8, "selector": 4, "ratio": 2, "kernel": 3, "aggregation": "group"}),
        ("rpc", "rpc:interval=8,selector=4,ratio=2,kernel=3,trigger=multiple",
         {"interval": 8, "selector": 4, "ratio": 2, "kernel": 3, "aggregation": "all",
          "trigger": "multiple"}),
        ("beaconkv", "beaconkv:recent=4,beacons=4,buf_upper=12,buf_lower=5,buffer=8",
         {"recent": 4, "beacons": 4, "buf_upper": 12, "buf_lower": 5, "buffer": 8,
          "softmax": True, "kernel": 1, "beacon_scope": "group"}),
        ("beaconkv", "beaconkv:recent=4,beacons=3,buf_upper=10,buf_lower=4,buffer=8,"
                     "softmax=0,kernel=3,beacon_scope=head",
         {"recent": 4, "beacons": 3, "buf_upper": 10, "buf_lower": 4, "buffer": 8,
          "softmax": False, "kernel": 3, "beacon_scope": "head"}),
    ]
    out["runs"] = []
    for policy, spec, p in runs:
        K, Q, events = decode_scenario(policy, cfg, p, np.random.default_rng(17))
        out["k"], out["q"] = flat(K), flat(Q)         # the same for every run
        out["runs"].append({"spec": spec, "events": events})
    return out


def flat(a):
    """float32 values as their shortest decimal (exact after strtod + cast)."""
    return [float(str(x)) for x in np.asarray(a, dtype=np.float32).ravel()]


def main():
    out = {"note": "generated by tools/golden/vase_ref.py; do not edit"}
    streams = []
    for (seed, seq, layer, ev, stream) in [(0, 0, 0, 0, 0), (1234, 3, 1, 7, 2),
                                          (2 ** 40 + 5, 9, 3, 1, Stream.LAYER)]:
        st = Stream(seed, seq, layer, ev, stream)
        u = [st.uniform() for _ in range(6)]
        streams.append({"seed": seed, "seq": seq, "layer": layer, "eviction": ev,
                        "stream": stream, "uniform": u})
    out["philox"] = streams

    rs = np.random.default_rng(7)
    cases = []
    for n, k, n_pos, n_taken in [(12, 5, 12, 0), (12, 5, 12, 3), (10, 6, 3, 2), (8, 8, 0, 0)]:
        w = rs.random(n) * (rs.random(n) < 0.9)
        zero = rs.permutation(n)[:n - n_pos]
        w[zero] = 0.0
        g = [gumbel(u) for u in rs.random(n)]
        taken = [False] * n
        for j in rs.permutation(n)[:n_taken]:
            taken[int(j)] = True
            w[j] = 0.0
        fb = list(rs.standard_normal(n))
        k = min(k, n - n_taken)
        cases.append({"w": [float(x) for x in w], "g": g, "taken": [int(t) for t in taken],
                      "fallback": fb, "k": k,
                      "want": sample_topk(list(w), g, taken, fb, k)})
    out["sample"] = cases

    cfg = {"n_layer": 2, "n_head": 4, "n_kv": 2, "head_dim": 16, "window": 8, "budget": 32,
           "sinks": 4, "seed": 1234, "seq": 3, "n_first": 48, "kernel": 5, "rank": 20}
    out["config"] = cfg
    for mode in ("attnv", "dkv", "curdkv", "attn_rkv"):
        # The same generator seed: every mode sees the same cache contents.
        steps, expected = scenario(mode, np.random.default_rng(11), cfg)
        out["steps"] = [{"n": s["n"], "k": flat(s["k"]), "v": flat(s["v"]), "q": flat(s["q"])}
                        for s in steps]
        out[mode] = {"kept_positions": expected}
    path = "tests/fixtures/vase/vase_cases.json"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print("wrote", path, os.path.getsize(path), "bytes")
    path = "tests/fixtures/vase/beacon_cases.json"
    with open(path, "w") as f:
        json.dump(beacon_fixture(), f, separators=(",", ":"))
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
