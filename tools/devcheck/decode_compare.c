/* decode_compare.c - gpu_check compare: a whole decode on the GPU against
 * the CPU backend with the same weights (tools/devcheck.sh step 4b).
 *
 *   gpu_check compare --model DIR [--policy rkv] [--budget 128] [--new 256]
 *                     [--prompt-len 256] [--kv-type bf16] [--device cuda[:N]|cpu]
 *
 *                     [--exact 0|1]
 *
 *  --device cpu: a second CPU backend stands in for the GPU (both sides then
 *  agree exactly; a test of this tool on a machine without a GPU).
 *  --exact 1: the CPU rounds activations to bf16 where the GPU does (every
 *  input of a matmul by a bf16 weight; see exact_matmul), so the logits
 *  should agree far more closely.  Off in devcheck.sh.
 *
 *  1. The GPU generates: generate() with the policy's hooks, greedy, the
 *     device sampler (be->sample), a cache of --kv-type, EOS ignored.
 *  2. Both backends then replay that trace in lockstep, each with its own
 *     instance of the policy: at every step each computes its next-token
 *     logits, the policy's on_step (then after_step, where set: the batch's
 *     compression point) sees the trace's token, and the token is fed.
 *  3. At a compression (the GPU's cache shrank) the CPU's policy chooses its
 *     own keep-sets, which are compared with the GPU's (overlap: the share of
 *     the GPU's kept positions the CPU kept too, per head; mean and least
 *     over heads), and then the CPU's cache is rebuilt from its state before
 *     the step with the GPU's keep-sets: one near-tie in a score would
 *     otherwise make the two caches differ in content, and every later logit
 *     with them, which says nothing about the forward pass.  The overlap is
 *     reported on its own.
 *  4. Per step: the two argmaxes, the CPU's top-1 margin (top-1 minus
 *     top-2 logit), KL(CPU || GPU), non-finite logits, and whether generate's
 *     device-sampled token is the argmax of the GPU's own replayed logits.
 *     A disagreement counts only when the CPU's margin exceeds MARGIN_ULPS
 *     bf16 ulps of its top logit: the GPU rounds every projection's input to
 *     bf16 (2^-9 relative per element), about 7 roundings per layer plus the
 *     LM head's, 29 over 4 layers, which as a random walk moves a logit by
 *     about sqrt(29) 2^-9 ~ 1% of itself; 8 ulps (2^-7 to 2^-8 of the
 *     logit each) are 3-6% of it, several times that.  Closer steps are
 *     near-ties, counted apart.  The checkpoint is made peaked
 *     (hf_check.py make-ckpt --peak) so that most steps are decisive.
 *  5. One line per compression, a summary line, and a JSON line that
 *     devcheck.sh judges (judge_compare). */
#include "tools/devcheck/decode_compare.h"
#include "tools/devcheck/gpu_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/exp/session.h"
#include "kernels/quant.h"
#include "kernels/cuda/backend_cuda.h"
#include "model/generate.h"
#include "model/model.h"
#include "policies/registry.h"

enum { MAX_COMPRESSIONS = 64, MARGIN_ULPS = 8 };

struct side {
    struct backend *be;
    struct model *m;
    struct session_policy pol;
    struct gen_hooks hooks;
    struct kvcache *cache;
    struct forward *f;
    float *logits;
};

struct tally {
    int steps, agree, agree_pre, steps_pre, first_div, first_comp, n_comp, nonfinite;
    int decisive, decisive_pre, near_ties, sched_mismatch;
    int sample_mismatch;
    double kl_max, kl_pre_max;
    double *margin_ulps; /* [steps]: the CPU's top-1 margin in bf16 ulps of its top logit */
    int comp_step[MAX_COMPRESSIONS];
    double comp_kl[MAX_COMPRESSIONS], overlap_mean[MAX_COMPRESSIONS], overlap_min[MAX_COMPRESSIONS];
};

