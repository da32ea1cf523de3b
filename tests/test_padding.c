/* test_padding.c - left-padded batching: pad slots in the KV cache (flags,
 * positions, bytes, compaction), generation with left pads equal to the same
 * prompts unpadded (tiny fixtures, and SmolLM2 when present), and pads
 * counting against a policy's budget (R-KV with pad_policy=keep keeps them,
 * with evict-first evicts them first). */
#include "test.h"
#include "test_util.h"

#include "harness/exp/policy_glue.h"
#include "kernels/backend.h"
#include "model/generate.h"
#include "model/modelfile.h"
#include "policies/registry.h"

static struct backend *be;

static const char *TINY[] = {"tiny-llama", "tiny-llama3", "tiny-llama-tied", "tiny-qwen2",
                             "tiny-qwen3"};
#define SMOL_PATH "models/SmolLM2-135M-Instruct.Q4_1.gguf"

/* Deterministic pseudo-random prompt of ids in [3, vocab). */
static void fill_prompt(int *ids, int n, int vocab, unsigned salt)
{
    unsigned x = 2166136261u ^ salt;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        ids[i] = 3 + (int)((x >> 8) % (unsigned)(vocab - 3));
    }
}

static size_t token_bytes(const struct model *m)
{
    return (size_t)m->cfg.n_layer * m->cfg.n_head_kv * m->cfg.head_dim * 2 * sizeof(float);
}

/* ---- the cache ---- */

static void test_kvcache_pad_slots(void)
{
    enum { L = 2, KV = 2, HD = 4, CAP = 16, N = 6, P = 3 };
    struct kvcache *c = NULL, *plain = NULL;
    struct eb_err e = {0};
    CHECK(kvcache_create(be, L, KV, HD, CAP, KV_F32, &c, &e) == 0);
    CHECK(kvcache_create(be, L, KV, HD, CAP, KV_F32, &plain, &e) == 0);
    if (!c || !plain) return;
    CHECK(kvcache_pad_mask(plain, 0) == NULL); /* no pads: attention gets no mask */
    CHECK(kvcache_left_pad(c, P, &e) == 0);
    CHECK(c->next_pos == -P && c->left_pad == P);
    /* token t, head h, dim d holds 100 t + 10 h + d, so moved rows can be told apart */
    float host[N * KV * HD];
    for (int t = 0; t < N; t++)
        for (int h = 0; h < KV; h++)
            for (int d = 0; d < HD; d++) host[(t * KV + h) * HD + d] = (float)(100 * t + 10 * h + d);
    float *k = be->alloc(be, N * KV * HD), *v = be->alloc(be, N * KV * HD);
    be->upload(be, k, host, N * KV * HD);
    be->upload(be, v, host, N * KV * HD);
    CHECK(kvcache_append_pads(c, 0, k, v, N, N + 1, &e) == -1); /* more pads than tokens */
    for (int l = 0; l < L; l++) CHECK(kvcache_append_pads(c, l, k, v, N, P, &e) == 0);
    kvcache_advance(c, N);
    CHECK(c->next_pos == N - P); /* real tokens sit at 0, 1, 2; the next one at 3 */
    CHECK(kvcache_left_pad(c, 1, &e) == -1); /* only on an empty cache */
    /* pads take K+V bytes like tokens */
    CHECK(c->bytes == (size_t)N * L * KV * HD * 2 * sizeof(float));
    CHECK(kvcache_pad_mask(c, 1) == kvcache_pads(c, 1, 0));
    int ok = 1;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < KV; h++) {
            const int *pos = kvcache_positions(c, l, h);
            const unsigned char *pad = kvcache_pads(c, l, h);
            for (int t = 0; t < N; t++) ok &= pos[t] == t - P && pad[t] == (t < P);
        }
    CHECK_MSG(ok, "positions -3..2 with the first three slots flagged as pads");

    /* compaction carries the flags with the slots */
    int keep[3] = {4, 1, 2};
    CHECK(kvcache_compact(c, 1, 1, keep, 3, &e) == 3 * HD * 2 * (int64_t)sizeof(float));
    const int *pos = kvcache_positions(c, 1, 1);
    const unsigned char *pad = kvcache_pads(c, 1, 1);
    CHECK(kvcache_len(c, 1, 1) == 3);
    /* the slots land in keep order */
    CHECK(pos[0] == 1 && pos[1] == -2 && pos[2] == -1);
    CHECK(pad[0] == 0 && pad[1] == 1 && pad[2] == 1);
    float row[HD];
    be->download(be, row, kvcache_k(c, 1, 1), HD);
    CHECK(row[0] == 410.0f); /* token 4 of head 1 */
    /* other heads are untouched */
    CHECK(kvcache_pads(c, 1, 0)[3] == 0 && kvcache_pads(c, 0, 1)[2] == 1);
    be->free(be, k);
    be->free(be, v);
    kvcache_free(c);
    kvcache_free(plain);
}

/* ---- generation ---- */

