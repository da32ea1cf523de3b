/* test_bench_long.c - the pieces of the long-context benchmarks that need no
 * model: a cache filled by repeating its K/V (kvcache_fill_repeat), and the
 * bench table with its views and migration. */
#include "test.h"

#include <unistd.h>

#include "harness/store/store.h"
#include "test_util.h"
#include "kernels/backend.h"
#include "model/kvcache.h"

enum { L = 2, KV = 2, HD = 4, CAP = 12 };

static struct backend *be;

static float tag(int which, int layer, int head, int pos, int ch)
{
    return (float)(which * 200 + layer * 50 + head * 20 + pos) + 0.25f * (float)ch; /* exact in f16 */
}

/* Append n tokens (values tagged by position) to every layer of c. */
static int append(struct kvcache *c, int n, int n_pad)
{
    struct eb_err e;
    float hk[CAP * KV * HD], hv[CAP * KV * HD];
    float *dk = be->alloc(be, (size_t)n * KV * HD), *dv = be->alloc(be, (size_t)n * KV * HD);
    int rc = 0;
    for (int l = 0; l < L && rc == 0; l++) {
        for (int t = 0; t < n; t++)
            for (int h = 0; h < KV; h++)
                for (int ch = 0; ch < HD; ch++) {
                    hk[(t * KV + h) * HD + ch] = tag(0, l, h, t, ch);
                    hv[(t * KV + h) * HD + ch] = tag(1, l, h, t, ch);
                }
        be->upload(be, dk, hk, (size_t)n * KV * HD);
        be->upload(be, dv, hv, (size_t)n * KV * HD);
        rc = kvcache_append_pads(c, l, dk, dv, n, n_pad, &e);
    }
    if (rc == 0) kvcache_advance(c, n);
    be->free(be, dk);
    be->free(be, dv);
    return rc;
}

/* Slot j of every head holds the K/V of prompt token j % n0 at position j. */
static void check_filled(struct kvcache *c, int n0, int n)
{
    for (int l = 0; l < L; l++)
        for (int h = 0; h < KV; h++) {
            CHECK(kvcache_len(c, l, h) == n);
            const float *k = kvcache_rows_f32(c, 0, l, h);
            float hk[CAP * HD], hv[CAP * HD];
            be->download(be, hk, k, (size_t)n * HD);
            be->download(be, hv, kvcache_rows_f32(c, 1, l, h), (size_t)n * HD);
            const int *pos = kvcache_positions(c, l, h);
            for (int j = 0; j < n; j++) {
                CHECK(pos[j] == j);
                CHECK(kvcache_pads(c, l, h)[j] == 0);
                for (int ch = 0; ch < HD; ch++) {
                    CHECK(hk[j * HD + ch] == tag(0, l, h, j % n0, ch));
                    CHECK(hv[j * HD + ch] == tag(1, l, h, j % n0, ch));
                }
            }
        }
}

static void fill_type(enum kv_type type)
{
    struct eb_err e;
    struct kvcache *c;
    CHECK(kvcache_create(be, L, KV, HD, CAP, type, &c, &e) == 0);
    CHECK(append(c, 3, 0) == 0);
    size_t slot = 2 * (size_t)HD * kv_type_bytes(type) * L * KV;
    CHECK(kvcache_fill_repeat(c, 10, &e) == 0);
    CHECK(c->next_pos == 10);
    CHECK(c->bytes == 10 * slot && c->peak_bytes == 10 * slot);
    check_filled(c, 3, 10);
    /* The sequence continues after the filled slots. */
    CHECK(append(c, 1, 0) == 0);
    CHECK(kvcache_len(c, 1, 1) == 11 && kvcache_positions(c, 1, 1)[10] == 10);
    /* Beyond the capacity: refused, the cache unchanged. */
    CHECK(kvcache_fill_repeat(c, CAP + 1, &e) == -1);
    CHECK(strstr(e.msg, "cannot fill") != NULL);
    CHECK(kvcache_len(c, 0, 0) == 11);
    /* Filling to no more than the length is nothing. */
    CHECK(kvcache_fill_repeat(c, 5, &e) == 0 && kvcache_len(c, 0, 0) == 11);
    kvcache_free(c);
}

static void test_fill_repeat(void)
{
    fill_type(KV_F32);
    fill_type(KV_F16);
}

static void test_fill_bad(void)
{
    struct eb_err e;
    struct kvcache *c;
    CHECK(kvcache_create(be, L, KV, HD, CAP, KV_F32, &c, &e) == 0);
    CHECK(kvcache_fill_repeat(c, 4, &e) == -1 && strstr(e.msg, "empty") != NULL);
    kvcache_free(c);
    CHECK(kvcache_create(be, L, KV, HD, CAP, KV_F32, &c, &e) == 0);
    CHECK(kvcache_left_pad(c, 1, &e) == 0);
    CHECK(append(c, 3, 1) == 0);
    CHECK(kvcache_fill_repeat(c, 8, &e) == -1 && strstr(e.msg, "left-padded") != NULL);
    kvcache_free(c);
}

