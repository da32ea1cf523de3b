#!/usr/bin/env python3
"""Whole-generation golden runs of the eviction policies, transcribed from the
papers' RELEASED code (not from the specs), in numpy.

Sources (read, then transcribed in our own words; nothing copied):
  R-KV     Zefan-Cai/R-KV @ d15c9767e67c2bd9807128fecc35223fa2484a69
           rkv/compression/r1_kv.py   R1KV.update_kv        -> rkv, rkv-code
           rkv/compression/snapkv.py  SnapKV.update_kv      -> snapkv-decode
           rkv/utils.py               compute_attention_scores, cal_similarity
           rkv/modeling.py            query cache (last window queries) and the
                                      step_length trigger (length % divide == 0
                                      after a forward -> the next forward compresses)
  H2O      TTTTTTris/SkipKV @ 4492840432b8a7676b973f06b38d55e83ba113d5
           skipkv/compression/h2o.py  H2O.update_kv (the R-KV/SkipKV baseline:
                                      last query, softmax per kv head, mean over
                                      kv heads, one index set per layer) -> h2o-rkv
  SnapKV   FasterDecoding/SnapKV snapkv/monkeypatch/snapkv_utils.py
           SnapKVCluster.update_kv (prefill only: window 32, softmax over all
           keys with a causal window, avg-pool 5) -> snapkv

What every one of them does after top-k: gather the kept slots in torch.topk
order (best score first) and concatenate the window, so the cache is left in
SCORE order and the next step's pooling runs over those slot neighbours.  The
runs below simulate whole generations (prefill, then one token per forward,
compression on the released schedule) and record, after every compression,
the original positions held by each (layer, kv head) in cache order.

Numerics: f32 inputs; logits, softmax and cosines in float64; importance and
redundancy rounded to float32 (the released `.to(query_states.dtype)` with an
f32 model); the final mix in float64 as the C side does.  torch.topk's order
among exactly equal scores is not specified; here, as in policies/score.c, the
lower slot index ranks first.  A draw whose order would hinge on a gap smaller
than the C side's float32 rounding (or a cosine at the 0.5 threshold) is
redrawn, so tests/test_released.c can compare slot for slot.

The second part (run_samples) runs several samples one after another through
one policy, with and without what the released scripts carry from a sample to
the next (compat=released): tests/fixtures/policies/released_samples.*.

Writes tests/fixtures/policies/released.json and released.bin.
Usage: python3 tools/golden/released_ref.py [--out tests/fixtures/policies]
"""
import argparse
import json
import os

import numpy as np

HEAD_DIM = 8
N_LAYER = 2
DIVIDE = 16
REL_TOL = 2.5e-7   # ~2 float32 ulps of the components: the C side rounds I and R to f32 too
COS_TOL = 1e-6     # cosines this close to the 0.5 threshold are redrawn


class Ambiguous(Exception):
    pass


# ------------------------------------------------------------ released primitives

def attention_logits(q, k, n_head, n_kv, pooling="max"):
    """rkv/utils.py compute_attention_scores: q [n_q][n_head][d], k [n_kv][L][d]
    -> [n_kv][n_q][L]; a GQA group's logits are pooled (max) before any softmax."""
    group = n_head // n_kv
    qd = q.astype(np.float64)
    scale = float(np.float32(1.0) / np.sqrt(np.float32(HEAD_DIM)))  # the C side's f32 scale
    out = []
    for h in range(n_kv):
        kk = k[h].astype(np.float64)
        # inputs are multiples of 1/8: the dot products are exact in f32 and
        # f64 alike, and the one f32 rounding of the scaled logit is emulated
        lg = f32(np.stack([qd[:, h * group + g, :] @ kk.T for g in range(group)]) * scale)
        out.append(lg.max(axis=0) if pooling == "max" else lg.mean(axis=0))
    return np.stack(out)


