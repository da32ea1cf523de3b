-- evictbench results database, schema version 6.
--
-- harness/store/ creates it (from the identical copy in harness/store/schema_sql.c;
-- tests/test_store.c checks the two agree) and is the only code that writes it.
-- Conventions: accuracy and agreement are fractions in [0, 1]; lengths are in
-- tokens; memory in bytes; times in seconds (wall_s) or milliseconds (*_ms).
-- NULL means "not measured" (e.g. PSS statistics of a policy without sentences).

-- One row per experiment config as run by one code version.
-- Points being computed right now, so that several `exp` processes on one
-- database split a sweep instead of each computing all of it.  A process
-- claims a point before running it and renews the lease while it runs; the
-- lease of a process that died runs out and another process takes the
-- point.  The row goes when the run is written.  (Created on open in
-- version-2 files too: older builds ignore the table.)
CREATE TABLE IF NOT EXISTS claims (
    run_key    TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,            -- host:pid:start of the claiming process
    expires_at REAL NOT NULL             -- unix time (s) the lease runs out
);

CREATE TABLE experiments (
    id           INTEGER PRIMARY KEY,
    name         TEXT NOT NULL,
    config_json  TEXT NOT NULL,
    started_at   TEXT NOT NULL,              -- UTC, ISO 8601
    code_version TEXT NOT NULL,
    UNIQUE (name, config_json, code_version)
);

-- One row per measured point of a sweep.  run_key is the SHA-256 of every
-- parameter that changes a result (harness/runkey.c).  Runs that hit
-- out-of-memory ('oom') or failed ('error') are recorded too, without samples.
CREATE TABLE runs (
    id              INTEGER PRIMARY KEY,
    experiment_id   INTEGER REFERENCES experiments(id),
    run_key         TEXT NOT NULL UNIQUE,
    model           TEXT NOT NULL,
    dataset         TEXT NOT NULL,
    data_offset     INTEGER NOT NULL DEFAULT 0,
    data_limit      INTEGER,                  -- NULL: every item
    policy          TEXT NOT NULL,
    params_json     TEXT,
    budget          INTEGER,                  -- KV budget in tokens; NULL: none (fullkv)
    batch_size      INTEGER NOT NULL CHECK (batch_size >= 1),
    batching        TEXT NOT NULL,            -- padded | grouped | ragged | continuous
    sampling_json   TEXT,
    seed            INTEGER,
    max_new_tokens  INTEGER,
    device          TEXT,
    status          TEXT NOT NULL CHECK (status IN ('ok', 'oom', 'error')),
    error           TEXT,
    n_samples       INTEGER NOT NULL,         -- rows in samples for this run
    accuracy        REAL,                     -- pass@1: mean of samples.correct
    mean_gen_tokens REAL,
    wall_s          REAL,
    gen_tokens      INTEGER,                  -- generated tokens, whole batch schedule
    tokens_per_s    REAL,
    peak_kv_bytes   INTEGER,                  -- whole batch
    mean_kv_bytes   REAL,
    finished_at     TEXT NOT NULL,            -- UTC, ISO 8601
    -- KV cache element type: f32 | f16 | bf16 (version 3; harness/store adds it,
    -- last, with this definition to an older database, whose runs were f32)
    kv_type         TEXT NOT NULL DEFAULT 'f32',
    CHECK (status = 'ok' OR (error IS NOT NULL AND n_samples = 0))
);

-- One row per generated trace.
CREATE TABLE samples (
    run_id            INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    sample_idx        INTEGER NOT NULL,
    item_id           TEXT,
    prompt_tokens     INTEGER NOT NULL,
    gen_tokens        INTEGER NOT NULL,
    think_tokens      INTEGER,
    finished          INTEGER NOT NULL CHECK (finished IN (0, 1)),  -- 0: truncated
    correct           INTEGER NOT NULL CHECK (correct IN (0, 1)),
    pred_answer       TEXT,
    ref_answer        TEXT,
    n_compressions    INTEGER,
    peak_kv_bytes     INTEGER,                -- this sequence
    mean_kv_bytes     REAL,
    n_sentences       INTEGER,
    n_redundant_pairs INTEGER,                -- PSS: sentence pairs above the similarity threshold
    pss_max           REAL,
    pss_mean          REAL,
    n_nonexec         INTEGER,                -- N_o: non-execution thoughts
    steer_alpha_final REAL,
    ttft_ms           REAL,
    tpot_ms           REAL,
    kl_mean           REAL,                   -- fidelity: mean KL(FullKV || policy)
    top1_agree        REAL,                   -- fidelity: fraction of steps with the same argmax
    first_divergence  INTEGER,                -- fidelity: first differing step of free-running greedy
    text              TEXT,
    PRIMARY KEY (run_id, sample_idx)
);

