/* merge.c - copy the finished runs of shard databases into one database.
 *
 * Everything goes through store_query on the target's connection: the shard
 * is ATTACHed, compared and copied with INSERT ... SELECT, so values keep
 * their exact types (a REAL is never printed and parsed back). */
#include "harness/cluster/merge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FINISHED "('ok', 'oom')"

struct merge {
    struct store *into;
    char *into_path;
    char *cols[3];              /* runs (no id), samples (no run_id), sentences (no run_id) */
    char *sel[3];               /* the same read from the shard: "x.col, ..." */
};

static const char *const TABLES[3] = {"runs", "samples", "sentences"};

static int add_col(void *ctx, int n, const char *const *names, const char *const *values)
{
    (void)n;
    (void)names;
    char **list = ctx;
    char *grown = NULL;
    if (asprintf(&grown, "%s%s%s", *list ? *list : "", *list ? ", " : "", values[0]) < 0)
        return 1;
    free(*list);
    *list = grown;
    return 0;
}

void merge_end(struct merge *m)
{
    if (!m) return;
    struct eb_err ignored = {0};
    store_query(m->into, "DROP TABLE IF EXISTS temp.merge_origin", NULL, NULL, &ignored);
    for (int i = 0; i < 3; i++) {
        free(m->cols[i]);
        free(m->sel[i]);
    }
    free(m->into_path);
    free(m);
}

/* cols ("a, b, experiment_id") read from table alias x: "x.a, x.b, <mapped id>";
 * a run's experiment_id becomes the target's id of the same experiment. */
static char *select_list(const char *cols)
{
    static const char MAPPED_EXP[] =
        "(SELECT me.id FROM main.experiments me JOIN shard.experiments se"
        " ON se.name = me.name AND se.config_json = me.config_json"
        " AND se.code_version = me.code_version WHERE se.id = x.experiment_id)";
    char *copy = strdup(cols);
    char *out = calloc(1, strlen(cols) * 2 + sizeof MAPPED_EXP + 16);
    if (!copy || !out) { free(copy); free(out); return NULL; }
    char *p = copy, *tok, *o = out;
    while ((tok = strsep(&p, ","))) {
        while (*tok == ' ') tok++;
        if (o != out) o += sprintf(o, ", ");
        o += strcmp(tok, "experiment_id") ? sprintf(o, "x.%s", tok) : sprintf(o, "%s", MAPPED_EXP);
    }
    free(copy);
    return out;
}

int merge_begin(struct store *into, const char *into_path, struct merge **out, struct eb_err *e)
{
    *out = NULL;
    struct merge *m = eb_calloc(1, sizeof *m, e);
    if (!m) return -1;
    m->into = into;
    m->into_path = strdup(into_path);
    if (!m->into_path) { free(m); return eb_fail(e, "out of memory"); }
    /* The target's columns: the shard must have every one of them. */
    for (int i = 0; i < 3; i++) {
        char sql[200];
        snprintf(sql, sizeof sql, "SELECT name FROM pragma_table_info('%s') WHERE name NOT IN "
                 "('id', 'run_id') ORDER BY cid", TABLES[i]);
        if (store_query(into, sql, add_col, &m->cols[i], e) != 0 || !m->cols[i]) {
            if (!m->cols[i] && !e->msg[0]) eb_fail(e, "%s: no table %s", into_path, TABLES[i]);
            merge_end(m);
            return -1;
        }
        if (!(m->sel[i] = select_list(m->cols[i]))) {
            merge_end(m);
            return eb_fail(e, "out of memory");
        }
    }
    /* Where each run of this session came from, for conflict messages. */
    if (store_query(into, "CREATE TEMP TABLE IF NOT EXISTS merge_origin "
                          "(run_key TEXT PRIMARY KEY, file TEXT NOT NULL)", NULL, NULL, e) != 0) {
        merge_end(m);
        return -1;
    }
    *out = m;
    return 0;
}

/* 'text' as an SQL string literal (quotes doubled), malloc'd. */
static char *sql_string(const char *text)
{
    size_t n = 3;
    for (const char *c = text; *c; c++) n += *c == '\'' ? 2 : 1;
    char *q = malloc(n), *o = q;
    if (!q) return NULL;
    *o++ = '\'';
    for (const char *c = text; *c; c++) {
        if (*c == '\'') *o++ = '\'';
        *o++ = *c;
    }
    *o++ = '\'';
    *o = '\0';
    return q;
}

static int first_row(void *ctx, int n, const char *const *names, const char *const *values)
{
    (void)names;
    char **out = ctx;
    /* "key|model|dataset|policy|budget|bs|origin" */
    size_t len = 1;
    for (int i = 0; i < n; i++) len += (values[i] ? strlen(values[i]) : 1) + 1;
    char *row = malloc(len), *o = row;
    if (!row) return 1;
    for (int i = 0; i < n; i++)
        o += sprintf(o, "%s%s", i ? "\x1f" : "", values[i] ? values[i] : "-");
    *out = row;
    return 1;                   /* one row is enough */
}

