/* runner_schedule.c - the requests of a point, their order, and left padding
 * for padded and grouped batching.  See runner_priv.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/exp/runner_priv.h"
#include "model/generate.h"

/* ---- the schedule ---- */


int cmp_len_idx(const void *a, const void *b)
{
    const struct len_idx *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

void set_oom(struct run_output *o, const char *msg)
{
    o->run.status = "oom";
    o->run.error = own(o, strdup(msg));
}

void set_error(struct run_output *o, const char *msg)
{
    o->run.status = "error";
    o->run.error = own(o, strdup(msg));
}

/* Requests of a point: item i, sample j -> index i * n_samples + j. */
struct gen_request *make_requests(const struct exp_config *cfg, const struct point *pt,
                                         const struct runner_item *items, int n, struct eb_err *e)
{
    int ns = cfg->sampling.n_samples;
    struct gen_request *reqs = eb_calloc((size_t)n * ns, sizeof *reqs, e);
    if (!reqs) return NULL;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < ns; j++) {
            struct gen_request *q = &reqs[i * ns + j];
            q->prompt = items[i].prompt;
            q->n_prompt = items[i].n_prompt;
            q->max_new = cfg->max_new_tokens;
            if (cfg->max_total_tokens) {
                int room = cfg->max_total_tokens - items[i].n_prompt;
                if (room < q->max_new) q->max_new = room > 0 ? room : 1;
            }
            if (cfg->sampling.greedy) {
                q->sampling = sampler_params_greedy();
            } else {
                q->sampling.greedy = 0;
                q->sampling.temperature = (float)cfg->sampling.temperature;
                q->sampling.top_p = (float)cfg->sampling.top_p;
                q->sampling.top_k = cfg->sampling.top_k;
                q->sampling.seed = cfg->sampling.seed +
                                   ((uint64_t)pt->data_offset + (uint64_t)i) * (uint64_t)ns +
                                   (uint64_t)j;
            }
        }
    return reqs;
}

/* ---- left padding (padded and grouped batching) ----
 * A static batch is left-padded to its longest prompt, as the papers' Hugging
 * Face scripts do: the pads are real cache slots (bytes, budget) that
 * attention masks; see gen_options.n_pad for positions. */


void pad_buf_free(struct pad_buf *pb)
{
    free(pb->tokens);
    free(pb->n_pad);
    memset(pb, 0, sizeof *pb);
}

/* The token the pads hold: the model file names no pad token to this loader,
 * so EOS, as the reference scripts do when the tokenizer has no pad.  Its
 * value never reaches a real token (pads are masked). */
int pad_token(const struct runner *r)
{
    int id = r->s.tok ? tokenizer_eos(r->s.tok) : -1;
    if (id < 0 && r->s.m->cfg.n_eos > 0) id = r->s.m->cfg.eos_ids[0];
    return id >= 0 && id < r->s.m->cfg.n_vocab ? id : 0;
}

/* Rewrite reqs[0..nb) to point at left-padded copies of their prompts, each
 * maxlen tokens long; pb->n_pad gets the pad counts for gen_options.n_pad. */
int left_pad_batch(struct pad_buf *pb, struct gen_request *reqs, int nb, int maxlen,
                          int pad_id, struct eb_err *e)
{
    size_t need = (size_t)nb * (size_t)maxlen;
    if (need > pb->cap) {
        int *t = realloc(pb->tokens, need * sizeof *t);
        if (!t) return eb_fail(e, "out of memory for a padded batch of %zu tokens", need);
        pb->tokens = t;
        pb->cap = need;
    }
    if (nb > pb->n_cap) {
        int *p = realloc(pb->n_pad, (size_t)nb * sizeof *p);
        if (!p) return eb_fail(e, "out of memory for a padded batch");
        pb->n_pad = p;
        pb->n_cap = nb;
    }
    for (int k = 0; k < nb; k++) {
        int *row = pb->tokens + (size_t)k * maxlen, pads = maxlen - reqs[k].n_prompt;
        for (int t = 0; t < pads; t++) row[t] = pad_id;
        memcpy(row + pads, reqs[k].prompt, (size_t)reqs[k].n_prompt * sizeof *row);
        pb->n_pad[k] = pads;
        reqs[k].prompt = row;
        reqs[k].n_prompt = maxlen;
    }
    return 0;
}
