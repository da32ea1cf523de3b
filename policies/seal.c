/* seal.c - SEAL steering (../shared/specs/policies.md §6): FullKV plus
 * h <- h + coef * V on the residual stream entering `layer`, only at rows
 * whose input token is a split token ("\n\n" in its text) inside the
 * thought, as the runtime runs the forward (policy steer hook), so the
 * steered state flows into that token's K/V at later layers and into the
 * logits.  Nothing is evicted.  It also counts Check sentences (N_o), for
 * the trace statistics, and keeps each sentence's span and label (no
 * similarity: it builds no sentence representations).  A row (row.h) with
 * no score, only the follower (follow.h). */
#include "policies.h"
#include "row.h"

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

static int seal_follow_opts(const void *prm, const struct policy_model *m, struct follow_opts *o,
                            struct eb_err *e)
{
    (void)m; (void)e;
    const struct seal_params *p = prm;
    *o = (struct follow_opts){
        .name = "seal", .check_space = p->check_space, .steer = 1, .layer = p->layer,
        .mode = p->think == 0 ? THINK_TAGS : THINK_ALWAYS,
        .pairs = p->split, .dim = 0, .tau = 1.0f, .alpha0 = p->coef,
    };
    return 0;
}

static const struct row_follow seal_follow = {.opts = seal_follow_opts};

/* No score: it never selects (POLICY_NEVER). */
const struct scorer_row seal_row = {.follow = &seal_follow,
                                    .base.info = {.schedule = POLICY_NEVER}};
