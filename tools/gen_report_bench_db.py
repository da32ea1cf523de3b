#!/usr/bin/env python3
"""Write a synthetic results database the size of a 12-point, 100-problem CPU
sweep, to measure `evictbench report` (README "The report": size and build time).

    tools/gen_report_bench_db.py OUT.db [--points 12] [--problems 100]

Not measured data: the texts are filler, the retention records follow a
StreamingLLM-like pattern (sinks kept, older positions leaving every 16 steps,
with per-head jitter), at the quickstart model's shape (Qwen2.5-Coder-1.5B:
28 layers x 2 KV heads), ~100 prompt and ~300 generated tokens per sample.
The schema is results/schema.sql (run from the repository root)."""
import argparse, json, os, random, sqlite3, struct, zlib

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--points", type=int, default=12)
p.add_argument("--problems", type=int, default=100)
a = p.parse_args()
if os.path.exists(a.out):
    os.remove(a.out)
db = sqlite3.connect(a.out)
db.executescript(open("results/schema.sql", encoding="utf-8").read())
rng = random.Random(1)
L, K, PROMPT = 28, 2, 100
policies = [("fullkv", None)] + [(pol, b) for pol in ("rkv", "snapkv-decode", "streamingllm")
                                 for b in (64, 128, 256)] + [("h2o-rkv", 64), ("h2o-rkv", 128)]
db.execute("INSERT INTO experiments (name, config_json, started_at, code_version) VALUES "
           "('synthetic', '{}', '2026-01-01T00:00:00Z', 'synthetic')")
words = "so the total is then we add and multiply each of them by two which gives".split()
for rid, (pol, budget) in enumerate(policies[:a.points], 1):
    db.execute("INSERT INTO runs (id, experiment_id, run_key, model, dataset, data_limit, policy, "
               "params_json, budget, batch_size, batching, sampling_json, seed, max_new_tokens, "
               "device, status, n_samples, accuracy, mean_gen_tokens, wall_s, gen_tokens, "
               "tokens_per_s, peak_kv_bytes, mean_kv_bytes, finished_at) VALUES (?, 1, ?, "
               "'qwen2.5-coder-1.5b', 'gsm8k', ?, ?, '{}', ?, 8, 'continuous', '{\"greedy\":true}', "
               "0, 320, 'cpu', 'ok', ?, ?, 300, 1000, ?, ?, ?, 1e6, '2026-01-01T00:00:00Z')",
               (rid, "k%d" % rid, a.problems, pol, budget, a.problems, rng.random(),
                300 * a.problems, 20 + rng.random() * 10, 2e7 * rng.random()))
    for i in range(a.problems):
        n_gen = rng.randint(250, 320)
        toks = [" " + rng.choice(words) for _ in range(n_gen)]
        text = "".join(toks)
        db.execute("INSERT INTO samples (run_id, sample_idx, item_id, prompt_tokens, gen_tokens, "
                   "finished, correct, pred_answer, ref_answer, text) VALUES (?, ?, ?, ?, ?, 1, ?, "
                   "'7', '7', ?)", (rid, i, "gsm8k-test-%04d" % i, PROMPT, n_gen,
                                    rng.randint(0, 1), text))
        if budget is None:
            continue
        n_pos = PROMPT + n_gen
        steps = []
        for h in range(L * K):
            for pos in range(n_pos):
                # held until the first compression (every 16 steps) that finds it
                # outside the budget's window, give or take a head's jitter
                s = 0
                if pos >= 4:
                    due = pos - PROMPT + budget + rng.randint(-8, 8)
                    s = max(1, (due // 16 + 1) * 16) if due < n_gen - 16 else 0
                steps.append(s)
        blob = zlib.compress(struct.pack("<%dI" % len(steps), *steps), 6)
        tb = zlib.compress(struct.pack("<%dH" % n_gen, *[len(t.encode()) for t in toks]), 6)
        ev_slots = sum(1 for s in steps if s)
        ev_tok = sum(1 for pos in range(n_pos) if all(steps[h * n_pos + pos] for h in range(L * K)))
        db.execute("INSERT INTO retention VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (rid, i, L, K, PROMPT, n_pos, ev_slots, ev_tok, max(steps),
                    "zlib-u32le-head-major-v1", blob, tb))
db.commit()
print("wrote", a.out, "(%d runs x %d problems)" % (min(a.points, len(policies)), a.problems))
