/* bench_maxbatch.c - `bench --max-batch`: the largest batch whose KV fits
 * under a cap at a generation length, per policy, and the decode rate on the
 * way to it (SkipKV's transition-batch experiment). */
#include "harness/exp/bench_long.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness/exp/bench_point.h"
#include "harness/exp/device.h"
#include "kernels/cuda/backend_cuda.h"
#include "kernels/cuda/cuda_pool.h"
#include "util/clock.h"

enum { MAX_BATCH = 4096 };

/* What one sequence of a policy holds: K+V bytes of the slots its cache
 * needs over a generation, and the steady-state context its decode reads;
 * and, with no KV cap (a GPU), the largest batch the memory plan fits. */
struct seq_need {
    size_t kv_bytes;
    int context;
    int plan_largest;        /* 0: no plan (a KV cap decides) */
    size_t plan_bytes;       /* the device pool that batch reserves */
};

/* The largest batch of req whose memory plan (generate_plan: caches and
 * their query rings, forward buffers, probabilities, the policy's scratch)
 * fits the pool a generate may reserve in the device's free memory
 * (kv_pool_plan, as the session reserves it): bisection over the plan, so
 * no batch is tried and found to fail. */
static int plan_largest(struct session *s, struct gen_options *opt, const struct gen_request *req,
                        struct seq_need *out, struct eb_err *e)
{
    size_t free_b, total_b;
    if (backend_cuda_mem_info(s->be, &free_b, &total_b, e)) return -1;
    struct gen_request *reqs = malloc(MAX_BATCH * sizeof *reqs);
    if (!reqs) return eb_fail(e, "bench: out of memory");
    for (int i = 0; i < MAX_BATCH; i++) reqs[i] = *req;
    int lo = 0, hi = MAX_BATCH;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        struct gen_mem_plan p;
        opt->prefill_chunk = bench_prefill_chunk(mid, req->n_prompt);
        generate_plan(&s->m->cfg, 0, reqs, mid, opt, &p);
        struct kv_pool_need need = {p.kv / (size_t)mid + 1, p.forward + p.probs + p.hooks, mid};
        struct kv_pool_plan pl;
        struct eb_err ignored;
        if (kv_pool_plan(free_b, total_b, &need, &pl, &ignored) == 0) {
            lo = mid;
            out->plan_bytes = pl.pool_bytes;
        } else {
            hi = mid - 1;
        }
    }
    free(reqs);
    out->plan_largest = lo;
    return 0;
}

static int seq_need(struct session *s, const struct bench_long_opts *o, const struct bench_policy *bp,
                    enum kv_type kv, struct seq_need *out, struct eb_err *e)
{
    const struct model_config *c = &s->m->cfg;
    int dummy = 0, rc = 0;
    struct gen_request req = {&dummy, o->src_len, o->gen_len, sampler_params_greedy()};
    struct session_policy sp;
    int fullkv = !strcmp(bp->spec, "fullkv");
    memset(out, 0, sizeof *out);
    if (!fullkv && bench_open_policy(s, bp->spec, bp->budget, &sp, e)) return -1;
    struct session_gen_opts so = {.policy = fullkv ? NULL : &sp, .kv_type = kv, .ignore_eos = 1};
    struct gen_hooks hooks;
    struct gen_options opt;
    session_gen_options(s, &so, &hooks, &opt);
    int slots = generate_cache_slots(c, &opt, &req, 0);
    int limit = opt.hooks ? opt.hooks->kv_slot_limit : 0;
    if (o->kv_cap == 0) rc = plan_largest(s, &opt, &req, out, e);
    if (!fullkv) session_policy_close(&sp);
    size_t slot_bytes = 2 * (size_t)c->n_layer * c->n_head_kv * c->head_dim * kv_type_bytes(kv);
    out->kv_bytes = (size_t)slots * slot_bytes;
    /* FullKV's mean context over the generation; a policy's mean between
     * its budget and the most slots it holds before compressing again. */
    out->context = o->src_len + o->gen_len / 2;
    if (limit > 0 && bp->budget > 0 && (bp->budget + limit) / 2 < out->context)
        out->context = (bp->budget + limit) / 2;
    if (out->context < o->src_len) out->context = o->src_len;
    return rc;
}

static void print_row(const struct bench_long_opts *o, const struct bench_point *p,
                      const struct bench_result *r, int largest)
{
    char bud[16] = "-";
    if (p->budget > 0) snprintf(bud, sizeof bud, "%d", p->budget);
    fprintf(o->out, "%-14s %6s %5d%s %8d %12.1f ", p->policy, bud, p->batch,
            largest ? "*" : " ", p->context, r->est_bytes / 1048576.0);
    if (r->oom) fprintf(o->out, "%10s %9s  oom: %s\n", "-", "-", r->error);
    else fprintf(o->out, "%10.2f %9.1f\n", r->decode_tok_s, r->decode_step_ms);
    fflush(o->out);
}

/* The batch measured after b (0: the first): below the largest, the next of
 * o->batches (none given: 1, 2, 4, ...), then the largest, then one past it
 * (an oom row). */
static int next_batch(const struct bench_long_opts *o, int b, int largest)
{
    if (largest < 1 || b >= largest) return largest + 1 > 1 ? largest + 1 : 1;
    if (o->largest_only) return largest;
    if (o->n_batches == 0) return b == 0 ? 1 : b * 2 < largest ? b * 2 : largest;
    int next = largest;
    for (int i = 0; i < o->n_batches; i++)
        if (o->batches[i] > b && o->batches[i] < next) next = o->batches[i];
    return next;
}