/* ---- the bench table ---- */

static char dir[64];

static double q_num(struct store *s, const char *sql)
{
    return store_query_number(s, sql);
}

static void row(struct store *s, const char *kind, const char *policy, int budget, int ctx,
                int batch, const char *status, double tok_s, double step_ms, double compr_ms)
{
    struct eb_err e;
    struct bench_record r;
    bench_record_init(&r);
    r.kind = kind;
    r.model = "m";
    r.device = "cpu";
    r.kv_type = "f16";
    r.policy = policy;
    r.fill = "repeat:gsm8k:64";
    r.status = status;
    r.budget = budget > 0 ? budget : STORE_NONE;
    r.context = ctx;
    r.batch_size = batch;
    r.n_new = 8;
    r.kv_cap_bytes = !strcmp(kind, "max_batch") ? 1000 : STORE_NONE;
    r.est_bytes = 500;
    if (!strcmp(status, "ok")) {
        r.decode_tok_s = tok_s;
        r.decode_step_ms = step_ms;
        if (budget > 0) r.compress_first_ms = compr_ms;
    } else {
        r.error = "needs more";
    }
    CHECK_MSG(store_write_bench(s, &r, &e) == 0, "%s", e.msg);
}

static void test_bench_views(void)
{
    char path[128];
    struct eb_err e;
    struct store *s;
    snprintf(path, sizeof path, "%s/views.db", dir);
    CHECK_MSG(store_open(path, &s, &e) == 0, "%s", e.msg);
    row(s, "context", "fullkv", 0, 8192, 8, "ok", 10.0, 800.0, 0);
    row(s, "context", "rkv", 1024, 8192, 8, "ok", 25.0, 320.0, 1600.0);
    row(s, "context", "rkv", 1024, 8192, 8, "ok", 30.0, 266.7, 1600.0); /* a rerun: latest wins */
    row(s, "context", "fullkv", 0, 16384, 8, "oom", 0, 0, 0);
    CHECK(q_num(s, "SELECT COUNT(*) FROM v_bench_context") == 3);
    CHECK_NEAR(q_num(s, "SELECT speedup FROM v_bench_context WHERE policy = 'rkv'"), 3.0, 1e-9);
    CHECK_NEAR(q_num(s, "SELECT compress_in_fullkv_steps FROM v_bench_context WHERE policy = 'rkv'"),
               2.0, 1e-9);
    CHECK(q_num(s, "SELECT COUNT(*) FROM v_bench_context WHERE status = 'oom' AND "
                   "decode_tok_s IS NULL AND est_bytes = 500") == 1);
    row(s, "max_batch", "fullkv", 0, 4096, 1, "ok", 2.0, 500.0, 0);
    row(s, "max_batch", "fullkv", 0, 4096, 2, "ok", 3.0, 666.0, 0);
    row(s, "max_batch", "fullkv", 0, 4096, 3, "oom", 0, 0, 0);
    CHECK(q_num(s, "SELECT MAX(max_ok_batch_size) FROM v_bench_max_batch") == 2);
    /* A row without its identity is refused. */
    struct bench_record bad;
    bench_record_init(&bad);
    CHECK(store_write_bench(s, &bad, &e) == -1);
    store_close(s);
}

/* A version-4 database (no bench table) gets the table and views when opened for writing. */
static void test_bench_migration(void)
{
    char path[128];
    struct eb_err e;
    struct store *s;
    snprintf(path, sizeof path, "%s/old.db", dir);
    CHECK_MSG(store_open(path, &s, &e) == 0, "%s", e.msg);
    CHECK(store_query(s, "DROP VIEW v_bench_context; DROP VIEW v_bench_max_batch; "
                         "DROP TABLE bench; PRAGMA user_version = 5", NULL, NULL, &e) == 0);
    store_close(s);
    CHECK_MSG(store_open(path, &s, &e) == 0, "%s", e.msg);
    CHECK(q_num(s, "PRAGMA user_version") == STORE_SCHEMA_VERSION);
    CHECK(q_num(s, "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('bench', "
                   "'v_bench_context', 'v_bench_max_batch')") == 3);
    row(s, "context", "fullkv", 0, 1024, 1, "ok", 5.0, 200.0, 0);
    CHECK(q_num(s, "SELECT COUNT(*) FROM v_bench_context") == 1);
    store_close(s);
}

int main(void)
{
    be = backend_cpu_create(1);
    snprintf(dir, sizeof dir, "/tmp/eb_test_bench_XXXXXX");
    if (!be || !mkdtemp(dir)) return fprintf(stderr, "setup failed\n"), 1;
    RUN(test_fill_repeat);
    RUN(test_fill_bad);
    RUN(test_bench_views);
    RUN(test_bench_migration);
    be->destroy(be);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_summary("bench_long");
}
