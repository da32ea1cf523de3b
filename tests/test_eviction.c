/* test_eviction.c - eviction invariants on real models (the tiny fixtures,
 * and SmolLM2 when present): a budget that never binds leaves every policy's
 * greedy output equal to FullKV's; a keep-everything compaction every step
 * changes nothing; keep-sets are validated; positions survive compaction;
 * triggers fall where the spec puts them; 1,000 decode steps at budget 64
 * never exceed B + 128 slots and return to B after each compression. */
#include "test.h"
#include "test_util.h"

static struct backend *be;

#define SMOL_PATH "models/SmolLM2-135M-Instruct.Q4_1.gguf"
static const char *POLICIES[] = {"fullkv", "streamingllm", "h2o", "h2o-rkv", "snapkv",
                                 "snapkv-decode", "rkv", "rkv-code"};
enum { N_POLICIES = sizeof POLICIES / sizeof POLICIES[0] };

static int *tiny_prompt(const char *model, int which, int *n)
{
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/models/%s/golden.json", model);
    *n = 0;
    cJSON *j = read_json(path);
    if (!j) return NULL;
    int *ids = json_ints(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "prompts"), which), n);
    cJSON_Delete(j);
    return ids;
}

/* Deterministic pseudo-random prompt of valid ids. */
static int *long_prompt(int n, int vocab, unsigned salt)
{
    int *ids = malloc((size_t)n * sizeof *ids);
    unsigned x = 2166136261u ^ salt;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        ids[i] = 3 + (int)((x >> 8) % (unsigned)(vocab - 3));
    }
    return ids;
}

/* Generate greedily from one prompt; with a policy when spec != NULL.  The
 * tokens are returned (malloc'd); stats and inner hooks optional. */
static int *run(const struct model *m, const int *prompt, int n_prompt, int max_new,
                const char *spec, int budget, const struct gen_hooks *inner,
                struct policy_glue_stats *gst, int *n_out, char *err, size_t errn)
{
    struct gen_request req = {.prompt = prompt, .n_prompt = n_prompt, .max_new = max_new,
                              .sampling = sampler_params_greedy()};
    struct gen_options opt = {0};
    opt.ignore_eos = 1;
    opt.n_ctx = n_prompt + max_new + 8;
    opt.prefill_chunk = 16; /* several prefill chunks: the query ring spans them */
    struct gen_result res;
    struct eb_err e = {0};
    struct session_policy sp = {0};
    struct gen_hooks hooks;
    int *out = NULL;
    if (spec) {
        if (open_test_policy(m, NULL, spec, budget, &sp, &e)) goto done;
        session_policy_hooks(&sp, inner, &hooks);
        opt.hooks = &hooks;
    } else if (inner) {
        opt.hooks = inner;
    }
    if (generate(m, &req, 1, &opt, &res, NULL, &e)) goto done;
    out = res.tokens;
    *n_out = res.n_tokens;
    if (sp.glue && gst) policy_glue_stats(sp.glue, gst);
done:
    if (!out) snprintf(err, errn, "%s", e.msg);
    session_policy_close(&sp);
    return out;
}

/* Budget >= prompt + max_new: nothing is ever evicted, output == FullKV's. */
static void check_unbound(const struct model *m, const int *prompt, int n_prompt, int max_new,
                          const char *label)
{
    char err[512];
    int n_ref = 0, n = 0;
    int *ref = run(m, prompt, n_prompt, max_new, NULL, 0, NULL, NULL, &n_ref, err, sizeof err);
    CHECK_MSG(ref != NULL, "%s: %s", label, err);
    if (!ref) return;
    int budget = n_prompt + max_new > 40 ? n_prompt + max_new : 40;
    for (int i = 0; i < N_POLICIES; i++) {
        struct policy_glue_stats st;
        int *got = run(m, prompt, n_prompt, max_new, POLICIES[i], budget, NULL, &st, &n, err,
                       sizeof err);
        CHECK_MSG(got != NULL, "%s %s: %s", label, POLICIES[i], err);
        if (!got) continue;
        CHECK_MSG(same_ints(ref, n_ref, got, n), "%s: %s with budget %d differs from FullKV", label,
                  POLICIES[i], budget);
        CHECK_MSG(st.evicted_slots == 0 && st.compressions == 0, "%s: %s evicted %ld slots",
                  label, POLICIES[i], st.evicted_slots);
        CHECK(st.steps == max_new);
        free(got);
    }
    free(ref);
}