-- The sentences of a trace, for the policies that segment it (seal, skipkv and
-- their presets, fullkv-pss included; none for the others).  A sentence ends at
-- a delimiter token; sent_idx counts from 0 in order, the prompt's sentences
-- included; the unterminated tail of a trace is no sentence, so a sample has
-- n_sentences rows and n_nonexec of them have kind 'check'.
CREATE TABLE sentences (
    run_id       INTEGER NOT NULL,
    sample_idx   INTEGER NOT NULL,
    sent_idx     INTEGER NOT NULL,
    start_tok    INTEGER NOT NULL,            -- span [start_tok, end_tok] of absolute token
    end_tok      INTEGER NOT NULL,            -- positions, prompt included (0 = the first
                                              -- prompt token); end_tok < samples.prompt_tokens:
                                              -- a prompt sentence
    kind         TEXT,                        -- 'check': a check word (Wait, Alternatively,
                                              -- again) lies in it, a non-execution thought
                                              -- (SkipKV's N_o); 'others': the rest
    max_sim      REAL,                        -- largest cosine similarity to any sentence it
                                              -- was compared with; NULL: never compared (seal
                                              -- builds no sentence representations)
    evicted_step INTEGER,                     -- generated tokens so far when SkipKV's sentence
                                              -- penalty first hit it (pushing it out of the
                                              -- cache); NULL: never (always under fullkv-pss)
    PRIMARY KEY (run_id, sample_idx, sent_idx),
    FOREIGN KEY (run_id, sample_idx) REFERENCES samples(run_id, sample_idx) ON DELETE CASCADE
);

CREATE INDEX runs_by_point ON runs(model, dataset, policy, budget, batch_size);

-- Views.  Aggregates over samples count every trace once (pass@1 over all
-- samples of all runs of a point).  Only status 'ok' runs carry samples.

-- Runs with the dataset slice folded into one label, so that different slices
-- of one dataset never mix in an aggregate: "gsm8k", "gsm8k[0:50]".
CREATE VIEW v_run AS
SELECT r.*,
       CASE WHEN r.data_offset = 0 AND r.data_limit IS NULL THEN r.dataset
            ELSE r.dataset || '[' || r.data_offset || ':' ||
                 COALESCE(r.data_offset + r.data_limit, '') || ']' END AS dataset_label
FROM runs r;

-- The FullKV reference of each (model, dataset slice, sampling, max_new_tokens):
-- the runs of the policies that evict nothing (fullkv, and fullkv-pss, which
-- only watches sentences).  Version 4 added fullkv-pss.
CREATE VIEW v_fullkv_ref AS
SELECT r.model, r.dataset_label AS dataset, r.sampling_json AS sampling, r.max_new_tokens,
       COUNT(*) AS n_samples,
       AVG(s.correct) AS accuracy,
       AVG(s.gen_tokens) AS mean_gen_tokens,
       AVG(s.peak_kv_bytes) AS seq_peak_kv_bytes
FROM v_run r JOIN samples s ON s.run_id = r.id
WHERE r.status = 'ok' AND r.policy IN ('fullkv', 'fullkv-pss')
GROUP BY r.model, r.dataset_label, r.sampling_json, r.max_new_tokens;

-- Accuracy per policy and budget; budget_ratio is the budget over FullKV's mean
-- generation length (how the SkipKV paper labels budgets).
CREATE VIEW v_accuracy_by_budget AS
SELECT r.model, r.dataset_label AS dataset, r.policy, r.budget, r.batch_size, r.batching,
       r.sampling_json AS sampling, r.max_new_tokens,
       COUNT(DISTINCT r.id) AS n_runs,
       COUNT(*) AS n_samples,
       AVG(s.correct) AS accuracy,
       AVG(s.gen_tokens) AS mean_gen_tokens,
       f.accuracy AS fullkv_accuracy,
       f.mean_gen_tokens AS fullkv_mean_gen_tokens,
       r.budget / f.mean_gen_tokens AS budget_ratio
FROM v_run r
JOIN samples s ON s.run_id = r.id
LEFT JOIN v_fullkv_ref f ON f.model = r.model AND f.dataset = r.dataset_label
     AND f.sampling IS r.sampling_json AND f.max_new_tokens IS r.max_new_tokens
WHERE r.status = 'ok'
GROUP BY r.model, r.dataset_label, r.policy, r.budget, r.batch_size, r.batching,
         r.sampling_json, r.max_new_tokens
ORDER BY r.model, r.dataset_label, r.policy, r.budget, r.batch_size, r.batching;

-- Generation length per policy and budget (eviction can make models think longer).
CREATE VIEW v_length_by_budget AS
SELECT r.model, r.dataset_label AS dataset, r.policy, r.budget, r.batch_size, r.batching,
       r.sampling_json AS sampling, r.max_new_tokens,
       COUNT(DISTINCT r.id) AS n_runs,
       COUNT(*) AS n_samples,
       AVG(s.gen_tokens) AS mean_gen_tokens,
       MIN(s.gen_tokens) AS min_gen_tokens,
       MAX(s.gen_tokens) AS max_gen_tokens,
       AVG(s.think_tokens) AS mean_think_tokens,
       AVG(s.finished) AS frac_finished,
       f.mean_gen_tokens AS fullkv_mean_gen_tokens,
       AVG(s.gen_tokens) / f.mean_gen_tokens AS length_ratio,
       r.budget / f.mean_gen_tokens AS budget_ratio
FROM v_run r
JOIN samples s ON s.run_id = r.id
LEFT JOIN v_fullkv_ref f ON f.model = r.model AND f.dataset = r.dataset_label
     AND f.sampling IS r.sampling_json AND f.max_new_tokens IS r.max_new_tokens
WHERE r.status = 'ok'
GROUP BY r.model, r.dataset_label, r.policy, r.budget, r.batch_size, r.batching,
         r.sampling_json, r.max_new_tokens
ORDER BY r.model, r.dataset_label, r.policy, r.budget, r.batch_size, r.batching;

-- Throughput per batch size, OOM points included (status 'oom', tokens_per_s
-- NULL); max_ok_batch_size is the largest batch size that ran for that line.
-- One line per KV cache type (version 4): a 16-bit cache reads half the bytes.
CREATE VIEW v_throughput_by_batch AS
SELECT r.model, r.dataset_label AS dataset, r.policy, r.budget, r.batching, r.batch_size,
       r.status, r.device, r.kv_type, r.sampling_json AS sampling, r.max_new_tokens,
       COUNT(*) AS n_runs,
       SUM(r.n_samples) AS n_samples,
       SUM(r.gen_tokens) AS gen_tokens,
       SUM(r.wall_s) AS wall_s,
       AVG(r.tokens_per_s) AS tokens_per_s,
       MAX(r.peak_kv_bytes) AS peak_kv_bytes,
       (SELECT MAX(o.batch_size) FROM v_run o
         WHERE o.status = 'ok' AND o.model = r.model AND o.dataset_label = r.dataset_label
           AND o.policy = r.policy AND o.budget IS r.budget AND o.batching = r.batching
           AND o.device IS r.device AND o.kv_type = r.kv_type
           AND o.sampling_json IS r.sampling_json
           AND o.max_new_tokens IS r.max_new_tokens) AS max_ok_batch_size
FROM v_run r
WHERE r.status IN ('ok', 'oom')
GROUP BY r.model, r.dataset_label, r.policy, r.budget, r.batching, r.batch_size, r.status,
         r.device, r.kv_type, r.sampling_json, r.max_new_tokens
ORDER BY r.model, r.dataset_label, r.policy, r.budget, r.batching, r.batch_size, r.kv_type;

-- Batch size 1 against larger padded / grouped / ragged / continuous batches.
-- setting is 'bs1' for batch size 1 (no pads, so the mode does not matter),
-- else the batching mode; bs1_accuracy is the same point's batch-size-1 accuracy.
CREATE VIEW v_batching AS
WITH pts AS (
    SELECT r.model, r.dataset_label AS dataset, r.policy, r.budget,
           r.sampling_json AS sampling, r.max_new_tokens, r.batch_size,
           CASE WHEN r.batch_size = 1 THEN 'bs1' ELSE r.batching END AS setting,
           COUNT(DISTINCT r.id) AS n_runs,
           COUNT(*) AS n_samples,
           AVG(s.correct) AS accuracy,
           AVG(s.gen_tokens) AS mean_gen_tokens
    FROM v_run r JOIN samples s ON s.run_id = r.id
    WHERE r.status = 'ok'
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
)
SELECT p.*, b.accuracy AS bs1_accuracy, p.accuracy - b.accuracy AS delta_vs_bs1
FROM pts p
LEFT JOIN pts b ON b.setting = 'bs1' AND b.model = p.model AND b.dataset = p.dataset
     AND b.policy = p.policy AND b.budget IS p.budget AND b.sampling IS p.sampling
     AND b.max_new_tokens IS p.max_new_tokens
ORDER BY p.model, p.dataset, p.policy, p.budget, p.batch_size, p.setting;

-- The SkipKV ablation: R-KV -> +sentence scoring -> +adaptive steering ->
-- +batch grouping (the full preset), and the static-steering control.
-- step orders the bars; batching tells the grouped from the ungrouped runs.
CREATE VIEW v_ablation AS
SELECT a.model, a.dataset, a.budget, a.batch_size, a.batching, a.sampling, a.max_new_tokens,
       a.policy,
       CASE a.policy WHEN 'rkv' THEN 0 WHEN 'skipkv-sent' THEN 1
                     WHEN 'skipkv-sent-steer' THEN 2 WHEN 'skipkv' THEN 3
                     WHEN 'seal-static' THEN 4 ELSE 5 END AS step,
       a.n_runs, a.n_samples, a.accuracy, a.mean_gen_tokens,
       a.fullkv_accuracy, a.fullkv_mean_gen_tokens
FROM v_accuracy_by_budget a
WHERE a.policy IN ('rkv', 'seal-static') OR a.policy LIKE 'skipkv%'
ORDER BY a.model, a.dataset, a.budget, step, a.policy, a.batching, a.batch_size;

-- PSS per trace (for distributions) and averaged over correct vs incorrect traces.
CREATE VIEW v_pss_samples AS
SELECT r.model, r.dataset_label AS dataset, r.policy, r.budget, r.id AS run_id,
       s.sample_idx, s.item_id, s.correct, s.gen_tokens, s.n_sentences,
       s.n_redundant_pairs, s.pss_max, s.pss_mean, s.n_nonexec
FROM v_run r JOIN samples s ON s.run_id = r.id
WHERE r.status = 'ok'
  AND (s.pss_mean IS NOT NULL OR s.n_redundant_pairs IS NOT NULL OR s.n_nonexec IS NOT NULL);

CREATE VIEW v_pss AS
SELECT model, dataset, policy, budget, correct,
       COUNT(*) AS n_samples,
       AVG(pss_mean) AS mean_pss,
       AVG(pss_max) AS mean_pss_max,
       AVG(n_redundant_pairs) AS mean_redundant_pairs,
       AVG(n_nonexec) AS mean_nonexec,
       AVG(n_sentences) AS mean_sentences,
       AVG(gen_tokens) AS mean_gen_tokens
FROM v_pss_samples
GROUP BY model, dataset, policy, budget, correct
ORDER BY model, dataset, policy, budget, correct;

-- Fidelity to FullKV (teacher-forced replay of FullKV traces).
CREATE VIEW v_fidelity AS
SELECT r.model, r.dataset_label AS dataset, r.policy, r.budget,
       r.sampling_json AS sampling, r.max_new_tokens,
       COUNT(*) AS n_samples,
       AVG(s.kl_mean) AS mean_kl,
       AVG(s.top1_agree) AS top1_agree,
       AVG(s.first_divergence) AS mean_first_divergence,
       MIN(s.first_divergence) AS min_first_divergence
FROM v_run r JOIN samples s ON s.run_id = r.id
WHERE r.status = 'ok' AND (s.kl_mean IS NOT NULL OR s.top1_agree IS NOT NULL)
GROUP BY r.model, r.dataset_label, r.policy, r.budget, r.sampling_json, r.max_new_tokens
ORDER BY r.model, r.dataset_label, r.policy, r.budget;

-- KV memory per policy and budget: per sequence (comparable across batch
-- sizes) and per batch, with the FullKV per-sequence peak as the reference.
-- One line per KV cache type, against FullKV in the same type (version 4).
CREATE VIEW v_kv_by_budget AS
SELECT r.model, r.dataset_label AS dataset, r.policy, r.budget, r.batch_size, r.batching,
       r.kv_type, r.sampling_json AS sampling, r.max_new_tokens,
       COUNT(DISTINCT r.id) AS n_runs,
       COUNT(*) AS n_samples,
       AVG(s.peak_kv_bytes) AS seq_peak_kv_bytes,
       MAX(s.peak_kv_bytes) AS seq_max_peak_kv_bytes,
       AVG(s.mean_kv_bytes) AS seq_mean_kv_bytes,
       MAX(r.peak_kv_bytes) AS batch_peak_kv_bytes,
       (SELECT AVG(fs.peak_kv_bytes) FROM v_run f JOIN samples fs ON fs.run_id = f.id
         WHERE f.status = 'ok' AND f.policy IN ('fullkv', 'fullkv-pss')
           AND f.model = r.model AND f.dataset_label = r.dataset_label
           AND f.kv_type = r.kv_type AND f.sampling_json IS r.sampling_json
           AND f.max_new_tokens IS r.max_new_tokens) AS fullkv_seq_peak_kv_bytes
FROM v_run r
JOIN samples s ON s.run_id = r.id
WHERE r.status = 'ok'
GROUP BY r.model, r.dataset_label, r.policy, r.budget, r.batch_size, r.batching, r.kv_type,
         r.sampling_json, r.max_new_tokens
ORDER BY r.model, r.dataset_label, r.policy, r.budget, r.batch_size, r.batching, r.kv_type;

-- ---- Added in schema version 5.  harness/store migrates a version-4
-- database by running this part of the file (up to the version-2 mark). ----

-- The token-retention record of a trace (one row per sample of a run whose
-- policy evicts; none for FullKV, for runs with "retention": false or
-- `run --no-retention`, and for databases older than version 5).
-- Positions are absolute token positions, prompt first (0 = the first real
-- prompt token; left pads are not positions): 0 .. n_prompt-1 the prompt,
-- n_prompt .. n_positions-1 the generated tokens.  Heads are the (layer, KV
-- head) caches, head = layer * n_kv + kv_head.
--   steps: zlib (RFC 1950) of n_layer * n_kv * n_positions uint32
--          little-endian, head-major (value [head * n_positions + position]):
--          the decode step at which the position left that head's cache, 0 =
--          never (still held at the end).  Step k is the selection that follows
--          the k-th sampled token (1: the one at prefill), so at step k the
--          cache holds positions < n_prompt + k - 1 whose value is 0 or > k.
--   token_bytes: zlib of one uint16 little-endian per generated token, its
--          length in bytes in samples.text (the report cuts the text into
--          tokens with it; NULL when the tokens decoded one by one do not add
--          up to the text).
-- Size: with the quickstart's model and settings (Qwen2.5-Coder-1.5B, 28
-- layers x 2 KV heads, R-KV at budget 64 compressing every 16 tokens, <= 320
-- new tokens) a sample's record took 8,295 and 9,125 bytes (266 and 318
-- positions x 56 caches; steps 8.2-9.0 KB, token_bytes 127 bytes).
CREATE TABLE IF NOT EXISTS retention (
    run_id           INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    sample_idx       INTEGER NOT NULL,
    n_layer          INTEGER NOT NULL,
    n_kv             INTEGER NOT NULL,
    n_prompt         INTEGER NOT NULL,
    n_positions      INTEGER NOT NULL,
    n_evicted_slots  INTEGER NOT NULL,        -- (position, head) pairs with a step
    n_evicted_tokens INTEGER NOT NULL,        -- positions gone from every head
    max_step         INTEGER NOT NULL,        -- the last step that evicted (0: none)
    encoding         TEXT NOT NULL,           -- zlib-u32le-head-major-v1
    steps            BLOB NOT NULL,
    token_bytes      BLOB,
    PRIMARY KEY (run_id, sample_idx)
);

