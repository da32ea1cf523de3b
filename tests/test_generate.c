/* test_generate.c - greedy continuations against transformers, batched ==
 * one-at-a-time, EOS and length stops, bad requests, hooks. */
#include "test.h"

#include <math.h>
#include <time.h>
#include "test_util.h"

static struct backend *be;

static const char *TINY[] = {"tiny-llama", "tiny-llama3", "tiny-llama-tied", "tiny-qwen2",
                             "tiny-qwen3"};
#define SMOL_PATH "models/SmolLM2-135M-Instruct.Q4_1.gguf"

static int same_tokens(const struct gen_result *r, const int *want, int n)
{
    return same_ints(r->tokens, r->n_tokens, want, n);
}

/* The golden prompts of a tiny model, all in one batch, 32 greedy tokens each. */
static void check_greedy(const char *name, const char *file)
{
    char path[512];
    snprintf(path, sizeof path, "tests/fixtures/models/%s/golden.json", name);
    cJSON *g = read_json(path);
    snprintf(path, sizeof path, "tests/fixtures/models/%s%s", name, file);
    struct model *m = g ? open_model_on(be, path) : NULL;
    if (!m) { CHECK_MSG(0, "cannot load %s or its golden.json", path); cJSON_Delete(g); return; }
    const cJSON *prompts = cJSON_GetObjectItem(g, "prompts"), *greedy = cJSON_GetObjectItem(g, "greedy");
    int n = cJSON_GetArraySize(prompts);
    struct gen_request req[8] = {{0}};
    int *ids[8], *want[8], nw[8];
    for (int i = 0; i < n; i++) {
        ids[i] = json_ints(cJSON_GetArrayItem(prompts, i), &req[i].n_prompt);
        want[i] = json_ints(cJSON_GetArrayItem(greedy, i), &nw[i]);
        req[i].prompt = ids[i];
        req[i].max_new = nw[i];
        req[i].sampling = sampler_params_greedy();
    }
    struct gen_options opt = {0};
    opt.ignore_eos = 1;
    struct gen_result res[8];
    struct eb_err e;
    CHECK(generate(m, req, n, &opt, res, NULL, &e) == 0);
    for (int i = 0; i < n; i++) {
        CHECK_MSG(same_tokens(&res[i], want[i], nw[i]), "%s prompt %d", path, i);
        CHECK(res[i].finish == GEN_FINISH_LENGTH);
    }
    gen_results_free(res, n);
    for (int i = 0; i < n; i++) {
        free(ids[i]);
        free(want[i]);
    }
    model_free(m);
    cJSON_Delete(g);
}

static void test_greedy_golden(void)
{
    for (size_t i = 0; i < sizeof TINY / sizeof TINY[0]; i++) {
        check_greedy(TINY[i], "");
        check_greedy(TINY[i], "/model.gguf");
    }
}

/* Prompts of mixed lengths; deterministic ids. */
enum { NP = 7 };
static int prompt_buf[NP][64];
static void make_requests(struct gen_request *req, int sample, int vocab)
{
    int lens[NP] = {5, 17, 1, 40, 9, 23, 2};
    memset(req, 0, NP * sizeof *req); /* fields not set below stay 0 */
    for (int i = 0; i < NP; i++) {
        for (int t = 0; t < lens[i]; t++) prompt_buf[i][t] = (i * 131 + t * 29 + 7) % vocab;
        req[i].prompt = prompt_buf[i];
        req[i].n_prompt = lens[i];
        req[i].max_new = 10 + 3 * i;
        if (sample) {
            struct sampler_params p = {0, 0.9f, 40, 0.9f, 1000 + (uint64_t)i};
            req[i].sampling = p;
        } else {
            req[i].sampling = sampler_params_greedy();
        }
    }
}

