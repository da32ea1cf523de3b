/* test_retention.c - the token-retention record (harness/exp/retention.h):
 *   - under StreamingLLM (the tiny-llama fixture, budget 64, 4 sinks) every
 *     recorded step is the one the policy's keep-set implies: at a compression
 *     the cache keeps the 4 sink positions and the newest 60, so every other
 *     position leaves at the first compression after it entered;
 *   - under R-KV and H2O (keep-sets chosen by scores) the record equals what
 *     the cache itself showed step by step (positions watched through a hook);
 *   - the blob survives encoding, the store and decoding; a version-4
 *     database gains the table when opened for writing, and is read as it is
 *     read-only; with the record off nothing is recorded. */
#include "test.h"
#include "test_util.h"

#include <stdint.h>
#include <unistd.h>

#include "harness/exp/retention.h"
#include "model/kvcache.h"

static struct backend *be;

#define TINY "tests/fixtures/models/tiny-llama/model.gguf"
#define MAXPOS 1400
#define MAXHEAD 64

/* What the cache held, watched after every step (after the policy's compaction). */
struct watch {
    int n_heads, steps, prev_next;
    unsigned char held[MAXPOS][MAXHEAD];
    uint32_t left[MAXPOS][MAXHEAD];   /* the step it was first missing; 0: never */
    int sinks_ok, window_ok, compressions;
};

static int watch_step(void *ctx, int seq, int token, struct kvcache *c, struct eb_err *e)
{
    (void)seq, (void)token, (void)e;
    struct watch *w = ctx;
    w->steps++;
    w->n_heads = c->n_layer * c->n_kv;
    for (int h = 0; h < w->n_heads && h < MAXHEAD; h++) {
        unsigned char now[MAXPOS] = {0};
        for (int i = 0; i < c->len[h]; i++) {
            int p = c->pos[(size_t)h * c->capacity + i];
            if (p >= 0 && p < MAXPOS) now[p] = 1;
        }
        for (int p = 0; p < c->next_pos && p < MAXPOS; p++) {
            int was_there = w->held[p][h] || p >= w->prev_next;
            if (!now[p] && was_there && !w->left[p][h]) w->left[p][h] = (uint32_t)w->steps;
            w->held[p][h] = now[p];
        }
    }
    w->prev_next = c->next_pos;
    return 0;
}

/* Generate n_new tokens from the fixture's first prompt under spec; fills
 * the record's blob for the sequence. */
static int generate_recorded(const struct model *m, const char *spec, int budget, int n_new,
                             int record, struct watch *w, struct retention_blob *b,
                             int *n_prompt)
{
    cJSON *j = read_json("tests/fixtures/models/tiny-llama/golden.json");
    int np = 0;
    int *prompt = j ? json_ints(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "prompts"), 0), &np) : NULL;
    cJSON_Delete(j);
    if (!prompt) return -1;
    *n_prompt = np;
    struct eb_err e = {0};
    struct session_policy sp = {0};
    struct gen_hooks inner = {.ctx = w, .on_step = watch_step}, hooks;
    struct gen_request req = {.prompt = prompt, .n_prompt = np, .max_new = n_new,
                              .sampling = sampler_params_greedy()};
    struct gen_options opt = {0};
    opt.ignore_eos = 1;
    opt.n_ctx = np + n_new + 8;
    struct gen_result res = {0};
    int rc = open_test_policy(m, NULL, spec, budget, &sp, &e);
    if (rc == 0) rc = policy_glue_record_retention(sp.glue, record, &e);
    if (rc == 0) {
        session_policy_hooks(&sp, &inner, &hooks);
        opt.hooks = &hooks;
        rc = generate(m, &req, 1, &opt, &res, NULL, &e);
    }
    struct retention *rec = rc == 0 ? policy_glue_retention(sp.glue) : NULL;
    memset(b, 0, sizeof *b);
    if (rec) rc = retention_encode(rec, 0, res.n_tokens, NULL, res.tokens, 0, b, &e);
    if (rc) fprintf(stderr, "  %s: %s\n", spec, e.msg);
    free(res.tokens);
    free(prompt);
    session_policy_close(&sp);
    return rc;
}