def softmax_rows(x):
    m = x.max(axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def max_pool1d(x, kernel):
    half = kernel // 2
    xp = np.concatenate([np.full(half, -np.inf), x, np.full(half, -np.inf)])
    return np.array([xp[j:j + kernel].max() for j in range(len(x))])


def avg_pool1d(x, kernel):
    half = kernel // 2
    xp = np.concatenate([np.zeros(half), x, np.zeros(half)])
    return np.array([xp[j:j + kernel].sum() / kernel for j in range(len(x))])


def cal_similarity(k, threshold=0.5):
    """rkv/utils.py cal_similarity, retain_direction="last", one kv head:
    cosine of normalised keys, zero diagonal, per row zero the column of the
    LAST (largest slot index) similar key -- column 0 when none is similar --,
    mean over rows, softmax over slots."""
    kd = k.astype(np.float64)
    # normalised keys rounded to f32 as the C side stores them
    inv = f32(1.0 / (np.sqrt((kd * kd).sum(axis=1, keepdims=True)) + 1e-8))
    kn = f32(kd * inv)
    c = kn @ kn.T
    np.fill_diagonal(c, 0.0)
    if (np.abs(c - threshold) < COS_TOL).any():
        raise Ambiguous("cosine at the threshold")
    idx = np.where(c > threshold, np.arange(len(c))[None, :], 0)
    retain = idx.max(axis=1)
    c[np.arange(len(c)), retain] = 0.0
    col = c.mean(axis=0)
    e = np.exp(col - col.max())
    return e / e.sum()


def f32(x):
    return np.asarray(x, dtype=np.float32).astype(np.float64)


BF16_GUARD = 1.2e-7  # ~2 float32 ulps: the C side feeds the same f32 values to the rounding


def _bf16(x):
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def bf16(x):
    """Round to bf16 (nearest, ties to even) as torch's .to(torch.bfloat16);
    raises Ambiguous when the C side's slightly different value could round
    the other way."""
    x = np.asarray(x, dtype=np.float64)
    r = _bf16(x)
    if (_bf16(x * (1 + BF16_GUARD)) != r).any() or (_bf16(x * (1 - BF16_GUARD)) != r).any():
        raise Ambiguous("value at a bf16 rounding midpoint")
    return r


def rounder(dtype):
    return bf16 if dtype == "bf16" else (lambda x: x)


def ranked_topk(z, k, mag):
    """torch.topk(z, k).indices (sorted=True): best first; equal scores: lower
    index first (see the module note).  Raises Ambiguous on a near tie that
    decides membership or order."""
    order = sorted(range(len(z)), key=lambda j: (-z[j], j))
    upto = min(k + 1, len(z))
    for a, b in zip(order[:upto - 1], order[1:upto]):
        gap = z[a] - z[b]
        if gap != 0 and gap < REL_TOL * (mag[a] + mag[b]) + 1e-300:
            raise Ambiguous("near tie in the ranking")
    return order[:k]


# ------------------------------------------------------------ released update_kv

def rkv_update(k, qcache, budget, n_head, mix_lambda, window=8, kernel=7, dtype="f32", **_):
    """r1_kv.py R1KV.update_kv for one layer: returns per kv head the kept slot
    indices in the order the cache is rebuilt (topk order, then the window).
    dtype bf16: the importance (.to(query_states.dtype)), the similarity and
    each step of the mix are bf16 tensors in the released run (the logits and
    the similarity's inner steps stay f32 here, as on the C side)."""
    rd = rounder(dtype)
    n_kv, L, _d = k.shape
    if L < budget:
        return None
    logits = attention_logits(qcache[-window:], k, n_head, n_kv)
    out = []
    for h in range(n_kv):
        imp = rd(f32(softmax_rows(logits[h][:, :L - window]).mean(axis=0)))
        imp = max_pool1d(imp, kernel)
        sim = rd(f32(cal_similarity(k[h])))[:L - window]
        if dtype == "bf16":
            # torch: bf16 tensor * python float runs in f32 (the scalar rounded
            # to f32), rounded to bf16; the difference of two bf16 tensors the
            # same way.  Exact f32 arithmetic here and in C: no guard needed.
            a = _bf16(np.float32(imp) * np.float32(mix_lambda))
            b = _bf16(np.float32(sim) * np.float32(1 - mix_lambda))
            z = _bf16(np.float32(a) - np.float32(b))
        else:
            z = imp * mix_lambda - sim * (1 - mix_lambda)
        mag = np.abs(imp) * mix_lambda + np.abs(sim) * (1 - mix_lambda)
        out.append(ranked_topk(z, budget - window, mag) + list(range(L - window, L)))
    return out


def snapkv_decode_update(k, qcache, budget, n_head, window=8, kernel=7, dtype="f32", **_):
    """R-KV's snapkv.py SnapKV.update_kv: R1KV without the similarity term."""
    rd = rounder(dtype)
    n_kv, L, _d = k.shape
    if L < budget:
        return None
    logits = attention_logits(qcache[-window:], k, n_head, n_kv)
    out = []
    for h in range(n_kv):
        imp = max_pool1d(rd(f32(softmax_rows(logits[h][:, :L - window]).mean(axis=0))), kernel)
        out.append(ranked_topk(imp, budget - window, np.abs(imp)) + list(range(L - window, L)))
    return out


def snapkv_prefill_update(k, qcache, budget, n_head, window=32, kernel=5, **_):
    """FasterDecoding SnapKV: softmax of the window's queries over every key
    (causal inside the window), over the non-window keys, average-pooled.
    The original sums the rows; the mean (as the C side takes) orders alike."""
    n_kv, L, _d = k.shape
    if L < budget:
        return None
    logits = attention_logits(qcache[-window:], k, n_head, n_kv)
    mask = np.zeros((window, L))
    for i in range(window):
        mask[i, L - window + i + 1:] = -np.inf
    out = []
    for h in range(n_kv):
        p = softmax_rows(logits[h] + mask)[:, :L - window]
        imp = avg_pool1d(f32(p.mean(axis=0)), kernel)
        out.append(ranked_topk(imp, budget - window, np.abs(imp)) + list(range(L - window, L)))
    return out


def h2o_update(k, qcache, budget, n_head, dtype="f32", **_):
    """SkipKV's h2o.py H2O.update_kv: the last query, softmax over the keys
    [0, L-1) per kv head, mean over the kv heads, one top-k for the layer,
    gathered for every head, then the last slot."""
    n_kv, L, _d = k.shape
    if L < budget:
        return None
    logits = attention_logits(qcache[-1:], k, n_head, n_kv)
    z = np.zeros(L - 1)
    for h in range(n_kv):
        z += f32(softmax_rows(logits[h][:, :L - 1])[0])
    z /= n_kv
    z = rounder(dtype)(z)
    keep = ranked_topk(z, budget - 1, np.abs(z)) + [L - 1]
    return [list(keep) for _ in range(n_kv)]


def sorted_variant(update):
    """cache_order=position: the same kept set, sorted by slot (the spec's reading)."""
    def run(*a, **kw):
        res = update(*a, **kw)
        if res is None:
            return None
        w = kw.get("window", 1 if update is h2o_update else 8)
        return [sorted(r[:len(r) - w]) + r[len(r) - w:] for r in res]
    return run


# spec string -> (update, options, schedule, query window)
POLICIES = {
    "rkv": (rkv_update, {"mix_lambda": 0.1}, "divide", 8),
    "rkv-code": (rkv_update, {"mix_lambda": 0.07}, "divide", 8),
    "rkv:cache_order=position": (sorted_variant(rkv_update), {"mix_lambda": 0.1}, "divide", 8),
    "snapkv-decode": (snapkv_decode_update, {}, "divide", 8),
    "snapkv-decode:cache_order=position": (sorted_variant(snapkv_decode_update), {}, "divide", 8),
    "h2o-rkv": (h2o_update, {}, "divide", 1),
    "snapkv": (snapkv_prefill_update, {"window": 32, "kernel": 5}, "prefill", 32),
    "rkv:score_dtype=bf16": (rkv_update, {"mix_lambda": 0.1, "dtype": "bf16"}, "divide", 8),
    "snapkv-decode:score_dtype=bf16": (snapkv_decode_update, {"dtype": "bf16"}, "divide", 8),
    "h2o-rkv:score_dtype=bf16": (h2o_update, {"dtype": "bf16"}, "divide", 1),
}


# ------------------------------------------------------------ a whole generation

def generate(update, opts, schedule, qwin, q, k, prompt, budget, n_head, prefill=True, count0=0):
    """rkv/modeling.py's flow for one sequence: the prompt's keys and its last
    qwin queries enter, update_kv runs (compression=None at the first forward);
    then one token per forward: its key is appended, its query joins the query
    cache (last qwin kept), and update_kv runs when the previous forward left
    length % divide == 0.  Returns, per compression, the token position whose
    forward compressed (-1: prefill) and the positions held per layer and kv
    head in cache order.  prefill, count0: the compression flag and the count
    `length` this sample starts with (see run_samples; one sequence alone:
    None, i.e. compress, and 0)."""
    total = q.shape[1]
    n_kv = k.shape[2]
    n_layer = q.shape[0]
    held = [[list(range(prompt)) for _ in range(n_kv)] for _ in range(n_layer)]
    steps = []

    def compress(at, upto):
        rec = {"at": at, "held": []}
        changed = False
        for layer in range(n_layer):
            kl = np.stack([k[layer, held[layer][h], h, :] for h in range(n_kv)])
            qc = q[layer, max(0, upto - qwin):upto]
            res = update(kl, qc, budget, n_head, **opts)
            if res is not None:
                changed = True
                for h in range(n_kv):
                    held[layer][h] = [held[layer][h][j] for j in res[h]]
            rec["held"].append([list(held[layer][h]) for h in range(n_kv)])
        if changed:
            steps.append(rec)

    if prefill:
        compress(-1, prompt)
    length = count0 + prompt
    for pos in range(prompt, total):
        for layer in range(n_layer):
            for h in range(n_kv):
                held[layer][h].append(pos)
        if schedule == "divide" and length % DIVIDE == 0:
            compress(pos, pos + 1)
        length += 1
    return steps


# ------------------------------------------------------------ samples one after another
#
# What the released scripts carry from one sample to the next (one sample per
# generate() call, eval_batch_size 1; each call gets a fresh DynamicCache, so
# the query cache and the KV cache start empty):
#   R-KV     rkv/modeling.py CausalLM_forward: `self.length` is set at the
#            model's first forward (`if not hasattr(self, "length")`) and then
#            only incremented (`self.length += input_ids.shape[1]`), never
#            reset; `is_newline = self.length % self.config.divide_length == 0`
#            is stored as `layer.self_attn.config.compression`, which starts as
#            None (run_math.py's compression_config) and is never reset either.
#            The attention forward compresses the prompt when it is None
#            (first sample) or True, and leaves it whole when False.
#   SkipKV   skipkv/modeling_nhid.py: the same flag, but run_math.py calls
#            reset_for_new_sample() before each batch, which sets
#            `self.length = 0`: the count restarts, the flag does not.
# So a later sample's prompt (>= B tokens) is compressed at prefill only if
# the previous sample's last forward left the count divisible.

def run_samples(update, opts, qwin, samples, budget, n_head, carry):
    """samples: [(q, k, prompt)] run one after another; carry: None (each
    sample afresh: our default), "count" (R-KV) or "flag" (SkipKV).  Returns
    the steps of every sample, each tagged with its sample index."""
    length, flag, out = 0, None, []
    for si, (q, k, prompt) in enumerate(samples):
        if carry != "count":
            length = 0
        prefill = carry is None or flag is None or flag
        steps = generate(update, opts, "divide", qwin, q, k, prompt, budget, n_head,
                         prefill=prefill, count0=length)
        length += q.shape[1]          # every token of the sample went through a forward
        flag = length % DIVIDE == 0   # what its last forward left
        out += [dict(s, sample=si) for s in steps]
    return out


def carried_prefills(totals, carry):
    """Which samples compress their prompt, from the totals alone."""
    length, flag, res = 0, None, []
    for t in totals:
        if carry != "count":
            length = 0
        res.append(carry is None or flag is None or flag)
        length += t
        flag = length % DIVIDE == 0
    return res


# spec -> (update, options, query window, what compat=released carries)
SEQ_POLICIES = {
    "rkv": (rkv_update, {"mix_lambda": 0.1}, 8, "count"),
    "snapkv-decode": (snapkv_decode_update, {}, 8, "count"),
    "h2o-rkv": (h2o_update, {}, 1, "flag"),
}
# prompts >= B; totals chosen so that sample 1 is not compressed at prefill
# under either script, sample 2 only under R-KV's (its count is divisible,
# SkipKV's restarted one is not) and sample 3 under both
SEQ_SHAPE = dict(n_layer=1, n_head=4, n_kv=2, budget=32)
SEQ_PROMPTS = [34, 37, 35, 40]
SEQ_TOTALS = [85, 91, 96, 80]


def main_samples(out_dir):
    n_layer, n_head, n_kv, budget = (SEQ_SHAPE[x] for x in ("n_layer", "n_head", "n_kv", "budget"))
    want = {"count": [True, False, True, True], "flag": [True, False, False, True]}
    for carry, w in want.items():
        assert carried_prefills(SEQ_TOTALS, carry) == w, carry
    samples, blob, off, redraws = [], [], 0, 0
    for si, (prompt, total) in enumerate(zip(SEQ_PROMPTS, SEQ_TOTALS)):
        for attempt in range(400):
            rng = np.random.default_rng(9100 + 100 * si + attempt)
            q, k = draw(rng, total, n_head, n_kv, n_layer)
            try:  # unambiguous under every prefill decision and count it can meet
                for u, o, qw, _c in SEQ_POLICIES.values():
                    for prefill in (True, False):
                        for count0 in (0, sum(SEQ_TOTALS[:si])):
                            generate(u, o, "divide", qw, q, k, prompt, budget, n_head,
                                     prefill=prefill, count0=count0)
                break
            except Ambiguous:
                redraws += 1
        else:
            raise SystemExit(f"no unambiguous draw for sample {si}")
        qa = np.ascontiguousarray(q, dtype="<f4").ravel()
        ka = np.ascontiguousarray(k, dtype="<f4").ravel()
        samples.append(dict(prompt=prompt, total=total, q=off, k=off + qa.size))
        blob += [qa, ka]
        off += qa.size + ka.size
    data = [(np.frombuffer(blob[2 * i].tobytes(), "<f4").astype(np.float32).reshape(
                 n_layer, s["total"], n_head, HEAD_DIM),
             np.frombuffer(blob[2 * i + 1].tobytes(), "<f4").astype(np.float32).reshape(
                 n_layer, s["total"], n_kv, HEAD_DIM), s["prompt"])
            for i, s in enumerate(samples)]
    runs = []
    for spec, (u, o, qw, carry) in SEQ_POLICIES.items():
        for compat in (False, True):
            steps = run_samples(u, o, qw, data, budget, n_head, carry if compat else None)
            pre = [s["sample"] for s in steps if s["at"] < 0]
            n_dec = sum(1 for s in steps if s["at"] >= 0)
            if compat and pre != [i for i, w in enumerate(want[carry]) if w]:
                raise SystemExit(f"{spec}: prefill compressions {pre}")
            if n_dec < 8:
                raise SystemExit(f"{spec}: only {n_dec} decode compressions")
            runs.append(dict(policy=spec + (":compat=released" if compat else ""), steps=steps))
    with open(os.path.join(out_dir, "released_samples.bin"), "wb") as f:
        for a in blob:
            f.write(a.tobytes())
    doc = {"generator": "tools/golden/released_ref.py", "n_floats": off, "head_dim": HEAD_DIM,
           "divide": DIVIDE, **SEQ_SHAPE, "samples": samples, "runs": runs}
    with open(os.path.join(out_dir, "released_samples.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"samples: {len(runs)} runs over {len(samples)} samples one after another, {off} floats, "
          f"{redraws} ambiguous draws redrawn")


def draw(rng, total, n_head, n_kv, n_layer=N_LAYER):
    """Queries: plain normals.  Keys: near-duplicate clusters (so the 0.5
    similarity threshold matters) and loners (so the no-match quirk does)."""
    q = rng.standard_normal((n_layer, total, n_head, HEAD_DIM))
    k = np.zeros((n_layer, total, n_kv, HEAD_DIM))
    for layer in range(n_layer):
        for h in range(n_kv):
            bases = rng.standard_normal((6, HEAD_DIM)) * 1.5
            for t in range(total):
                if rng.random() < 0.35:
                    k[layer, t, h] = rng.standard_normal(HEAD_DIM) * 2.0
                else:
                    k[layer, t, h] = bases[rng.integers(6)] + 0.6 * rng.standard_normal(HEAD_DIM)
    # multiples of 1/8 (exact dot products, see attention_logits)
    return (np.round(q * 8) / 8).astype(np.float32), (np.round(k * 8) / 8).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/policies")
    args = ap.parse_args()
    blob, off = [], 0
    sets, runs = [], []
    redraws = 0
    for si, ((n_head, n_kv), budget) in enumerate(
            [(s, b) for s in [(2, 2), (4, 2)] for b in (64, 128)]):
        prompt = budget + 2                       # compressed at prefill
        total = prompt + 8 * DIVIDE + 1           # >= 8 decode compressions
        for attempt in range(400):
            rng = np.random.default_rng(7000 + 100 * si + attempt)
            q, k = draw(rng, total, n_head, n_kv)
            try:
                res = {spec: generate(u, o, sch, qw, q, k, prompt, budget, n_head)
                       for spec, (u, o, sch, qw) in POLICIES.items()}
                break
            except Ambiguous:
                redraws += 1
        else:
            raise SystemExit(f"no unambiguous draw for set {si}")
        qa = np.ascontiguousarray(q, dtype="<f4").ravel()
        ka = np.ascontiguousarray(k, dtype="<f4").ravel()
        sets.append(dict(id=si, n_layer=N_LAYER, n_head=n_head, n_kv=n_kv, head_dim=HEAD_DIM,
                         total=total, prompt=prompt, budget=budget, divide=DIVIDE,
                         q=off, k=off + qa.size))
        blob += [qa, ka]
        off += qa.size + ka.size
        for spec, steps in res.items():
            n_dec = sum(1 for s in steps if s["at"] >= 0)
            if POLICIES[spec][2] == "divide" and n_dec < 8:
                raise SystemExit(f"{spec} on set {si}: only {n_dec} decode compressions")
            runs.append(dict(set=si, policy=spec, steps=steps))
    with open(os.path.join(args.out, "released.bin"), "wb") as f:
        for a in blob:
            f.write(a.tobytes())
    doc = {"generator": "tools/golden/released_ref.py", "n_floats": off, "sets": sets,
           "runs": runs}
    with open(os.path.join(args.out, "released.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"{len(runs)} runs on {len(sets)} sets, {off} floats, {redraws} ambiguous draws redrawn")
    main_samples(args.out)


if __name__ == "__main__":
    main()
