/* store.c - the results database: records, one transaction per run, queries
 * (opening: store_open.c). */
#include "harness/store/store_priv.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void run_record_init(struct run_record *r)
{
    memset(r, 0, sizeof *r);
    r->data_limit = STORE_NONE;
    r->budget = STORE_NONE;
    r->max_new_tokens = STORE_NONE;
    r->wall_s = NAN;
    r->gen_tokens = STORE_NONE;
    r->tokens_per_s = NAN;
    r->peak_kv_bytes = STORE_NONE;
    r->mean_kv_bytes = NAN;
}

void sample_record_init(struct sample_record *s)
{
    memset(s, 0, sizeof *s);
    s->think_tokens = STORE_NONE;
    s->n_compressions = STORE_NONE;
    s->peak_kv_bytes = STORE_NONE;
    s->mean_kv_bytes = NAN;
    s->n_sentences = STORE_NONE;
    s->n_redundant_pairs = STORE_NONE;
    s->pss_max = NAN;
    s->pss_mean = NAN;
    s->n_nonexec = STORE_NONE;
    s->steer_alpha_final = NAN;
    s->ttft_ms = NAN;
    s->tpot_ms = NAN;
    s->kl_mean = NAN;
    s->top1_agree = NAN;
    s->first_divergence = STORE_NONE;
}

void sentence_record_init(struct sentence_record *s)
{
    memset(s, 0, sizeof *s);
    s->max_sim = NAN;
    s->evicted_step = STORE_NONE;
}

/* ---- binding helpers: markers become NULL ------------------------------ */

static int bind_text(sqlite3_stmt *st, int i, const char *v)
{
    return v ? sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
}

static int bind_opt_int(sqlite3_stmt *st, int i, int64_t v)
{
    return v >= 0 ? sqlite3_bind_int64(st, i, v) : sqlite3_bind_null(st, i);
}

static int bind_opt_real(sqlite3_stmt *st, int i, double v)
{
    return isfinite(v) ? sqlite3_bind_double(st, i, v) : sqlite3_bind_null(st, i);
}

/* ---- experiments and runs ---------------------------------------------- */

static int need_writable(struct store *s, struct eb_err *e)
{
    if (!s) return eb_fail(e, "results database: not open");
    if (s->readonly) return eb_fail(e, "%s: opened read-only", s->path);
    return 0;
}

int store_begin_experiment(struct store *s, const char *name, const char *config_json,
                           const char *code_version, int64_t *exp_id, struct eb_err *e)
{
    *exp_id = 0;
    if (need_writable(s, e) != 0) return -1;
    if (!name || !*name || !config_json || !code_version)
        return eb_fail(e, "%s: an experiment needs a name, a config and a code version", s->path);
    sqlite3_stmt *ins = NULL, *sel = NULL;
    if (exec(s, "BEGIN IMMEDIATE", "locking the database", e) != 0) return -1;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO experiments (name, config_json, started_at, code_version) "
                           "VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?3) "
                           "ON CONFLICT (name, config_json, code_version) DO NOTHING",
                           -1, &ins, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->db,
                           "SELECT id FROM experiments WHERE name = ?1 AND config_json = ?2 "
                           "AND code_version = ?3",
                           -1, &sel, NULL) != SQLITE_OK)
        goto fail;
    bind_text(ins, 1, name);
    bind_text(ins, 2, config_json);
    bind_text(ins, 3, code_version);
    if (sqlite3_step(ins) != SQLITE_DONE) goto fail;
    bind_text(sel, 1, name);
    bind_text(sel, 2, config_json);
    bind_text(sel, 3, code_version);
    if (sqlite3_step(sel) != SQLITE_ROW) goto fail;
    *exp_id = sqlite3_column_int64(sel, 0);
    sqlite3_finalize(ins);
    sqlite3_finalize(sel);
    return exec(s, "COMMIT", "recording the experiment", e);
fail:
    fail_db(s, e, "recording the experiment");
    sqlite3_finalize(ins);
    sqlite3_finalize(sel);
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    *exp_id = 0;
    return -1;
}

