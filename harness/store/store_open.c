/* store_open.c - opening the results database: location checks, read-only
 * opens of files on read-only media, schema creation, version check and
 * migration, prepared statements.  See store.h. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/store/store_priv.h"

/* A writer waits this long for another process's write lock before failing. */
#define STORE_BUSY_MS 30000

/* ---- opening ---------------------------------------------------------- */

static void finalize_all(struct store *s)
{
    sqlite3_finalize(s->find_run);
    sqlite3_finalize(s->del_run);
    sqlite3_finalize(s->ins_run);
    sqlite3_finalize(s->ins_sample);
    sqlite3_finalize(s->ins_sentence);
    s->find_run = s->del_run = s->ins_run = s->ins_sample = s->ins_sentence = NULL;
}

void store_close(struct store *s)
{
    if (!s) return;
    finalize_all(s);
    sqlite3_close(s->db);
    free(s->path);
    free(s);
}

int fail_db(struct store *s, struct eb_err *e, const char *what)
{
    return eb_fail(e, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

/* The directory part of path (malloc'd), "." when it has none. */
static char *parent_dir(const char *path)
{
    char *dir = malloc(strlen(path) + 2);
    if (!dir) return NULL;
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    return dir;
}

/* A reader of a WAL database normally creates "<path>-shm" next to it.  In a
 * directory where it cannot, and with no WAL content left to read (a writer
 * that closed cleanly checkpoints and removes the WAL), the file can be read
 * as immutable.  A leftover WAL must be read through the normal path. */
static int needs_immutable_open(const char *path)
{
    char *dir = parent_dir(path);
    int writable = dir && access(dir, W_OK | X_OK) == 0;
    free(dir);
    if (writable) return 0;
    char *wal = malloc(strlen(path) + 5);
    if (!wal) return 0;
    sprintf(wal, "%s-wal", path);
    struct stat st;
    int has_wal = stat(wal, &st) == 0 && st.st_size > 0;
    free(wal);
    return !has_wal;
}

/* "file:<path>?immutable=1" with the path percent-encoded. */
static char *immutable_uri(const char *path)
{
    size_t len = strlen(path);
    char *uri = malloc(3 * len + 32);
    if (!uri) return NULL;
    char *o = uri + sprintf(uri, "file:");
    for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
            strchr("/._-~", *c))
            *o++ = (char)*c;
        else
            o += sprintf(o, "%%%02X", *c);
    }
    strcpy(o, "?immutable=1");
    return uri;
}

/* Check the directory (and the file, if present) before SQLite does, because
 * its own message for these cases is only "unable to open database file". */
static int check_location(const char *path, int for_write, struct eb_err *e)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode)) return eb_fail(e, "%s: not a regular file", path);
        if (access(path, for_write ? R_OK | W_OK : R_OK) != 0)
            return eb_fail(e, "%s: cannot %s the database: %s", path,
                           for_write ? "write" : "read", strerror(errno));
    } else if (!for_write) {
        return eb_fail(e, "%s: no such results database", path);
    }
    if (!for_write) return 0;

    char *dir = parent_dir(path);
    if (!dir) return eb_fail(e, "out of memory");

    int rc = 0;
    if (stat(dir, &st) != 0)
        rc = eb_fail(e, "%s: directory %s does not exist (create it first)", path, dir);
    else if (!S_ISDIR(st.st_mode))
        rc = eb_fail(e, "%s: %s is not a directory", path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        rc = eb_fail(e, "%s: directory %s is not writable (the database and its WAL files "
                        "live there): %s", path, dir, strerror(errno));
    free(dir);
    return rc;
}

int exec(struct store *s, const char *sql, const char *what, struct eb_err *e)
{
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        eb_fail(e, "%s: %s: %s", s->path, what, msg ? msg : sqlite3_errmsg(s->db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

/* One integer from a one-row query (a pragma or count). */
static int query_int(struct store *s, const char *sql, int64_t *out, struct eb_err *e)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) return fail_db(s, e, sql);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        fail_db(s, e, sql);
        sqlite3_finalize(st);
        return -1;
    }
    *out = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return 0;
}

/* The oldest version this build reads (read-only) and migrates (for writing). */
#define STORE_OLDEST_VERSION 1

/* Refuse a version this build cannot read; an older one it can is accepted
 * (the writer migrates it). */