static void test_unbound_budget_tiny(void)
{
    const char *models[] = {"tiny-llama", "tiny-qwen2", "tiny-qwen3"};
    int any = 0;
    for (int i = 0; i < 3; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/fixtures/models/%s/model.gguf", models[i]);
        struct model *m = open_model_on(be, path);
        if (!m) continue;
        any = 1;
        int n;
        int *prompt = tiny_prompt(models[i], 2, &n);
        if (prompt) check_unbound(m, prompt, n, 48, models[i]);
        free(prompt);
        model_free(m);
    }
    if (!any) SKIP("no tiny model fixtures");
}

static void test_unbound_budget_smollm2(void)
{
    struct model *m = open_model_on(be, SMOL_PATH);
    if (!m) SKIP("%s not present (make deps)", SMOL_PATH);
    int prompt[] = {1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519,
                    28, 7018, 411, 407, 19712, 8182, 2, 198, 1, 4093, 198, 1780, 314, 216, 33,
                    34, 26, 39, 47, 19842, 13099, 30, 2, 198, 1, 520, 9531, 198};
    check_unbound(m, prompt, (int)(sizeof prompt / sizeof prompt[0]), 8, "smollm2");
    model_free(m);
}

/* ---- a test-only policy: every step, keep everything (or a broken set) ---- */

enum { MODE_KEEP_ALL = 0, MODE_DUPLICATE = 1, MODE_OUT_OF_RANGE = 2, MODE_FAIL_OBSERVE = 3 };
struct test_policy {
    int mode;
    long attn_calls;
};

static int tp_create(const struct policy_params *p, const struct policy_model *m, void **self,
                     struct policy_info *info, struct eb_err *e)
{
    (void)p; (void)m; (void)self; (void)info; (void)e;
    return 0;
}
static void tp_destroy(void *self)
{
    (void)self;
}
static int tp_observe_attn(void *self, int seq, const struct attn_view *a, struct eb_err *e)
{
    (void)seq; (void)a;
    struct test_policy *t = self;
    /* an observe hook's error stops the forward at once, with its message */
    long k = t->attn_calls++;
    if (t->mode == MODE_FAIL_OBSERVE && k == 4) return eb_fail(e, "observe failed at call %ld", k);
    return 0;
}
static int tp_select(void *self, int seq, const struct cache_view *cv, int budget,
                     struct keep_set *out, struct eb_err *e)
{
    (void)seq; (void)budget; (void)e;
    const struct test_policy *t = self;
    for (int l = 0; l < cv->n_layer; l++)
        for (int h = 0; h < cv->n_kv; h++) {
            int len = cache_view_len(cv, l, h), *keep = keep_set_head(out, l, h);
            for (int i = 0; i < len; i++) keep[i] = len - 1 - i; /* any order is allowed */
            if (t->mode == MODE_DUPLICATE && len > 2) keep[1] = keep[0];
            if (t->mode == MODE_OUT_OF_RANGE && l == cv->n_layer - 1) keep[0] = len;
            out->n_keep[l * cv->n_kv + h] = len;
        }
    return 0;
}
static const struct policy_ops TEST_OPS = {
    .name = "test-keep-all", .create = tp_create, .destroy = tp_destroy,
    .observe_attn = tp_observe_attn, .select = tp_select};

