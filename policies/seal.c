/* seal.c - SEAL steering (../shared/specs/policies.md §6): FullKV plus
 * h <- h + coef * V on the residual stream entering `layer`, only at rows
 * whose input token is a split token ("\n\n" in its text) inside the
 * thought, as the runtime runs the forward (policy steer hook), so the
 * steered state flows into that token's K/V at later layers and into the
 * logits.  Nothing is evicted.  It also counts Check sentences (N_o), for
 * the trace statistics, and keeps each sentence's span and label (no
 * similarity: it builds no sentence representations). */
#include <stdlib.h>

#include "follow_hooks.h"
#include "policies.h"

/* The values of seal_params (param_def.offset). */
struct seal_params {
    double coef;
    int layer;
    int split;
    int think;
    int check_space;
};

const struct param_def seal_params[] = {
    {"coef", PARAM_FLOAT, -1.0, -100, 100, NULL, "steering coefficient c in h + c * V",
     offsetof(struct seal_params, coef)},
    {"layer", PARAM_INT, 0, 0, 1000, NULL, "steering layer; 0: the vector file's",
     offsetof(struct seal_params, layer)},
    {"split", PARAM_CHOICE, 0, 0, 1, "vocab|pairs",
     "split tokens: SEAL's (text contains \"\\n\\n\"), or also a \"\\n\"-led token after a "
     "\"\\n\"-ended one (tokenizers that write \"\\n\\n\" as two tokens, e.g. SmolLM2)",
     offsetof(struct seal_params, split)},
    {"think", PARAM_CHOICE, 0, 0, 1, "tags|always",
     "thought region: <think>..</think>, or every generated token (models without <think>)",
     offsetof(struct seal_params, think)},
    {"check_space", PARAM_BOOL, 0, 0, 1, NULL,
     "N_o statistics: also count check words with a leading space",
     offsetof(struct seal_params, check_space)},
    {NULL, PARAM_INT, 0, 0, 0, NULL, NULL, 0},
};

struct seal {
    struct follower f;       /* first: the follow_hook_* take the state as the follower */
    double coef;
};

static void seal_destroy(void *self)
{
    struct seal *s = self;
    if (!s) return;
    follower_close(&s->f);
    free(s);
}

static int seal_create(const struct policy_params *p, const struct policy_model *m, void **self,
                       struct policy_info *info, struct eb_err *e)
{
    const struct seal_params *prm = policy_typed(p);
    struct seal *s = eb_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->coef = prm->coef;
    struct follow_opts o = {
        .name = "seal", .check_space = prm->check_space, .steer = 1, .layer = prm->layer,
        .mode = prm->think == 0 ? THINK_TAGS : THINK_ALWAYS,
        .pairs = prm->split, .dim = 0, .tau = 1.0f, .alpha0 = s->coef,
    };
    if (follower_open(&s->f, &o, m, e)) {
        seal_destroy(s);
        return -1;
    }
    *info = (struct policy_info){.schedule = POLICY_NEVER};
    *self = s;
    return 0;
}

static int seal_observe(void *self, int seq, const struct step_view *sv, struct eb_err *e)
{
    struct seal *s = self;
    struct follow_seq *q;
    if (follower_live(&s->f, seq, &q, e)) return -1;
    return q ? follower_push(&s->f, q, sv->token, e) : 0;
}

static int seal_select(void *self, int seq, const struct cache_view *cv, int budget,
                       struct keep_set *out, struct eb_err *e)
{
    (void)self; (void)seq; (void)cv; (void)budget; (void)e;
    keep_set_none(out);
    return 0;
}

const struct policy_ops seal_ops = {
    .name = "seal",
    .create = seal_create,
    .destroy = seal_destroy,
    .begin_sequence = follow_hook_begin,
    .end_sequence = follow_hook_end,
    .observe = seal_observe,
    .select = seal_select,
    .steer = follow_hook_steer,
    .trace_stats = follow_hook_trace_stats,
    .trace_sentences = follow_hook_trace_sentences,
};