/* The CPU cache's content, to rebuild it with the GPU's keep-sets (host
 * memory: the CPU backend's buffers are ordinary memory). */
struct snap {
    char *kv;            /* [n_layer][2][n_kv * capacity * row_bytes] */
    int *len, *pos;
    unsigned char *pad;
    size_t bytes, layer_bytes;
};

struct compare_opts {
    const char *model, *device, *policy;
    int budget, n_new, plen;
    enum kv_type kv_type;
    int exact;
};

static int argmax_of(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int count_nonfinite(const float *x, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++) bad += !isfinite(x[i]);
    return bad;
}

/* top-1 minus top-2, in bf16 ulps of the top-1 logit (8 significant bits:
 * an ulp is 2^(e - 7) for a value in [2^e, 2^(e+1))). */
static double margin_in_ulps(const float *x, int n)
{
    int a = argmax_of(x, n);
    float second = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != a && x[i] > second) second = x[i];
    double top = fabs((double)x[a]);
    if (!(top > 0) || !isfinite(second)) return 0;
    double ulp = ldexp(1.0, ilogb(top) - 7);
    return ((double)x[a] - second) / ulp;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* KL(softmax(p) || softmax(q)) in double. */
static double kl_of(const float *p, const float *q, int n)
{
    double mp = p[argmax_of(p, n)], mq = q[argmax_of(q, n)], zp = 0, zq = 0, kl = 0;
    for (int i = 0; i < n; i++) zp += exp((double)p[i] - mp), zq += exp((double)q[i] - mq);
    double lzp = mp + log(zp), lzq = mq + log(zq);
    for (int i = 0; i < n; i++) {
        double lp = p[i] - lzp, lq = q[i] - lzq;
        kl += exp(lp) * (lp - lq);
    }
    return kl > 0 ? kl : 0;
}

static long cache_slots(const struct kvcache *c)
{
    long n = 0;
    for (int l = 0; l < c->n_layer; l++)
        for (int h = 0; h < c->n_kv; h++) n += kvcache_len(c, l, h);
    return n;
}

static int open_side(struct side *s, struct backend *be, const struct compare_opts *o,
                     struct eb_err *e)
{
    memset(s, 0, sizeof *s);
    s->be = be;
    if (open_model(o->model, be, MODEL_WEIGHTS_NATIVE, &s->m, e)) return -1;
    const struct policy_entry *entry;
    struct policy_params params;
    if (session_policy_resolve(o->policy, "DeepSeek-R1-Distill-Qwen-7B", NULL, o->budget, 0,
                               &entry, &params, e))
        return -1;
    struct policy_target t = {&s->m->cfg, s->m, NULL, "DeepSeek-R1-Distill-Qwen-7B"};
    struct policy_request rq = {entry, &params, o->budget, NULL, 0};
    if (policy_target_open(&t, &rq, &s->pol, e)) return -1;
    session_policy_hooks(&s->pol, NULL, &s->hooks);
    return 0;
}

static void close_side(struct side *s)
{
    kvcache_free(s->cache);
    forward_free(s->f);
    free(s->logits);
    session_policy_close(&s->pol);
    if (s->m) model_free(s->m);
}

/* One forward of n tokens; the last row's logits into s->logits. */
static int side_forward(struct side *s, const int *toks, int n, struct eb_err *e)
{
    struct fwd_seq fs = {.id = 0, .cache = s->cache, .tokens = toks, .n_tokens = n,
                         .logits = FWD_LOGITS_LAST};
    struct fwd_batch b = {&fs, 1, 0};
    if (model_forward(s->f, &b, s->hooks.model, e)) return -1;
    int nv = s->m->cfg.n_vocab;
    memcpy(s->logits, forward_logits(s->f) + (size_t)fs.logit_row0 * nv, (size_t)nv * sizeof(float));
    return 0;
}