static int check_version(struct store *s, int64_t version, struct eb_err *e)
{
    if (version >= STORE_OLDEST_VERSION && version <= STORE_SCHEMA_VERSION) return 0;
    if (version > STORE_SCHEMA_VERSION)
        return eb_fail(e, "%s: written by a newer evictbench (schema version %lld; this build "
                          "knows version %d); use a newer build or another --db file",
                       s->path, (long long)version, STORE_SCHEMA_VERSION);
    return eb_fail(e, "%s: schema version %lld is older than this build's %d and cannot be "
                      "migrated; move the file aside to start a new database",
                   s->path, (long long)version, STORE_SCHEMA_VERSION);
}

/* Version 1 -> 2: the part of the schema after the version-2 mark (views
 * only), taken from the embedded schema so that a migrated database and a
 * new one get the same text. */
#define SCHEMA_V2_MARK "-- ---- Added in schema version 2."

/* Run the part of the embedded schema from mark `from` up to `to`, then set
 * the version. */
static int run_schema_part(struct store *s, const char *from_mark, const char *to_mark,
                           int version, struct eb_err *e)
{
    char what[64];
    snprintf(what, sizeof what, "migrating the schema to version %d", version);
    const char *from = strstr(store_schema_sql, from_mark);
    const char *to = from ? strstr(from, to_mark) : NULL;
    if (!to) return eb_fail(e, "%s: the embedded schema has no version-%d part", s->path, version);
    char *sql = strndup(from, (size_t)(to - from));
    if (!sql) return eb_fail_nomem(e, "%s", what);
    int rc = exec(s, sql, what, e);
    free(sql);
    if (rc) return -1;
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", version);
    return exec(s, pragma, what, e);
}

static int migrate_1_to_2(struct store *s, struct eb_err *e)
{
    /* the bench part after it is its own step (store_migrate_bench) */
    return run_schema_part(s, SCHEMA_V2_MARK, STORE_BENCH_MARK, 2, e);
}

/* Version 2 -> 3: runs.kv_type, as the schema defines it (every older run
 * was f32).  Added only when missing: a database made by this schema and
 * marked older (the tests do) has it already. */
static int migrate_2_to_3(struct store *s, struct eb_err *e)
{
    int64_t has = 0;
    if (query_int(s, "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'kv_type'",
                  &has, e) != 0)
        return -1;
    if (!has && exec(s, "ALTER TABLE runs ADD COLUMN kv_type TEXT NOT NULL DEFAULT 'f32'",
                     "migrating the schema to version 3", e) != 0)
        return -1;
    return exec(s, "PRAGMA user_version = 3", "migrating the schema to version 3", e);
}

/* The CREATE VIEW statement of one view, as the embedded schema has it
 * (each ends with the first ";" at the end of a line). */
static char *schema_view_sql(const char *name)
{
    char head[96];
    snprintf(head, sizeof head, "CREATE VIEW %s AS\n", name);
    const char *from = strstr(store_schema_sql, head);
    const char *to = from ? strstr(from, ";\n") : NULL;
    return to ? strndup(from, (size_t)(to - from + 1)) : NULL;
}

/* Version 3 -> 4: views redefined (fullkv-pss counts as FullKV; throughput and
 * KV memory one line per kv_type): dropped and made again from the embedded
 * schema, so that a migrated database and a new one have the same text. */
static int migrate_3_to_4(struct store *s, struct eb_err *e)
{
    static const char *const views[] = {"v_fullkv_ref", "v_throughput_by_batch",
                                         "v_kv_by_budget"};
    for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
        char drop[96];
        snprintf(drop, sizeof drop, "DROP VIEW IF EXISTS %s", views[i]);
        char *create = schema_view_sql(views[i]);
        if (!create) return eb_fail(e, "%s: the embedded schema has no view %s", s->path, views[i]);
        int rc = exec(s, drop, "migrating the schema to version 4", e) ||
                 exec(s, create, "migrating the schema to version 4", e);
        free(create);
        if (rc) return -1;
    }
    return exec(s, "PRAGMA user_version = 4", "migrating the schema to version 4", e);
}

/* Version 4 -> 5: the retention table, the part of the embedded schema
 * between the version-5 and version-2 marks. */
#define SCHEMA_V5_MARK "-- ---- Added in schema version 5."
static int migrate_4_to_5(struct store *s, struct eb_err *e)
{
    return run_schema_part(s, SCHEMA_V5_MARK, SCHEMA_V2_MARK, 5, e);
}

