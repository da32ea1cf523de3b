#!/usr/bin/env python3
"""Golden fixtures for SkipKV's sentence machinery (policies/sentences.c,
policies/skipkv.c), written from ../shared/specs/policies.md §7.1-§7.4 in
numpy float64, independently of the C code.

  - token-id sets of the R1-Qwen tokenizer (tests/fixtures/tok/r1-qwen.*),
    computed here with the Hugging Face `tokenizers` package: delimiters =
    encode(t)[-1] for the spec's 7 texts, check ids = encode(w)[-1] for
    "Alternatively", "Wait", "again" (and with a leading space), SEAL split
    tokens = every vocabulary string containing "\\n\\n", <think>, </think>;
  - sentence segmentation of a fixed token sequence (prompt included,
    consecutive delimiters make one-token sentences, a </think> inside a
    sentence is an ordinary token, an unterminated tail is no sentence) and
    the Check / Others labels;
  - sentence representations (mean of the hidden rows over the span, then
    v / (|v| + 1e-8)), one-token sentences included, PSS lambda_ij at two compression steps (each newly
    complete sentence against every earlier one; the earlier sentence of a
    pair above tau is marked, for good, the later pair's lambda wins),
    evaluated in the forward before the compressing one, as the released
    modeling_nhid.py (TTTTTTris/SkipKV @ 4492840) does when a forward raises
    its step flag;
  - the final score Z = lambda*I - (1-lambda)*R - lambda_ij on every cached
    slot whose original position lies in a redundant sentence that holds at
    least two slots in the head (released SkipKV), and the
    keep-set sort(topk(Z[0, L-w), B-w)) + window per (layer, kv head).
I and R come from tools/golden/policies_ref.py (the R-KV transcription).

Writes tests/fixtures/skipkv/golden.json.  Usage:
    python3 tools/golden/skipkv_ref.py [--out tests/fixtures/skipkv]
"""
import argparse
import json
import lzma
import os
import sys

import numpy as np
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from policies_ref import Ambiguous, pool1d, redundancy, topk, window_importance  # noqa: E402

DELIM_TEXTS = ["\n", ".\n", ")\n", "\n\n", ".\n\n", ")\n\n", "?\n\n"]
CHECK_WORDS = ["Alternatively", "Wait", "again"]
DIM = 16
N_LAYER, N_HEAD, N_KV, HEAD_DIM = 2, 4, 2, 8
WINDOW, KERNEL, LAMBDA, BUDGET = 8, 7, 0.1, 24
TAU = 0.9
TAU_GUARD = 1e-4


def token_sets(tok):
    enc = lambda t: tok.encode(t, add_special_tokens=False).ids  # noqa: E731
    delim = sorted({enc(t)[-1] for t in DELIM_TEXTS})
    check = sorted({enc(w)[-1] for w in CHECK_WORDS})
    check_sp = sorted(set(check) | {enc(" " + w)[-1] for w in CHECK_WORDS})
    vocab = tok.get_vocab(with_added_tokens=True)
    # byte-level BPE writes "\n" as "Ċ"
    split = sorted(i for s, i in vocab.items() if "ĊĊ" in s or "\n\n" in s)
    return {
        "delim": delim, "check": check, "check_space": check_sp, "split": split,
        "think_open": tok.token_to_id("<think>"), "think_close": tok.token_to_id("</think>"),
    }


def segment(tokens, delim, check, n_prompt=0):
    """§7.1: returns [(b, e, label)].  As in SkipKV's released
    check_punct_tokens_in_forward (TTTTTTris/SkipKV @ 4492840, the file
    skipkv/modeling_nhid.py), a delimiter right after a delimiter closes a
    one-token sentence of its own (the code's extend branch never fires).
    The prompt is one forward, then one token per forward; the released code
    labels only the first check token of a forward (its loop breaks there).
    """
    sents, start, open_check = [], 0, False
    labelled = set()
    for p, t in enumerate(tokens):
        fwd = 0 if p < n_prompt else p
        is_check = t in check and fwd not in labelled
        if is_check:
            labelled.add(fwd)
        if t in delim:
            sents.append((start, p, open_check or is_check))
            start, open_check = p + 1, False
        elif is_check:
            open_check = True
    return sents