-- ---- Added in schema version 2.  harness/store.c migrates a version-1
-- database by running this part of the file (up to the PRAGMA). ----

-- Sentences with their trace's outcome; in_prompt is 1 for a prompt sentence.
CREATE VIEW v_sentences AS
SELECT r.model, r.dataset_label AS dataset, r.policy, r.budget, r.id AS run_id,
       s.sample_idx, s.correct, x.sent_idx, x.start_tok, x.end_tok,
       x.end_tok - x.start_tok + 1 AS n_tokens,
       x.end_tok < s.prompt_tokens AS in_prompt,
       x.kind, x.max_sim, x.evicted_step
FROM v_run r
JOIN samples s ON s.run_id = r.id
JOIN sentences x ON x.run_id = s.run_id AND x.sample_idx = s.sample_idx
WHERE r.status = 'ok';

-- The generated sentences of correct against incorrect traces (the SkipKV
-- paper's observation: incorrect traces hold more non-execution thoughts and
-- more highly similar sentences).  Shares are over the sentences of all traces
-- of a line pooled (n_traces: those with a generated sentence); high_sim_share
-- counts max_sim > 0.95 (SkipKV's default tau) among the compared sentences;
-- evicted_share is the share the sentence penalty reached.
CREATE VIEW v_sentence_kinds AS
SELECT model, dataset, policy, budget, correct,
       COUNT(DISTINCT run_id || ':' || sample_idx) AS n_traces,
       COUNT(*) AS n_sentences,
       AVG(kind = 'check') AS check_share,
       AVG(max_sim) AS mean_max_sim,
       AVG(max_sim > 0.95) AS high_sim_share,
       AVG(evicted_step IS NOT NULL) AS evicted_share,
       AVG(n_tokens) AS mean_sentence_tokens
FROM v_sentences
WHERE in_prompt = 0
GROUP BY model, dataset, policy, budget, correct
ORDER BY model, dataset, policy, budget, correct;

-- ---- Added in schema version 6 (the bench table).  harness/store/ migrates
-- an older database by running this part of the file (up to the PRAGMA). ----

-- `evictbench bench --contexts` and `--max-batch` points, one row each
-- (harness/exp/bench_long.c, bench_maxbatch.c).  kind: 'context' (decode at a
-- context length) or 'max_batch' (the largest batch under kv_cap_bytes).
-- fill: how the context was reached, e.g. 'repeat:gsm8k:256' (the K/V of a
-- 256-token real prefill of GSM8K text, repeated to `context` slots) or
-- 'prefill' (the whole context prefilled).  status 'oom': the point did not
-- fit (est_bytes says how much it needed); its measurements are NULL.
-- decode_tok_s counts forward passes only; compress_first_ms is one
-- sequence's first compression (the policy's scoring over the whole
-- context), compress_ms_per_step the policy's time per later decode step.
CREATE TABLE bench (
    id INTEGER PRIMARY KEY,
    started_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    kind TEXT NOT NULL CHECK (kind IN ('context', 'max_batch')),
    model TEXT NOT NULL,
    device TEXT NOT NULL,
    threads INTEGER NOT NULL,
    kv_type TEXT NOT NULL,
    policy TEXT NOT NULL,
    budget INTEGER,
    context INTEGER NOT NULL,
    fill TEXT NOT NULL,
    batch_size INTEGER NOT NULL,
    n_new INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'oom')),
    error TEXT,
    est_bytes INTEGER,
    kv_cap_bytes INTEGER,
    decode_tok_s REAL,
    decode_step_ms REAL,
    prefill_tokens INTEGER,
    prefill_s REAL,
    compress_first_ms REAL,
    compress_ms_per_step REAL,
    compressions INTEGER,
    kv_bytes INTEGER,
    peak_rss_mb REAL,
    code_version TEXT
);

