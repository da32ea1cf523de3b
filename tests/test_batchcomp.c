/* test_batchcomp.c - the whole batch's compression (issue 33 item 3; TOVA,
 * h2o-rkv, SkipKV and H2O's device-side selection added since):
 * generate with a policy on the batched path (due sequences compressed
 * together at after_step with the backend's batched ops) must give the
 * per-sequence path's tokens and caches step for step, at batch 1 and 16,
 * and the backend calls of one compression must not depend on the batch
 * (and stay O(layers)).  The batched ops are also checked head by head
 * against the per-head primitives. */
#include "test.h"
#include "test_util.h"

#include <stdint.h>

#include "harness/exp/policy_glue.h"
#include "model/kvcache.h"
#include "policies/steering.h"
#include "tok_fixture.h"

static struct backend *be;
static enum kv_type run_type = KV_F32;
/* 1: a static left-padded batch (gen_options.n_pad), every prompt padded to
 * one length, as the papers' padded batches are. */
static int run_padded;
/* The sentence policies read token texts: the tiny model's ids are looked
 * up in a fixture tokenizer (its first 256 ids, delimiters among them). */
static struct tokenizer *run_tok;

#define TINY_PATH "tests/fixtures/models/tiny-llama/model.gguf"

enum { MAX_REQ = 16, MAX_NEW = 72, BUDGET = 32 };

/* What an inner on_step sees: a hash of every head's slots after the step's
 * compression, per (request, step). */
struct watch {
    uint64_t h[MAX_REQ][MAX_NEW + 1];
    int steps[MAX_REQ];
};

static int watch_step(void *ctx, int seq, int token, struct kvcache *c, struct eb_err *e)
{
    (void)e;
    struct watch *w = ctx;
    uint64_t h = 1469598103934665603ull ^ (uint64_t)token;
    for (int i = 0; i < c->n_layer * c->n_kv; i++) {
        h = (h ^ (uint64_t)c->len[i]) * 1099511628211ull;
        for (int j = 0; j < c->len[i]; j++)
            h = (h ^ (uint64_t)(uint32_t)c->pos[(size_t)i * c->capacity + j]) * 1099511628211ull;
    }
    if (seq >= 0 && seq < MAX_REQ && w->steps[seq] <= MAX_NEW) w->h[seq][w->steps[seq]++] = h;
    return 0;
}

struct outcome {
    struct gen_result res[MAX_REQ];
    struct watch w;
    struct policy_glue_stats st;
    long penalised, penalty_steps;  /* sentences the sentence penalty reached; sum of steps */
};

/* SkipKV's sentences that got a penalty, over the n requests. */
static void count_penalised(const struct session_policy *sp, int n, struct outcome *o)
{
    for (int seq = 0; seq < n; seq++) {
        struct sent_info *si = NULL;
        int ns = 0;
        struct eb_err e = {0};
        if (policy_trace_sentences(sp->pol, seq, &si, &ns, &e) != 0) continue;
        for (int i = 0; i < ns; i++)
            if (si[i].evicted_step >= 0) {
                o->penalised++;
                o->penalty_steps += si[i].evicted_step;
            }
        free(si);
    }
}