static uint32_t *decoded(const struct retention_blob *b)
{
    uint32_t *v = NULL;
    struct eb_err e = {0};
    size_t n = (size_t)b->n_layer * b->n_kv * b->n_positions;
    if (retention_decode_steps(b->steps, b->steps_len, n, &v, &e)) fprintf(stderr, "  %s\n", e.msg);
    return v;
}

/* The record equals what the cache showed, for every position and head. */
static void check_against_cache(const char *spec, const struct watch *w,
                                const struct retention_blob *b, const uint32_t *v)
{
    long mismatches = 0, evicted = 0;
    int heads = b->n_layer * b->n_kv;
    CHECK(heads == w->n_heads);
    for (int h = 0; h < heads; h++)
        for (int p = 0; p < b->n_positions && p < MAXPOS; p++) {
            uint32_t got = v[(size_t)h * b->n_positions + p];
            evicted += got != 0;
            if (got != w->left[p][h] && mismatches++ == 0)
                fprintf(stderr, "  %s: head %d position %d: recorded step %u, the cache lost it at %u\n",
                        spec, h, p, got, w->left[p][h]);
        }
    CHECK_MSG(mismatches == 0, "%s: %ld (position, head) records differ from the cache", spec,
              mismatches);
    CHECK_MSG(evicted == b->n_evicted_slots && evicted > 0, "%s: %ld evicted, blob says %lld",
              spec, evicted, (long long)b->n_evicted_slots);
}

static void test_streamingllm_keep_sets(void)
{
    struct model *m = open_model_on(be, TINY);
    if (!m) SKIP("tiny-llama fixture missing");
    static struct watch w;
    memset(&w, 0, sizeof w);
    struct retention_blob b;
    enum { B = 64, SINKS = 4, NEW = 600 };
    int np = 0;
    CHECK(generate_recorded(m, "streamingllm", B, NEW, 1, &w, &b, &np) == 0);
    uint32_t *v = b.steps ? decoded(&b) : NULL;
    CHECK(v != NULL);
    if (v) {
        check_against_cache("streamingllm", &w, &b, v);
        /* StreamingLLM's keep-set (its released code: sinks + the newest
         * B - sinks): a compression at step k, when the cache holds
         * positions < np + k - 1, evicts exactly the positions in
         * [SINKS, np + k - 1 - (B - SINKS)) not gone before, in every head */
        int heads = b.n_layer * b.n_kv, last = 0, prev_start = SINKS;
        long bad = 0, checked = 0;
        /* window start of the compression at step s: what it kept from */
#define WSTART(s) (np + (s) - 1 - (B - SINKS))
        for (int p = 0; p < b.n_positions; p++) {
            uint32_t s0 = v[p];
            for (int h = 1; h < heads; h++) bad += v[(size_t)h * b.n_positions + p] != s0;
            if (p < SINKS) { bad += s0 != 0; continue; }
            if (!s0) {
                /* never evicted: inside the last compression's window */
                bad += p < WSTART(b.max_step);
                continue;
            }
            if ((int)s0 != last) prev_start = last ? WSTART(last) : SINKS;
            /* outside the window of its compression, inside the previous one's */
            if (!(p < WSTART((int)s0) && p >= prev_start) && bad++ < 3)
                fprintf(stderr, "  position %d left at step %u (window from %d, previous %d)\n",
                        p, s0, WSTART((int)s0), prev_start);
            bad += (int)s0 < last;                 /* positions leave in order */
            last = (int)s0;
            checked++;
        }
#undef WSTART
        CHECK_MSG(bad == 0 && checked > 400, "streamingllm: %ld records off the keep-set rule "
                  "(%ld evicted positions)", bad, checked);
        CHECK(b.n_evicted_tokens == checked);
        CHECK(b.n_prompt == np && b.n_positions == np + NEW);
    }
    free(v);
    retention_blob_free(&b);
    model_free(m);
}