int store_run_done(struct store *s, const char *run_key, struct eb_err *e)
{
    if (!s) return eb_fail(e, "results database: not open");
    if (!run_key) return eb_fail(e, "%s: no run key", s->path);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT 1 FROM runs WHERE run_key = ?1 AND status IN ('ok', 'oom')",
                           -1, &st, NULL) != SQLITE_OK)
        return fail_db(s, e, "looking up a run");
    bind_text(st, 1, run_key);
    int rc = sqlite3_step(st);
    int done = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
    if (done < 0) fail_db(s, e, "looking up a run");
    sqlite3_finalize(st);
    return done;
}

int store_point_seen(struct store *s, const struct run_record *r, struct eb_err *e)
{
    if (!s) return eb_fail(e, "results database: not open");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT 1 FROM runs WHERE run_key <> ?1 AND model = ?2 AND dataset = ?3 "
                           "AND data_offset = ?4 AND data_limit IS ?5 AND policy = ?6 "
                           "AND budget IS ?7 AND batch_size = ?8 AND batching = ?9 "
                           "AND status IN ('ok', 'oom') LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return fail_db(s, e, "looking up a point");
    bind_text(st, 1, r->run_key);
    bind_text(st, 2, r->model);
    bind_text(st, 3, r->dataset);
    sqlite3_bind_int64(st, 4, r->data_offset);
    bind_opt_int(st, 5, r->data_limit);
    bind_text(st, 6, r->policy);
    bind_opt_int(st, 7, r->budget);
    sqlite3_bind_int64(st, 8, r->batch_size);
    bind_text(st, 9, r->batching);
    int rc = sqlite3_step(st);
    int seen = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
    if (seen < 0) fail_db(s, e, "looking up a point");
    sqlite3_finalize(st);
    return seen;
}

static int check_run(const struct store *s, const struct run_record *r,
                     const struct sample_record *samples, int n,
                     const struct sentence_record *sents, int n_sents, struct eb_err *e)
{
    if (!r || !r->run_key || !*r->run_key) return eb_fail(e, "%s: a run needs a run_key", s->path);
    const char *k = r->run_key;
    if (!r->model || !r->dataset || !r->policy || !r->batching || !r->status)
        return eb_fail(e, "%s: run %.12s: model, dataset, policy, batching and status are "
                          "required", s->path, k);
    int ok = strcmp(r->status, "ok") == 0;
    if (!ok && strcmp(r->status, "oom") != 0 && strcmp(r->status, "error") != 0)
        return eb_fail(e, "%s: run %.12s: status \"%s\" is not ok, oom or error", s->path, k,
                       r->status);
    if (r->batch_size < 1)
        return eb_fail(e, "%s: run %.12s: batch size %lld < 1", s->path, k,
                       (long long)r->batch_size);
    if (n < 0 || n_sents < 0 || (n > 0 && !samples) || (n_sents > 0 && !sents))
        return eb_fail(e, "%s: run %.12s: bad sample or sentence array", s->path, k);
    if (!ok && (n > 0 || n_sents > 0))
        return eb_fail(e, "%s: run %.12s: a run with status \"%s\" carries no samples", s->path,
                       k, r->status);
    if (!ok && !r->error)
        return eb_fail(e, "%s: run %.12s: status \"%s\" needs an error message", s->path, k,
                       r->status);
    return 0;
}

/* Insert the run row and its samples and sentences (inside the caller's transaction). */
static int insert_samples(struct store *s, const char *k, int64_t run_id,
                          const struct sample_record *samples, int n, struct eb_err *e)
{
    sqlite3_stmt *st = s->ins_sample;
    for (int i = 0; i < n; i++) {
        const struct sample_record *x = &samples[i];
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        sqlite3_bind_int64(st, 1, run_id);
        bind_opt_int(st, 2, x->sample_idx);
        bind_text(st, 3, x->item_id);
        bind_opt_int(st, 4, x->prompt_tokens);
        bind_opt_int(st, 5, x->gen_tokens);
        bind_opt_int(st, 6, x->think_tokens);
        bind_opt_int(st, 7, x->finished);
        bind_opt_int(st, 8, x->correct);
        bind_text(st, 9, x->pred_answer);
        bind_text(st, 10, x->ref_answer);
        bind_opt_int(st, 11, x->n_compressions);
        bind_opt_int(st, 12, x->peak_kv_bytes);
        bind_opt_real(st, 13, x->mean_kv_bytes);
        bind_opt_int(st, 14, x->n_sentences);
        bind_opt_int(st, 15, x->n_redundant_pairs);
        bind_opt_real(st, 16, x->pss_max);
        bind_opt_real(st, 17, x->pss_mean);
        bind_opt_int(st, 18, x->n_nonexec);
        bind_opt_real(st, 19, x->steer_alpha_final);
        bind_opt_real(st, 20, x->ttft_ms);
        bind_opt_real(st, 21, x->tpot_ms);
        bind_opt_real(st, 22, x->kl_mean);
        bind_opt_real(st, 23, x->top1_agree);
        bind_opt_int(st, 24, x->first_divergence);
        bind_text(st, 25, x->text);
        if (sqlite3_step(st) != SQLITE_DONE)
            return eb_fail(e, "%s: run %.12s: writing sample %d (sample_idx %lld): %s", s->path,
                           k, i, (long long)x->sample_idx, sqlite3_errmsg(s->db));
    }
    return 0;
}