static void check_batched_equals_single(const char *path, int sample)
{
    struct model *m = open_model_on(be, path);
    if (!m) { CHECK(0); return; }
    struct gen_request req[NP];
    make_requests(req, sample, m->cfg.n_vocab);
    struct gen_result single[NP], batch[NP], cont[NP];
    struct eb_err e;
    struct gen_options opt = {0};
    opt.ignore_eos = 1;
    for (int i = 0; i < NP; i++) CHECK(generate(m, &req[i], 1, &opt, &single[i], NULL, &e) == 0);
    /* All at once, prompts prefilled in chunks of 8 alongside the decodes. */
    opt.prefill_chunk = 8;
    struct gen_stats st;
    CHECK(generate(m, req, NP, &opt, batch, &st, &e) == 0);
    CHECK(st.prefill_tokens == 5 + 17 + 1 + 40 + 9 + 23 + 2);
    CHECK(st.peak_kv_bytes > 0);
    /* Two in flight, refilled as they finish. */
    opt.max_live = 2;
    opt.prefill_chunk = 0;
    CHECK(generate(m, req, NP, &opt, cont, NULL, &e) == 0);
    for (int i = 0; i < NP; i++) {
        CHECK(single[i].n_tokens == req[i].max_new);
        CHECK_MSG(same_tokens(&batch[i], single[i].tokens, single[i].n_tokens),
                  "%s %s: sequence %d differs in the ragged batch", path, sample ? "sampled" : "greedy", i);
        CHECK_MSG(same_tokens(&cont[i], single[i].tokens, single[i].n_tokens),
                  "%s %s: sequence %d differs with 2 in flight", path, sample ? "sampled" : "greedy", i);
        gen_results_free(&single[i], 1);
    }
    gen_results_free(batch, NP);
    gen_results_free(cont, NP);
    model_free(m);
}

static void test_batched_equals_single(void)
{
    check_batched_equals_single("tests/fixtures/models/tiny-qwen2", 0);
    check_batched_equals_single("tests/fixtures/models/tiny-qwen2", 1);
    check_batched_equals_single("tests/fixtures/models/tiny-llama/model.gguf", 0);
    check_batched_equals_single("tests/fixtures/models/tiny-llama/model.gguf", 1);
}

static void test_seed_changes_output(void)
{
    struct model *m = open_model_on(be, "tests/fixtures/models/tiny-qwen3");
    if (!m) { CHECK(0); return; }
    struct gen_request req[NP];
    make_requests(req, 1, m->cfg.n_vocab);
    req[1] = req[0];
    req[1].sampling.seed = 77;
    struct gen_result r[2];
    struct gen_options opt = {0};
    opt.ignore_eos = 1;
    struct eb_err e;
    CHECK(generate(m, req, 2, &opt, r, NULL, &e) == 0);
    CHECK(!same_tokens(&r[0], r[1].tokens, r[1].n_tokens));
    gen_results_free(r, 2);
    model_free(m);
}

/* A sequence stops at the first EOS id it samples; the others run on. */
static void test_eos_and_length(void)
{
    cJSON *g = read_json("tests/fixtures/models/tiny-llama/golden.json");
    struct model *m = g ? open_model_on(be, "tests/fixtures/models/tiny-llama") : NULL;
    if (!m) { CHECK(0); cJSON_Delete(g); return; }
    int n0, n1, nw;
    int *p0 = json_ints(cJSON_GetArrayItem(cJSON_GetObjectItem(g, "prompts"), 0), &n0);
    int *p1 = json_ints(cJSON_GetArrayItem(cJSON_GetObjectItem(g, "prompts"), 1), &n1);
    int *want = json_ints(cJSON_GetArrayItem(cJSON_GetObjectItem(g, "greedy"), 0), &nw);
    int stop = want[4], first = 0;
    while (want[first] != stop) first++;
    struct gen_request req[2] = {
        {.prompt = p0, .n_prompt = n0, .max_new = 32, .sampling = sampler_params_greedy()},
        {.prompt = p1, .n_prompt = n1, .max_new = 32, .sampling = sampler_params_greedy()}};
    struct gen_options opt = {0};
    int eos[2] = {stop, stop};
    opt.eos_ids = eos;
    opt.n_eos = 2;
    struct gen_result r[2];
    struct eb_err e;
    CHECK(generate(m, req, 2, &opt, r, NULL, &e) == 0);
    CHECK(r[0].finish == GEN_FINISH_EOS);
    CHECK(same_tokens(&r[0], want, first));
    CHECK(r[1].n_tokens > first || r[1].finish == GEN_FINISH_EOS);
    for (int i = 0; i < r[1].n_tokens; i++) CHECK(r[1].tokens[i] != stop);
    gen_results_free(r, 2);

    /* The context clamps max_new: 7 prompt tokens in a context of 10 leave 3. */
    opt.eos_ids = NULL;
    opt.ignore_eos = 1;
    opt.n_ctx = 10;
    CHECK(generate(m, req, 1, &opt, r, NULL, &e) == 0);
    CHECK(r[0].n_tokens == 3 && r[0].finish == GEN_FINISH_LENGTH);
    CHECK(same_tokens(&r[0], want, 3));
    gen_results_free(r, 1);
    free(p0);
    free(p1);
    free(want);
    model_free(m);
    cJSON_Delete(g);
}