/* n requests of different lengths, all in flight at once; batched or not. */
static int run(const struct model *m, const char *spec, int n, int batched, struct outcome *o)
{
    memset(o, 0, sizeof *o);
    int *prompts[MAX_REQ] = {0}, n_pad[MAX_REQ] = {0};
    /* SkipKV's prompts hold a sentence every 6 tokens (the fixture
     * tokenizer's id 198 is "\\n"): the tiny model seldom writes one. */
    int delim = strncmp(spec, "skipkv", 6) == 0 ? 198 : -1;
    struct gen_request req[MAX_REQ];
    /* every prompt padded, the longest by one pad too, so a batched
     * compression is one of padded caches */
    int longest = run_padded ? 25 + 2 * (n > 4 ? 3 : n - 1) : 0;
    for (int i = 0; i < n; i++) {
        int len = run_padded ? 24 + 2 * (i % 4) : 24 + 5 * i;
        n_pad[i] = run_padded ? longest - len : 0;
        prompts[i] = malloc((size_t)(n_pad[i] + len) * sizeof *prompts[i]);
        unsigned x = 2166136261u ^ (unsigned)i;
        for (int t = 0; t < n_pad[i]; t++) prompts[i][t] = 0; /* pads: any id */
        for (int t = 0; t < len; t++) {
            x = x * 1664525u + 1013904223u;
            prompts[i][n_pad[i] + t] =
                delim >= 0 && t % 6 == 5 ? delim : (int)(x >> 8) % m->cfg.n_vocab;
        }
        req[i] = (struct gen_request){.prompt = prompts[i], .n_prompt = n_pad[i] + len,
                                      .max_new = MAX_NEW, .sampling = sampler_params_greedy()};
    }
    struct eb_err e = {0};
    struct session_policy sp = {0};
    struct gen_hooks inner = {.ctx = &o->w, .on_step = watch_step}, hooks;
    struct gen_options opt = {.max_live = n, .ignore_eos = 1, .kv_type = run_type,
                              .n_pad = run_padded ? n_pad : NULL};
    int rc = open_test_policy(m, run_tok, spec, BUDGET, &sp, &e);
    if (rc == 0) {
        policy_glue_set_batch(sp.glue, batched);
        session_policy_hooks(&sp, &inner, &hooks);
        opt.hooks = &hooks;
        rc = generate(m, req, n, &opt, o->res, NULL, &e);
        policy_glue_stats(sp.glue, &o->st);
        if (rc == 0) count_penalised(&sp, n, o);
    }
    if (rc) fprintf(stderr, "  %s: %s\n", spec, e.msg);
    session_policy_close(&sp);
    for (int i = 0; i < n; i++) free(prompts[i]);
    return rc;
}

static void outcome_free(struct outcome *o)
{
    for (int r = 0; r < MAX_REQ; r++) {
        free(o->res[r].tokens);
        o->res[r].tokens = NULL;
    }
}

static int same_run(const struct outcome *a, const struct outcome *b, int n)
{
    for (int i = 0; i < n; i++) {
        if (!same_ints(a->res[i].tokens, a->res[i].n_tokens, b->res[i].tokens,
                       b->res[i].n_tokens) ||
            a->w.steps[i] != b->w.steps[i] ||
            memcmp(a->w.h[i], b->w.h[i], (size_t)a->w.steps[i] * sizeof a->w.h[i][0]))
            return 0;
    }
    return a->st.compressions == b->st.compressions &&
           a->st.evicted_slots == b->st.evicted_slots && a->penalised == b->penalised &&
           a->penalty_steps == b->penalty_steps;
}

/* The policies the batched path covers, each at batch 1 and 16.  SkipKV
 * with tau = -1: every compared sentence is redundant, so the penalty
 * reaches many heads; steer=0 needs no steering vector. */
static const char *const batched_specs[] = {
    "rkv:divide_length=16",
    "snapkv:schedule=divide,divide_length=16,window=8",
    "streamingllm:divide_length=16",
    "h2o",
    "h2o:heavy_ratio=0.25",
    "knorm:divide_length=16",
    "keydiff:divide_length=16",
    "rkv:divide_length=16,cache_order=position,lambda=1",
    "tova:divide_length=16",
    "h2o-rkv:divide_length=16",
    "h2o-rkv:divide_length=16,cache_order=position,gqa=mean",
    "skipkv:steer=0,tau=-1,divide_length=16",
    "skipkv:steer=0,tau=-1,divide_length=16,cache_order=score,lambda=1",
    "skipkv:steer=0,sentence=0,divide_length=16",
    "lazyeviction:window=8,alpha=0.02",
    /* scores as a bf16 run stores them (many ties): rounded on the batched
     * path at the same steps as on the per-sequence one */
    "rkv:divide_length=16,score_dtype=bf16",
    "rkv:divide_length=16,score_dtype=bf16,lambda=1",
    "snapkv:schedule=divide,divide_length=16,window=8,score_dtype=bf16",
    "h2o-rkv:divide_length=16,score_dtype=bf16",
    /* kvpress's scorers that score on the host: a row per head, ranked on
     * the device */
    "random:divide_length=16",
    "random:divide_length=16,keep_prompt=0",
    "lagkv:divide_length=16,n_sink=2,lag_size=4",
    /* schedules as wrappers (scheduled.c): the inner's plan, its callbacks
     * on the inner (batch_plan.self) */
    "decoding:over=h2o,divide_length=16",
    "prefill-decoding:over=knorm,divide_length=16",
};
enum { N_BATCHED_SPECS = sizeof batched_specs / sizeof batched_specs[0] };

/* Sentence penalties expected (SkipKV with sentences). */
static int penalises(const char *spec)
{
    return strncmp(spec, "skipkv", 6) == 0 && !strstr(spec, "sentence=0");
}