static int insert_sentences(struct store *s, const char *k, int64_t run_id,
                            const struct sentence_record *sents, int n_sents, struct eb_err *e)
{
    sqlite3_stmt *st = s->ins_sentence;
    for (int i = 0; i < n_sents; i++) {
        const struct sentence_record *x = &sents[i];
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        sqlite3_bind_int64(st, 1, run_id);
        bind_opt_int(st, 2, x->sample_idx);
        bind_opt_int(st, 3, x->sent_idx);
        bind_opt_int(st, 4, x->start_tok);
        bind_opt_int(st, 5, x->end_tok);
        bind_text(st, 6, x->kind);
        bind_opt_real(st, 7, x->max_sim);
        bind_opt_int(st, 8, x->evicted_step);
        if (sqlite3_step(st) != SQLITE_DONE)
            return eb_fail(e, "%s: run %.12s: writing sentence %d (sample_idx %lld): %s",
                           s->path, k, i, (long long)x->sample_idx, sqlite3_errmsg(s->db));
    }
    return 0;
}

static int insert_run(struct store *s, const struct run_record *r,
                      const struct sample_record *samples, int n,
                      const struct sentence_record *sents, int n_sents, struct eb_err *e)
{
    const char *k = r->run_key;
    double sum_correct = 0, sum_gen = 0;
    for (int i = 0; i < n; i++) {
        sum_correct += samples[i].correct;
        sum_gen += (double)samples[i].gen_tokens;
    }
    sqlite3_stmt *st = s->ins_run;
    if (r->experiment_id > 0) sqlite3_bind_int64(st, 1, r->experiment_id);
    else sqlite3_bind_null(st, 1);
    bind_text(st, 2, r->run_key);
    bind_text(st, 3, r->model);
    bind_text(st, 4, r->dataset);
    sqlite3_bind_int64(st, 5, r->data_offset > 0 ? r->data_offset : 0);
    bind_opt_int(st, 6, r->data_limit);
    bind_text(st, 7, r->policy);
    bind_text(st, 8, r->params_json);
    bind_opt_int(st, 9, r->budget);
    sqlite3_bind_int64(st, 10, r->batch_size);
    bind_text(st, 11, r->batching);
    bind_text(st, 12, r->sampling_json);
    sqlite3_bind_int64(st, 13, (int64_t)r->seed);
    bind_opt_int(st, 14, r->max_new_tokens);
    bind_text(st, 15, r->device);
    bind_text(st, 16, r->status);
    bind_text(st, 17, r->error);
    sqlite3_bind_int64(st, 18, n);
    bind_opt_real(st, 19, n > 0 ? sum_correct / n : NAN);
    bind_opt_real(st, 20, n > 0 ? sum_gen / n : NAN);
    bind_opt_real(st, 21, r->wall_s);
    bind_opt_int(st, 22, r->gen_tokens);
    bind_opt_real(st, 23, r->tokens_per_s);
    bind_opt_int(st, 24, r->peak_kv_bytes);
    bind_opt_real(st, 25, r->mean_kv_bytes);
    bind_text(st, 26, r->kv_type ? r->kv_type : "f32");
    if (sqlite3_step(st) != SQLITE_DONE)
        return eb_fail(e, "%s: run %.12s: writing the run: %s", s->path, k,
                       sqlite3_errmsg(s->db));
    int64_t run_id = sqlite3_last_insert_rowid(s->db);
    if (insert_samples(s, k, run_id, samples, n, e) ||
        insert_retention(s, k, run_id, samples, n, e))
        return -1;
    return insert_sentences(s, k, run_id, sents, n_sents, e);
}

