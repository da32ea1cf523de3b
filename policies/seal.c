/* seal.c - SEAL steering (../shared/specs/policies.md §6): FullKV plus
 * h <- h + coef * V on the residual stream entering `layer`, only at rows
 * whose input token is a split token ("\n\n" in its text) inside the
 * thought, as the runtime runs the forward (policy steer hook), so the
 * steered state flows into that token's K/V at later layers and into the
 * logits.  Nothing is evicted.  It also counts Check sentences (N_o), for
 * the trace statistics, and keeps each sentence's span and label (no
 * similarity: it builds no sentence representations). */
#include <stdlib.h>
#include <string.h>

#include "policies.h"
#include "score.h"
#include "sentences.h"
#include "steering.h"
#include "trace_stats.h"

const struct param_def seal_params[] = {
    {"coef", PARAM_FLOAT, -1.0, -100, 100, NULL, "steering coefficient c in h + c * V"},
    {"layer", PARAM_INT, 0, 0, 1000, NULL, "steering layer; 0: the vector file's"},
    {"split", PARAM_CHOICE, 0, 0, 1, "vocab|pairs",
     "split tokens: SEAL's (text contains \"\\n\\n\"), or also a \"\\n\"-led token after a "
     "\"\\n\"-ended one (tokenizers that write \"\\n\\n\" as two tokens, e.g. SmolLM2)"},
    {"think", PARAM_CHOICE, 0, 0, 1, "tags|always",
     "thought region: <think>..</think>, or every generated token (models without <think>)"},
    {"check_space", PARAM_BOOL, 0, 0, 1, NULL,
     "N_o statistics: also count check words with a leading space"},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL},
};

struct seal_seq {
    struct steer_seq st;
    struct sent_tracker tr;  /* labels only (no hidden states) */
    int n_prompt;
    int failed;              /* a hook failed (reported then): the trackers are not consistent */
};

struct seal {
    double coef;
    struct policy_model m;
    struct sent_tokens tok;
    struct steerer sr;
    struct seq_table seqs;
    struct trace_stats_table done;   /* finished traces by sequence id */
};

static void seal_seq_free(void *p)
{
    struct seal_seq *q = p;
    if (!q) return;
    steer_seq_free(&q->st);
    sent_tracker_free(&q->tr);
    free(q);
}

static void seal_destroy(void *self)
{
    struct seal *s = self;
    if (!s) return;
    seq_table_free(&s->seqs, seal_seq_free);
    steerer_close(&s->sr);
    sent_tokens_free(&s->tok);
    trace_stats_table_free(&s->done);
    free(s);
}

static int seal_create(const struct policy_params *p, const struct policy_model *m, void **self,
                       struct policy_info *info, struct eb_err *e)
{
    if (!m->tok) return eb_fail(e, "policy seal needs the model's tokenizer (split tokens)");
    struct seal *s = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->coef = policy_param(p, "coef");
    s->m = *m;
    enum think_mode mode = policy_param_int(p, "think") == 0 ? THINK_TAGS : THINK_ALWAYS;
    if (sent_tokens_from_tokenizer(m->tok, policy_param_int(p, "check_space"), &s->tok, e) ||
        steerer_open(&s->sr, m, policy_param_int(p, "layer"), mode, &s->tok, "seal", e)) {
        seal_destroy(s);
        return -1;
    }
    s->sr.pairs = policy_param_int(p, "split");
    *info = (struct policy_info){.schedule = POLICY_NEVER};
    *self = s;
    return 0;
}

static int seal_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e)
{
    struct seal *s = self;
    void **slot = seq_table_slot(&s->seqs, seq, e);
    if (!slot) return -1;
    seal_seq_free(*slot);
    struct seal_seq *q = *slot = eb_calloc(1, sizeof *q, e);
    if (!q) return -1;
    q->n_prompt = sv->n_prompt;
    if (steer_seq_begin(&q->st, s->sr.mode, s->sr.pairs, sv, e)) return -1;
    if (sent_tracker_init(&q->tr, &s->tok, 0, 1.0f, e)) return -1;
    if (sent_tracker_tokens(&q->tr, sv->prompt, sv->n_prompt, e)) return -1;
    trace_stats_table_clear(&s->done, seq);
    return 0;
}

static void fill_stats(const struct seal *s, const struct seal_seq *q,
                       struct policy_trace_stats *out)
{
    sent_tracker_stats(&q->tr, &out->s);
    out->alpha = s->coef;
    out->n_steered = q->st.n_steered;
    out->valid = 1;
}

static void seal_end(void *self, int seq)
{
    struct seal *s = self;
    struct seal_seq *q = seq_table_get(&s->seqs, seq);
    if (!q) return;
    struct policy_trace_stats st = {0};
    fill_stats(s, q, &st);
    struct sent_info *v = NULL;
    struct eb_err e;
    int n = 0, lost = q->failed || sent_tracker_export(&q->tr, q->n_prompt, &v, &n, &e);
    trace_stats_table_put(&s->done, seq, &st, v, n, lost);
    seq_table_drop(&s->seqs, seq, seal_seq_free);
}

static int seal_observe(void *self, int seq, const struct step_view *sv, struct eb_err *e)
{
    struct seal *s = self;
    struct seal_seq *q = seq_table_get(&s->seqs, seq);
    if (!q) return 0;
    if (q->failed) return eb_fail(e, "policy seal: sequence %d's tracking failed earlier", seq);
    if (steer_seq_push(&q->st, sv->token, e) || sent_tracker_tokens(&q->tr, &sv->token, 1, e)) {
        q->failed = 1;
        return -1;
    }
    return 0;
}

static int seal_steer(void *self, int seq, int layer, struct backend *be, float *hidden,
                      int n_rows, int dim, struct eb_err *e)
{
    struct seal *s = self;
    struct seal_seq *q = seq_table_get(&s->seqs, seq);
    if (!q) return eb_fail(e, "policy seal: steer for unknown sequence %d", seq);
    if (q->failed) return eb_fail(e, "policy seal: sequence %d's tracking failed earlier", seq);
    return steerer_apply(&s->sr, &q->st, layer, be, hidden, n_rows, dim, s->coef, e);
}

static int seal_select(void *self, int seq, const struct cache_view *cv, int budget,
                       struct keep_set *out, struct eb_err *e)
{
    (void)self; (void)seq; (void)cv; (void)budget; (void)e;
    keep_set_none(out);
    return 0;
}

static int seal_trace_stats(const void *self, int seq, struct policy_trace_stats *out)
{
    const struct seal *s = self;
    memset(out, 0, sizeof *out);
    const struct seal_seq *q = seq_table_get(&s->seqs, seq);
    if (q) {
        fill_stats(s, q, out);
        return 0;
    }
    return trace_stats_table_get(&s->done, seq, out);
}

static int seal_trace_sentences(const void *self, int seq, struct sent_info **out, int *n,
                                struct eb_err *e)
{
    const struct seal *s = self;
    *out = NULL;
    *n = 0;
    const struct seal_seq *q = seq_table_get(&s->seqs, seq);
    if (q) return sent_tracker_export(&q->tr, q->n_prompt, out, n, e);
    return trace_stats_table_sentences(&s->done, seq, out, n, e);
}

const struct policy_ops seal_ops = {
    .name = "seal",
    .create = seal_create,
    .destroy = seal_destroy,
    .begin_sequence = seal_begin,
    .end_sequence = seal_end,
    .observe = seal_observe,
    .select = seal_select,
    .steer = seal_steer,
    .trace_stats = seal_trace_stats,
    .trace_sentences = seal_trace_sentences,
};
