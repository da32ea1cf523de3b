/* claims.c - leases on points, so several processes share one sweep (see
 * store.h and the claims table in results/schema.sql). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "harness/store/store_priv.h"

double store_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Run one statement with (run_key, owner, number) bound; SQLITE_DONE expected. */
static int step3(struct store *s, const char *sql, const char *run_key, const char *owner,
                 double x, const char *what, struct eb_err *e)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) return fail_db(s, e, what);
    sqlite3_bind_text(st, 1, run_key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, owner, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(st, 3, x);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : fail_db(s, e, what);
}

int store_claim(struct store *s, const char *run_key, const char *owner, double lease_s,
                struct eb_err *e)
{
    if (!s || s->readonly) return eb_fail(e, "results database: not open for writing");
    if (!run_key || !owner || !(lease_s > 0)) return eb_fail(e, "claim: bad arguments");
    double now = store_clock();
    /* One write transaction: the claim is taken when free, expired or ours. */
    if (exec(s, "BEGIN IMMEDIATE", "claiming a point", e) != 0) return -1;
    if (step3(s, "DELETE FROM claims WHERE run_key = ?1 AND owner <> ?2 AND expires_at < ?3",
              run_key, owner, now, "claiming a point", e) ||
        step3(s, "INSERT INTO claims (run_key, owner, expires_at) VALUES (?1, ?2, ?3) "
                 "ON CONFLICT (run_key) DO UPDATE SET expires_at = excluded.expires_at "
                 "WHERE claims.owner = excluded.owner",
              run_key, owner, now + lease_s, "claiming a point", e))
        goto fail;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT owner = ?2 FROM claims WHERE run_key = ?1", -1, &st,
                           NULL) != SQLITE_OK) {
        fail_db(s, e, "claiming a point");
        goto fail;
    }
    sqlite3_bind_text(st, 1, run_key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, owner, -1, SQLITE_TRANSIENT);
    int mine = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1;
    sqlite3_finalize(st);
    if (exec(s, "COMMIT", "claiming a point", e) != 0) goto fail;
    return mine;
fail:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

int store_release(struct store *s, const char *run_key, const char *owner, struct eb_err *e)
{
    if (!s || s->readonly) return eb_fail(e, "results database: not open for writing");
    return step3(s, "DELETE FROM claims WHERE run_key = ?1 AND owner = ?2 AND ?3 = ?3", run_key,
                 owner, 0, "releasing a point", e);
}

int store_claim_owner(struct store *s, const char *run_key, char *owner, size_t cap,
                      struct eb_err *e)
{
    owner[0] = '\0';
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT owner FROM claims WHERE run_key = ?1", -1, &st, NULL) !=
        SQLITE_OK)
        return fail_db(s, e, "reading a claim");
    sqlite3_bind_text(st, 1, run_key, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) snprintf(owner, cap, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : fail_db(s, e, "reading a claim");
}

int store_claim_expire(struct store *s, const char *run_key, const char *owner, struct eb_err *e)
{
    if (!s || s->readonly) return eb_fail(e, "results database: not open for writing");
    return step3(s, "UPDATE claims SET expires_at = ?3 WHERE run_key = ?1 AND owner = ?2", run_key,
                 owner, 0, "expiring a claim", e);
}