static int *run_test_policy(const struct model *m, const int *prompt, int n, int max_new,
                            int mode, long *attn_calls, char *err, size_t errn, int *n_out)
{
    struct test_policy tp = {mode, 0};
    struct policy p = {.name = "test-keep-all", .ops = &TEST_OPS, .self = &tp, .spec = "test-keep-all"};
    p.info = (struct policy_info){.needs = POLICY_NEED_ATTN_PROBS | POLICY_NEED_RECENT_Q,
                                  .q_window = 4, .schedule = POLICY_EVERY_STEP};
    struct policy_glue *g = NULL;
    struct eb_err e = {0};
    int *out = NULL;
    if (policy_glue_create(&p, 1 << 20, m, &g, &e)) {
        snprintf(err, errn, "%s", e.msg);
        return NULL;
    }
    struct gen_hooks hooks;
    policy_glue_hooks(g, NULL, &hooks);
    struct gen_request req = {.prompt = prompt, .n_prompt = n, .max_new = max_new,
                              .sampling = sampler_params_greedy()};
    struct gen_options opt = {0};
    opt.ignore_eos = 1;
    opt.n_ctx = n + max_new + 8;
    opt.hooks = &hooks;
    struct gen_result res;
    if (generate(m, &req, 1, &opt, &res, NULL, &e) == 0) {
        out = res.tokens;
        *n_out = res.n_tokens;
    } else {
        snprintf(err, errn, "%s", e.msg);
    }
    *attn_calls = tp.attn_calls;
    policy_glue_free(g);
    return out;
}

static void test_keep_everything_and_validation(void)
{
    struct model *m = open_model_on(be, "tests/fixtures/models/tiny-llama/model.gguf");
    if (!m) SKIP("tiny-llama fixture missing");
    int n;
    int *prompt = tiny_prompt("tiny-llama", 1, &n);
    char err[512];
    int n_ref = 0, n_got = 0;
    long calls = 0;
    int *ref = run(m, prompt, n, 40, NULL, 0, NULL, NULL, &n_ref, err, sizeof err);
    int *got = run_test_policy(m, prompt, n, 40, MODE_KEEP_ALL, &calls, err, sizeof err, &n_got);
    CHECK_MSG(ref && got, "%s", err);
    if (ref && got) CHECK(same_ints(ref, n_ref, got, n_got));
    CHECK(calls == (long)40 * m->cfg.n_layer); /* one prefill forward + 39 decode forwards */
    free(got);

    got = run_test_policy(m, prompt, n, 10, MODE_DUPLICATE, &calls, err, sizeof err, &n_got);
    CHECK(got == NULL);
    CHECK_MSG(strstr(err, "duplicate keep index"), "%s", err);
    free(got);
    got = run_test_policy(m, prompt, n, 10, MODE_OUT_OF_RANGE, &calls, err, sizeof err, &n_got);
    CHECK(got == NULL);
    CHECK_MSG(strstr(err, "out of range"), "%s", err);
    free(got);
    got = run_test_policy(m, prompt, n, 10, MODE_FAIL_OBSERVE, &calls, err, sizeof err, &n_got);
    CHECK(got == NULL);
    CHECK_MSG(strstr(err, "test-keep-all: observe failed at call 4"), "%s", err);
    CHECK(calls == 5); /* no hook ran after the failing one */
    free(got);
    free(ref);
    free(prompt);
    model_free(m);
}

/* ---- cache watchers chained after the glue ---- */

struct watch {
    int budget, divide, sinks;
    int score_order;      /* the policy leaves kept slots in score order, then its window */
    long compressions, violations, steps;
    int prev_len;
    char first_violation[256];
    size_t slot_bytes; /* K+V bytes of one slot in every (layer, kv head) */
};

static void violate(struct watch *w, const char *fmt, int a, int b)
{
    if (w->violations++ == 0) snprintf(w->first_violation, sizeof w->first_violation, fmt, a, b);
}