static void reset_writes(struct store *s)
{
    sqlite3_stmt *all[] = {s->find_run, s->del_run, s->ins_run, s->ins_sample, s->ins_sentence};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        sqlite3_reset(all[i]);
        sqlite3_clear_bindings(all[i]);
    }
}

int store_write_run(struct store *s, const struct run_record *run,
                    const struct sample_record *samples, int n,
                    const struct sentence_record *sents, int n_sents, struct eb_err *e)
{
    if (need_writable(s, e) != 0) return -1;
    if (check_run(s, run, samples, n, sents, n_sents, e) != 0) return -1;
    const char *k = run->run_key;
    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return eb_fail(e, "%s: run %.12s: locking the database: %s", s->path, k,
                       sqlite3_errmsg(s->db));

    /* A done run stays; an "error" run is replaced (its rows cascade away). */
    int result = 0;
    bind_text(s->find_run, 1, k);
    int rc = sqlite3_step(s->find_run);
    if (rc == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(s->find_run, 0);
        const char *status = (const char *)sqlite3_column_text(s->find_run, 1);
        int is_error = status && strcmp(status, "error") == 0;
        sqlite3_reset(s->find_run);
        if (!is_error) {
            result = 1;
            goto rollback;
        }
        sqlite3_bind_int64(s->del_run, 1, id);
        if (sqlite3_step(s->del_run) != SQLITE_DONE) {
            eb_fail(e, "%s: run %.12s: replacing the failed run: %s", s->path, k,
                    sqlite3_errmsg(s->db));
            result = -1;
            goto rollback;
        }
    } else if (rc != SQLITE_DONE) {
        eb_fail(e, "%s: run %.12s: looking up the run: %s", s->path, k, sqlite3_errmsg(s->db));
        result = -1;
        goto rollback;
    }
    if (insert_run(s, run, samples, n, sents, n_sents, e) != 0) {
        result = -1;
        goto rollback;
    }
    reset_writes(s);
    if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        eb_fail(e, "%s: run %.12s: committing: %s", s->path, k, sqlite3_errmsg(s->db));
        result = -1;
        goto rollback;
    }
    return 0;
rollback:
    reset_writes(s);
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return result;
}

/* ---- queries ----------------------------------------------------------- */

int store_query(struct store *s, const char *sql, store_row_fn fn, void *ctx, struct eb_err *e)
{
    if (!s) return eb_fail(e, "results database: not open");
    if (!sql) return eb_fail(e, "%s: no query", s->path);
    const char *tail = sql;
    while (*tail) {
        sqlite3_stmt *st = NULL;
        const char *next = NULL;
        if (sqlite3_prepare_v2(s->db, tail, -1, &st, &next) != SQLITE_OK)
            return fail_db(s, e, "query");
        tail = next;
        if (!st) continue;                      /* only whitespace or a comment was left */
        int ncols = sqlite3_column_count(st);
        const char **names = NULL, **values = NULL;
        if (ncols > 0) {
            names = calloc((size_t)ncols, sizeof *names);
            values = calloc((size_t)ncols, sizeof *values);
            if (!names || !values) {
                free(names);
                free(values);
                sqlite3_finalize(st);
                return eb_fail(e, "out of memory");
            }
            for (int i = 0; i < ncols; i++) names[i] = sqlite3_column_name(st, i);
        }
        int rc = SQLITE_DONE, stop = 0;
        while (!stop && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            for (int i = 0; i < ncols; i++)
                values[i] = (const char *)sqlite3_column_text(st, i);
            if (fn) stop = fn(ctx, ncols, names, values) != 0;
        }
        free(names);
        free(values);
        if (!stop && rc != SQLITE_DONE) {
            fail_db(s, e, "query");
            sqlite3_finalize(st);
            return -1;
        }
        sqlite3_finalize(st);
        if (stop) return 0;
    }
    return 0;
}