static int side_begin(struct side *s, const struct gen_request *r, const struct gen_options *opt,
                      struct eb_err *e)
{
    int nv = s->m->cfg.n_vocab;
    if (!(s->logits = eb_malloc((size_t)nv * sizeof(float), e)) ||
        forward_create(s->m, r->n_prompt, 1, &s->f, e) ||
        model_kvcache_create_as(s->m, generate_cache_slots(&s->m->cfg, opt, r, 0), opt->kv_type,
                                &s->cache, e))
        return -1;
    const struct gen_hooks *h = &s->hooks;
    if (h->recent_q_window > 0 &&
        kvcache_qring_enable(s->cache, h->recent_q_window, s->m->cfg.n_head * s->m->cfg.head_dim, e))
        return -1;
    if (h->begin_sequence && h->begin_sequence(h->ctx, 0, r, s->cache, e)) return -1;
    return side_forward(s, r->prompt, r->n_prompt, e);
}

/* --exact 1: the CPU side rounds every input of a matmul by a bf16 weight to
 * bf16 first, as the GPU's 16-bit matmuls do (kernels/cuda/cuda_weight.cu):
 * the two sides then differ only in the order of f32 sums and in attention.
 * The CPU backend's own matmul does the product (cpu_matmul). */
static void (*cpu_matmul)(struct backend *be, float *y, const float *x, const struct weight *w,
                          const float *bias, int m);
static float *exact_x;
static size_t exact_cap;
static int exact_nomem;

static void exact_matmul(struct backend *be, float *y, const float *x, const struct weight *w,
                         const float *bias, int m)
{
    size_t n = (size_t)m * w->cols;
    if (w->type == WEIGHT_BF16 && n > exact_cap) {
        float *p = realloc(exact_x, n * sizeof *p);
        if (p) exact_x = p, exact_cap = n;
        else exact_nomem = 1; /* reported after the run: the mode was not exact */
    }
    if (w->type != WEIGHT_BF16 || n > exact_cap) {
        cpu_matmul(be, y, x, w, bias, m);
        return;
    }
    for (size_t i = 0; i < n; i++) exact_x[i] = quant_bf16_to_f32(quant_f32_to_bf16(x[i]));
    cpu_matmul(be, y, exact_x, w, bias, m);
}

static void snap_free(struct snap *sn)
{
    free(sn->kv);
    free(sn->len);
    free(sn->pos);
    free(sn->pad);
    memset(sn, 0, sizeof *sn);
}

static int snap_take(struct snap *sn, const struct kvcache *c, struct eb_err *e)
{
    size_t heads = (size_t)c->n_layer * c->n_kv, slots = heads * c->capacity;
    sn->layer_bytes = (size_t)c->n_kv * c->capacity * c->row_bytes;
    if (!sn->kv && (!(sn->kv = eb_malloc(2 * c->n_layer * sn->layer_bytes, e)) ||
                    !(sn->len = eb_malloc(heads * sizeof *sn->len, e)) ||
                    !(sn->pos = eb_malloc(slots * sizeof *sn->pos, e)) ||
                    !(sn->pad = eb_malloc(slots, e))))
        return -1;
    for (int l = 0; l < c->n_layer; l++) {
        memcpy(sn->kv + (2 * (size_t)l) * sn->layer_bytes, c->k[l], sn->layer_bytes);
        memcpy(sn->kv + (2 * (size_t)l + 1) * sn->layer_bytes, c->v[l], sn->layer_bytes);
    }
    memcpy(sn->len, c->len, heads * sizeof *sn->len);
    memcpy(sn->pos, c->pos, slots * sizeof *sn->pos);
    memcpy(sn->pad, c->pad, slots);
    sn->bytes = c->bytes;
    return 0;
}