def reprs(sents, hidden, n_rows):
    out = []
    for b, e, _ in sents:
        # released extract_sentence_representations (modeling_nhid.py @ 4492840)
        # skips only incomplete ranges: one-token sentences (b == e) get a
        # representation and are compared like any other (the start_idx >=
        # end_idx test is in cal_sentence_similarity_pair, off the skipkv path)
        if e >= n_rows:
            out.append(None)
            continue
        v = hidden[b:e + 1].astype(np.float64).mean(axis=0)
        out.append(v / (np.linalg.norm(v) + 1e-8))
    return out


def build_case(rng, sets):
    delim, check = sets["delim"], sets["check"]
    special = set(delim) | set(sets["check_space"]) | set(sets["split"]) | {
        sets["think_open"], sets["think_close"]}
    words = [i for i in range(1000, 6000) if i not in special]
    tokens, topic_of = [], []
    n_topics = 4
    # prompt: two sentences with a check word each (only the first is labelled:
    # one forward), the second ends with two delimiters
    plan = [(5, 0, True, 1), (6, 1, True, 2)]   # two check words in the prompt forward
    for _ in range(16):
        plan.append((int(rng.integers(2, 9)), int(rng.integers(0, n_topics + 6)),
                     bool(rng.random() < 0.3), int(rng.choice([1, 1, 1, 2]))))
    for n_words, topic, has_check, n_delim in plan:
        for j in range(n_words):
            if has_check and j == n_words // 2:
                tokens.append(int(rng.choice(check)))
            else:
                tokens.append(int(rng.choice(words)))
            topic_of.append(topic)
        for _ in range(n_delim):
            tokens.append(int(rng.choice(delim)))
            topic_of.append(topic)
    # a </think> inside the 9th sentence's span, and an unterminated tail
    tokens.insert(70, sets["think_close"])
    topic_of.insert(70, topic_of[70])
    for _ in range(5):
        tokens.append(int(rng.choice(words)))
        topic_of.append(99)
    topics = rng.standard_normal((n_topics + 7, DIM))
    topics[99 % len(topics)] = rng.standard_normal(DIM)
    hidden = np.array([topics[t % len(topics)] + 0.15 * rng.standard_normal(DIM)
                       for t in topic_of], dtype=np.float32)
    return tokens, hidden


