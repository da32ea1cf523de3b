/* session.h - one place that runs a model for every command.
 *
 * A session holds the backend of --device (created on first need), the model
 * last asked for (file, tokenizer and weights, kept for the next request with
 * the same name and weight mode), renders and encodes prompts, opens a policy
 * for the model (defaults -> create -> budget check -> glue -> hooks) and
 * generates.  runner (exp, run), generate, calibrate and bench all go
 * through it, so a request reaches the same code whichever command makes it.
 *
 * On a CUDA backend, the weights are checked against the device's free
 * memory before they are uploaded (EB_ERR_NOMEM: the point's 'oom'), each
 * generate() makes sure the device pool holds its batch
 * (backend_cuda_ensure_pool: kept, reserved, or re-planned when empty and
 * too small; EB_ERR_NOMEM otherwise) and ends by reading the backend's
 * sticky error.
 *
 * Teacher forcing (session_gen_opts.teacher): each request's FullKV greedy
 * trace is replayed under the policy: both caches are fed the FullKV token at
 * every step, and the two next-token distributions are compared (fidelity
 * mode of `exp`; session_teacher.c). */
#ifndef EB_SESSION_H
#define EB_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "model/generate.h"
#include "model/model_tokenizer.h"
#include "model/modelfile.h"
#include "policies/registry.h"
#include "harness/exp/policy_glue.h"
#include "util/err.h"

struct session_opts {
    const char *device;          /* cpu (NULL) | cuda | cuda:N */
    int threads;                 /* CPU threads; 0: all cores */
    size_t mem_limit;            /* bytes for weights + KV + activations; 0: available memory */
};

/* Read-only for callers; session_* functions change it. */
struct session {
    struct session_opts o;
    struct backend *be;          /* NULL until weights are loaded */
    char *model_name;            /* the model asked for last */
    enum model_weights weights;
    struct model_file *mf;
    struct tokenizer *tok;       /* NULL: the model file has none (tests' tiny models) */
    struct model *m;             /* NULL until session_load */
    int think_end_id;            /* "</think>" or -1 */
    int count_calls;             /* session_count_calls was asked for */
};

void session_init(struct session *s, const struct session_opts *o);
void session_close(struct session *s);

/* Open model (file and tokenizer; no weights yet) unless it is the one open
 * with the same weight mode.  need_tok: a missing tokenizer is an error. */
int session_open(struct session *s, const char *model, enum model_weights w, int need_tok,
                 struct eb_err *e);
/* Create the backend (when none) and load the open model's weights (when not loaded). */
int session_load(struct session *s, struct eb_err *e);
/* Before session_load: run a CPU backend through the counting wrapper
 * (backend_count_create), so gen_stats counts backend calls per decode step.
 * The CUDA backend is not wrapped (its own entry points read its struct). */
void session_count_calls(struct session *s);
/* session_open (tokenizer optional) + session_load. */
int session_model(struct session *s, const char *model, enum model_weights w, struct eb_err *e);
/* The open model's configuration (after session_open). */
static inline const struct model_config *session_config(const struct session *s)
{
    return s->m ? &s->m->cfg : s->mf ? model_file_config(s->mf) : NULL;
}

/* Render user text with a chat template and encode it (BOS first when
 * add_bos and the tokenizer has one).  Empty, invalid UTF-8 or NUL: an error. */
int session_encode(const struct session *s, enum chat_template tpl, int add_bos,
                   const char *user, size_t len, int **ids, int *n, struct eb_err *e);

/* ---- a policy for the model ---- */

struct session_policy {
    const struct policy_entry *entry;
    struct policy *pol;          /* NULL: FullKV run bare (keep_fullkv unset) */
    struct policy_glue *glue;    /* NULL until the weights are loaded */
    int budget;                  /* 0: none */
    char spec[256];              /* resolved "name:key=value,..." */
    char identity[256];          /* the model's steering identity */
};

/* Which model a policy is for: a session's, or one a caller loaded itself. */
struct policy_target {
    const struct model_config *cfg;
    const struct model *m;       /* NULL: no glue yet (session_policy_glue later) */
    const struct tokenizer *tok; /* NULL: none (sentence policies then fail clearly) */
    const char *model_name;      /* default steering vector vectors/<name>.bin */
};

struct policy_request {
    const struct policy_entry *entry;
    const struct policy_params *params;  /* resolved, defaults included */
    int budget;                  /* 0: none */
    const char *steer_vector;    /* NULL: the policy's default */
    int keep_fullkv;             /* 1: FullKV gets an instance and glue too (their counters) */
};

/* Resolve spec NAME[:k=v,...] with the model's defaults from
 * policies/policy_defaults.json for dataset (NULL: none) at budget, unless
 * no_defaults; explicit parameters win. */
int session_policy_resolve(const char *spec, const char *model, const char *dataset,
                           int budget, int no_defaults, const struct policy_entry **entry,
                           struct policy_params *params, struct eb_err *e);

int policy_target_open(const struct policy_target *t, const struct policy_request *rq,
                       struct session_policy *out, struct eb_err *e);
/* The same for the session's open model. */
int session_policy_open(const struct session *s, const struct policy_request *rq,
                        struct session_policy *out, struct eb_err *e);
/* Create the glue once the weights are in (no-op without a policy or when made). */
int session_policy_glue(struct session_policy *sp, const struct model *m, struct eb_err *e);
/* The hooks generate() gets: the policy's (when any) around mine (may be NULL). */
void session_policy_hooks(struct session_policy *sp, const struct gen_hooks *mine,
                          struct gen_hooks *out);
void session_policy_close(struct session_policy *sp);

/* ---- generation ---- */

/* Teacher forcing: per-request outputs, each [n]. */
struct session_teacher {
    double *kl_mean;             /* mean KL(FullKV || policy) over steps */
    double *top1_agree;          /* fraction of steps whose argmax agrees */
    int64_t *first_div;          /* first disagreeing step; -1: none */
};

struct session_gen_opts {
    int max_live;                /* 0: all at once */
    const int *n_pad;            /* NULL, or [n] left pads (see gen_options) */
    int ignore_eos;              /* run every sequence to max_new */
    int prefill_chunk;           /* 0: generate's default */
    int n_ctx;                   /* 0: the model's */
    const struct gen_hooks *hooks;       /* the caller's own (run after the policy's); NULL: none */
    struct session_policy *policy;       /* NULL: FullKV */
    struct session_teacher *teacher;     /* NULL: free-running generation */
    enum kv_type kv_type;                /* KV cache element type (0: f32) */
    int fill_to;                         /* > 0: gen_options.fill_to (long-context bench) */
};

/* The generate() options of o (hooks written into *hooks, which must outlive them). */
void session_gen_options(const struct session *s, const struct session_gen_opts *o,
                         struct gen_hooks *hooks, struct gen_options *opt);
/* generate()'s memory estimate and the limit it is held to. */
size_t session_estimate(const struct session *s, const struct gen_request *reqs, int n,
                        const struct gen_options *opt);
size_t session_mem_limit(const struct session *s);

/* Generate with the loaded model (session_load first).  res[n] filled (free
 * with gen_results_free); stats may be NULL. */
int session_generate(struct session *s, const struct gen_request *reqs, int n,
                     const struct session_gen_opts *o, struct gen_result *res,
                     struct gen_stats *stats, struct eb_err *e);

/* Teacher forcing (session_teacher.c); called by session_generate. */
int session_teacher_run(struct session *s, const struct gen_request *reqs, int n,
                        const struct gen_options *opt, struct session_teacher *t,
                        struct gen_result *res, struct eb_err *e);

#endif