static void snap_restore(const struct snap *sn, struct kvcache *c)
{
    size_t heads = (size_t)c->n_layer * c->n_kv, slots = heads * c->capacity;
    for (int l = 0; l < c->n_layer; l++) {
        memcpy(c->k[l], sn->kv + (2 * (size_t)l) * sn->layer_bytes, sn->layer_bytes);
        memcpy(c->v[l], sn->kv + (2 * (size_t)l + 1) * sn->layer_bytes, sn->layer_bytes);
    }
    memcpy(c->len, sn->len, heads * sizeof *sn->len);
    memcpy(c->pos, sn->pos, slots * sizeof *sn->pos);
    memcpy(c->pad, sn->pad, slots);
    c->bytes = sn->bytes;
    c->view_of[0] = c->view_of[1] = -1;
    kvcache_touch(c);
}

/* The share of the GPU's kept positions the CPU kept too, per head (mean and
 * least over heads); then the CPU's cache back as it was before the step,
 * compacted to the GPU's keep-sets (same positions, the GPU's order). */
static int adopt_gpu_keep(struct side *cpu, const struct snap *sn, const struct kvcache *g,
                          double *mean, double *least, struct eb_err *e)
{
    struct kvcache *c = cpu->cache;
    int n_pos = c->next_pos, rc = -1;
    int *slot_of = eb_malloc((size_t)(n_pos > 0 ? n_pos : 1) * sizeof *slot_of, e);
    int *keep = eb_malloc((size_t)c->capacity * sizeof *keep, e);
    if (!slot_of || !keep) goto out;
    double sum = 0;
    *least = 1;
    for (int l = 0; l < c->n_layer; l++)
        for (int h = 0; h < c->n_kv; h++) {
            const int *cp = kvcache_positions(c, l, h), *gp = kvcache_positions(g, l, h);
            int nc = kvcache_len(c, l, h), ng = kvcache_len(g, l, h), both = 0;
            for (int p = 0; p < n_pos; p++) slot_of[p] = 0;
            for (int i = 0; i < nc; i++)
                if (cp[i] >= 0 && cp[i] < n_pos) slot_of[cp[i]] = 1;
            for (int i = 0; i < ng; i++) both += gp[i] >= 0 && gp[i] < n_pos && slot_of[gp[i]];
            double ov = ng ? (double)both / ng : 1;
            sum += ov;
            if (ov < *least) *least = ov;
        }
    *mean = sum / (c->n_layer * c->n_kv);
    snap_restore(sn, c);
    for (int l = 0; l < c->n_layer; l++)
        for (int h = 0; h < c->n_kv; h++) {
            const int *cp = kvcache_positions(c, l, h), *gp = kvcache_positions(g, l, h);
            int nc = kvcache_len(c, l, h), ng = kvcache_len(g, l, h);
            for (int p = 0; p < n_pos; p++) slot_of[p] = -1;
            for (int i = 0; i < nc; i++)
                if (cp[i] >= 0 && cp[i] < n_pos) slot_of[cp[i]] = i;
            for (int i = 0; i < ng; i++) {
                if (gp[i] < 0 || gp[i] >= n_pos || slot_of[gp[i]] < 0) {
                    eb_fail(e, "the GPU kept position %d (layer %d, kv head %d), which the CPU's "
                            "cache does not hold", gp[i], l, h);
                    goto out;
                }
                keep[i] = slot_of[gp[i]];
            }
            if (kvcache_compact(c, l, h, keep, ng, e) < 0) goto out;
        }
    rc = 0;
out:
    free(slot_of);
    free(keep);
    return rc;
}

/* The policy's per-token hooks for the trace's token: on_step, then
 * after_step where the policy has one (the batch's compression point). */
static int side_step(struct side *s, int tok, struct eb_err *e)
{
    const struct gen_hooks *h = &s->hooks;
    if (h->on_step && h->on_step(h->ctx, 0, tok, s->cache, e)) return -1;
    if (h->after_step && h->after_step(h->ctx, e)) return -1;
    return 0;
}

