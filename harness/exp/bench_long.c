/* bench_long.c - `bench --contexts`: decode tokens/s against context length,
 * FullKV against policies, and the rows of both long-context benchmarks. */
#include "harness/exp/bench_long.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/exp/bench_point.h"
#include "harness/exp/code_hash.h"
#include "util/clock.h"

static int add_policy(struct bench_policy *out, int max, int *n, const char *spec, int budget,
                      struct eb_err *e)
{
    if (*n == max) return eb_fail(e, "bench: more than %d policy and budget pairs", max);
    if (strlen(spec) >= sizeof out->spec) return eb_fail(e, "bench: policy '%s' is too long", spec);
    snprintf(out[*n].spec, sizeof out[*n].spec, "%s", spec);
    out[(*n)++].budget = budget;
    return 0;
}

int bench_policy_list(struct session *s, const char *specs, const char *budgets,
                      struct bench_policy *out, int max, int *n, struct eb_err *e)
{
    char sl[512], bl[256], *sp[BENCH_MAX_LIST], *bp[BENCH_MAX_LIST];
    snprintf(sl, sizeof sl, "%s", specs);
    snprintf(bl, sizeof bl, "%s", budgets);
    int ns = bench_split(sl, sp, BENCH_MAX_LIST), nb = bench_split(bl, bp, BENCH_MAX_LIST), bv[BENCH_MAX_LIST];
    if (ns < 1) return eb_fail(e, "bench: bad policy list '%s'", specs);
    if (nb < 1) return eb_fail(e, "bench: bad budget list '%s'", budgets);
    for (int i = 0; i < nb; i++) {
        char *end;
        errno = 0;
        long v = strtol(bp[i], &end, 10);
        if (errno || *end || v < 1 || v > 1 << 24)
            return eb_fail(e, "bench: budget '%s' is not an integer in [1, %d]", bp[i], 1 << 24);
        bv[i] = (int)v;
    }
    *n = 0;
    if (add_policy(out, max, n, "fullkv", 0, e)) return -1;
    for (int i = 0; i < ns; i++) {
        if (!strcmp(sp[i], "fullkv")) continue;
        for (int j = 0; j < nb; j++) {
            struct session_policy pol;
            if (bench_open_policy(s, sp[i], bv[j], &pol, e)) return -1;
            int evicts = pol.pol && pol.pol->info.schedule != POLICY_NEVER;
            session_policy_close(&pol);
            if (add_policy(out, max, n, sp[i], evicts ? bv[j] : 0, e)) return -1;
            if (!evicts) break;
        }
    }
    return 0;
}

int bench_emit(const struct bench_long_opts *o, const char *kind, const char *fill,
               const struct bench_point *p, const struct bench_result *r, size_t kv_cap,
               struct eb_err *e)
{
    if (!o->db) return 0;
    struct bench_record b;
    bench_record_init(&b);
    b.kind = kind;
    b.model = o->model;
    b.device = o->device ? o->device : "cpu";
    b.threads = o->threads;
    b.kv_type = kv_type_name(p->kv);
    b.policy = p->policy;
    b.budget = p->budget > 0 ? p->budget : STORE_NONE;
    b.context = p->context;
    b.fill = fill;
    b.batch_size = p->batch;
    b.n_new = p->n_new;
    b.status = r->oom ? "oom" : "ok";
    b.error = r->oom ? r->error : NULL;
    b.est_bytes = (int64_t)r->est_bytes;
    b.kv_cap_bytes = kv_cap > 0 ? (int64_t)kv_cap : STORE_NONE;
    b.code_version = code_version();
    if (!r->oom) {
        b.decode_tok_s = r->decode_tok_s;
        b.decode_step_ms = r->decode_step_ms;
        b.prefill_tokens = r->prefill_tokens;
        b.prefill_s = r->prefill_s;
        b.kv_bytes = (int64_t)r->kv_bytes;
        b.peak_rss_mb = r->peak_rss_mb;
        if (p->budget > 0) {
            b.compress_first_ms = r->compress_first_ms;
            b.compress_ms_per_step = r->compress_ms_per_step;
            b.compressions = r->compressions;
        }
    }
    return store_write_bench(o->db, &b, e);
}

/* Contexts the model can hold, each with room for the decode steps, and no
 * shorter than the real prefill that fills it. */
