/* session_teacher.c - teacher forcing, the fidelity option of
 * session_generate (see session.h).
 *
 * For each request, the FullKV greedy trace is replayed under the policy:
 * both caches are fed the same (FullKV) tokens, and at every step the two
 * next-token distributions are compared: KL(FullKV || policy) averaged over
 * steps, the fraction of steps whose argmax agrees, and the first step where
 * it does not, which is where free-running greedy decoding under the policy
 * would leave the FullKV trace (before it, both histories are the same).
 * One sequence at a time.  The result is the FullKV trace.  Token limits,
 * cache sizes (the policy's kv_slot_limit included) and EOS are generate()'s
 * own (generate_max_new, generate_cache_slots, generate_is_eos). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/exp/session.h"

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* KL(softmax(p) || softmax(q)) over the first n logits. */
static double kl_logits(const float *p, const float *q, int n)
{
    double mp = p[argmax(p, n)], mq = q[argmax(q, n)], zp = 0, zq = 0;
    for (int i = 0; i < n; i++) {
        zp += exp((double)p[i] - mp);
        zq += exp((double)q[i] - mq);
    }
    double lzp = mp + log(zp), lzq = mq + log(zq), kl = 0;
    for (int i = 0; i < n; i++) {
        double lp = (double)p[i] - lzp, lq = (double)q[i] - lzq;
        kl += exp(lp) * (lp - lq);
    }
    return kl > 0 ? kl : 0;
}

/* One forward of n tokens on one cache; logits of the last row into out. */
static int forward_one(struct forward *f, struct kvcache *c, const int *toks, int n,
                       const struct model_hooks *h, float *out, int n_vocab, struct eb_err *e)
{
    struct fwd_seq fs = {.id = 0, .cache = c, .tokens = toks, .n_tokens = n,
                         .logits = FWD_LOGITS_LAST};
    struct fwd_batch b = {&fs, 1, 0};
    if (model_forward(f, &b, h, e)) return -1;
    memcpy(out, forward_logits(f) + (size_t)fs.logit_row0 * n_vocab, (size_t)n_vocab * sizeof *out);
    return 0;
}

/* The two caches and buffers of one replay. */
struct replay {
    struct kvcache *ref, *pol;
    struct forward *f;
    float *lref, *lpol;
};

static void replay_free(struct replay *rp)
{
    kvcache_free(rp->ref);
    kvcache_free(rp->pol);
    forward_free(rp->f);
    free(rp->lref);
    free(rp->lpol);
}

static int replay_init(struct replay *rp, const struct model *m, const struct gen_request *r,
                       const struct gen_options *opt, struct eb_err *e)
{
    memset(rp, 0, sizeof *rp);
    int nv = m->cfg.n_vocab;
    struct gen_options bare = *opt;     /* the reference runs without the policy's limit */
    bare.hooks = NULL;
    const struct gen_hooks *h = opt->hooks;
    if (!(rp->lref = eb_malloc((size_t)nv * sizeof *rp->lref, e)) ||
        !(rp->lpol = eb_malloc((size_t)nv * sizeof *rp->lpol, e)) ||
        forward_create(m, r->n_prompt, 1, &rp->f, e) ||
        model_kvcache_create_as(m, generate_cache_slots(&m->cfg, &bare, r, 0), opt->kv_type,
                                &rp->ref, e) ||
        model_kvcache_create_as(m, generate_cache_slots(&m->cfg, opt, r, 0), opt->kv_type,
                                &rp->pol, e))
        return -1;
    if (h && h->recent_q_window > 0 &&
        kvcache_qring_enable(rp->pol, h->recent_q_window, m->cfg.n_head * m->cfg.head_dim, e))
        return -1;
    return 0;
}

/* Replay request r (sequence id seq); fills g and the comparison of step i. */
static int replay_one(const struct model *m, const struct gen_request *r, int seq,
                      const struct gen_options *opt, struct gen_result *g, double *kl_mean,
                      double *agree, int64_t *first_div, struct eb_err *e)
{
    const struct gen_hooks *h = opt->hooks;
    const struct model_hooks *mh = h ? h->model : NULL;
    int nv = m->cfg.n_vocab;
    int nvalid = opt->n_vocab_valid > 0 && opt->n_vocab_valid < nv ? opt->n_vocab_valid : nv;
    int max_new = generate_max_new(&m->cfg, opt, r, 0);
    memset(g, 0, sizeof *g);
    if (max_new < 1) return eb_fail(e, "prompt of %d tokens leaves no room in the context", r->n_prompt);
    struct replay rp;
    int rc = -1;
    if (!(g->tokens = eb_malloc((size_t)max_new * sizeof *g->tokens, e))) return -1;
    if (replay_init(&rp, m, r, opt, e)) goto out;
    if (h && h->begin_sequence && h->begin_sequence(h->ctx, seq, r, rp.pol, e)) goto out;
    if (forward_one(rp.f, rp.ref, r->prompt, r->n_prompt, NULL, rp.lref, nv, e) ||
        forward_one(rp.f, rp.pol, r->prompt, r->n_prompt, mh, rp.lpol, nv, e))
        goto out;
    double kl_sum = 0;
    long agree_n = 0, steps = 0;
    *first_div = -1;
    for (;;) {
        int ref = argmax(rp.lref, nvalid);
        kl_sum += kl_logits(rp.lref, rp.lpol, nvalid);
        if (argmax(rp.lpol, nvalid) == ref) agree_n++;
        else if (*first_div < 0) *first_div = steps;
        steps++;
        if (h && h->on_step && h->on_step(h->ctx, seq, ref, rp.pol, e)) goto out;
        if (h && h->after_step && h->after_step(h->ctx, e)) goto out; /* the compression point */
        if (generate_is_eos(m, opt, ref)) { g->finish = GEN_FINISH_EOS; break; }
        g->tokens[g->n_tokens++] = ref;
        if (g->n_tokens >= max_new) { g->finish = GEN_FINISH_LENGTH; break; }
        if (forward_one(rp.f, rp.ref, &ref, 1, NULL, rp.lref, nv, e) ||
            forward_one(rp.f, rp.pol, &ref, 1, mh, rp.lpol, nv, e))
            goto out;
    }
    g->peak_kv_bytes = rp.pol->peak_bytes;
    if (h && h->end_sequence) h->end_sequence(h->ctx, seq, g);
    *kl_mean = kl_sum / (double)steps;
    *agree = (double)agree_n / (double)steps;
    rc = 0;
out:
    if (rc) {
        free(g->tokens);
        g->tokens = NULL;
    }
    replay_free(&rp);
    return rc;
}

int session_teacher_run(struct session *s, const struct gen_request *reqs, int n,
                        const struct gen_options *opt, struct session_teacher *t,
                        struct gen_result *res, struct eb_err *e)
{
    if (opt->n_pad) return eb_fail(e, "teacher forcing: left-padded batches do not apply");
    if (n > 0) memset(res, 0, (size_t)n * sizeof *res);
    if (generate_check(&s->m->cfg, s->m->weight_bytes, 1, reqs, n, opt, e)) return -1;
    for (int i = 0; i < n; i++) {
        if (!reqs[i].sampling.greedy && reqs[i].sampling.temperature > 0)
            return eb_fail(e, "teacher forcing replays greedy traces (request %d samples)", i);
        if (replay_one(s->m, &reqs[i], i, opt, &res[i], &t->kl_mean[i], &t->top1_agree[i],
                       &t->first_div[i], e)) {
            gen_results_free(res, n);
            return -1;
        }
    }
    return 0;
}
