/* bench_store.c - the bench table: its migration step and its rows (see
 * store.h and the bench table in results/schema.sql). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/store/store_priv.h"


void bench_record_init(struct bench_record *r)
{
    memset(r, 0, sizeof *r);
    r->budget = r->est_bytes = r->kv_cap_bytes = r->prefill_tokens = STORE_NONE;
    r->compressions = r->kv_bytes = STORE_NONE;
    r->decode_tok_s = r->decode_step_ms = r->prefill_s = NAN;
    r->compress_first_ms = r->compress_ms_per_step = r->peak_rss_mb = NAN;
}

/* Runs the bench part of the embedded schema (table and views) unless the
 * table is there (a version-1 database migrated by the version-2 step, which
 * runs everything after its mark, got it already). */
int store_migrate_bench(struct store *s, struct eb_err *e)
{
    sqlite3_stmt *st = NULL;
    const char *q = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'bench'";
    if (sqlite3_prepare_v2(s->db, q, -1, &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return fail_db(s, e, "migrating the schema to the bench version");
    }
    int has = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (!has) {
        const char *from = strstr(store_schema_sql, STORE_BENCH_MARK);
        const char *to = from ? strstr(from, "PRAGMA user_version") : NULL;
        if (!to) return eb_fail(e, "%s: the embedded schema has no bench part", s->path);
        char *sql = strndup(from, (size_t)(to - from));
        if (!sql) return eb_fail(e, "out of memory");
        int rc = exec(s, sql, "migrating the schema to the bench version", e);
        free(sql);
        if (rc) return -1;
    }
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", STORE_BENCH_VERSION);
    return exec(s, pragma, "migrating the schema to the bench version", e);
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v) sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, i);
}

static void bind_int(sqlite3_stmt *st, int i, int64_t v)
{
    if (v >= 0) sqlite3_bind_int64(st, i, v);
    else sqlite3_bind_null(st, i);
}

static void bind_real(sqlite3_stmt *st, int i, double v)
{
    if (isfinite(v)) sqlite3_bind_double(st, i, v);
    else sqlite3_bind_null(st, i);
}

int store_write_bench(struct store *s, const struct bench_record *r, struct eb_err *e)
{
    if (!s || s->readonly) return eb_fail(e, "results database: not open for writing");
    if (!r->kind || !r->model || !r->device || !r->kv_type || !r->policy || !r->fill ||
        !r->status || r->batch_size < 1 || r->context < 1)
        return eb_fail(e, "%s: a bench row needs kind, model, device, kv_type, policy, fill, "
                          "status, a batch and a context", s->path);
    sqlite3_stmt *st = NULL;
    const char *sql =
        "INSERT INTO bench (kind, model, device, threads, kv_type, policy, budget, context, "
        "fill, batch_size, n_new, status, error, est_bytes, kv_cap_bytes, decode_tok_s, "
        "decode_step_ms, prefill_tokens, prefill_s, compress_first_ms, compress_ms_per_step, "
        "compressions, kv_bytes, peak_rss_mb, code_version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
        "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, "
        "?24, ?25)";
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return fail_db(s, e, "writing a bench row");
    const char *text[] = {r->kind, r->model, r->device};
    for (int i = 0; i < 3; i++) bind_text(st, i + 1, text[i]);
    sqlite3_bind_int64(st, 4, r->threads);
    bind_text(st, 5, r->kv_type);
    bind_text(st, 6, r->policy);
    bind_int(st, 7, r->budget);
    sqlite3_bind_int64(st, 8, r->context);
    bind_text(st, 9, r->fill);
    sqlite3_bind_int64(st, 10, r->batch_size);
    sqlite3_bind_int64(st, 11, r->n_new);
    bind_text(st, 12, r->status);
    bind_text(st, 13, r->error);
    bind_int(st, 14, r->est_bytes);
    bind_int(st, 15, r->kv_cap_bytes);
    bind_real(st, 16, r->decode_tok_s);
    bind_real(st, 17, r->decode_step_ms);
    bind_int(st, 18, r->prefill_tokens);
    bind_real(st, 19, r->prefill_s);
    bind_real(st, 20, r->compress_first_ms);
    bind_real(st, 21, r->compress_ms_per_step);
    bind_int(st, 22, r->compressions);
    bind_int(st, 23, r->kv_bytes);
    bind_real(st, 24, r->peak_rss_mb);
    bind_text(st, 25, r->code_version);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : fail_db(s, e, "writing a bench row");
}