static int count_row(void *ctx, int n, const char *const *names, const char *const *values)
{
    (void)names;
    long *out = ctx;
    *out = n > 0 && values[0] ? atol(values[0]) : 0;
    return 1;
}

/* The same run in target (m) and shard (s) with different results. */
static const char CONFLICT_SQL[] =
    "SELECT m.run_key, m.model, m.dataset, m.policy, m.budget, m.batch_size, o.file "
    "FROM main.runs m JOIN shard.runs s ON s.run_key = m.run_key "
    "LEFT JOIN temp.merge_origin o ON o.run_key = m.run_key "
    "WHERE m.status IN " FINISHED " AND s.status IN " FINISHED " AND ("
    " m.status IS NOT s.status OR m.n_samples IS NOT s.n_samples"
    " OR m.accuracy IS NOT s.accuracy OR m.mean_gen_tokens IS NOT s.mean_gen_tokens"
    " OR EXISTS (SELECT sample_idx, item_id, gen_tokens, finished, correct, pred_answer, text"
    "   FROM shard.samples WHERE run_id = s.id EXCEPT"
    "   SELECT sample_idx, item_id, gen_tokens, finished, correct, pred_answer, text"
    "   FROM main.samples WHERE run_id = m.id)"
    " OR EXISTS (SELECT sample_idx, item_id, gen_tokens, finished, correct, pred_answer, text"
    "   FROM main.samples WHERE run_id = m.id EXCEPT"
    "   SELECT sample_idx, item_id, gen_tokens, finished, correct, pred_answer, text"
    "   FROM shard.samples WHERE run_id = s.id)) "
    "ORDER BY m.run_key LIMIT 1";

static int conflict_error(struct merge *m, const char *shard_path, char *row, struct eb_err *e)
{
    char *f[7] = {0};
    int n = 0;
    for (char *p = row, *tok; n < 7 && (tok = strsep(&p, "\x1f")); ) f[n++] = tok;
    const char *origin = n == 7 && strcmp(f[6], "-") ? f[6] : m->into_path;
    eb_fail(e, "merge: run %.12s (%s %s %s B=%s bs=%s) has different results in %s and %s",
            n > 0 ? f[0] : "?", n > 1 ? f[1] : "?", n > 2 ? f[2] : "?", n > 3 ? f[3] : "?",
            n > 4 ? f[4] : "?", n > 5 ? f[5] : "?", origin, shard_path);
    free(row);
    return -1;
}

/* The copy, after the conflict check; one string of statements. */
static char *copy_sql(const struct merge *m, const char *shard_lit)
{
    char *sql = NULL;
    int rc = asprintf(&sql,
        /* Runs new to the target (an 'error' row there is replaced). */
        "CREATE TEMP TABLE merge_new AS SELECT s.id AS shard_id, s.run_key FROM shard.runs s"
        " WHERE s.status IN " FINISHED " AND NOT EXISTS (SELECT 1 FROM main.runs m"
        " WHERE m.run_key = s.run_key AND m.status IN " FINISHED ");"
        "INSERT OR IGNORE INTO main.experiments (name, config_json, started_at, code_version)"
        " SELECT x.name, x.config_json, x.started_at, x.code_version FROM shard.experiments x"
        " WHERE x.id IN (SELECT r.experiment_id FROM shard.runs r JOIN temp.merge_new n"
        " ON n.shard_id = r.id) ORDER BY x.id;"
        "DELETE FROM main.runs WHERE run_key IN (SELECT run_key FROM temp.merge_new);"
        "INSERT INTO main.runs (%s) SELECT %s FROM shard.runs x"
        " JOIN temp.merge_new n ON n.shard_id = x.id ORDER BY x.id;"
        "INSERT INTO main.samples (run_id, %s) SELECT m.id, %s FROM shard.samples x"
        " JOIN temp.merge_new n ON n.shard_id = x.run_id JOIN main.runs m ON m.run_key = n.run_key"
        " ORDER BY m.id, x.sample_idx;"
        "INSERT INTO main.sentences (run_id, %s) SELECT m.id, %s FROM shard.sentences x"
        " JOIN temp.merge_new n ON n.shard_id = x.run_id JOIN main.runs m ON m.run_key = n.run_key"
        " ORDER BY m.id, x.sample_idx, x.sent_idx;"
        "INSERT OR IGNORE INTO temp.merge_origin SELECT run_key, %s FROM temp.merge_new;",
        m->cols[0], m->sel[0], m->cols[1], m->sel[1], m->cols[2], m->sel[2], shard_lit);
    return rc < 0 ? NULL : sql;
}

/* A shard written before schema version 3 has no runs.kv_type: its runs
 * were all f32, so the copy selects that literal instead (in place in
 * copy, which is long enough). */