-- The latest row of every bench point (a rerun replaces the older row here),
-- the same key's FullKV row beside it: speedup = decode_tok_s / FullKV's at
-- the same context, batch and KV type; compress_in_fullkv_steps = the first
-- compression (one sequence, over the whole context) in FullKV decode steps.
CREATE VIEW v_bench_context AS
SELECT b.model, b.device, b.threads, b.kv_type, b.fill, b.n_new, b.batch_size, b.context,
       b.policy, b.budget, b.status, b.est_bytes, b.decode_tok_s, b.decode_step_ms,
       b.prefill_tokens, b.prefill_s, b.compress_first_ms, b.compress_ms_per_step,
       b.compressions, b.kv_bytes, b.peak_rss_mb,
       f.decode_tok_s AS fullkv_tok_s, f.decode_step_ms AS fullkv_step_ms,
       f.kv_bytes AS fullkv_kv_bytes,
       b.decode_tok_s / f.decode_tok_s AS speedup,
       b.compress_first_ms / f.decode_step_ms AS compress_in_fullkv_steps
FROM bench b
LEFT JOIN bench f ON f.id = (
    SELECT MAX(y.id) FROM bench y
    WHERE y.kind = 'context' AND y.policy = 'fullkv' AND y.status = 'ok'
      AND y.model = b.model AND y.device = b.device AND y.threads = b.threads
      AND y.kv_type = b.kv_type AND y.fill = b.fill AND y.n_new = b.n_new
      AND y.batch_size = b.batch_size AND y.context = b.context)
