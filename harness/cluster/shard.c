/* shard.c - a sweep's points split into balanced, reproducible shards. */
#include "harness/cluster/shard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets/dataset.h"

int shard_parse(const char *spec, int *index, int *count, struct eb_err *e)
{
    char *end = NULL;
    errno = 0;
    long i = strtol(spec, &end, 10);
    if (errno || end == spec || *end != '/')
        return eb_fail(e, "--shard: expected I/N (e.g. 2/4), got '%s'", spec);
    const char *rest = end + 1;
    long n = strtol(rest, &end, 10);
    if (errno || end == rest || *end)
        return eb_fail(e, "--shard: expected I/N (e.g. 2/4), got '%s'", spec);
    if (n < 1 || n > SHARD_MAX)
        return eb_fail(e, "--shard: N must be in [1, %d], got '%s'", SHARD_MAX, spec);
    if (i < 1 || i > n)
        return eb_fail(e, "--shard: I must be in [1, N] (shards count from 1), got '%s'", spec);
    *index = (int)i;
    *count = (int)n;
    return 0;
}

/* Items the point reads: its limit, else what the registry says the dataset
 * holds from its offset (the synthetic set: its N). */
static int64_t point_items(const struct point *pt)
{
    if (pt->data_limit >= 0) return pt->data_limit > 0 ? pt->data_limit : 1;
    int64_t rows = 0;
    const struct dataset_spec *spec = dataset_find(pt->dataset, NULL);
    if (spec && !spec->file) {
        int n = 0;
        uint32_t seed = 0;
        struct eb_err ignored;
        if (synthetic_parse_name(pt->dataset, &n, &seed, &ignored) == 0) rows = n;
    } else if (spec) {
        rows = spec->rows;
    }
    if (rows <= 0) return SHARD_UNKNOWN_ITEMS;
    rows -= pt->data_offset;
    return rows > 0 ? rows : 1;
}

int64_t shard_point_work(const struct exp_config *cfg, const struct point *pt)
{
    int64_t samples = point_items(pt) * (cfg->sampling.n_samples > 0 ? cfg->sampling.n_samples : 1);
    int64_t tokens = cfg->max_new_tokens > 0 ? cfg->max_new_tokens : 1;
    if (cfg->max_total_tokens > 0 && cfg->max_total_tokens < tokens) tokens = cfg->max_total_tokens;
    return samples * tokens;
}

struct weighted {
    const char *key;
    int64_t work;
    int at;                     /* position in the caller's arrays */
};

/* Heaviest first; equal work in run key order, so the result does not depend
 * on the order the points were given in. */
static int heavier_first(const void *a, const void *b)
{
    const struct weighted *x = a, *y = b;
    if (x->work != y->work) return x->work > y->work ? -1 : 1;
    return strcmp(x->key, y->key);
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const struct weighted *)a)->key, ((const struct weighted *)b)->key);
}

int shard_assign(const char *const *keys, const int64_t *work, int n, int count, int *shard_of,
                 struct eb_err *e)
{
    if (count < 1) return eb_fail(e, "shards: the count must be at least 1, got %d", count);
    if (n == 0) return 0;
    struct weighted *w = eb_calloc((size_t)n, sizeof *w, e);
    int64_t *load = eb_calloc((size_t)count, sizeof *load, e);
    if (!w || !load) { free(w); free(load); return -1; }
    for (int i = 0; i < n; i++) {
        w[i].key = keys[i];
        w[i].work = work[i] > 0 ? work[i] : 1;
        w[i].at = i;
    }
    /* A repeated key would make the split depend on the input order. */
    qsort(w, (size_t)n, sizeof *w, by_key);
    for (int i = 1; i < n; i++) {
        if (!strcmp(w[i].key, w[i - 1].key)) {
            eb_fail(e, "shards: run key %s appears twice", w[i].key);
            free(w);
            free(load);
            return -1;
        }
    }
    qsort(w, (size_t)n, sizeof *w, heavier_first);
    for (int i = 0; i < n; i++) {
        int best = 0;
        for (int s = 1; s < count; s++)
            if (load[s] < load[best]) best = s;
        load[best] += w[i].work;
        shard_of[w[i].at] = best + 1;
    }
    free(w);
    free(load);
    return 0;
}

int shard_assign_sweep(const struct sweep *s, int count, int **shard_of, struct eb_err *e)
{
    *shard_of = NULL;
    int n = s->n;
    const char **keys = eb_calloc((size_t)(n ? n : 1), sizeof *keys, e);
    int64_t *work = eb_calloc((size_t)(n ? n : 1), sizeof *work, e);
    int *of = eb_calloc((size_t)(n ? n : 1), sizeof *of, e);
    int rc = -1;
    if (!keys || !work || !of) goto done;
    for (int i = 0; i < n; i++) {
        keys[i] = s->pts[i].run_key;
        work[i] = shard_point_work(s->cfg, &s->pts[i]);
    }
    if (shard_assign(keys, work, n, count, of, e) != 0) goto done;
    *shard_of = of;
    of = NULL;
    rc = 0;
done:
    free(keys);
    free(work);
    free(of);
    return rc;
}

int shard_view(const struct sweep *s, int index, int count, struct sweep *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    out->cfg = s->cfg;
    if (index < 1 || index > count)
        return eb_fail(e, "shard %d/%d: the index must be in [1, %d]", index, count, count);
    int *of = NULL;
    if (shard_assign_sweep(s, count, &of, e) != 0) return -1;
    out->pts = eb_calloc((size_t)(s->n ? s->n : 1), sizeof *out->pts, e);
    if (!out->pts) { free(of); return -1; }
    for (int i = 0; i < s->n; i++)
        if (of[i] == index) out->pts[out->n++] = s->pts[i];
    free(of);
    return 0;
}

void shard_view_free(struct sweep *v)
{
    free(v->pts);
    memset(v, 0, sizeof *v);
}

/* mkdir -p for a relative or absolute path. */
static int make_dirs(const char *path, struct eb_err *e)
{
    char buf[4096];
    if (strlen(path) >= sizeof buf) return eb_fail(e, "%s: path too long", path);
    strcpy(buf, path);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || !*p) {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return eb_fail(e, "%s: cannot create the directory: %s", buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    return 0;
}

int shard_job_dir(const char *config_name, char *out, size_t cap, int create, struct eb_err *e)
{
    /* The config name becomes one path component. */
    char name[256];
    size_t n = 0;
    for (const char *c = config_name; *c && n + 1 < sizeof name; c++) {
        int plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                    (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || (*c == '.' && n > 0);
        name[n++] = plain ? *c : '_';
    }
    name[n] = '\0';
    if (!n) return eb_fail(e, "shards: the config has an empty name");
    if ((size_t)snprintf(out, cap, "results/slurm/%s", name) >= cap)
        return eb_fail(e, "shards: path too long for config '%s'", config_name);
    return create ? make_dirs(out, e) : 0;
}

int shard_default_db(const char *config_name, int index, int count, char *out, size_t cap,
                     int create, struct eb_err *e)
{
    char dir[4096];
    if (shard_job_dir(config_name, dir, sizeof dir, create, e) != 0) return -1;
    if ((size_t)snprintf(out, cap, "%s/shard-%d-of-%d.db", dir, index, count) >= cap)
        return eb_fail(e, "shards: path too long for config '%s'", config_name);
    return 0;
}
