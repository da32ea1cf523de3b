/* retention_rows.c - writes the retention table (results/schema.sql): one
 * row per sample that carries a token-retention record. */
#include "harness/store/store_priv.h"

#include <stdio.h>

int insert_retention(struct store *s, const char *k, int64_t run_id,
                     const struct sample_record *samples, int n, struct eb_err *e)
{
    sqlite3_stmt *st = NULL;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const struct sample_record *x = &samples[i];
        const struct sample_retention *r = x->retention;
        if (!r || !r->steps) continue;
        if (!st && sqlite3_prepare_v2(s->db,
                "INSERT INTO retention (run_id, sample_idx, n_layer, n_kv, n_prompt, n_positions, "
                "n_evicted_slots, n_evicted_tokens, max_step, encoding, steps, token_bytes) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)", -1, &st, NULL) != SQLITE_OK)
            return fail_db(s, e, "preparing the retention insert");
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        sqlite3_bind_int64(st, 1, run_id);
        sqlite3_bind_int64(st, 2, x->sample_idx);
        sqlite3_bind_int64(st, 3, r->n_layer);
        sqlite3_bind_int64(st, 4, r->n_kv);
        sqlite3_bind_int64(st, 5, r->n_prompt);
        sqlite3_bind_int64(st, 6, r->n_positions);
        sqlite3_bind_int64(st, 7, r->n_evicted_slots);
        sqlite3_bind_int64(st, 8, r->n_evicted_tokens);
        sqlite3_bind_int64(st, 9, r->max_step);
        sqlite3_bind_text(st, 10, r->encoding, -1, SQLITE_STATIC);
        sqlite3_bind_blob64(st, 11, r->steps, r->steps_len, SQLITE_STATIC);
        if (r->token_bytes) sqlite3_bind_blob64(st, 12, r->token_bytes, r->token_bytes_len, SQLITE_STATIC);
        else sqlite3_bind_null(st, 12);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = eb_fail(e, "%s: run %.12s: writing the retention record of sample_idx %lld: %s",
                         s->path, k, (long long)x->sample_idx, sqlite3_errmsg(s->db));
    }
    sqlite3_finalize(st);
    return rc;
}