WHERE b.kind = 'context' AND b.id = (
    SELECT MAX(x.id) FROM bench x
    WHERE x.kind = 'context' AND x.model = b.model AND x.device = b.device
      AND x.threads = b.threads AND x.kv_type = b.kv_type AND x.fill = b.fill
      AND x.n_new = b.n_new AND x.batch_size = b.batch_size AND x.context = b.context
      AND x.policy = b.policy AND x.budget IS b.budget);

-- The largest-batch sweep: the latest row per batch, with the largest batch
-- that fitted under the cap (max_ok_batch_size) for its policy and budget.
CREATE VIEW v_bench_max_batch AS
SELECT b.model, b.device, b.threads, b.kv_type, b.fill, b.n_new, b.kv_cap_bytes, b.policy,
       b.budget, b.batch_size, b.context, b.status, b.est_bytes, b.decode_tok_s,
       b.decode_step_ms, b.kv_bytes, b.peak_rss_mb,
       (SELECT MAX(y.batch_size) FROM bench y
        WHERE y.kind = 'max_batch' AND y.status = 'ok' AND y.model = b.model
          AND y.device = b.device AND y.threads = b.threads AND y.kv_type = b.kv_type
          AND y.fill = b.fill AND y.kv_cap_bytes = b.kv_cap_bytes AND y.policy = b.policy
          AND y.budget IS b.budget) AS max_ok_batch_size
FROM bench b
WHERE b.kind = 'max_batch' AND b.id = (
    SELECT MAX(x.id) FROM bench x
    WHERE x.kind = 'max_batch' AND x.model = b.model AND x.device = b.device
      AND x.threads = b.threads AND x.kv_type = b.kv_type AND x.fill = b.fill
      AND x.n_new = b.n_new AND x.kv_cap_bytes = b.kv_cap_bytes AND x.policy = b.policy
      AND x.budget IS b.budget AND x.batch_size = b.batch_size);

PRAGMA user_version = 6;