/* Three prompts of different lengths, generated unpadded and then as one
 * static batch left-padded to the longest plus `extra` (so every one has
 * pads), prefilled in chunks of `chunk` (chunks that split the pads). */
static void check_padded_equals_unpadded(struct model *m, const char *label, int max_new,
                                         int chunk, int extra)
{
    enum { NB = 3 };
    int lens[NB] = {5, 11, 2}, maxlen = 11 + extra;
    int real[NB][64], padded[NB][80], n_pad[NB];
    int pad_id = m->cfg.n_eos > 0 ? m->cfg.eos_ids[0] : 0;
    struct gen_request ur[NB], pr[NB];
    for (int i = 0; i < NB; i++) {
        fill_prompt(real[i], lens[i], m->cfg.n_vocab, 17u * (unsigned)i + 1u);
        n_pad[i] = maxlen - lens[i];
        for (int t = 0; t < n_pad[i]; t++) padded[i][t] = pad_id;
        memcpy(padded[i] + n_pad[i], real[i], (size_t)lens[i] * sizeof(int));
        ur[i] = (struct gen_request){.prompt = real[i], .n_prompt = lens[i], .max_new = max_new,
                                     .sampling = sampler_params_greedy()};
        pr[i] = ur[i];
        pr[i].prompt = padded[i];
        pr[i].n_prompt = maxlen;
    }
    struct gen_options opt = {0};
    opt.ignore_eos = 1;
    opt.prefill_chunk = chunk;
    struct gen_result ures[NB], pres[NB];
    struct gen_stats ust, pst;
    struct eb_err e = {0};
    int urc = generate(m, ur, NB, &opt, ures, &ust, &e);
    CHECK_MSG(urc == 0, "%s unpadded: %s", label, e.msg);
    opt.n_pad = n_pad;
    int prc = generate(m, pr, NB, &opt, pres, &pst, &e);
    CHECK_MSG(prc == 0, "%s padded: %s", label, e.msg);
    if (urc || prc) {
        if (!urc) gen_results_free(ures, NB);
        if (!prc) gen_results_free(pres, NB);
        return;
    }
    size_t tb = token_bytes(m);
    for (int i = 0; i < NB; i++) {
        int same = ures[i].n_tokens == pres[i].n_tokens &&
                   memcmp(ures[i].tokens, pres[i].tokens,
                          (size_t)ures[i].n_tokens * sizeof(int)) == 0;
        CHECK_MSG(same, "%s: prompt %d (%d pads) generates differently when padded", label, i,
                  n_pad[i]);
        /* the pads are in the cache: its peak is larger by exactly their bytes */
        CHECK_MSG(pres[i].peak_kv_bytes == ures[i].peak_kv_bytes + (size_t)n_pad[i] * tb,
                  "%s: prompt %d peak %zu vs %zu + %d pads", label, i, pres[i].peak_kv_bytes,
                  ures[i].peak_kv_bytes, n_pad[i]);
    }
    CHECK(pst.prefill_tokens == (long)NB * maxlen);
    /* the memory estimate covers the pads */
    CHECK(pst.est_bytes > ust.est_bytes);
    gen_results_free(ures, NB);
    gen_results_free(pres, NB);
}