static int watch_step(void *ctx, int seq, int token, struct kvcache *c, struct eb_err *e)
{
    (void)seq; (void)token; (void)e;
    struct watch *w = ctx;
    w->steps++;
    int len0 = kvcache_len(c, 0, 0);
    int compressed = len0 < w->prev_len + 1 && w->steps > 1;
    for (int l = 0; l < c->n_layer; l++)
        for (int h = 0; h < c->n_kv; h++) {
            int len = kvcache_len(c, l, h);
            const int *pos = kvcache_positions(c, l, h);
            if (len != len0) violate(w, "heads hold %d and %d slots", len0, len);
            if (len > w->budget + 127) violate(w, "%d slots after a step (budget %d)", len, w->budget);
            if (pos[len - 1] != c->next_pos - 1)
                violate(w, "last slot at position %d, expected %d", pos[len - 1], c->next_pos - 1);
            for (int i = 1; i < len; i++) {
                if (!w->score_order && pos[i] <= pos[i - 1])
                    violate(w, "positions out of order at slot %d (%d)", i, pos[i]);
                for (int j = 0; w->score_order && j < i; j++)
                    if (pos[j] == pos[i]) violate(w, "position %d held twice (slot %d)", pos[i], i);
            }
            for (int i = 0; i < w->sinks && i < len; i++)
                if (pos[i] != i) violate(w, "sink slot %d holds position %d", i, pos[i]);
        }
    if (compressed) {
        w->compressions++;
        if (w->divide > 1 && (c->next_pos - 1) % w->divide != 0)
            violate(w, "compressed after position %d (divide_length %d)", c->next_pos - 1, w->divide);
        if (len0 != w->budget) violate(w, "compressed to %d slots, budget %d", len0, w->budget);
        size_t want = (size_t)w->budget * w->slot_bytes;
        if (c->bytes != want) violate(w, "KV bytes %d after a compression, expected %d",
                                      (int)c->bytes, (int)want);
    }
    w->prev_len = len0;
    return 0;
}

/* 1,000 decode steps at budget 64: the cache never exceeds B + 128 slots and
 * comes back to exactly B (and B slots' bytes) after every compression. */
static void test_thousand_steps(void)
{
    struct model *m = open_model_on(be, "tests/fixtures/models/tiny-llama/model.gguf");
    if (!m) SKIP("tiny-llama fixture missing");
    int n;
    int *prompt = tiny_prompt("tiny-llama", 0, &n);
    const char *specs[] = {"streamingllm", "h2o-rkv", "snapkv-decode", "rkv", "h2o"};
    enum { B = 64, STEPS = 1000 };
    size_t slot_bytes = 2 * (size_t)m->cfg.head_dim * sizeof(float) * m->cfg.n_layer * m->cfg.n_head_kv;
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        int every_step = !strcmp(specs[i], "h2o");
        struct watch w = {.budget = B, .divide = every_step ? 1 : 128,
                          .sinks = !strcmp(specs[i], "streamingllm") ? 4 : 0,
                          .score_order = strcmp(specs[i], "streamingllm") && strcmp(specs[i], "h2o"),
                          .slot_bytes = slot_bytes, .prev_len = 1 << 30};
        struct gen_hooks inner = {.ctx = &w, .on_step = watch_step};
        struct policy_glue_stats st;
        char err[512];
        int n_out = 0;
        int *got = run(m, prompt, n, STEPS, specs[i], B, &inner, &st, &n_out, err, sizeof err);
        CHECK_MSG(got != NULL, "%s: %s", specs[i], err);
        free(got);
        if (!got) continue;
        CHECK_MSG(w.violations == 0, "%s: %ld violations, first: %s", specs[i], w.violations,
                  w.first_violation);
        CHECK_MSG(st.max_slots <= (every_step ? B + 1 : B + 128), "%s: %d slots", specs[i],
                  st.max_slots);
        CHECK_MSG(st.peak_kv_bytes <= (size_t)(B + 128) * slot_bytes, "%s: peak %zu bytes",
                  specs[i], st.peak_kv_bytes);
        /* prompt n, then one token per step: compressions at each boundary crossed */
        long want = every_step ? (n + STEPS - 1) - B : (n + STEPS - 1) / 128 - (B - 1) / 128;
        if (every_step) CHECK_MSG(st.compressions == want, "%s: %ld compressions, expected %ld",
                                  specs[i], st.compressions, want);
        else CHECK_MSG(st.compressions >= want - 1 && st.compressions <= want,
                       "%s: %ld compressions, expected about %ld", specs[i], st.compressions, want);
        CHECK(st.compressions == w.compressions);
        CHECK(st.steps == STEPS);
        printf("  %-14s %4ld compressions, %7.0f tokens evicted, max %d slots, peak %zu bytes, "
               "%.3f ms/step in the policy\n", specs[i], st.compressions, st.evicted_tokens,
               st.max_slots, st.peak_kv_bytes, 1e3 * st.policy_s / st.steps);
    }
    free(prompt);
    model_free(m);
}

/* A prompt >= B is compressed at prefill (last w prompt queries); SnapKV
 * (prefill only) never compresses again; a short prompt is left whole. */