static void test_bad_requests(void)
{
    struct model *m = open_model_on(be, "tests/fixtures/models/tiny-qwen2");
    if (!m) { CHECK(0); return; }
    int ids[200];
    for (int i = 0; i < 200; i++) ids[i] = i % 200;
    struct gen_request r = {.prompt = ids, .n_prompt = 5, .max_new = 4,
                            .sampling = sampler_params_greedy()};
    struct gen_options opt = {0};
    struct gen_result res[2];
    struct eb_err e;

    r.n_prompt = 0;
    CHECK(generate(m, &r, 1, &opt, res, NULL, &e) == -1);
    CHECK(strstr(e.msg, "empty") != NULL);
    r.n_prompt = 5;
    r.max_new = 0;
    CHECK(generate(m, &r, 1, &opt, res, NULL, &e) == -1);
    CHECK(strstr(e.msg, ">= 1") != NULL);
    r.max_new = 4;
    r.n_prompt = 200; /* the tiny models' context is 128 */
    CHECK(generate(m, &r, 1, &opt, res, NULL, &e) == -1);
    CHECK(strstr(e.msg, "context") != NULL);
    r.n_prompt = 5;
    opt.mem_limit = m->weight_bytes + 1000;
    CHECK(generate(m, &r, 1, &opt, res, NULL, &e) == -1);
    CHECK(strstr(e.msg, "estimated") != NULL);
    CHECK(generate_estimate_bytes(&m->cfg, m->weight_bytes, &r, 1, &opt) > m->weight_bytes + 1000);
    opt.mem_limit = 0;
    ids[2] = 100000;
    CHECK(generate(m, &r, 1, &opt, res, NULL, &e) == -1);
    ids[2] = 2;
    r.sampling.greedy = 0;
    r.sampling.temperature = 1.0f;
    r.sampling.top_p = 2.0f;
    CHECK(generate(m, &r, 1, &opt, res, NULL, &e) == -1);
    CHECK(generate(m, &r, 0, &opt, res, NULL, &e) == -1);
    model_free(m);
}

/* A backend that runs out of memory after `left` more allocations: generate()
 * fails cleanly, frees what it took, and says it was memory (EB_ERR_NOMEM),
 * which the runner records as an 'oom' result. */
static struct backend *real_be;
static int allocs_left;
static float *failing_alloc(struct backend *b, size_t n)
{
    (void)b;
    if (allocs_left-- <= 0) return NULL;
    return real_be->alloc(real_be, n);
}

static void test_alloc_failure_is_nomem(void)
{
    struct model *m = open_model_on(be, "tests/fixtures/models/tiny-qwen2");
    if (!m) { CHECK(0); return; }
    int ids[5] = {1, 2, 3, 4, 5};
    struct gen_request r[2];
    for (int i = 0; i < 2; i++)
        r[i] = (struct gen_request){.prompt = ids, .n_prompt = 5, .max_new = 4,
                                    .sampling = sampler_params_greedy()};
    struct gen_options opt = {0};
    struct gen_result res[2];
    struct backend failing = *be;
    failing.alloc = failing_alloc;
    real_be = be;
    struct model mm = *m;
    mm.be = &failing;
    /* Every point where a backend allocation can fail: forward buffers, then
     * each cache's layers, its compaction buffer. */
    int failures = 0;
    for (int budget = 0; budget < 200; budget++) {
        struct eb_err e = {.kind = EB_ERR_OTHER};
        allocs_left = budget;
        int rc = generate(&mm, r, 2, &opt, res, NULL, &e);
        if (rc == 0) { gen_results_free(res, 2); break; }
        failures++;
        CHECK_MSG(e.kind == EB_ERR_NOMEM && strstr(e.msg, "out of memory"), "%d: %s", budget, e.msg);
    }
    CHECK(failures > 3);
    /* A bad request is not a memory failure. */
    struct eb_err e = {.kind = EB_ERR_NOMEM};
    r[0].max_new = 0;
    CHECK(generate(m, r, 1, &opt, res, NULL, &e) == -1 && e.kind == EB_ERR_OTHER);
    model_free(m);
}