/* The step's comparison, then the hooks with the trace's token: the GPU's
 * first, so that when it compresses the CPU's cache can be rebuilt with the
 * GPU's keep-sets. */
static int step_both(struct side *cpu, struct side *gpu, struct snap *sn, int tok, int nv,
                     struct tally *t, struct eb_err *e)
{
    int a = argmax_of(cpu->logits, nv), b = argmax_of(gpu->logits, nv);
    int bad = count_nonfinite(cpu->logits, nv) + count_nonfinite(gpu->logits, nv);
    double kl = bad ? INFINITY : kl_of(cpu->logits, gpu->logits, nv);
    double m = bad ? 0 : margin_in_ulps(cpu->logits, nv);
    int decisive = m > MARGIN_ULPS, pre = t->first_comp < 0;
    t->margin_ulps[t->steps] = m;
    t->nonfinite += bad;
    t->kl_max = kl > t->kl_max ? kl : t->kl_max;
    if (pre && kl > t->kl_pre_max) t->kl_pre_max = kl;
    t->sample_mismatch += b != tok;
    t->near_ties += !decisive;
    if (decisive) {
        t->decisive++, t->agree += a == b;
        if (pre) t->decisive_pre++, t->agree_pre += a == b;
        if (a != b && t->first_div < 0) t->first_div = t->steps;
    }
    if (pre) t->steps_pre++;
    if (t->n_comp > 0 && t->comp_step[t->n_comp - 1] == t->steps - 1)
        t->comp_kl[t->n_comp - 1] = kl; /* the first logits after the compression */
    t->steps++;
    long g_before = cache_slots(gpu->cache), c_before = cache_slots(cpu->cache);
    if (side_step(gpu, tok, e)) return -1;
    int g_comp = cache_slots(gpu->cache) < g_before;
    if (g_comp && snap_take(sn, cpu->cache, e)) return -1;
    if (side_step(cpu, tok, e)) return -1;
    int c_comp = cache_slots(cpu->cache) < c_before;
    t->sched_mismatch += g_comp != c_comp;
    if (g_comp && t->n_comp < MAX_COMPRESSIONS) {
        int i = t->n_comp++;
        if (t->first_comp < 0) t->first_comp = t->steps - 1;
        t->comp_step[i] = t->steps - 1;
        t->comp_kl[i] = NAN;
        if (adopt_gpu_keep(cpu, sn, gpu->cache, &t->overlap_mean[i], &t->overlap_min[i], e))
            return -1;
    } else if (g_comp) {
        return eb_fail(e, "more than %d compressions", MAX_COMPRESSIONS);
    }
    return 0;
}

/* The GPU's free-running trace: generate() with device sampling. */
static int gpu_trace(struct side *gpu, struct backend *inner, const struct gen_request *r,
                     const struct gen_options *opt, struct gen_result *res, struct eb_err *e)
{
    size_t free_b, total_b;
    if (backend_cuda_mem_info(inner, &free_b, &total_b, e)) return -1;
    struct gen_options o = *opt;
    o.mem_limit = total_b;
    size_t est = generate_estimate_bytes(&gpu->m->cfg, 0, r, 1, &o);
    struct kv_pool_need need = {est + 1, 0, 1};
    struct kv_pool_plan plan;
    if (backend_cuda_reserve_pool(inner, &need, &plan, e)) return -1;
    o.mem_limit = gpu->m->weight_bytes + plan.pool_bytes;
    int rc = generate(gpu->m, r, 1, &o, res, NULL, e);
    struct eb_err ce = {0};
    if (backend_cuda_status(inner, &ce)) {
        if (!rc) gen_results_free(res, 1);
        *e = ce;
        return -1;
    }
    if (rc) return -1;
    /* the replay's caches and buffers are made outside the pool */
    backend_cuda_pool_serve(inner, 0);
    return 0;
}

