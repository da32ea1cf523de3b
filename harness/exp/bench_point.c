/* bench_point.c - one long-context bench point: the prompts, the fill, the
 * timing of decode and of the policy's compressions. */
#include "harness/exp/bench_point.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "datasets/dataset.h"
#include "model/generate.h"
#include "util/clock.h"

enum { SRC_DATA_ROWS = 200, BENCH_MAX_STEPS = 4096 };

/* Deterministic ordinary token ids (no tokenizer or no dataset). */
static void fill_ids(int *ids, int n, int vocab, int salt)
{
    unsigned x = 2166136261u ^ (unsigned)salt;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        ids[i] = 32 + (int)((x >> 8) % (unsigned)(vocab > 1064 ? 1000 : vocab - 32));
    }
}

/* Sequence b's prompt: GSM8K problems from row 7b on, joined, first len tokens. */
static int text_prompt(struct session *s, const struct dataset *d, int b, int len, int *out,
                       struct eb_err *e)
{
    size_t cap = 0, used = 0;
    char *text = NULL;
    int rc = -1;
    for (int r = 7 * b;; r++) {
        const char *p = d->items[r % d->n].problem;
        size_t pl = strlen(p);
        if (used + pl + 3 > cap) {
            cap = 2 * (used + pl + 3);
            char *t = realloc(text, cap);
            if (!t) { eb_fail(e, "bench: out of memory"); goto out; }
            text = t;
        }
        memcpy(text + used, p, pl);
        used += pl;
        memcpy(text + used, "\n\n", 3);
        used += 2;
        if (used < (size_t)len * 3) continue; /* fewer than ~3 characters per token is rare */
        int *ids, n;
        if (session_encode(s, CHAT_RAW, 1, text, used, &ids, &n, e)) goto out;
        if (n >= len) memcpy(out, ids, (size_t)len * sizeof *out);
        free(ids);
        if (n >= len) break;
    }
    rc = 0;
out:
    free(text);
    return rc;
}

int bench_src_make(struct session *s, int n, int len, struct bench_src *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    out->ids = malloc((size_t)n * len * sizeof *out->ids);
    if (!out->ids) return eb_fail(e, "bench: out of memory");
    out->n = n;
    out->len = len;
    struct dataset d = {0};
    struct eb_err ignored = {0};
    int have_text = s->tok && dataset_available("gsm8k", NULL) &&
                    dataset_load("gsm8k", NULL, 0, SRC_DATA_ROWS, &d, &ignored) == 0 && d.n > 0;
    for (int b = 0; b < n; b++) {
        int *ids = out->ids + (size_t)b * len;
        if (!have_text) fill_ids(ids, len, s->m->cfg.n_vocab, b + 1);
        else if (text_prompt(s, &d, b, len, ids, e)) {
            dataset_free(&d);
            bench_src_free(out);
            return -1;
        }
    }
    if (have_text) dataset_free(&d);
    snprintf(out->fill, sizeof out->fill, "repeat:%s:%d", have_text ? "gsm8k" : "ids", len);
    return 0;
}

void bench_src_free(struct bench_src *b)
{
    free(b->ids);
    memset(b, 0, sizeof *b);
}

int bench_split(char *s, char **items, int max)
{
    int n = 0;
    for (char *p = s; p && *p;) {
        char *c = strchr(p, ',');
        if (c) *c = '\0';
        if (*p == '\0' || n == max) return -1;
        items[n++] = p;
        p = c ? c + 1 : NULL;
    }
    return n;
}

int bench_open_policy(struct session *s, const char *spec, int budget, struct session_policy *sp,
                      struct eb_err *e)
{
    const struct policy_entry *entry;
    struct policy_params params;
    if (session_policy_resolve(spec, s->model_name, NULL, budget, 0, &entry, &params, e))
        return -1;
    struct policy_request rq = {entry, &params, budget, NULL, 1};
    return session_policy_open(s, &rq, sp, e);
}

/* ---- peak RSS of one point: reset the high-water mark, read it after ---- */

static void rss_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return;
    fputs("5", f); /* 5: reset the peak resident set size (Linux >= 4.0) */
    fclose(f);
}

static double rss_peak_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb >= 0) return kb / 1024.0;
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss / 1024.0 : 0;
}

/* Every step's clock.  A step ends when the last sequence of the batch has
 * taken its token (its hooks ran); the forward time of step k is the time
 * between the ends of steps k-1 and k less the policy's time in between.
 * The first step ends after the prefill, the fill and every sequence's first
 * selection (over the filled context): the policy's time until then is
 * first_s.  Medians of the per-step times resist the bursts of a shared
 * machine. */
struct step_clock {
    struct session_policy *sp;   /* NULL: FullKV */
    int batch;
    long calls;
    double first_s, last_t, last_policy;
    double *step_s;              /* [cap] forward time of each decode step */
    int n_steps, cap;
};