/* A backend that samples in its own memory (struct backend's `sample` op, as
 * the CUDA backend does): generate() sends it each row's parameters and the
 * sequence's uniform draw, downloads no logits except the rows the backend
 * leaves to the host, and so produces exactly the CPU sampler's tokens.
 * The op here picks with sampler_sample_u on the row (the CPU backend's
 * memory is the host's) and leaves every third call's first row to the host. */
static long sample_calls, sampled_rows, host_rows, floats_downloaded;
static void counting_download(struct backend *b, float *dst, const float *src, size_t n)
{
    (void)b;
    floats_downloaded += (long)n;
    real_be->download(real_be, dst, src, n);
}

static int host_side_sample(struct backend *b, int *tokens, const float *logits, int n_rows,
                            int n_vocab, const struct sample_row *rows)
{
    (void)b;
    sample_calls++;
    for (int r = 0; r < n_rows; r++) {
        const struct sample_row *p = &rows[r];
        if (r == 0 && sample_calls % 3 == 0) {
            tokens[r] = -1;
            host_rows++;
            continue;
        }
        struct sampler s;
        struct sampler_params sp = {p->greedy, p->temperature, p->top_k, p->top_p, 0};
        struct eb_err e;
        if (!(p->u >= 0 && p->u < 1) || sampler_init(&s, &sp, p->n_valid, &e)) return -1;
        tokens[r] = sampler_sample_u(&s, logits + (size_t)r * n_vocab, n_vocab, p->u);
        sampler_free(&s);
        sampled_rows++;
    }
    return 0;
}

static void test_sampling_in_backend(void)
{
    struct model *m = open_model_on(be, "tests/fixtures/models/tiny-qwen3");
    if (!m) { CHECK(0); return; }
    struct gen_request req[NP];
    make_requests(req, 1, m->cfg.n_vocab);
    req[2].sampling = sampler_params_greedy(); /* greedy and sampled rows in one batch */
    req[5].sampling.top_k = 0;
    req[5].sampling.top_p = 1.0f;
    struct gen_result want[NP], got[NP];
    struct gen_options opt = {.ignore_eos = 1, .max_live = 4}; /* slots are reused */
    struct eb_err e;
    CHECK(generate(m, req, NP, &opt, want, NULL, &e) == 0);

    struct backend sampling = *be;
    sampling.sample = host_side_sample;
    sampling.download = counting_download;
    real_be = be;
    struct model mm = *m;
    mm.be = &sampling;
    sample_calls = sampled_rows = host_rows = floats_downloaded = 0;
    CHECK_MSG(generate(&mm, req, NP, &opt, got, NULL, &e) == 0, "%s", e.msg);
    long tokens = 0;
    for (int i = 0; i < NP; i++) {
        CHECK_MSG(same_tokens(&got[i], want[i].tokens, want[i].n_tokens), "request %d", i);
        tokens += got[i].n_tokens;
    }
    CHECK(sampled_rows + host_rows == tokens && host_rows > 0 && sampled_rows > 0);
    /* only the rows left to the host crossed as logits */
    CHECK_MSG(floats_downloaded == host_rows * m->cfg.n_vocab, "%ld floats, %ld host rows",
              floats_downloaded, host_rows);
    gen_results_free(got, NP);
    /* host_sampling: the backend's op is not used */
    opt.host_sampling = 1;
    sample_calls = 0;
    CHECK(generate(&mm, req, NP, &opt, got, NULL, &e) == 0);
    CHECK(sample_calls == 0);
    for (int i = 0; i < NP; i++) CHECK(same_tokens(&got[i], want[i].tokens, want[i].n_tokens));
    gen_results_free(got, NP);
    gen_results_free(want, NP);
    model_free(m);
}