static void test_padded_generation_tiny(void)
{
    for (size_t i = 0; i < sizeof TINY / sizeof TINY[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/fixtures/models/%s/model.gguf", TINY[i]);
        struct model *m = open_model_on(be, path);
        CHECK_MSG(m != NULL, "cannot load %s", path);
        if (!m) continue;
        check_padded_equals_unpadded(m, TINY[i], 24, 512, 4);
        check_padded_equals_unpadded(m, TINY[i], 8, 3, 9); /* pads split over chunks */
        model_free(m);
    }
}

static void test_padded_generation_smollm2(void)
{
    FILE *f = fopen(SMOL_PATH, "rb");
    if (!f) {
        SKIP("%s absent", SMOL_PATH);
        return;
    }
    fclose(f);
    struct model *m = open_model_on(be, SMOL_PATH);
    CHECK(m != NULL);
    if (!m) return;
    check_padded_equals_unpadded(m, "smollm2", 12, 512, 6);
    model_free(m);
}

static void test_bad_pads(void)
{
    struct model *m = open_model_on(be, "tests/fixtures/models/tiny-llama/model.gguf");
    CHECK(m != NULL);
    if (!m) return;
    int ids[4] = {5, 6, 7, 8}, n_pad[1] = {4};
    struct gen_request r = {.prompt = ids, .n_prompt = 4, .max_new = 2,
                            .sampling = sampler_params_greedy()};
    struct gen_options opt = {0};
    opt.n_pad = n_pad;
    struct gen_result res;
    struct eb_err e = {0};
    CHECK(generate(m, &r, 1, &opt, &res, NULL, &e) == -1); /* no real token left */
    CHECK(strstr(e.msg, "pads") != NULL);
    n_pad[0] = -1;
    CHECK(generate(m, &r, 1, &opt, &res, NULL, &e) == -1);
    model_free(m);
}

/* ---- pads against a policy's budget ---- */

struct pad_watch {
    int first;               /* the first step's cache has been looked at */
    int min_len, max_len;    /* slots per head after the prefill selection */
    int min_pads, max_pads;  /* pad slots per head then */
    size_t bytes;
};

static int watch_step(void *ctx, int seq, int token, struct kvcache *c, struct eb_err *e)
{
    (void)seq; (void)token; (void)e;
    struct pad_watch *w = ctx;
    if (w->first) return 0;
    w->first = 1;
    w->min_len = w->min_pads = 1 << 30;
    for (int l = 0; l < c->n_layer; l++)
        for (int h = 0; h < c->n_kv; h++) {
            int len = kvcache_len(c, l, h), pads = 0;
            const unsigned char *pad = kvcache_pads(c, l, h);
            for (int j = 0; j < len; j++) pads += pad[j];
            if (len < w->min_len) w->min_len = len;
            if (len > w->max_len) w->max_len = len;
            if (pads < w->min_pads) w->min_pads = pads;
            if (pads > w->max_pads) w->max_pads = pads;
        }
    w->bytes = c->bytes;
    return 0;
}

/* One sequence of n_real tokens behind n_pad pads under spec at budget. */
static int run_padded_policy(struct model *m, const char *spec, int budget, int n_real, int n_pad,
                      struct pad_watch *w, struct policy_glue_stats *gst)
{
    int ids[128];
    for (int t = 0; t < n_pad; t++) ids[t] = m->cfg.eos_ids[0];
    fill_prompt(ids + n_pad, n_real, m->cfg.n_vocab, 99u);
    struct gen_request r = {.prompt = ids, .n_prompt = n_pad + n_real, .max_new = 4,
                            .sampling = sampler_params_greedy()};
    struct gen_options opt = {0};
    opt.ignore_eos = 1;
    opt.n_pad = &n_pad;
    struct session_policy sp = {0};
    struct gen_hooks inner = {.ctx = w, .on_step = watch_step}, hooks;
    struct gen_result res;
    struct eb_err e = {0};
    int rc = -1;
    memset(w, 0, sizeof *w);
    if (open_test_policy(m, NULL, spec, budget, &sp, &e)) goto out;
    session_policy_hooks(&sp, &inner, &hooks);
    opt.hooks = &hooks;
    if (generate(m, &r, 1, &opt, &res, NULL, &e)) goto out;
    gen_results_free(&res, 1);
    policy_glue_stats(sp.glue, gst);
    rc = 0;
out:
    if (rc) fprintf(stderr, "  %s: %s\n", spec, e.msg);
    session_policy_close(&sp);
    return rc;
}

static void test_pads_count_against_budget(void)
{
    struct model *m = open_model_on(be, "tests/fixtures/models/tiny-qwen2/model.gguf");
    CHECK(m != NULL);
    if (!m) return;
    enum { B = 24, REAL = 40, PADS = 12 };
    size_t tb = token_bytes(m);
    struct pad_watch w;
    struct policy_glue_stats gst;

    /* keep: every pad stays, so only B - PADS slots hold real tokens */
    CHECK(run_padded_policy(m, "rkv:pad_policy=keep", B, REAL, PADS, &w, &gst) == 0);
    CHECK(gst.compressions >= 1);
    CHECK_MSG(w.min_len == B && w.max_len == B, "slots %d..%d after prefill", w.min_len, w.max_len);
    CHECK_MSG(w.min_pads == PADS && w.max_pads == PADS, "pads kept %d..%d", w.min_pads, w.max_pads);
    CHECK(w.bytes == (size_t)B * tb);

    /* evict-first: the pads go before any real token */
    CHECK(run_padded_policy(m, "rkv:pad_policy=evict-first", B, REAL, PADS, &w, &gst) == 0);
    CHECK_MSG(w.min_len == B && w.max_len == B, "slots %d..%d after prefill", w.min_len, w.max_len);
    CHECK_MSG(w.max_pads == 0, "pads left %d", w.max_pads);

    /* a prompt below the budget is compressed at prefill once its pads push
     * the cache to the budget; unpadded it is not */
    CHECK(run_padded_policy(m, "rkv:pad_policy=keep", B, 18, 0, &w, &gst) == 0);
    CHECK(gst.compressions == 0 && w.max_len == 18);
    CHECK(run_padded_policy(m, "rkv:pad_policy=keep", B, 18, 8, &w, &gst) == 0);
    CHECK(gst.compressions == 1 && w.max_len == B && w.min_pads == 8);
    model_free(m);
}

int main(void)
{
    be = backend_cpu_create(1); /* results do not depend on the thread count */
    if (!be) {
        fprintf(stderr, "cannot create the CPU backend\n");
        return 1;
    }
    RUN(test_kvcache_pad_slots);
    RUN(test_padded_generation_tiny);
    RUN(test_padded_generation_smollm2);
    RUN(test_bad_pads);
    RUN(test_pads_count_against_budget);
    be->destroy(be);
    return test_summary("padding");
}