/* Measured batches up to the largest, then one oom row past it. */
/* best[0]: the rate at the largest batch; best[1]: the best rate measured. */
static int sweep(struct session *s, const struct bench_long_opts *o, const struct bench_src *src,
                 const struct bench_policy *bp, const struct seq_need *need, int largest,
                 int fits, double *best, struct eb_err *e)
{
    for (int b = next_batch(o, 0, largest);; b = next_batch(o, b, largest)) {
        struct bench_point p = {bp->spec, bp->budget, need->context, b, o->n_new, o->kv_types[0]};
        struct bench_result r;
        memset(&r, 0, sizeof r);
        if (b > largest && largest < fits) return 0; /* capped by --batch-limit: no oom row */
        if (b > largest) {
            r.oom = 1;
            r.est_bytes = (size_t)b * need->kv_bytes;
            if (need->plan_largest)
                snprintf(r.error, sizeof r.error, "the memory plan of %d sequences does not fit "
                         "the device's free memory (not run)", b);
            else
                snprintf(r.error, sizeof r.error, "K+V of %d sequences: %zu bytes, over the cap "
                         "of %zu", b, r.est_bytes, o->kv_cap);
        } else {
            double t0 = clock_now_s();
            if (bench_point_run(s, src, &p, &r, e)) return -1;
            r.est_bytes = (size_t)b * need->kv_bytes; /* the capped quantity, not RAM */
            fprintf(stderr, "bench: max-batch %s:%d batch %d: %.2f tok/s (%.0f s)\n", bp->spec,
                    bp->budget, b, r.decode_tok_s, clock_now_s() - t0);
        }
        print_row(o, &p, &r, b == largest);
        if (b == largest) best[0] = r.oom ? 0 : r.decode_tok_s;
        if (!r.oom && r.decode_tok_s > best[1]) best[1] = r.decode_tok_s;
        if (bench_emit(o, "max_batch", src->fill, &p, &r, o->kv_cap, e)) return -1;
        if (b > largest) return 0;
    }
}

int bench_max_batch(struct session *s, const struct bench_long_opts *o, struct eb_err *e)
{
    struct seq_need need[BENCH_MAX_LIST];
    int largest[BENCH_MAX_LIST], fits[BENCH_MAX_LIST], max_b = 1, rc = -1;
    double best[BENCH_MAX_LIST][2];
    if (o->kv_cap == 0 && !device_is_cuda(s->be))
        return eb_fail(e, "bench: --max-batch on the CPU needs --max-kv-bytes (a GPU plans the "
                          "largest batch from its free memory)");
    for (int i = 0; i < o->n_pols; i++) {
        if (seq_need(s, o, &o->pols[i], o->kv_types[0], &need[i], e)) return -1;
        size_t n = need[i].kv_bytes ? o->kv_cap / need[i].kv_bytes : 0;
        if (o->kv_cap == 0) n = (size_t)need[i].plan_largest;
        fits[i] = n > MAX_BATCH ? MAX_BATCH : (int)n;
        largest[i] = o->batch_limit > 0 && fits[i] > o->batch_limit ? o->batch_limit : fits[i];
        if (largest[i] > max_b) max_b = largest[i];
    }
    struct bench_src src;
    if (bench_src_make(s, max_b, o->src_len, &src, e)) return -1;
    if (o->kv_cap)
        fprintf(o->out, "max-batch: KV cap %zu bytes", o->kv_cap);
    else
        fprintf(o->out, "max-batch: the largest batch whose memory plan fits the device's free "
                        "memory");
    fprintf(o->out, ", %d prompt + %d generated tokens per sequence, %s KV; decode measured for "
            "%d steps at the steady-state context (%s), every policy hook counted\n", o->src_len,
            o->gen_len, kv_type_name(o->kv_types[0]), o->n_new, src.fill);
    fprintf(o->out, "%-14s %6s %6s %8s %12s %10s %9s\n", "policy", "budget", "batch", "context",
            o->kv_cap ? "KV MB (cap)" : "KV MB", "decode t/s", "step ms");
    for (int i = 0; i < o->n_pols; i++) {
        best[i][0] = best[i][1] = 0;
        if (sweep(s, o, &src, &o->pols[i], &need[i], largest[i], fits[i], best[i], e))
            goto out;
    }
    fprintf(o->out, "largest batch %s:", o->kv_cap ? "under the cap" : "by the plan");
    for (int i = 0; i < o->n_pols; i++)
        fprintf(o->out, " %s%s%.0d %d (%.2fx FullKV)%s", o->pols[i].spec,
                o->pols[i].budget ? ":" : "", o->pols[i].budget, fits[i],
                fits[0] ? (double)fits[i] / fits[0] : 0.0, i + 1 < o->n_pols ? ";" : "\n");
    for (int i = 0; i < o->n_pols; i++)
        if (largest[i] < fits[i])
            fprintf(o->out, "measured at %d, not %d (--batch-limit): %s%s%.0d\n", largest[i],
                    fits[i], o->pols[i].spec, o->pols[i].budget ? ":" : "", o->pols[i].budget);
    /* The papers' claim: throughput at the largest batch against FullKV's best. */
    int top = -1;
    for (int i = 1; i < o->n_pols; i++)
        if (top < 0 || best[i][0] > best[top][0]) top = i;
    if (top > 0 && best[0][1] > 0)
        fprintf(o->out, "max-batch throughput ratio to FullKV: %.2f (%s%s%.0d at batch %d, %.1f "
                "tok/s, against FullKV's best %.1f tok/s)\n", best[top][0] / best[0][1],
                o->pols[top].spec, o->pols[top].budget ? ":" : "", o->pols[top].budget,
                largest[top], best[top][0], best[0][1]);
    rc = 0;
out:
    bench_src_free(&src);
    return rc;
}
