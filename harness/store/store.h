/* store.h - the results database (SQLite, WAL mode); the only code that touches it.
 *
 * Schema and views: results/schema.sql (embedded as store_schema_sql).
 * Every run is written with all its samples and sentences in one transaction,
 * so a killed sweep leaves either the whole run or nothing; run_key
 * (harness/runkey.h) lets a rerun skip what is done.
 *
 * Optional measurements use markers that are stored as SQL NULL ("not
 * measured"): integer fields set to STORE_NONE (any negative value) and double
 * fields set to NAN.  The *_init functions set every optional field to its
 * marker, so a caller fills in only what it measured. */
#ifndef EB_STORE_H
#define EB_STORE_H

#include <stdint.h>

#include "util/err.h"

/* Version 2 added the views v_sentences and v_sentence_kinds, version 3
 * runs.kv_type, version 4 redefined v_fullkv_ref (fullkv-pss counts),
 * v_throughput_by_batch and v_kv_by_budget (one line per kv_type).  An older
 * database is migrated when opened for writing (store_open) and read as it is
 * by store_open_readonly.  Version 5 added the retention table (a CREATE);
 * version 6 (STORE_BENCH_VERSION) the bench table (its own migration step,
 * harness/store/bench_store.c). */
#define STORE_BENCH_VERSION 6
#define STORE_SCHEMA_VERSION 6
#define STORE_NONE (-1)

/* results/schema.sql, byte for byte (harness/store/schema_sql.c). */
extern const char store_schema_sql[];

struct store;

/* One measured point.  Required: run_key, model, dataset, policy, batching,
 * status, batch_size >= 1, and error when status is not "ok".  n_samples,
 * accuracy (mean of correct) and mean_gen_tokens are computed by the store
 * from the samples written with the run. */
struct run_record {
    int64_t experiment_id;      /* 0: none */
    const char *run_key;
    const char *model;
    const char *dataset;
    int64_t data_offset;        /* first item (0 by default) */
    int64_t data_limit;         /* STORE_NONE: every item */
    const char *policy;
    const char *params_json;
    int64_t budget;             /* STORE_NONE: no budget (fullkv) */
    int64_t batch_size;
    const char *batching;       /* padded | grouped | ragged | continuous */
    const char *sampling_json;
    uint64_t seed;              /* always stored (as its int64 bit pattern) */
    int64_t max_new_tokens;
    const char *device;
    const char *kv_type;        /* KV cache element type (f32, f16, bf16); NULL: f32 */
    const char *status;         /* "ok" | "oom" | "error" */
    const char *error;          /* what failed, for "oom" and "error" */
    double wall_s;
    int64_t gen_tokens;         /* whole batch schedule */
    double tokens_per_s;
    int64_t peak_kv_bytes;      /* whole batch */
    double mean_kv_bytes;
};

/* A trace's token-retention record (the retention table, results/schema.sql). */
struct sample_retention {
    int n_layer, n_kv, n_prompt, n_positions;
    int64_t n_evicted_slots, n_evicted_tokens;
    int max_step;
    const char *encoding;
    const unsigned char *steps;
    size_t steps_len;
    const unsigned char *token_bytes;   /* NULL: none */
    size_t token_bytes_len;
};

/* One generated trace.  Required: sample_idx (unique within the run),
 * prompt_tokens, gen_tokens, finished (0/1), correct (0/1). */
struct sample_record {
    int64_t sample_idx;
    const char *item_id;
    int64_t prompt_tokens;
    int64_t gen_tokens;
    int64_t think_tokens;
    int finished;               /* 1: stopped at EOS; 0: truncated */
    int correct;
    const char *pred_answer;
    const char *ref_answer;
    int64_t n_compressions;
    int64_t peak_kv_bytes;      /* this sequence */
    double mean_kv_bytes;
    int64_t n_sentences;
    int64_t n_redundant_pairs;
    double pss_max;
    double pss_mean;
    int64_t n_nonexec;
    double steer_alpha_final;
    double ttft_ms;
    double tpot_ms;
    double kl_mean;             /* fidelity mode */
    double top1_agree;
    int64_t first_divergence;
    const char *text;
    const struct sample_retention *retention;  /* NULL: none recorded */
};

/* One sentence of a trace; sample_idx names a sample written with the run
 * (see the sentences table in results/schema.sql). */
struct sentence_record {
    int64_t sample_idx;
    int64_t sent_idx;
    int64_t start_tok;          /* span of absolute positions, prompt included */
    int64_t end_tok;
    const char *kind;           /* "check" | "others" (sent_label_name) */
    double max_sim;             /* NAN: never compared */
    int64_t evicted_step;       /* STORE_NONE: never evicted */
};