static double median_of(double *x, int n)
{
    if (n <= 0) return 0;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

static double finite_or(double x, double other) { return isfinite(x) ? x : other; }

static void report(struct tally *t, const struct compare_opts *o)
{
    for (int i = 0; i < t->n_comp; i++)
        printf("compare: compression %d at step %d: keep-set overlap %.4f (least head %.4f), "
               "KL(cpu || gpu) of the next logits %.3g\n", i + 1, t->comp_step[i],
               t->overlap_mean[i], t->overlap_min[i], t->comp_kl[i]);
    double agree = t->decisive ? (double)t->agree / t->decisive : 0;
    double agree_pre = t->decisive_pre ? (double)t->agree_pre / t->decisive_pre : 0;
    double med = median_of(t->margin_ulps, t->steps), least = 1;
    for (int i = 0; i < t->n_comp; i++) least = t->overlap_min[i] < least ? t->overlap_min[i] : least;
    printf("compare: %s budget %d, %s cache, %d steps: top-1 agreement %.2f%% of %d decisive "
           "steps (CPU margin > %d bf16 ulps; %d near-ties; median margin %.1f ulps), %.2f%% of "
           "%d before the first compression (of %d steps there, max KL %.3g), first divergent "
           "step %d, first compression %d, %d compressions (%d where only one side compressed), "
           "least keep-set overlap %.4f, max KL %.3g, non-finite logits %d, device sampler vs "
           "its logits %d mismatches\n",
           o->policy, o->budget, kv_type_name(o->kv_type), t->steps, 100 * agree, t->decisive,
           MARGIN_ULPS, t->near_ties, med, 100 * agree_pre, t->decisive_pre, t->steps_pre,
           t->kl_pre_max, t->first_div, t->first_comp, t->n_comp, t->sched_mismatch, least,
           t->kl_max, t->nonfinite, t->sample_mismatch);
    printf("{\"exact\": %d, \"steps\": %d, \"decisive\": %d, \"near_ties\": %d, \"margin_ulps\": %d, "
           "\"margin_ulps_median\": %.3f, \"agree\": %.6f, \"agree_pre\": %.6f, "
           "\"steps_pre\": %d, \"decisive_pre\": %d, \"first_div\": %d, "
           "\"first_compression\": %d, \"compressions\": %d, \"sched_mismatch\": %d, \"kl\": [",
           o->exact, t->steps, t->decisive, t->near_ties, MARGIN_ULPS, med, agree, agree_pre, t->steps_pre,
           t->decisive_pre, t->first_div, t->first_comp, t->n_comp, t->sched_mismatch);
    for (int i = 0; i < t->n_comp; i++) printf("%s%.6g", i ? ", " : "", finite_or(t->comp_kl[i], -1));
    printf("], \"overlap\": [");
    for (int i = 0; i < t->n_comp; i++) printf("%s%.6f", i ? ", " : "", t->overlap_mean[i]);
    printf("], \"overlap_min\": %.6f, \"kl_max\": %.6g, \"kl_pre_max\": %.6g, "
           "\"nonfinite\": %d, \"sample_mismatch\": %d}\n",
           least, finite_or(t->kl_max, -1), finite_or(t->kl_pre_max, -1), t->nonfinite,
           t->sample_mismatch);
}

static int parse_opts(int argc, char **argv, struct compare_opts *o)
{
    *o = (struct compare_opts){NULL, "cuda", "rkv", 128, 256, 256, KV_BF16, 0};
    for (int i = 0; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) o->model = argv[i + 1];
        else if (!strcmp(argv[i], "--device")) o->device = argv[i + 1];
        else if (!strcmp(argv[i], "--policy")) o->policy = argv[i + 1];
        else if (!strcmp(argv[i], "--budget")) o->budget = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--new")) o->n_new = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prompt-len")) o->plen = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--exact")) o->exact = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kv-type")) {
            if (kv_type_parse(argv[i + 1], &o->kv_type)) return -1;
        } else return -1;
    }
    return o->model && o->n_new > 0 && o->plen > 0 && o->budget >= 0 ? 0 : -1;
}