static void test_scored_policies(void)
{
    struct model *m = open_model_on(be, TINY);
    if (!m) SKIP("tiny-llama fixture missing");
    const char *specs[] = {"rkv", "h2o", "snapkv-decode"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        static struct watch w;
        memset(&w, 0, sizeof w);
        struct retention_blob b;
        int np = 0;
        CHECK(generate_recorded(m, specs[i], 48, 300, 1, &w, &b, &np) == 0);
        uint32_t *v = b.steps ? decoded(&b) : NULL;
        CHECK(v != NULL);
        if (v) check_against_cache(specs[i], &w, &b, v);
        printf("  %-14s %lld (position, head) evictions, %lld tokens gone from every head, "
               "%zu bytes compressed (%d positions x %d heads)\n", specs[i],
               (long long)b.n_evicted_slots, (long long)b.n_evicted_tokens, b.steps_len,
               b.n_positions, b.n_layer * b.n_kv);
        free(v);
        retention_blob_free(&b);
    }
    /* off: nothing recorded */
    static struct watch w;
    memset(&w, 0, sizeof w);
    struct retention_blob b;
    int np = 0;
    CHECK(generate_recorded(m, "rkv", 48, 100, 0, &w, &b, &np) == 0);
    CHECK(b.steps == NULL);
    model_free(m);
}

static char db_path[256];

/* Written with a run, read back through SQL; a version-4 file gains the table. */
static void test_store_and_migration(void)
{
    snprintf(db_path, sizeof db_path, "/tmp/eb_test_retention_%d.db", (int)getpid());
    unlink(db_path);
    struct store *st = NULL;
    struct eb_err e = {0};
    CHECK_MSG(store_open(db_path, &st, &e) == 0, "%s", e.msg);
    if (!st) return;
    unsigned char steps[] = {1, 2, 3, 4, 5}, tb[] = {9, 8};
    struct sample_retention r = {2, 1, 3, 4, 5, 1, 7, RETENTION_ENCODING, steps, sizeof steps,
                                 tb, sizeof tb};
    struct run_record run;
    run_record_init(&run);
    run.run_key = "k1", run.model = "m", run.dataset = "d", run.policy = "rkv";
    run.batch_size = 1, run.batching = "ragged", run.status = "ok";
    struct sample_record s[2];
    for (int i = 0; i < 2; i++) {
        sample_record_init(&s[i]);
        s[i].sample_idx = i, s[i].prompt_tokens = 3, s[i].gen_tokens = 1;
        s[i].finished = 1, s[i].correct = i;
    }
    s[1].retention = &r;
    CHECK_MSG(store_write_run(st, &run, s, 2, NULL, 0, &e) == 0, "%s", e.msg);
    CHECK(store_query_number(st, "select count(*) from retention") == 1);
    CHECK(store_query_number(st, "select n_evicted_slots from retention where sample_idx = 1") == 5);
    CHECK(store_query_number(st, "select length(steps) + length(token_bytes) from retention") == 7);
    CHECK(store_query_number(st, "select count(*) from retention r join samples s using "
                                 "(run_id, sample_idx) where s.correct = 1") == 1);
    /* make it a version-4 file (no retention table, no bench table of version 6) */
    CHECK(store_query(st, "DROP VIEW v_bench_context; DROP VIEW v_bench_max_batch; DROP TABLE bench; "
                          "DROP TABLE retention; PRAGMA user_version = 4", NULL, NULL, &e) == 0);
    store_close(st);
    st = NULL;
    CHECK_MSG(store_open_readonly(db_path, &st, &e) == 0, "%s", e.msg);
    if (st) {
        CHECK(store_query_number(st, "PRAGMA user_version") == 4);
        CHECK(store_query_number(st, "select count(*) from sqlite_master where name = "
                                     "'retention'") == 0);
        store_close(st);
        st = NULL;
    }
    CHECK_MSG(store_open(db_path, &st, &e) == 0, "%s", e.msg);
    if (st) {
        CHECK(store_query_number(st, "PRAGMA user_version") == STORE_SCHEMA_VERSION);
        CHECK(store_query_number(st, "select count(*) from retention") == 0);
        store_close(st);
    }
    unlink(db_path);
}

int main(void)
{
    be = backend_cpu_create(2);
    RUN(test_store_and_migration);
    RUN(test_streamingllm_keep_sets);
    RUN(test_scored_policies);
    be->destroy(be);
    return test_summary("retention");
}