static void test_prefill_compression(void)
{
    struct model *m = open_model_on(be, "tests/fixtures/models/tiny-qwen2/model.gguf");
    if (!m) SKIP("tiny-qwen2 fixture missing");
    int *prompt = long_prompt(100, m->cfg.n_vocab, 7);
    struct {
        const char *spec;
        int budget, max_new, len_after_prefill, len_end;
    } cases[] = {
        {"rkv", 40, 20, 40, 59},            /* 100 >= 40: 40 kept, then +19 (no boundary) */
        {"snapkv", 48, 60, 48, 48 + 59},    /* prefill only: grows afterwards */
        {"streamingllm", 120, 20, 100, 119} /* prompt < B: kept whole */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct watch w = {.budget = cases[i].budget, .divide = 128, .prev_len = 1 << 30,
                          .slot_bytes = 2 * (size_t)m->cfg.head_dim * sizeof(float) *
                                        m->cfg.n_layer * m->cfg.n_head_kv};
        struct gen_hooks inner = {.ctx = &w, .on_step = watch_step};
        struct policy_glue_stats st;
        char err[512];
        int n_out;
        int *got = run(m, prompt, 100, cases[i].max_new, cases[i].spec, cases[i].budget, &inner,
                       &st, &n_out, err, sizeof err);
        CHECK_MSG(got != NULL, "%s: %s", cases[i].spec, err);
        free(got);
        int first_len = cases[i].len_after_prefill;
        CHECK_MSG(st.compressions == (first_len < 100 ? 1 : 0), "%s: %ld compressions",
                  cases[i].spec, st.compressions);
        CHECK_MSG(w.prev_len == cases[i].len_end, "%s: %d slots at the end, expected %d",
                  cases[i].spec, w.prev_len, cases[i].len_end);
        CHECK_MSG(st.evicted_tokens == 100 - first_len, "%s: %.0f tokens evicted", cases[i].spec,
                  st.evicted_tokens);
    }
    free(prompt);
    model_free(m);
}

static void test_glue_errors_and_costs(void)
{
    struct model *m = open_model_on(be, "tests/fixtures/models/tiny-llama/model.gguf");
    if (!m) SKIP("tiny-llama fixture missing");
    struct policy_model pm = policy_model_of(m);
    struct policy *p;
    struct policy_glue *g;
    struct eb_err e;
    CHECK(policy_create("rkv", &pm, &p, &e) == 0);
    CHECK(policy_glue_create(p, 8, m, &g, &e) == -1 && strstr(e.msg, "window"));
    CHECK(policy_glue_create(p, 0, m, &g, &e) == -1);
    CHECK(policy_glue_create(p, -3, m, &g, &e) == -1);
    CHECK(policy_glue_create(p, 9, m, &g, &e) == 0);
    struct gen_hooks h;
    policy_glue_hooks(g, NULL, &h);
    CHECK(h.recent_q_window == 8 && h.model == NULL); /* queries only, no probabilities */
    policy_glue_free(g);
    policy_free(p);
    CHECK(policy_create("fullkv", &pm, &p, &e) == 0);
    CHECK(policy_glue_create(p, 0, m, &g, &e) == 0);
    policy_glue_hooks(g, NULL, &h);
    CHECK(h.recent_q_window == 0 && h.model == NULL); /* FullKV asks for nothing */
    policy_glue_free(g);
    policy_free(p);
    CHECK(policy_create("h2o", &pm, &p, &e) == 0);
    CHECK(policy_glue_create(p, 16, m, &g, &e) == 0);
    policy_glue_hooks(g, NULL, &h);
    CHECK(h.model && (h.model->needs & MODEL_NEED_ATTN_PROBS) && h.recent_q_window == 0);
    policy_glue_free(g);
    policy_free(p);
    model_free(m);
}

int main(void)
{
    be = backend_cpu_create(2);
    RUN(test_glue_errors_and_costs);
    RUN(test_keep_everything_and_validation);
    RUN(test_unbound_budget_tiny);
    RUN(test_prefill_compression);
    RUN(test_thousand_steps);
    RUN(test_unbound_budget_smollm2);
    be->destroy(be);
    return test_summary("eviction");
}