int cmd_compare(int argc, char **argv)
{
    struct compare_opts o;
    if (parse_opts(argc, argv, &o)) {
        fprintf(stderr, "gpu_check: compare --model DIR [--policy P] [--budget N] [--new N] "
                        "[--prompt-len N] [--kv-type f32|f16|bf16] [--device cuda[:N]|cpu] "
                        "[--exact 0|1]\n");
        return 2;
    }
    struct eb_err e = {0};
    int dev = 0, rc = 1;
    struct side cpu = {0}, gpu = {0};
    /* --device cpu: a second CPU backend stands in for the GPU (tests this tool) */
    int on_cpu = !strcmp(o.device, "cpu");
    struct backend *inner = on_cpu ? backend_cpu_create(0)
                            : cuda_device_parse(o.device, &dev, &e) ? NULL
                                                                    : backend_cuda_create(dev, &e);
    struct backend *cb = backend_cpu_create(0);
    int *ids = malloc((size_t)o.plen * sizeof *ids);
    struct gen_result res = {0};
    struct tally t = {0};
    struct snap sn = {0};
    t.first_div = t.first_comp = -1;
    t.margin_ulps = malloc((size_t)o.n_new * sizeof *t.margin_ulps);
    if (cb && o.exact) {
        cpu_matmul = cb->matmul;
        cb->matmul = exact_matmul;
    }
    if (!inner || !cb || !ids || !t.margin_ulps || open_side(&gpu, inner, &o, &e) ||
        open_side(&cpu, cb, &o, &e))
        goto fail;
    unsigned x = 2166136261u, span = gpu.m->cfg.n_vocab > 1032 ? 1000u : 1u + gpu.m->cfg.n_vocab / 2;
    for (int i = 0; i < o.plen; i++) { /* ordinary-text-like ids, as gpu_check decode */
        x = x * 1664525u + 1013904223u;
        ids[i] = (span == 1000u ? 32 : 0) + (int)((x >> 8) % span);
    }
    struct gen_request r = {ids, o.plen, o.n_new, sampler_params_greedy()};
    struct gen_options opt = {0};
    opt.ignore_eos = 1;
    opt.kv_type = o.kv_type;
    opt.hooks = &gpu.hooks;
    if (on_cpu ? generate(gpu.m, &r, 1, &opt, &res, NULL, &e)
               : gpu_trace(&gpu, inner, &r, &opt, &res, &e))
        goto fail;
    opt.hooks = &cpu.hooks;
    if (side_begin(&cpu, &r, &opt, &e)) goto fail;
    opt.hooks = &gpu.hooks;
    if (side_begin(&gpu, &r, &opt, &e)) goto fail;
    int nv = gpu.m->cfg.n_vocab;
    for (int s = 0; s < res.n_tokens; s++) {
        int tok = res.tokens[s];
        if (s >= o.n_new) break; /* generate gives at most n_new */
        if (step_both(&cpu, &gpu, &sn, tok, nv, &t, &e)) goto fail;
        if (s + 1 < res.n_tokens && (side_forward(&cpu, &tok, 1, &e) || side_forward(&gpu, &tok, 1, &e)))
            goto fail;
    }
    if (!on_cpu && backend_cuda_status(inner, &e)) goto fail;
    if (exact_nomem) {
        eb_fail(&e, "--exact: no memory to round a matmul's input");
        goto fail;
    }
    report(&t, &o);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "gpu_check: compare: %s\n", e.msg[0] ? e.msg : "out of memory");
done:
    gen_results_free(&res, 1);
    free(ids);
    free(t.margin_ulps);
    free(exact_x);
    snap_free(&sn);
    close_side(&cpu);
    close_side(&gpu);
    if (cb) cb->destroy(cb);
    if (inner) inner->destroy(inner);
    return rc;
}
