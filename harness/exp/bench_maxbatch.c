/* bench_maxbatch.c - `bench --max-batch`: the largest batch whose KV fits
 * under a cap at a generation length, per policy, and the decode rate on the
 * way to it (SkipKV's transition-batch experiment). */
#include "harness/exp/bench_long.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness/exp/bench_point.h"
#include "util/clock.h"

/* What one sequence of a policy holds: K+V bytes of the slots its cache
 * needs over a generation, and the steady-state context its decode reads. */
struct seq_need {
    size_t kv_bytes;
    int context;
};

static int seq_need(struct session *s, const struct bench_long_opts *o, const struct bench_policy *bp,
                    enum kv_type kv, struct seq_need *out, struct eb_err *e)
{
    const struct model_config *c = &s->m->cfg;
    int dummy = 0;
    struct gen_request req = {&dummy, o->src_len, o->gen_len, sampler_params_greedy()};
    struct session_policy sp;
    int fullkv = !strcmp(bp->spec, "fullkv");
    if (!fullkv && bench_open_policy(s, bp->spec, bp->budget, &sp, e)) return -1;
    struct session_gen_opts so = {.policy = fullkv ? NULL : &sp, .kv_type = kv};
    struct gen_hooks hooks;
    struct gen_options opt;
    session_gen_options(s, &so, &hooks, &opt);
    int slots = generate_cache_slots(c, &opt, &req, 0);
    int limit = opt.hooks ? opt.hooks->kv_slot_limit : 0;
    if (!fullkv) session_policy_close(&sp);
    size_t slot_bytes = 2 * (size_t)c->n_layer * c->n_head_kv * c->head_dim * kv_type_bytes(kv);
    out->kv_bytes = (size_t)slots * slot_bytes;
    /* FullKV's mean context over the generation; a policy's mean between
     * its budget and the most slots it holds before compressing again. */
    out->context = o->src_len + o->gen_len / 2;
    if (limit > 0 && bp->budget > 0 && (bp->budget + limit) / 2 < out->context)
        out->context = (bp->budget + limit) / 2;
    if (out->context < o->src_len) out->context = o->src_len;
    return 0;
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
    if (o->n_batches == 0) return b == 0 ? 1 : b * 2 < largest ? b * 2 : largest;
    int next = largest;
    for (int i = 0; i < o->n_batches; i++)
        if (o->batches[i] > b && o->batches[i] < next) next = o->batches[i];
    return next;
}

/* Measured batches up to the largest, then one oom row past it. */
static int sweep(struct session *s, const struct bench_long_opts *o, const struct bench_src *src,
                 const struct bench_policy *bp, const struct seq_need *need, int largest,
                 struct eb_err *e)
{
    for (int b = next_batch(o, 0, largest);; b = next_batch(o, b, largest)) {
        struct bench_point p = {bp->spec, bp->budget, need->context, b, o->n_new, o->kv_types[0]};
        struct bench_result r;
        memset(&r, 0, sizeof r);
        if (b > largest) {
            r.oom = 1;
            r.est_bytes = (size_t)b * need->kv_bytes;
            snprintf(r.error, sizeof r.error, "K+V of %d sequences: %zu bytes, over the cap of "
                     "%zu", b, r.est_bytes, o->kv_cap);
        } else {
            double t0 = clock_now_s();
            if (bench_point_run(s, src, &p, &r, e)) return -1;
            r.est_bytes = (size_t)b * need->kv_bytes; /* the capped quantity, not RAM */
            fprintf(stderr, "bench: max-batch %s:%d batch %d: %.2f tok/s (%.0f s)\n", bp->spec,
                    bp->budget, b, r.decode_tok_s, clock_now_s() - t0);
        }
        print_row(o, &p, &r, b == largest);
        if (bench_emit(o, "max_batch", src->fill, &p, &r, o->kv_cap, e)) return -1;
        if (b > largest) return 0;
    }
}

int bench_max_batch(struct session *s, const struct bench_long_opts *o, struct eb_err *e)
{
    struct seq_need need[BENCH_MAX_LIST];
    int largest[BENCH_MAX_LIST], max_b = 1, rc = -1;
    for (int i = 0; i < o->n_pols; i++) {
        if (seq_need(s, o, &o->pols[i], o->kv_types[0], &need[i], e)) return -1;
        size_t n = need[i].kv_bytes ? o->kv_cap / need[i].kv_bytes : 0;
        largest[i] = n > 4096 ? 4096 : (int)n;
        if (largest[i] > max_b) max_b = largest[i];
    }
    struct bench_src src;
    if (bench_src_make(s, max_b, o->src_len, &src, e)) return -1;
    fprintf(o->out, "max-batch: KV cap %zu bytes, %d prompt + %d generated tokens per sequence, "
            "%s KV; decode measured for %d steps at the steady-state context (%s)\n", o->kv_cap,
            o->src_len, o->gen_len, kv_type_name(o->kv_types[0]), o->n_new, src.fill);
    fprintf(o->out, "%-14s %6s %6s %8s %12s %10s %9s\n", "policy", "budget", "batch", "context",
            "KV MB (cap)", "decode t/s", "step ms");
    for (int i = 0; i < o->n_pols; i++)
        if (sweep(s, o, &src, &o->pols[i], &need[i], largest[i], e)) goto out;
    fprintf(o->out, "largest batch under the cap (* above):");
    for (int i = 0; i < o->n_pols; i++)
        fprintf(o->out, " %s%s%.0d %d (%.2fx FullKV)%s", o->pols[i].spec,
                o->pols[i].budget ? ":" : "", o->pols[i].budget, largest[i],
                largest[0] ? (double)largest[i] / largest[0] : 0.0,
                i + 1 < o->n_pols ? ";" : "\n");
    rc = 0;
out:
    bench_src_free(&src);
    return rc;
}