static int check_contexts(const struct session *s, const struct bench_long_opts *o,
                          struct eb_err *e)
{
    int max_pos = s->m->cfg.n_ctx_train;
    for (int i = 0; i < o->n_contexts; i++) {
        int c = o->contexts[i];
        if (c + o->n_new + 1 > max_pos)
            return eb_fail(e, "bench: context %d (+%d decode steps) is longer than %s's maximum "
                              "of %d positions", c, o->n_new + 1, o->model, max_pos);
        if (c < o->src_len)
            return eb_fail(e, "bench: context %d is shorter than the %d-token prefill that fills "
                              "it (--fill-len)", c, o->src_len);
    }
    return 0;
}

static void print_head(const struct bench_long_opts *o, const struct bench_src *src)
{
    fprintf(o->out, "contexts: %s; %d decode steps per point, FullKV and policies; %s threads\n",
            src->fill, o->n_new, o->threads > 0 ? "fixed" : "all");
    fprintf(o->out, "%-4s %6s %5s %-14s %6s %10s %9s %11s %7s %10s %9s %9s %6s\n", "KV",
            "ctx", "batch", "policy", "budget", "decode t/s", "step ms", "compress ms",
            "vs full", "KV MB", "RSS MB", "prefill s", "status");
}

static void print_row(const struct bench_long_opts *o, const struct bench_point *p,
                      const struct bench_result *r, double full_tok_s)
{
    char bud[16] = "-";
    if (p->budget > 0) snprintf(bud, sizeof bud, "%d", p->budget);
    if (r->oom) {
        fprintf(o->out, "%-4s %6d %5d %-14s %6s %10s %9s %11s %7s %10.1f %9s %9s %6s\n",
                kv_type_name(p->kv), p->context, p->batch, p->policy, bud, "-", "-", "-", "-",
                r->est_bytes / 1048576.0, "-", "-", "oom");
    } else {
        fprintf(o->out, "%-4s %6d %5d %-14s %6s %10.2f %9.1f %11.1f %7.2f %10.1f %9.1f %9.2f %6s\n",
                kv_type_name(p->kv), p->context, p->batch, p->policy, bud, r->decode_tok_s,
                r->decode_step_ms, p->budget > 0 ? r->compress_first_ms : 0.0,
                full_tok_s > 0 ? r->decode_tok_s / full_tok_s : NAN, r->kv_bytes / 1048576.0,
                r->peak_rss_mb, r->prefill_s, "ok");
    }
    fflush(o->out);
}

static void progress(int done, int total, double t0, const struct bench_point *p,
                     const struct bench_result *r)
{
    double el = clock_now_s() - t0;
    fprintf(stderr, "bench: %d/%d %s ctx %d batch %d %s:%d: %s %.2f tok/s; %.0f s elapsed, "
            "ETA %.0f s\n", done, total, kv_type_name(p->kv), p->context, p->batch, p->policy,
            p->budget, r->oom ? "oom" : "decode", r->oom ? 0.0 : r->decode_tok_s, el,
            el / done * (total - done));
}

int bench_contexts(struct session *s, const struct bench_long_opts *o, struct eb_err *e)
{
    if (check_contexts(s, o, e)) return -1;
    int max_batch = 1;
    for (int i = 0; i < o->n_batches; i++)
        if (o->batches[i] > max_batch) max_batch = o->batches[i];
    struct bench_src src;
    if (bench_src_make(s, max_batch, o->src_len, &src, e)) return -1;
    print_head(o, &src);
    int total = o->n_kv * o->n_contexts * o->n_batches * o->n_pols, done = 0, rc = -1;
    double t0 = clock_now_s();
    for (int k = 0; k < o->n_kv; k++)
        for (int c = 0; c < o->n_contexts; c++)
            for (int b = 0; b < o->n_batches; b++) {
                double full = 0;
                for (int i = 0; i < o->n_pols; i++) {
                    struct bench_point p = {o->pols[i].spec, o->pols[i].budget, o->contexts[c],
                                            o->batches[b], o->n_new, o->kv_types[k]};
                    struct bench_result r;
                    if (bench_point_run(s, &src, &p, &r, e)) goto out;
                    if (i == 0 && !r.oom) full = r.decode_tok_s;
                    print_row(o, &p, &r, full);
                    progress(++done, total, t0, &p, &r);
                    if (bench_emit(o, "context", src.fill, &p, &r, 0, e)) goto out;
                }
            }
    rc = 0;
out:
    bench_src_free(&src);
    return rc;
}
