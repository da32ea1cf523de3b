/* session.c - backend, model cache, prompts, policies and generation of one
 * session (see session.h; teacher forcing is session_teacher.c). */
#include "harness/exp/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/exp/device.h"
#include "harness/exp/model_view.h"
#include "kernels/cuda/backend_cuda.h"
#include "model/unicode.h"
#include "policies/steering.h"

void session_init(struct session *s, const struct session_opts *o)
{
    memset(s, 0, sizeof *s);
    if (o) s->o = *o;
    s->think_end_id = -1;
}

/* The weights, then the backend: a CUDA pool is reserved once per backend,
 * for the model it was reserved with. */
static void drop_weights(struct session *s)
{
    model_free(s->m);
    s->m = NULL;
    if (device_is_cuda(s->be)) {
        s->be->destroy(s->be);
        s->be = NULL;
    }
}

static void drop_model(struct session *s)
{
    drop_weights(s);
    tokenizer_free(s->tok);
    model_file_close(s->mf);
    free(s->model_name);
    s->tok = NULL;
    s->mf = NULL;
    s->model_name = NULL;
    s->think_end_id = -1;
}

void session_close(struct session *s)
{
    if (!s) return;
    drop_model(s);
    if (s->be) s->be->destroy(s->be);
    s->be = NULL;
}

int session_open(struct session *s, const char *model, enum model_weights w, int need_tok,
                 struct eb_err *e)
{
    if (!(s->model_name && !strcmp(s->model_name, model) && s->weights == w)) {
        drop_model(s);
        if (model_file_open(model, &s->mf, e)) return -1;
        struct eb_err te = {0};
        if (model_file_tokenizer(s->mf, &s->tok, &te)) s->tok = NULL; /* tests' tiny models */
        s->weights = w;
        if (!(s->model_name = strdup(model))) {
            drop_model(s);
            return eb_fail(e, "out of memory");
        }
        s->think_end_id = s->tok ? tokenizer_find(s->tok, "</think>") : -1;
    }
    if (need_tok && !s->tok) return eb_fail(e, "%s: the model has no tokenizer", model);
    return 0;
}

int session_load(struct session *s, struct eb_err *e)
{
    if (!s->mf) return eb_fail(e, "session: no model open");
    if (s->m) return 0;
    if (!s->be && device_backend(s->o.device, s->o.threads, &s->be, e)) return -1;
    if (s->count_calls && !device_is_cuda(s->be) && backend_count_calls(s->be) == 0) {
        struct backend *counted = backend_count_create(s->be);
        if (!counted) return eb_fail(e, "session: out of memory for the call counter");
        s->be = counted;
    }
    struct model_load_opts lo = {.weights = s->weights};
    /* A model too large for the device is an out-of-memory outcome, found
     * before uploading gigabytes of it. */
    if (device_is_cuda(s->be) &&
        backend_cuda_check_weights(s->be, model_weight_bytes_held(s->mf, &lo, cuda_matrix_bytes),
                                   e))
        return eb_wrap(e, model_file_path(s->mf));
    return model_load_opts(s->mf, s->be, &lo, &s->m, e);
}

void session_count_calls(struct session *s)
{
    s->count_calls = 1;
}

int session_model(struct session *s, const char *model, enum model_weights w, struct eb_err *e)
{
    if (session_open(s, model, w, 0, e)) return -1;
    if (session_load(s, e)) {
        drop_model(s);
        return -1;
    }
    return 0;
}

int session_encode(const struct session *s, enum chat_template tpl, int add_bos,
                   const char *user, size_t len, int **ids, int *n, struct eb_err *e)
{
    *ids = NULL;
    *n = 0;
    if (!s->tok) return eb_fail(e, "%s: the model has no tokenizer", s->model_name);
    if (len == 0) return eb_fail(e, "the prompt is empty");
    size_t ok = utf8_validate((const unsigned char *)user, len);
    if (ok != len) return eb_fail(e, "the prompt is not valid UTF-8 (byte %zu)", ok);
    if (memchr(user, '\0', len)) return eb_fail(e, "the prompt contains a NUL character");
    if (chat_encode(s->tok, tpl, user, ids, n, e)) return -1;
    int bos = tokenizer_bos(s->tok);
    if (!add_bos || bos < 0) return 0;
    int *nb = realloc(*ids, (size_t)(*n + 1) * sizeof *nb);
    if (!nb) {
        free(*ids);
        *ids = NULL;
        return eb_fail(e, "out of memory");
    }
    memmove(nb + 1, nb, (size_t)*n * sizeof *nb);
    nb[0] = bos;
    *ids = nb;
    (*n)++;
    return 0;
}