def run(rng, sets):
    tokens, hidden = build_case(rng, sets)
    n_prompt = 14
    sents = segment(tokens, set(sets["delim"]), set(sets["check"]), n_prompt)
    N = len(tokens)
    # tokens seen at each compression; at the first, sentence (60, 64) has
    # just got its last row: compared now it would mark (45, 50), but the
    # released timing compares it only at the next compression
    steps = [66, N]
    marks = {}                               # sentence index -> lambda
    by_one_token = set()                     # (marked, marker) with a one-token marker
    compared = set()
    comps = []
    for n_tok in steps:
        n_rows = n_tok - 1                   # the token just sampled has no row yet
        # The comparison ran one forward before the compressing one, when that
        # forward raised the step flag (modeling_nhid.py CausalLM_forward:
        # `if is_newline ...: extract_sentence_representations(...);
        # cal_sentence_similarity_from_reprs(...)`): its input token, at
        # position n_tok - 3, was the last one labelled and the last row in.
        n_seen = n_tok - 2
        rep = reprs(sents, hidden, n_seen)
        closed = [i for i, s in enumerate(sents) if s[1] < n_tok]
        for i in [i for i, s in enumerate(sents) if s[1] < n_seen]:
            if i in compared or rep[i] is None:
                continue
            for j in range(i):
                lam = float(rep[i] @ rep[j])
                if abs(lam - TAU) < TAU_GUARD:
                    raise Ambiguous("lambda at tau")
                if lam > TAU:
                    marks[j] = lam
                    if sents[i][0] == sents[i][1]:
                        by_one_token.add((j, i))
            compared.add(i)
        n_check = sum(1 for i in closed if sents[i][2])
        # the cache of every (layer, kv head): the window plus a random subset
        heads = []
        for layer in range(N_LAYER):
            q = rng.standard_normal((WINDOW, N_HEAD, HEAD_DIM)).astype(np.float32)
            row = []
            for h in range(N_KV):
                L = int(rng.integers(BUDGET, BUDGET + 20))
                older = np.sort(rng.choice(n_rows - WINDOW, L - WINDOW, replace=False))
                pos = np.concatenate([older, np.arange(n_rows - WINDOW, n_rows)]).astype(int)
                k = rng.standard_normal((L, HEAD_DIM)).astype(np.float32)
                n_cand = L - WINDOW
                imp = pool1d(window_importance(q, k, N_HEAD, N_KV, h, n_cand, False, "max", None),
                             KERNEL, "max")
                r = redundancy(k, 0.5, 1, None)[:n_cand]
                z = LAMBDA * imp - (1 - LAMBDA) * r
                mag = LAMBDA * np.abs(imp) + (1 - LAMBDA) * np.abs(r)
                pen = np.zeros(n_cand)
                for i, lam in marks.items():
                    b, e, _ = sents[i]
                    # released update_kv (skipkv/compression/skipkv.py @ 4492840):
                    # the sentence's slot range in this head is penalised only when
                    # start_idx < end_idx, i.e. >= 2 of its slots survive (window
                    # slots count), and the penalty reaches the candidates only
                    held = (pos >= b) & (pos <= e)
                    if held.sum() < 2:
                        continue
                    pen[held[:n_cand]] -= lam
                z = z + pen
                keep = topk(z, BUDGET - WINDOW, mag + np.abs(pen)) + list(range(n_cand, L))
                row.append({"pos": pos.tolist(), "k": k.ravel().tolist(), "keep": keep,
                            "n_penalized": int((pen != 0).sum())})
            heads.append({"q": q.ravel().tolist(), "heads": row})
        comps.append({
            "n_tokens": n_tok, "n_rows": n_rows, "n_sentences": len(closed), "n_check": n_check,
            "redundant": sorted([[sents[i][0], sents[i][1], marks[i]] for i in marks]),
            "layers": heads,
        })
    return {
        "tokens": tokens, "n_prompt": n_prompt, "hidden": hidden.ravel().tolist(),
        "sentences": [[b, e, int(lab)] for b, e, lab in sents], "compressions": comps,
        # pairs where a later one-token sentence (a delimiter after a
        # delimiter) marked an earlier sentence: [marked b, e, marker b, e]
        "one_token_marks": sorted([sents[j][0], sents[j][1], sents[i][0], sents[i][1]]
                                  for j, i in by_one_token),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/skipkv")
    args = ap.parse_args()
    with lzma.open("tests/fixtures/tok/r1-qwen.tokenizer.json.xz", "rt", encoding="utf-8") as f:
        tok = Tokenizer.from_str(f.read())
    sets = token_sets(tok)
    rng = np.random.default_rng(20260)
    for _ in range(50):
        try:
            case = run(rng, sets)
            break
        except Ambiguous:
            continue
    else:
        raise SystemExit("no unambiguous draw")
    n_red = [len(c["redundant"]) for c in case["compressions"]]
    if n_red[0] == 0 or n_red[1] <= n_red[0]:
        raise SystemExit("the draw marks no sentence at one of the steps: %r" % n_red)
    if not case["one_token_marks"]:
        raise SystemExit("no one-token sentence marks an earlier sentence in the draw")
    out = {
        "about": "tools/golden/skipkv_ref.py; specs/policies.md 7.1-7.4",
        "dim": DIM, "n_layer": N_LAYER, "n_head": N_HEAD, "n_kv": N_KV, "head_dim": HEAD_DIM,
        "window": WINDOW, "kernel": KERNEL, "lambda": LAMBDA, "budget": BUDGET, "tau": TAU,
        "sets": sets, "case": case,
    }
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "golden.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print("wrote %s: %d tokens, %d sentences, redundant per step %r, one-token marks %r" % (
        path, len(case["tokens"]), len(case["sentences"]), n_red, case["one_token_marks"]))


if __name__ == "__main__":
    main()