/* Create the schema in an empty database, or verify the version of an
 * existing one and migrate it to this build's, one version at a time. */
static int ensure_schema(struct store *s, struct eb_err *e)
{
    if (exec(s, "BEGIN IMMEDIATE", "locking the database", e) != 0) return -1;
    int64_t version = 0, n_objects = 0;
    if (query_int(s, "PRAGMA user_version", &version, e) != 0 ||
        query_int(s, "SELECT count(*) FROM sqlite_master", &n_objects, e) != 0)
        goto fail;
    if (version == 0) {
        if (n_objects != 0) {
            eb_fail(e, "%s: not an evictbench results database (it has tables but no schema "
                       "version)", s->path);
            goto fail;
        }
        if (exec(s, store_schema_sql, "creating the schema", e) != 0) goto fail;
    } else if (check_version(s, version, e) != 0) {
        goto fail;
    } else if ((version == 1 && migrate_1_to_2(s, e) != 0) ||
               (version <= 2 && migrate_2_to_3(s, e) != 0) ||
               (version <= 3 && migrate_3_to_4(s, e) != 0) ||
               (version <= 4 && migrate_4_to_5(s, e) != 0) ||
               (version < STORE_BENCH_VERSION && store_migrate_bench(s, e) != 0)) {
        goto fail;
    }
    if (exec(s, STORE_CLAIMS_SQL, "creating the claims table", e) != 0) goto fail;
    if (exec(s, "COMMIT", "creating the schema", e) != 0) goto fail;
    return 0;
fail:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

static int prepare(struct store *s, const char *sql, sqlite3_stmt **st, struct eb_err *e)
{
    if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
        return fail_db(s, e, "preparing a statement");
    return 0;
}

static int prepare_writes(struct store *s, struct eb_err *e)
{
    if (prepare(s, "SELECT id, status FROM runs WHERE run_key = ?1", &s->find_run, e) ||
        prepare(s, "DELETE FROM runs WHERE id = ?1", &s->del_run, e) ||
        prepare(s,
                "INSERT INTO runs (experiment_id, run_key, model, dataset, data_offset, "
                "data_limit, policy, params_json, budget, batch_size, batching, sampling_json, "
                "seed, max_new_tokens, device, status, error, n_samples, accuracy, "
                "mean_gen_tokens, wall_s, gen_tokens, tokens_per_s, peak_kv_bytes, "
                "mean_kv_bytes, kv_type, finished_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
                "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, "
                "?25, ?26, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                &s->ins_run, e) ||
        prepare(s,
                "INSERT INTO samples (run_id, sample_idx, item_id, prompt_tokens, gen_tokens, "
                "think_tokens, finished, correct, pred_answer, ref_answer, n_compressions, "
                "peak_kv_bytes, mean_kv_bytes, n_sentences, n_redundant_pairs, pss_max, "
                "pss_mean, n_nonexec, steer_alpha_final, ttft_ms, tpot_ms, kl_mean, "
                "top1_agree, first_divergence, text) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                "?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, "
                "?24, ?25)",
                &s->ins_sample, e) ||
        prepare(s,
                "INSERT INTO sentences (run_id, sample_idx, sent_idx, start_tok, end_tok, "
                "kind, max_sim, evicted_step) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                &s->ins_sentence, e))
        return -1;
    return 0;
}

/* Put the database in WAL mode.  Two processes opening a new database at the
 * same moment (two `exp` on one file) can find it locked: the pragma then
 * answers the old mode without waiting for the busy handler, so ask again
 * for a while before calling it a failure. */
static int switch_to_wal(struct store *s, const char *path, struct eb_err *e)
{
    for (int attempt = 0;; attempt++) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &st, NULL) != SQLITE_OK)
            return fail_db(s, e, "cannot read the database");
        int rc = sqlite3_step(st);
        const char *mode = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
        int wal = mode && strcmp(mode, "wal") == 0;
        char seen[32];
        snprintf(seen, sizeof seen, "%s", mode ? mode : "unknown");
        sqlite3_finalize(st);
        if (wal) return 0;
        int busy = rc == SQLITE_BUSY || rc == SQLITE_LOCKED || rc == SQLITE_ROW;
        if (!busy || attempt >= 100) {
            if (rc == SQLITE_ROW)
                return eb_fail(e, "%s: cannot switch to WAL mode (journal mode stays %s)", path, seen);
            return fail_db(s, e, "cannot read the database");
        }
        sqlite3_sleep(50); /* up to 5 s in all */
    }
}

/* A reader of a database it could write opens it read-write, with
 * query_only set: a WAL database's last connection then checkpoints and
 * removes the -wal and -shm files as it closes, which a read-only connection
 * cannot do (it left an empty -wal and a 32 KB -shm beside every database
 * the report read).  While a writer is open, nothing is removed. */
static int reader_may_write(const char *path)
{
    char *dir = parent_dir(path);
    int ok = dir && access(dir, W_OK | X_OK) == 0 && access(path, R_OK | W_OK) == 0;
    free(dir);
    return ok;
}

static int open_common(const char *path, int readonly, struct store **out, struct eb_err *e)
{
    *out = NULL;
    if (!path || !*path) return eb_fail(e, "results database: no path given");
    if (check_location(path, !readonly, e) != 0) return -1;

    struct store *s = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->readonly = readonly;
    s->path = strdup(path);
    if (!s->path) { free(s); return eb_fail(e, "out of memory"); }

    int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    int query_only = readonly && reader_may_write(path);
    if (query_only) flags = SQLITE_OPEN_READWRITE;
    char *uri = NULL;
    int immutable = readonly && !query_only && needs_immutable_open(path);
    if (immutable) {
        uri = immutable_uri(path);
        if (!uri) { store_close(s); return eb_fail(e, "out of memory"); }
        flags |= SQLITE_OPEN_URI;
    }
    int rc_open = sqlite3_open_v2(uri ? uri : path, &s->db, flags, NULL);
    free(uri);
    if (rc_open != SQLITE_OK) {
        fail_db(s, e, "cannot open");
        store_close(s);
        return -1;
    }
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, STORE_BUSY_MS);

    int64_t version = 0;
    if (readonly) {
        if (query_only && exec(s, "PRAGMA query_only=1", "opening for reading", e) != 0) goto fail;
        if (query_int(s, "PRAGMA user_version", &version, e) != 0) {
            char *dir = parent_dir(path);
            if (!immutable && dir && access(dir, W_OK | X_OK) != 0)
                eb_fail(e, "%s: cannot read it in the read-only directory %s: a writer left a "
                           "WAL file; open it once with write access to checkpoint it", path, dir);
            free(dir);
            goto fail;
        }
        if (version == 0) {
            eb_fail(e, "%s: not an evictbench results database (no schema version)", path);
            goto fail;
        }
        if (check_version(s, version, e) != 0) goto fail;
        *out = s;
        return 0;
    }

    /* WAL: readers (sqlite3, plots) never block the sweep; a killed writer's
     * uncommitted frames are ignored on the next open.  synchronous=FULL makes
     * a committed run survive a power cut too; a run costs one fsync. */
    if (switch_to_wal(s, path, e) != 0) goto fail;
    if (exec(s, "PRAGMA foreign_keys=ON; PRAGMA synchronous=FULL", "setting up", e) != 0 ||
        ensure_schema(s, e) != 0 || prepare_writes(s, e) != 0)
        goto fail;
    *out = s;
    return 0;
fail:
    store_close(s);
    return -1;
}

int store_open(const char *path, struct store **out, struct eb_err *e)
{
    return open_common(path, 0, out, e);
}

int store_open_readonly(const char *path, struct store **out, struct eb_err *e)
{
    return open_common(path, 1, out, e);
}

int store_open_reader(const char *path, struct store **out, struct eb_err *e)
{
    if (open_common(path, 1, out, e) != 0) return -1;
    int64_t version = 0;
    struct eb_err ignored = {0};
    if (query_int(*out, "PRAGMA user_version", &version, &ignored) != 0 ||
        version >= STORE_SCHEMA_VERSION || access(path, W_OK) != 0)
        return 0;
    char *dir = parent_dir(path);
    int dir_writable = dir && access(dir, W_OK | X_OK) == 0;
    free(dir);
    if (!dir_writable) return 0;
    store_close(*out);
    *out = NULL;
    struct store *w = NULL;
    if (open_common(path, 0, &w, e) != 0) return -1; /* migrates */
    store_close(w);
    return open_common(path, 1, out, e);
}