static void test_batched_equals_per_sequence(void)
{
    struct model *m = open_model_on(be, TINY_PATH);
    if (!m) SKIP("tiny-llama fixture missing");
    static struct outcome one_b, one_s, many_b, many_s;
    for (int i = 0; i < N_BATCHED_SPECS; i++) {
        const char *spec = batched_specs[i];
        if (!run_tok && strncmp(spec, "skipkv", 6) == 0) {
            printf("  %s: skipped (no fixture tokenizer)\n", spec);
            continue;
        }
        int ok = run(m, spec, 1, 1, &one_b) == 0 && run(m, spec, 1, 0, &one_s) == 0 &&
                 run(m, spec, MAX_REQ, 1, &many_b) == 0 && run(m, spec, MAX_REQ, 0, &many_s) == 0;
        CHECK_MSG(ok, "%s: a run failed", spec);
        if (ok) {
            CHECK_MSG(same_run(&one_b, &one_s, 1), "%s: batch 1 differs from per sequence", spec);
            CHECK_MSG(same_run(&many_b, &many_s, MAX_REQ),
                      "%s: batch 16 differs from per sequence", spec);
            CHECK_MSG(many_b.st.compressions > MAX_REQ, "%s: %ld compressions", spec,
                      many_b.st.compressions);
            CHECK_MSG(one_b.st.batch_compressions > 0 && many_b.st.batch_compressions > 0 &&
                      one_s.st.batch_compressions == 0,
                      "%s: %ld / %ld batched compressions", spec, one_b.st.batch_compressions,
                      many_b.st.batch_compressions);
            if (penalises(spec))
                CHECK_MSG(many_b.penalised > 0, "%s: no sentence was penalised", spec);
        }
        outcome_free(&one_b), outcome_free(&one_s), outcome_free(&many_b), outcome_free(&many_s);
    }
    model_free(m);
}

/* A 16-bit cache: the batched ops widen the keys as the per-head path does. */
static void test_f16_cache(void)
{
    struct model *m = open_model_on(be, TINY_PATH);
    if (!m) SKIP("tiny-llama fixture missing");
    static struct outcome b, s;
    run_type = KV_F16;
    const char *specs[] = {"rkv:divide_length=16", "knorm:divide_length=16",
                           "tova:divide_length=16", "h2o-rkv:divide_length=16", "h2o"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        int ok = run(m, specs[i], MAX_REQ, 1, &b) == 0 && run(m, specs[i], MAX_REQ, 0, &s) == 0;
        CHECK_MSG(ok && same_run(&b, &s, MAX_REQ) && b.st.batch_compressions > 0,
                  "%s: f16 batch 16 differs from per sequence", specs[i]);
        outcome_free(&b), outcome_free(&s);
    }
    run_type = KV_F32;
    model_free(m);
}

/* A static left-padded batch: the pads are masked in the window scores and
 * the redundancy and ranked by the scorer's pad rule on the batched path as
 * on the per-sequence one, so the runs agree step for step; so are those
 * whose heads share a layer's score (TOVA: the last query's attention;
 * h2o-rkv: the heads' mean of their window scores). */
static void test_padded(void)
{
    struct model *m = open_model_on(be, TINY_PATH);
    if (!m) SKIP("tiny-llama fixture missing");
    static struct outcome b, s;
    run_padded = 1;
    const char *specs[] = {"rkv:divide_length=16", "snapkv:schedule=divide,divide_length=16,window=8",
                           "streamingllm:divide_length=16", "h2o", "h2o:pad_policy=evict-first",
                           "knorm:divide_length=16", "keydiff:divide_length=16",
                           "random:divide_length=16", "skipkv:steer=0,tau=-1,divide_length=16",
                           "skipkv:steer=0,tau=-1,divide_length=16,pad_policy=evict-first",
                           "tova:divide_length=16", "h2o-rkv:divide_length=16",
                           "h2o-rkv:divide_length=16,pad_policy=keep,gqa=mean"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        if (!run_tok && strncmp(specs[i], "skipkv", 6) == 0) continue;
        int ok = run(m, specs[i], MAX_REQ, 1, &b) == 0 && run(m, specs[i], MAX_REQ, 0, &s) == 0;
        CHECK_MSG(ok, "%s: a padded run failed", specs[i]);
        if (ok) {
            CHECK_MSG(same_run(&b, &s, MAX_REQ), "%s: padded batch differs from per sequence",
                      specs[i]);
            CHECK_MSG(s.st.compressions > MAX_REQ, "%s: %ld compressions", specs[i],
                      s.st.compressions);
            CHECK_MSG(b.st.batch_compressions > 0,
                      "%s: %ld batched compressions of padded caches", specs[i],
                      b.st.batch_compressions);
        }
        outcome_free(&b), outcome_free(&s);
    }
    run_padded = 0;
    model_free(m);
}