/* Hooks: counts, the query ring, and compaction inside on_step. */
struct hook_state {
    int begins, ends, steps, layers, fail_at;
    int compact_keep_all, compact_drop;
    long long freed;
    int ring_ok;
};

static int h_begin(void *ctx, int seq, const struct gen_request *r, struct kvcache *c, struct eb_err *e)
{
    (void)seq; (void)r; (void)e;
    ((struct hook_state *)ctx)->begins++;
    return c->next_pos == 0 ? 0 : -1;
}

static int h_step(void *ctx, int seq, int token, struct kvcache *c, struct eb_err *e)
{
    (void)seq; (void)token;
    struct hook_state *h = ctx;
    h->steps++;
    if (h->fail_at && h->steps == h->fail_at) return eb_fail(e, "hook: stop here");
    if (c->q_ring && c->q_count != (c->next_pos < c->q_window ? c->next_pos : c->q_window)) h->ring_ok = 0;
    int keep[256];
    for (int l = 0; l < c->n_layer; l++)
        for (int k = 0; k < c->n_kv; k++) {
            int len = kvcache_len(c, l, k), n = 0;
            for (int i = 0; i < len; i++)
                if (h->compact_keep_all || (h->compact_drop && (i < 2 || i >= len - 6))) keep[n++] = i;
            if (!h->compact_keep_all && !h->compact_drop) continue;
            int64_t fr = kvcache_compact(c, l, k, keep, n, e);
            if (fr < 0) return -1;
            h->freed += fr;
        }
    return 0;
}

static void h_end(void *ctx, int seq, const struct gen_result *r)
{
    (void)seq; (void)r;
    ((struct hook_state *)ctx)->ends++;
}

static int h_layer(void *ctx, const struct fwd_batch *b, int layer, float *hidden, struct eb_err *e)
{
    (void)b; (void)layer; (void)hidden; (void)e;
    ((struct hook_state *)ctx)->layers++;
    return 0;
}

static void test_hooks(void)
{
    struct model *m = open_model_on(be, "tests/fixtures/models/tiny-llama-tied");
    if (!m) { CHECK(0); return; }
    struct gen_request req[NP];
    make_requests(req, 0, m->cfg.n_vocab);
    struct gen_result plain[NP], hooked[NP];
    struct eb_err e;
    struct gen_options opt = {0};
    opt.ignore_eos = 1;
    opt.max_live = 3;
    CHECK(generate(m, req, NP, &opt, plain, NULL, &e) == 0);

    struct hook_state hs = {0};
    hs.ring_ok = 1;
    hs.compact_keep_all = 1;
    struct model_hooks mh = {&hs, 0, h_layer, NULL, NULL};
    struct gen_hooks gh = {.ctx = &hs, .model = &mh, .recent_q_window = 4,
                           .begin_sequence = h_begin, .on_step = h_step, .end_sequence = h_end};
    opt.hooks = &gh;
    struct gen_stats st;
    CHECK(generate(m, req, NP, &opt, hooked, &st, &e) == 0);
    int total = 0;
    for (int i = 0; i < NP; i++) {
        total += req[i].max_new;
        /* Compacting with "keep everything" changes nothing. */
        CHECK(same_tokens(&hooked[i], plain[i].tokens, plain[i].n_tokens));
    }
    CHECK(hs.begins == NP && hs.ends == NP && hs.steps == total);
    CHECK(hs.layers == st.forward_calls * m->cfg.n_layer);
    CHECK(hs.ring_ok);
    CHECK(hs.freed == 0);
    gen_results_free(hooked, NP);

    /* Real eviction: positions continue, generation finishes, bytes are freed. */
    hs = (struct hook_state){0};
    hs.ring_ok = 1;
    hs.compact_drop = 1;
    CHECK(generate(m, req, NP, &opt, hooked, &st, &e) == 0);
    CHECK(hs.freed > 0);
    for (int i = 0; i < NP; i++) CHECK(hooked[i].n_tokens == req[i].max_new);
    gen_results_free(hooked, NP);

    /* A failing hook aborts with its message. */
    hs = (struct hook_state){0};
    hs.ring_ok = 1;
    hs.fail_at = 5;
    CHECK(generate(m, req, NP, &opt, hooked, NULL, &e) == -1);
    CHECK(strstr(e.msg, "stop here") != NULL);
    gen_results_free(plain, NP);
    model_free(m);
}