static double policy_time(const struct step_clock *k)
{
    if (!k->sp) return 0;
    struct policy_glue_stats ps;
    policy_glue_stats(k->sp->glue, &ps);
    return ps.policy_s;
}

static int on_step(void *ctx, int seq, int token, struct kvcache *cache, struct eb_err *e)
{
    (void)seq, (void)token, (void)cache, (void)e;
    struct step_clock *k = ctx;
    if (++k->calls % k->batch) return 0;
    double now = clock_now_s(), pol = policy_time(k);
    if (k->calls == k->batch) k->first_s = pol;
    else if (k->n_steps < k->cap) k->step_s[k->n_steps++] = now - k->last_t; /* compression in */
    k->last_t = now;
    k->last_policy = pol;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n)
{
    if (n < 1) return 0;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

int bench_prefill_chunk(int batch, int n_prompt)
{
    long all = (long)batch * n_prompt;
    long most = batch > BENCH_PREFILL_TOKENS ? batch : BENCH_PREFILL_TOKENS;
    return (int)(all < most ? all : most);
}

static int measure(struct session *s, const struct gen_request *req, const struct bench_point *p,
                   struct session_policy *sp, struct bench_result *r, struct eb_err *e)
{
    double steps_s[BENCH_MAX_STEPS];
    struct step_clock k = {.sp = sp, .batch = p->batch, .step_s = steps_s,
                           .cap = BENCH_MAX_STEPS};
    struct gen_hooks mine = {.ctx = &k, .on_step = on_step};
    struct session_gen_opts so = {.ignore_eos = 1,
                                  .prefill_chunk = bench_prefill_chunk(p->batch, req[0].n_prompt),
                                  .policy = sp, .hooks = &mine, .kv_type = p->kv,
                                  .fill_to = p->context};
    struct gen_hooks hooks;
    struct gen_options opt;
    session_gen_options(s, &so, &hooks, &opt);
    r->est_bytes = session_estimate(s, req, p->batch, &opt);
    size_t limit = session_mem_limit(s);
    if (r->est_bytes > limit) {
        r->oom = 1;
        snprintf(r->error, sizeof r->error, "needs an estimated %zu bytes, more than the %zu "
                 "available", r->est_bytes, limit);
        return 0;
    }
    struct gen_result *res = calloc((size_t)p->batch, sizeof *res);
    if (!res) return eb_fail(e, "bench: out of memory");
    struct gen_stats st;
    rss_reset();
    if (session_generate(s, req, p->batch, &so, res, &st, e)) {
        free(res);
        if (e->kind != EB_ERR_NOMEM) return -1;
        r->oom = 1;
        memcpy(r->error, e->msg, sizeof r->error);
        return 0;
    }
    gen_results_free(res, p->batch);
    free(res);
    r->peak_rss_mb = rss_peak_mb();
    long steps = p->batch > 0 ? st.decode_tokens / p->batch : 0;
    double step = median(k.step_s, k.n_steps);
    r->decode_step_ms = 1e3 * step;
    /* The rate over the whole decode loop, compression included (a median
     * step would leave out exactly the steps that compress). */
    r->decode_tok_s = st.decode_s > 0 ? st.decode_tokens / st.decode_s : 0;
    r->prefill_tokens = st.prefill_tokens;
    r->prefill_s = st.prefill_s;
    r->kv_bytes = st.peak_kv_bytes;
    if (sp && sp->glue) {
        struct policy_glue_stats ps;
        policy_glue_stats(sp->glue, &ps);
        r->compress_first_ms = 1e3 * k.first_s / p->batch;
        r->compress_ms_per_step = steps > 0 ? 1e3 * (ps.policy_s - k.first_s) / steps : 0;
        r->compressions = ps.compressions;
    }
    return 0;
}

int bench_point_run(struct session *s, const struct bench_src *src, const struct bench_point *p,
                    struct bench_result *r, struct eb_err *e)
{
    memset(r, 0, sizeof *r);
    if (p->batch < 1 || p->batch > src->n || p->context < src->len || p->n_new < 1)
        return eb_fail(e, "bench: a point of batch %d, context %d, %d steps over %d prompts of "
                          "%d tokens", p->batch, p->context, p->n_new, src->n, src->len);
    struct gen_request *req = calloc((size_t)p->batch, sizeof *req);
    if (!req) return eb_fail(e, "bench: out of memory");
    for (int b = 0; b < p->batch; b++) /* the first token comes from the prefill */
        req[b] = (struct gen_request){src->ids + (size_t)b * src->len, src->len, p->n_new + 1,
                                      sampler_params_greedy()};
    struct session_policy sp;
    int fullkv = !strcmp(p->policy, "fullkv"), rc = -1;
    if (!fullkv && bench_open_policy(s, p->policy, p->budget, &sp, e)) goto out;
    rc = measure(s, req, p, fullkv ? NULL : &sp, r, e);
    if (!fullkv) session_policy_close(&sp);
out:
    free(req);
    return rc;
}