/* Backend calls per batched compression of run(spec, n, batched = 1), or 0. */
static unsigned long long calls_per(struct model *m, const char *spec, int n)
{
    static struct outcome o;
    unsigned long long per = 0;
    if (run(m, spec, n, 1, &o) == 0 && o.st.batch_compressions > 0 &&
        o.st.compress_calls % o.st.batch_compressions == 0)
        per = o.st.compress_calls / o.st.batch_compressions;
    outcome_free(&o);
    return per;
}

/* Padded caches cost one call more per compression, whatever the batch:
 * the one upload of the units' pad flags. */
static void test_padded_calls(void)
{
    struct model *m = open_model_on(be, TINY_PATH);
    if (!m) SKIP("tiny-llama fixture missing");
    const char *specs[] = {"rkv:divide_length=16", "tova:divide_length=16", "h2o"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        unsigned long long plain = calls_per(m, specs[i], MAX_REQ);
        run_padded = 1;
        unsigned long long one = calls_per(m, specs[i], 1), many = calls_per(m, specs[i], MAX_REQ);
        run_padded = 0;
        CHECK_MSG(plain > 0 && one == plain + 1 && many == plain + 1,
                  "%s: %llu calls per compression unpadded, %llu / %llu padded at batch 1 / 16",
                  specs[i], plain, one, many);
    }
    model_free(m);
}

/* N = backend calls / batched compression: the same at batch 1 and 16, and
 * at most a few per layer. */
static void test_calls_per_compression(void)
{
    struct model *m = open_model_on(be, TINY_PATH);
    if (!m) SKIP("tiny-llama fixture missing");
    const char *const *specs = batched_specs;
    static struct outcome one, many;
    for (int i = 0; i < N_BATCHED_SPECS; i++) {
        if (!run_tok && strncmp(specs[i], "skipkv", 6) == 0) continue;
        if (strncmp(specs[i], "keydiff", 7) == 0 || strncmp(specs[i], "lagkv", 5) == 0) {
            /* scorers with no backend op: each head's keys (lagkv: and values)
             * come to the host, a download per head; only the ranking is one call */
            printf("  %-62s scored per head on the host, ranked batched\n", specs[i]);
            continue;
        }
        int ok = run(m, specs[i], 1, 1, &one) == 0 && run(m, specs[i], MAX_REQ, 1, &many) == 0;
        CHECK_MSG(ok, "%s: a run failed", specs[i]);
        if (ok && one.st.batch_compressions > 0 && many.st.batch_compressions > 0) {
            unsigned long long n1 = one.st.compress_calls / one.st.batch_compressions;
            unsigned long long n16 = many.st.compress_calls / many.st.batch_compressions;
            CHECK_MSG(one.st.compress_calls % one.st.batch_compressions == 0 &&
                      many.st.compress_calls % many.st.batch_compressions == 0 && n1 == n16,
                      "%s: %llu calls over %ld compressions at batch 1, %llu over %ld at 16",
                      specs[i], one.st.compress_calls, one.st.batch_compressions,
                      many.st.compress_calls, many.st.batch_compressions);
            CHECK_MSG(n1 <= 2 * (unsigned long long)m->cfg.n_layer + 8, "%s: %llu calls",
                      specs[i], n1);
            printf("  %-62s backend calls per compression: %llu (batch 1 and 16)\n",
                   specs[i], n1);
        } else if (ok) {
            CHECK_MSG(0, "%s: no batched compression", specs[i]);
        }
        outcome_free(&one), outcome_free(&many);
    }
    model_free(m);
}

int main(void)
{
    char why[1024];
    run_tok = tok_fixture_load("smollm2", why, sizeof why);
    if (!run_tok) printf("  skipkv runs skipped: %s\n", why);
    be = backend_count_create(backend_cpu_create(2));
    RUN(test_batched_equals_per_sequence);
    RUN(test_f16_cache);
    RUN(test_padded);
    RUN(test_padded_calls);
    RUN(test_calls_per_compression);
    be->destroy(be);
    if (run_tok) tokenizer_free(run_tok);
    return test_summary("batchcomp");
}