/* ---- generation ---- */

void session_gen_options(const struct session *s, const struct session_gen_opts *o,
                         struct gen_hooks *hooks, struct gen_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->max_live = o->max_live;
    opt->n_pad = o->n_pad;
    opt->ignore_eos = o->ignore_eos;
    opt->prefill_chunk = o->prefill_chunk;
    opt->n_ctx = o->n_ctx;
    opt->n_vocab_valid = s->tok ? tokenizer_n_vocab(s->tok) : 0;
    opt->mem_limit = s->o.mem_limit;
    opt->kv_type = o->kv_type;
    opt->fill_to = o->fill_to;
    if (o->policy && o->policy->glue) {
        session_policy_hooks(o->policy, o->hooks, hooks);
        opt->hooks = hooks;
    } else if (o->hooks) {
        *hooks = *o->hooks;
        opt->hooks = hooks;
    }
}

size_t session_estimate(const struct session *s, const struct gen_request *reqs, int n,
                        const struct gen_options *opt)
{
    return generate_estimate_bytes(&s->m->cfg, s->m->weight_bytes, reqs, n, opt);
}

size_t session_mem_limit(const struct session *s)
{
    return s->o.mem_limit ? s->o.mem_limit : generate_available_memory() + s->m->weight_bytes;
}

/* CUDA: the device pool for this batch (kept, reserved, or re-planned when
 * a later generate asks for more than an empty pool holds), and generate()
 * held to what is free in it.  The pool serves allocations only while a
 * generate runs (session_generate turns it off after). */
static int ensure_pool(struct session *s, const struct gen_request *reqs, int n,
                       struct gen_options *opt, struct gen_mem_plan *plan_out, struct eb_err *e)
{
    memset(plan_out, 0, sizeof *plan_out);
    if (!device_is_cuda(s->be)) return 0;
    int live = opt->max_live > 0 && opt->max_live < n ? opt->max_live : n;
    /* The plan is what generate() allocates from the pool: each live cache
     * (query ring included), the forward buffers, the probabilities a
     * policy observes and the policy's scratch. */
    generate_plan(&s->m->cfg, 0, reqs, n, opt, plan_out);
    struct kv_pool_need need = {plan_out->kv / (size_t)live + 1,
                                plan_out->forward + plan_out->probs + plan_out->hooks, live};
    struct kv_pool_plan plan;
    if (backend_cuda_ensure_pool(s->be, &need, &plan, e)) return -1;
    backend_cuda_pool_serve(s->be, 1);
    size_t used, peak;
    backend_cuda_pool_usage(s->be, &used, &peak);
    /* The check counts host bytes too (positions, pad flags, host logits):
     * they are not in the pool. */
    size_t cap = s->m->weight_bytes + (plan.pool_bytes - used) + plan_out->host;
    if (!opt->mem_limit || opt->mem_limit > cap) opt->mem_limit = cap;
    return 0;
}

/* An out-of-memory inside a planned generate: say by how much the plan
 * missed, so a plan that is wrong is seen as one. */
static void explain_miss(struct session *s, const struct gen_mem_plan *plan, size_t used0,
                         struct eb_err *e)
{
    size_t used, peak;
    backend_cuda_pool_usage(s->be, &used, &peak);
    size_t took = peak > used0 ? peak - used0 : 0;
    size_t len = strnlen(e->msg, sizeof e->msg - 1);
    int n = snprintf(e->msg + len, sizeof e->msg - len,
                     " (memory plan: %zu device bytes for this generate; %zu were allocated from "
                     "the pool when it failed)", plan->device, took);
    (void)n; /* a message cut short is still the message */
}

