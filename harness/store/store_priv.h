/* store_priv.h - the store's handle, shared by the files of harness/store/. */
#ifndef EB_STORE_PRIV_H
#define EB_STORE_PRIV_H

#include <sqlite3.h>

#include "harness/store/store.h"

struct store {
    sqlite3 *db;
    char *path;
    int readonly;
    sqlite3_stmt *find_run;     /* id, status of a run_key */
    sqlite3_stmt *del_run;
    sqlite3_stmt *ins_run;
    sqlite3_stmt *ins_sample;
    sqlite3_stmt *ins_sentence;
};

/* Sets e to "<what>: <sqlite's message>"; returns -1. */
int fail_db(struct store *s, struct eb_err *e, const char *what);
/* Runs sql; on failure e names what. */
int exec(struct store *s, const char *sql, const char *what, struct eb_err *e);

/* The retention rows of the samples that carry one (retention_rows.c). */
int insert_retention(struct store *s, const char *k, int64_t run_id,
                     const struct sample_record *samples, int n, struct eb_err *e);

/* The claims table (results/schema.sql has the same statement): created on
 * every writable open, so version-2 files written before it get it too. */
#define STORE_CLAIMS_SQL \
    "CREATE TABLE IF NOT EXISTS claims (run_key TEXT PRIMARY KEY, owner TEXT NOT NULL, " \
    "expires_at REAL NOT NULL)"

/* Where the bench part of results/schema.sql starts (store_migrate_bench). */
#define STORE_BENCH_MARK "-- ---- Added in schema version 6 (the bench table)."

#endif
