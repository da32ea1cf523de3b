/* view_rows.c - a results view loaded into memory, and the labels figures
 * and tables share (sampling, batching, policy display names).  See plots.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "harness/report/plots.h"
#include "harness/store/store.h"

/* ---- view_rows --------------------------------------------------------- */

struct load_ctx {
    struct view_rows *t;
    int failed;
};

static char *dup_or_null(const char *s, int *failed)
{
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *failed = 1;
    return d;
}

static int load_row(void *ctx, int ncols, const char *const *names, const char *const *values)
{
    struct load_ctx *c = ctx;
    struct view_rows *t = c->t;
    if (!t->names) {
        t->names = calloc((size_t)(ncols ? ncols : 1), sizeof *t->names);
        if (!t->names) return c->failed = 1;
        t->ncols = ncols;
        for (int i = 0; i < ncols; i++) t->names[i] = dup_or_null(names[i], &c->failed);
        if (c->failed) return 1;
    }
    if (t->nrows == t->cap) {
        int cap = t->cap ? t->cap * 2 : 64;
        char **cells = realloc(t->cells, (size_t)cap * (size_t)ncols * sizeof *cells);
        if (!cells) return c->failed = 1;
        t->cells = cells;
        t->cap = cap;
    }
    char **row = t->cells + (size_t)t->nrows * (size_t)ncols;
    for (int i = 0; i < ncols; i++) row[i] = dup_or_null(values[i], &c->failed);
    t->nrows++;
    return c->failed;
}

int view_rows_load(struct store *s, const char *sql, struct view_rows *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    struct load_ctx c = {out, 0};
    if (store_query(s, sql, load_row, &c, e) != 0) {
        view_rows_free(out);
        return -1;
    }
    if (c.failed) {
        view_rows_free(out);
        return eb_fail(e, "out of memory reading query results");
    }
    return 0;
}

/* 1 when the database has a table or view `name`, 0 when not (an older
 * schema read as it is), -1 on error. */
int view_exists(struct store *s, const char *name, struct eb_err *e)
{
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT name FROM sqlite_master WHERE name = '%s'", name);
    struct view_rows t;
    if (view_rows_load(s, sql, &t, e)) return -1;
    int found = t.nrows > 0;
    view_rows_free(&t);
    return found;
}

void view_rows_free(struct view_rows *t)
{
    if (!t) return;
    for (int i = 0; i < t->ncols && t->names; i++) free(t->names[i]);
    for (size_t i = 0; i < (size_t)t->nrows * (size_t)t->ncols; i++) free(t->cells[i]);
    free(t->names);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

int view_col(const struct view_rows *t, const char *name)
{
    for (int i = 0; i < t->ncols; i++)
        if (t->names[i] && !strcmp(t->names[i], name)) return i;
    return -1;
}

const char *view_cell(const struct view_rows *t, int row, int col)
{
    if (row < 0 || row >= t->nrows || col < 0 || col >= t->ncols) return NULL;
    return t->cells[(size_t)row * (size_t)t->ncols + (size_t)col];
}

double view_num(const struct view_rows *t, int row, int col)
{
    const char *v = view_cell(t, row, col);
    if (!v || !*v) return NAN;
    char *end = NULL;
    double d = strtod(v, &end);
    return *end ? NAN : d;
}

/* ---- labels ------------------------------------------------------------ */

void describe_sampling(const char *sampling_json, char *out, size_t n)
{
    if (!n) return;
    if (!sampling_json || !*sampling_json) {
        snprintf(out, n, "sampling not recorded");
        return;
    }
    cJSON *j = cJSON_Parse(sampling_json);
    if (!cJSON_IsObject(j)) {
        snprintf(out, n, "sampling %s", sampling_json);
        cJSON_Delete(j);
        return;
    }
    const cJSON *greedy = cJSON_GetObjectItemCaseSensitive(j, "greedy");
    const cJSON *temp = cJSON_GetObjectItemCaseSensitive(j, "temperature");
    if (!temp) temp = cJSON_GetObjectItemCaseSensitive(j, "temp");
    const cJSON *top_p = cJSON_GetObjectItemCaseSensitive(j, "top_p");
    const cJSON *top_k = cJSON_GetObjectItemCaseSensitive(j, "top_k");
    const cJSON *count = cJSON_GetObjectItemCaseSensitive(j, "n_samples");
    if (!count) count = cJSON_GetObjectItemCaseSensitive(j, "samples");
    if (!count) count = cJSON_GetObjectItemCaseSensitive(j, "n");
    size_t k = 0;
    if (cJSON_IsTrue(greedy) || (cJSON_IsNumber(temp) && temp->valuedouble == 0)) {
        k += (size_t)snprintf(out, n, "greedy");
    } else if (cJSON_IsNumber(temp)) {
        k += (size_t)snprintf(out, n, "T=%g", temp->valuedouble);
        if (k < n && cJSON_IsNumber(top_p) && top_p->valuedouble < 1)
            k += (size_t)snprintf(out + k, n - k, ", top-p=%g", top_p->valuedouble);
        if (k < n && cJSON_IsNumber(top_k) && top_k->valuedouble > 0)
            k += (size_t)snprintf(out + k, n - k, ", top-k=%g", top_k->valuedouble);
    } else {
        k += (size_t)snprintf(out, n, "sampling %s", sampling_json);
    }
    if (k < n && cJSON_IsNumber(count) && count->valuedouble > 1)
        snprintf(out + k, n - k, ", %g samples", count->valuedouble);
    cJSON_Delete(j);
}

void describe_batching(const char *batch_size, const char *batching, char *out, size_t n)
{
    if (!batch_size) batch_size = "?";
    if (!batching)
        snprintf(out, n, "batch %s", batch_size);
    else
        snprintf(out, n, "batch %s, %s", batch_size, batching);
}

