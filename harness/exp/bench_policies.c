/* bench_policies.c - per-policy decode speed, overhead and KV memory. */
#include "harness/exp/bench_policies.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/generate.h"
#include "policies/registry.h"
#include "harness/exp/bench_point.h"
#include "harness/exp/policy_glue.h"
#include "util/clock.h"

enum { MAX_ITEMS = 32 };

struct row {
    double tok_s, policy_ms, policy_pct;
    long compressions;
    size_t peak_kv;
};

static int run_one(struct session *s, const int *prompt, int prompt_len, int n_new,
                   const char *spec, int budget, enum kv_type kv, struct row *r, struct eb_err *e)
{
    struct session_policy sp;
    struct gen_request req = {.prompt = prompt, .n_prompt = prompt_len, .max_new = n_new,
                              .sampling = sampler_params_greedy()};
    struct gen_result res;
    struct gen_stats st;
    if (bench_open_policy(s, spec, budget, &sp, e)) return -1;
    struct session_gen_opts so = {.ignore_eos = 1, .n_ctx = prompt_len + n_new + 1, .policy = &sp,
                                  .kv_type = kv};
    double t0 = clock_now_s();
    if (session_generate(s, &req, 1, &so, &res, &st, e)) {
        session_policy_close(&sp);
        return -1;
    }
    double wall = clock_now_s() - t0;
    gen_results_free(&res, 1);
    struct policy_glue_stats ps;
    policy_glue_stats(sp.glue, &ps);
    r->tok_s = st.decode_s > 0 ? st.decode_tokens / st.decode_s : 0;
    r->policy_ms = ps.steps ? 1e3 * ps.policy_s / ps.steps : 0;
    r->policy_pct = wall > 0 ? 100.0 * ps.policy_s / wall : 0;
    r->compressions = ps.compressions;
    r->peak_kv = ps.peak_kv_bytes;
    session_policy_close(&sp);
    return 0;
}

/* Every policy at every budget opens before anything runs; evicts[i]: it
 * has a budget to vary. */
static int check_all(struct session *s, char **pol, int np, const int *bv, int nb, int *evicts,
                     struct eb_err *e)
{
    for (int i = 0; i < np; i++)
        for (int j = 0; j < nb; j++) {
            struct session_policy sp;
            if (bench_open_policy(s, pol[i], bv[j], &sp, e)) return -1;
            evicts[i] = sp.pol->info.schedule != POLICY_NEVER;
            session_policy_close(&sp);
        }
    return 0;
}

int bench_policies_for(struct session *s, const char *policies, const char *budgets, int n_new,
                       int prompt_len, enum kv_type kv_type, FILE *out, struct eb_err *e)
{
    char *pl = strdup(policies), *bl = strdup(budgets);
    char *pol[MAX_ITEMS], *bud[MAX_ITEMS];
    int bv[MAX_ITEMS], evicts[MAX_ITEMS], rc = -1;
    int *prompt = malloc((size_t)(prompt_len > 0 ? prompt_len : 1) * sizeof *prompt);
    if (!pl || !bl || !prompt) {
        eb_fail(e, "bench: out of memory");
        goto out;
    }
    int np = bench_split(pl, pol, MAX_ITEMS), nb = bench_split(bl, bud, MAX_ITEMS);
    if (np < 1) { eb_fail(e, "bench: bad policy list '%s'", policies); goto out; }
    if (nb < 1) { eb_fail(e, "bench: bad budget list '%s'", budgets); goto out; }
    for (int i = 0; i < nb; i++) {
        char *end;
        errno = 0;
        long v = strtol(bud[i], &end, 10);
        if (errno || *end || v < 1 || v > 1 << 24) {
            eb_fail(e, "bench: budget '%s' is not an integer in [1, %d]", bud[i], 1 << 24);
            goto out;
        }
        bv[i] = (int)v;
    }
    if (check_all(s, pol, np, bv, nb, evicts, e)) goto out;
    const struct model *m = s->m;
    unsigned x = 2166136261u;
    for (int i = 0; i < prompt_len; i++) {
        x = x * 1664525u + 1013904223u;
        prompt[i] = 32 + (int)((x >> 8) % (unsigned)(m->cfg.n_vocab > 1064 ? 1000 : m->cfg.n_vocab - 32));
    }
    struct row full;
    if (run_one(s, prompt, prompt_len, n_new, "fullkv", 0, kv_type, &full, e)) goto out;
    fprintf(out, "policies: %d-token prompt, %d new tokens (EOS ignored), batch 1, %s KV cache\n",
            prompt_len, n_new, kv_type_name(kv_type));
    fprintf(out, "%-16s %7s %10s %12s %9s %6s %14s %9s\n", "policy", "budget", "decode t/s",
            "policy ms/st", "% of run", "compr", "peak KV bytes", "vs full");
    fprintf(out, "%-16s %7s %10.1f %12.3f %9.2f %6ld %14zu %9.3f\n", "fullkv", "-", full.tok_s,
            full.policy_ms, full.policy_pct, full.compressions, full.peak_kv, 1.0);
    for (int i = 0; i < np; i++) {
        if (!strcmp(pol[i], "fullkv")) continue;
        /* A policy that never evicts (seal, fullkv-pss) runs once, without a budget. */
        for (int j = 0; j < (evicts[i] ? nb : 1); j++) {
            struct row r;
            char bud_s[16] = "-";
            if (evicts[i]) snprintf(bud_s, sizeof bud_s, "%d", bv[j]);
            if (run_one(s, prompt, prompt_len, n_new, pol[i], evicts[i] ? bv[j] : 0, kv_type, &r,
                        e))
                goto out;
            fprintf(out, "%-16s %7s %10.1f %12.3f %9.2f %6ld %14zu %9.3f\n", pol[i], bud_s,
                    r.tok_s, r.policy_ms, r.policy_pct, r.compressions, r.peak_kv,
                    full.peak_kv ? (double)r.peak_kv / full.peak_kv : 0.0);
            fflush(out);
        }
    }
    rc = 0;
out:
    free(pl);
    free(bl);
    free(prompt);
    return rc;
}