static int old_shard_defaults(struct merge *m, char *copy, struct eb_err *e)
{
    long has = 0;
    if (store_query(m->into, "SELECT count(*) FROM pragma_table_info('runs', 'shard') WHERE "
                             "name = 'kv_type'", count_row, &has, e) != 0)
        return -1;
    char *at = has ? NULL : strstr(copy, "x.kv_type");
    if (at) {
        static const char lit[] = "'f32'", col[] = "x.kv_type";
        memcpy(at, lit, sizeof lit - 1);
        memmove(at + sizeof lit - 1, at + sizeof col - 1, strlen(at + sizeof col - 1) + 1);
    }
    return 0;
}

/* The retention records of the runs copied (a shard older than schema
 * version 5 has none). */
static int copy_retention(struct merge *m, struct eb_err *e)
{
    long has = 0;
    if (store_query(m->into, "SELECT count(*) FROM shard.sqlite_master WHERE name = 'retention'",
                    count_row, &has, e) != 0)
        return -1;
    if (!has) return 0;
    return store_query(m->into,
        "INSERT INTO main.retention (run_id, sample_idx, n_layer, n_kv, n_prompt, n_positions, "
        "n_evicted_slots, n_evicted_tokens, max_step, encoding, steps, token_bytes) SELECT m.id, "
        "x.sample_idx, x.n_layer, x.n_kv, x.n_prompt, x.n_positions, x.n_evicted_slots, "
        "x.n_evicted_tokens, x.max_step, x.encoding, x.steps, x.token_bytes FROM shard.retention x"
        " JOIN temp.merge_new n ON n.shard_id = x.run_id JOIN main.runs m ON m.run_key = n.run_key"
        " ORDER BY m.id, x.sample_idx", NULL, NULL, e);
}

int merge_shard(struct merge *m, const char *shard_path, struct merge_stats *st, struct eb_err *e)
{
    memset(st, 0, sizeof *st);
    struct stat a, b;
    if (stat(shard_path, &a) == 0 && stat(m->into_path, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        return eb_fail(e, "merge: %s is the target itself", shard_path);
    /* A results database of a version this build reads, or a clear error
     * (ATTACH would create a missing file). */
    struct store *probe = NULL;
    if (store_open_readonly(shard_path, &probe, e) != 0) return -1;
    store_close(probe);

    char *lit = sql_string(shard_path);
    char *attach = NULL, *copy = NULL, *row = NULL;
    int rc = -1, attached = 0, in_tx = 0;
    if (!lit || asprintf(&attach, "ATTACH DATABASE %s AS shard", lit) < 0) {
        eb_fail(e, "out of memory");
        goto done;
    }
    if (!(copy = copy_sql(m, lit))) {
        eb_fail(e, "out of memory");
        goto done;
    }
    if (store_query(m->into, attach, NULL, NULL, e) != 0) goto done;
    attached = 1;
    if (old_shard_defaults(m, copy, e)) goto done;
    /* Deferred BEGIN (IMMEDIATE would take a write lock on the shard too and
     * stall its writer); the no-op UPDATE takes the target's write lock now,
     * before anything is read, and the first read of the shard fixes the
     * snapshot every statement below sees. */
    if (store_query(m->into, "BEGIN; UPDATE main.runs SET id = id WHERE 0", NULL, NULL, e) != 0)
        goto done;
    in_tx = 1;
    if (store_query(m->into, CONFLICT_SQL, first_row, &row, e) != 0) goto done;
    if (row) {
        conflict_error(m, shard_path, row, e);
        row = NULL;
        goto done;
    }
    if (store_query(m->into,
                    "SELECT count(*) FROM shard.runs s JOIN main.runs m ON m.run_key = s.run_key"
                    " WHERE s.status IN " FINISHED " AND m.status IN " FINISHED,
                    count_row, &st->present, e) != 0 ||
        store_query(m->into, "SELECT count(*) FROM shard.runs WHERE status NOT IN " FINISHED,
                    count_row, &st->unfinished, e) != 0 ||
        store_query(m->into, copy, NULL, NULL, e) != 0 ||
        copy_retention(m, e) != 0 ||
        store_query(m->into, "SELECT count(*) FROM temp.merge_new", count_row, &st->copied, e) != 0 ||
        store_query(m->into, "DROP TABLE temp.merge_new; COMMIT", NULL, NULL, e) != 0)
        goto done;
    in_tx = 0;
    rc = 0;
done:
    if (in_tx) store_query(m->into, "ROLLBACK", NULL, NULL, NULL);
    if (attached) {
        struct eb_err ignored = {0};
        store_query(m->into, "DROP TABLE IF EXISTS temp.merge_new", NULL, NULL, &ignored);
        if (store_query(m->into, "DETACH DATABASE shard", NULL, NULL, &ignored) != 0 && rc == 0)
            rc = eb_fail(e, "%s", ignored.msg);
    }
    if (rc != 0 && e->msg[0] && !strstr(e->msg, shard_path)) eb_wrap(e, shard_path);
    free(lit);
    free(attach);
    free(copy);
    return rc;
}