void run_record_init(struct run_record *r);
void sample_record_init(struct sample_record *s);
void sentence_record_init(struct sentence_record *s);

/* Open (creating the file and schema if needed) for writing.  The directory
 * must exist and be writable (the WAL files live next to the database).
 * Migrates a database of an older schema version it knows how to (1), and
 * refuses one of a newer version or a file that is not one. */
int store_open(const char *path, struct store **out, struct eb_err *e);

/* Open an existing database for queries only (also in a read-only directory,
 * unless a writer left WAL content there that needs a checkpoint). */
int store_open_readonly(const char *path, struct store **out, struct eb_err *e);
/* For readers of the views (tables, plots): store_open_readonly, after
 * migrating a database of an older schema when this process may write it
 * (a newer build's views read columns an older one lacks); a file it cannot
 * write is read as it is. */
int store_open_reader(const char *path, struct store **out, struct eb_err *e);

void store_close(struct store *s);

/* The experiments row for (name, config_json, code_version): reused when it
 * exists (a resumed sweep), created otherwise. */
int store_begin_experiment(struct store *s, const char *name, const char *config_json,
                           const char *code_version, int64_t *exp_id, struct eb_err *e);

/* 1 when a run with this key is recorded as "ok" or "oom" (done: skip it),
 * 0 when absent or recorded as "error" (to be retried), -1 on failure. */
int store_run_done(struct store *s, const char *run_key, struct eb_err *e);

/* 1 when a done run of the same point (model, dataset slice, policy, budget,
 * batch size and batching of r) is recorded under another key: its code,
 * data or parameters changed since, so the point is stale.  0 when none, -1
 * on failure.  Used by `exp --dry-run`. */
int store_point_seen(struct store *s, const struct run_record *r, struct eb_err *e);

/* Leases on points (the claims table), so that several processes running
 * sweeps on one database split the points.  store_claim: 1 when the point is
 * now ours for lease_s seconds (it was free, its lease had run out, or it was
 * ours already: a renewal), 0 when another owner holds a live lease, -1 on
 * failure.  store_release drops our claim (after the run is written). */
int store_claim(struct store *s, const char *run_key, const char *owner, double lease_s,
                struct eb_err *e);
int store_release(struct store *s, const char *run_key, const char *owner, struct eb_err *e);

/* The owner of run_key's claim into owner (1), or 0 when unclaimed, -1 on
 * failure; store_claim_expire ends owner's lease now (a dead owner found
 * by the caller, e.g. a process of this host that no longer exists). */
int store_claim_owner(struct store *s, const char *run_key, char *owner, size_t cap,
                      struct eb_err *e);
int store_claim_expire(struct store *s, const char *run_key, const char *owner, struct eb_err *e);

/* Unix time in seconds, the clock of the leases. */
double store_clock(void);

/* Write a run with its samples and sentences in one transaction.  Returns 0
 * when written, 1 when a done run with the same key already exists (nothing is
 * written), -1 on failure (nothing is written).  An earlier "error" run with
 * the same key is replaced.  Runs whose status is not "ok" carry no samples. */
int store_write_run(struct store *s, const struct run_record *run,
                    const struct sample_record *samples, int n,
                    const struct sentence_record *sents, int n_sents, struct eb_err *e);

/* Run SQL (one or more statements, pragmas included) and call fn (may be NULL)
 * for every result row with the column names and values as text (NULL for SQL
 * NULL).  fn returns 0 to go on, non-zero to stop early (store_query then
 * returns 0).  For the plots/tables exporters and tests. */
typedef int (*store_row_fn)(void *ctx, int ncols, const char *const *names,
                            const char *const *values);
int store_query(struct store *s, const char *sql, store_row_fn fn, void *ctx,
                struct eb_err *e);

/* One row of the bench table (results/schema.sql documents the columns).
 * Optional fields: STORE_NONE / NAN as above; an 'oom' row has only the
 * identifying fields, error and est_bytes. */
struct bench_record {
    const char *kind;           /* "context" | "max_batch" */
    const char *model, *device, *kv_type, *policy, *fill, *status, *error, *code_version;
    int64_t threads, budget, context, batch_size, n_new;
    int64_t est_bytes, kv_cap_bytes, prefill_tokens, compressions, kv_bytes;
    double decode_tok_s, decode_step_ms, prefill_s, compress_first_ms, compress_ms_per_step;
    double peak_rss_mb;
};
void bench_record_init(struct bench_record *r);
int store_write_bench(struct store *s, const struct bench_record *r, struct eb_err *e);
/* The version-5 step: the bench table, when missing (bench_store.c). */
int store_migrate_bench(struct store *s, struct eb_err *e);

#endif