int session_generate(struct session *s, const struct gen_request *reqs, int n,
                     const struct session_gen_opts *o, struct gen_result *res,
                     struct gen_stats *stats, struct eb_err *e)
{
    if (!s->m) return eb_fail(e, "session: no model loaded");
    if (o->policy && session_policy_glue(o->policy, s->m, e)) return -1;
    struct gen_hooks hooks;
    struct gen_options opt;
    session_gen_options(s, o, &hooks, &opt);
    struct gen_mem_plan plan;
    if (ensure_pool(s, reqs, n, &opt, &plan, e)) return -1;
    size_t used0 = 0, peak0;
    if (device_is_cuda(s->be)) backend_cuda_pool_usage(s->be, &used0, &peak0);
    int rc;
    if (o->teacher) {
        if (stats) memset(stats, 0, sizeof *stats);
        rc = session_teacher_run(s, reqs, n, &opt, o->teacher, res, e);
    } else {
        rc = generate(s->m, reqs, n, &opt, res, stats, e);
    }
    /* The CUDA backend's ops return nothing: its first failure is sticky. */
    struct eb_err ce = {0};
    if (rc && e->kind == EB_ERR_NOMEM && device_is_cuda(s->be)) explain_miss(s, &plan, used0, e);
    if (device_is_cuda(s->be)) backend_cuda_pool_serve(s->be, 0);
    if (device_is_cuda(s->be) && backend_cuda_status(s->be, &ce)) {
        /* The device's record is the cause and generate's error its
         * consequence (a faulted alloc's NULL reads as out of memory there). */
        if (!rc) gen_results_free(res, n);
        *e = ce;
        rc = -1;
    }
    return rc;
}

/* ---- opening a policy for a model: defaults -> create -> budget check ->
 * glue -> hooks.  The one copy of that sequence: the runner, generate, bench
 * and the tests use it. ---- */

int session_policy_resolve(const char *spec, const char *model, const char *dataset,
                           int budget, int no_defaults, const struct policy_entry **entry,
                           struct policy_params *params, struct eb_err *e)
{
    struct policy_where at = {model, dataset, budget, model_registry_name};
    return policy_resolve(spec, no_defaults ? NULL : &at, entry, params, e);
}

int policy_target_open(const struct policy_target *t, const struct policy_request *rq,
                       struct session_policy *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    out->entry = rq->entry;
    out->budget = rq->budget > 0 ? rq->budget : 0;
    policy_params_format(rq->entry, rq->params, out->spec, sizeof out->spec);
    /* FullKV asks for nothing and pays nothing, unless its counters are wanted. */
    if (!strcmp(rq->entry->name, "fullkv") && !rq->keep_fullkv) return 0;
    /* What the sentence and steering policies read: the tokenizer, the
     * model's name (default vector vectors/<name>.bin) and identity, the
     * vector file. */
    struct policy_model pm = policy_model_of_config(t->cfg);
    struct token_text text;   /* read only while the policy is created */
    if (t->tok) {
        text = token_text_of(t->tok);
        pm.text = &text;
    }
    pm.model_name = t->model_name;
    pm.steer_vector = rq->steer_vector;
    if (steering_model_identity(t->cfg, out->identity, sizeof out->identity, e)) return -1;
    pm.model_identity = out->identity;
    /* The budget is checked once on each path: by the glue with a model,
     * here without one. */
    if (policy_instantiate(rq->entry, rq->params, &pm, &out->pol, e) ||
        (t->m ? session_policy_glue(out, t->m, e) : policy_check_budget(out->pol, out->budget, e))) {
        session_policy_close(out);
        return -1;
    }
    return 0;
}

int session_policy_open(const struct session *s, const struct policy_request *rq,
                        struct session_policy *out, struct eb_err *e)
{
    struct policy_target t = {session_config(s), s->m, s->tok, s->model_name};
    if (!t.cfg) return eb_fail(e, "session: no model open");
    return policy_target_open(&t, rq, out, e);
}

int session_policy_glue(struct session_policy *sp, const struct model *m, struct eb_err *e)
{
    if (!sp->pol || sp->glue) return 0;
    return policy_glue_create(sp->pol, sp->budget, m, &sp->glue, e);
}

void session_policy_hooks(struct session_policy *sp, const struct gen_hooks *mine,
                          struct gen_hooks *out)
{
    if (sp && sp->glue) policy_glue_hooks(sp->glue, mine, out);
    else if (mine) *out = *mine;
    else memset(out, 0, sizeof *out);
}

void session_policy_close(struct session_policy *sp)
{
    policy_glue_free(sp->glue);
    policy_free(sp->pol);
    memset(sp, 0, sizeof *sp);
}