/* A hook that spends 2 ms per batch step (in after_step, where a batched
 * policy compresses) and 0.5 ms per sampled row (on_step). */
static int slow_step(void *ctx, int seq, int token, struct kvcache *cache, struct eb_err *e)
{
    (void)ctx, (void)seq, (void)token, (void)cache, (void)e;
    struct timespec ts = {0, 500000};
    nanosleep(&ts, NULL);
    return 0;
}

static int slow_after(void *ctx, struct eb_err *e)
{
    (void)e;
    (*(int *)ctx)++;
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    return 0;
}

/* NP requests on m, 3 at a time, EOS ignored, with these hooks; 0 or -1. */
static int run_np(const struct model *m, const struct gen_hooks *hooks, struct gen_stats *st)
{
    struct gen_request req[NP];
    make_requests(req, 0, m->cfg.n_vocab);
    struct gen_result res[NP];
    struct eb_err e;
    struct gen_options opt = {.ignore_eos = 1, .max_live = 3, .hooks = hooks};
    if (generate(m, req, NP, &opt, res, st, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        return -1;
    }
    gen_results_free(res, NP);
    return 0;
}

/* Decode tokens/s counts the hooks: the time a policy spends lowers it. */
static void test_hook_time_counts(void)
{
    struct model *m = open_model_on(be, "tests/fixtures/models/tiny-llama-tied");
    if (!m) { CHECK(0); return; }
    struct gen_stats fast, slow;
    CHECK(run_np(m, NULL, &fast) == 0);
    int afters = 0;
    struct gen_hooks gh = {.ctx = &afters, .on_step = slow_step, .after_step = slow_after};
    CHECK(run_np(m, &gh, &slow) == 0);
    CHECK(slow.decode_steps == fast.decode_steps && slow.decode_tokens == fast.decode_tokens);
    CHECK(afters == slow.forward_calls); /* once per forward pass */
    /* Every decode step slept 2 ms plus 0.5 ms per row, all inside decode_s. */
    double slept = 2e-3 * slow.decode_steps + 0.5e-3 * slow.decode_tokens;
    CHECK_MSG(slow.decode_s >= slept, "decode %.4f s < the %.4f s the hooks slept", slow.decode_s,
              slept);
    CHECK(slow.decode_s - slow.decode_forward_s >= slept);
    CHECK(slow.decode_forward_s <= slow.decode_s);
    double fast_rate = fast.decode_tokens / fast.decode_s, slow_rate = slow.decode_tokens / slow.decode_s;
    CHECK_MSG(slow_rate < fast_rate, "tok/s %.1f with slow hooks, %.1f without", slow_rate,
              fast_rate);
    model_free(m);
}

/* A device clock (backend.time_*) as a queued backend would keep one:
 * every mark is 3 ms of device time after the one before, and every
 * download waits 1 ms.  generate() must mark each step's forward and
 * sampling, sum the device time of the decode steps and the host's waits,
 * and leave both 0 without a clock. */
static int clock_marks;
static double clock_waited;
static void clock_mark(struct backend *b)
{
    (void)b;
    clock_marks++;
}

static double clock_device_s(struct backend *b)
{
    (void)b;
    return clock_marks >= 2 ? 3e-3 : 0.0;
}

static double clock_waited_s(const struct backend *b)
{
    (void)b;
    return clock_waited;
}

static void waiting_download(struct backend *b, float *dst, const float *src, size_t n)
{
    (void)b;
    clock_waited += 1e-3;
    real_be->download(real_be, dst, src, n);
}

static void test_device_clock(void)
{
    struct model *m = open_model_on(be, "tests/fixtures/models/tiny-llama");
    if (!m) { CHECK(0); return; }
    struct gen_stats plain, clocked;
    CHECK(run_np(m, NULL, &plain) == 0);
    CHECK(!plain.device_clock && plain.decode_device_s == 0 && plain.decode_wait_s == 0);
    struct backend timed = *be;
    timed.time_mark = clock_mark;
    timed.time_device_s = clock_device_s;
    timed.time_waited_s = clock_waited_s;
    timed.download = waiting_download;
    real_be = be;
    struct model mm = *m;
    mm.be = &timed;
    clock_marks = 0;
    clock_waited = 0;
    CHECK(run_np(&mm, NULL, &clocked) == 0);
    CHECK(clocked.device_clock == 1 && clocked.decode_steps == plain.decode_steps);
    CHECK(clock_marks == 2 * clocked.forward_calls); /* before and after each forward */
    CHECK_MSG(fabs(clocked.decode_device_s - 3e-3 * clocked.decode_steps) < 1e-9,
              "device %.6f s over %ld decode steps", clocked.decode_device_s,
              clocked.decode_steps);
    /* one logits download per forward pass: 1 ms of waiting per decode step */
    CHECK_MSG(fabs(clocked.decode_wait_s - 1e-3 * clocked.decode_steps) < 1e-9,
              "waited %.6f s over %ld decode steps", clocked.decode_wait_s, clocked.decode_steps);
    model_free(m);
}

static void test_smollm2(void)
{
    if (!file_exists(SMOL_PATH)) SKIP("%s absent (make deps downloads it)", SMOL_PATH);
    cJSON *g = read_json("tests/fixtures/models/smollm2-golden.json");
    struct model *m = g ? open_model_on(be, SMOL_PATH) : NULL;
    if (!m) { CHECK_MSG(0, "SmolLM2 fixtures or model unreadable"); cJSON_Delete(g); return; }
    const cJSON *prompts = cJSON_GetObjectItem(g, "prompts"), *greedy = cJSON_GetObjectItem(g, "greedy");
    const cJSON *chat = cJSON_GetObjectItem(g, "chat");
    struct gen_request req[4] = {{0}};
    int *ids[4], *want[4], nw[4];
    for (int i = 0; i < 3; i++) {
        ids[i] = json_ints(cJSON_GetArrayItem(prompts, i), &req[i].n_prompt);
        want[i] = json_ints(cJSON_GetArrayItem(greedy, i), &nw[i]);
        req[i].prompt = ids[i];
        req[i].max_new = nw[i];
        req[i].sampling = sampler_params_greedy();
    }
    ids[3] = json_ints(cJSON_GetObjectItem(chat, "prompt_ids"), &req[3].n_prompt);
    want[3] = json_ints(cJSON_GetObjectItem(chat, "gen_ids"), &nw[3]);
    req[3].prompt = ids[3];
    req[3].max_new = 40;
    req[3].sampling = sampler_params_greedy();
    /* The golden continuations ignore EOS; the chat answer stops at <|im_end|>. */
    struct gen_options opt = {0};
    opt.ignore_eos = 1;
    struct gen_result r[4];
    struct eb_err e;
    CHECK(generate(m, req, 3, &opt, r, NULL, &e) == 0);
    for (int i = 0; i < 3; i++) CHECK_MSG(same_tokens(&r[i], want[i], nw[i]), "prompt %d", i);
    gen_results_free(r, 3);
    opt.ignore_eos = 0;
    CHECK(generate(m, &req[3], 1, &opt, &r[3], NULL, &e) == 0);
    CHECK(same_tokens(&r[3], want[3], nw[3]));
    CHECK(r[3].finish == (nw[3] < 40 ? GEN_FINISH_EOS : GEN_FINISH_LENGTH));
    gen_results_free(&r[3], 1);
    for (int i = 0; i < 4; i++) {
        free(ids[i]);
        free(want[i]);
    }
    model_free(m);
    cJSON_Delete(g);
}

int main(void)
{
    be = backend_cpu_create(1); /* results do not depend on the thread count */
    RUN(test_greedy_golden);
    RUN(test_batched_equals_single);
    RUN(test_seed_changes_output);
    RUN(test_eos_and_length);
    RUN(test_bad_requests);
    RUN(test_alloc_failure_is_nomem);
    RUN(test_sampling_in_backend);
    RUN(test_hooks);
    RUN(test_hook_time_counts);
    RUN(test_device_clock);
    RUN(test_smollm2);
    be->destroy(be);
    return test_summary("generate");
}
