/* test_util.h - helpers shared by the test programs that read JSON fixtures
 * and run the tiny models: whole-file JSON, JSON numbers, model loading,
 * token comparison and a two-request greedy run under a policy.
 *
 * Each tests/test_*.c is built alone against the library, so these are
 * static inline: a test that uses only some of them still builds under
 * -Werror.  Include after test.h. */
#ifndef EB_TEST_UTIL_H
#define EB_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include <math.h>

#include "harness/exp/policy_glue.h"
#include "harness/exp/session.h"
#include "harness/store/store.h"
#include "kernels/backend.h"
#include "model/generate.h"
#include "policies/registry.h"

/* The whole file parsed as JSON; NULL when it is missing or not JSON. */
static inline cJSON *read_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    cJSON *j = NULL;
    if (s && fread(s, 1, (size_t)n, f) == (size_t)n) {
        s[n] = '\0';
        j = cJSON_Parse(s);
    }
    free(s);
    fclose(f);
    return j;
}

/* Integer member k of object o (the fixtures always have it). */
static inline int json_int(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItem(o, k)->valueint;
}

/* A JSON array of integers as a malloc'd array of *n ints (never NULL on
 * an empty or absent array: one slot is allocated, *n = 0). */
static inline int *json_ints(const cJSON *arr, int *n)
{
    *n = cJSON_GetArraySize(arr);
    int *v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *v);
    for (int i = 0; i < *n; i++) v[i] = cJSON_GetArrayItem(arr, i)->valueint;
    return v;
}

static inline int file_exists(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fclose(f);
    return 1;
}

/* A model file (GGUF, or a safetensors directory) loaded onto be with
 * weights held as asked; NULL, with the reason on stderr, when it cannot be
 * opened or loaded. */
static inline struct model *open_model_weights(struct backend *be, const char *path,
                                               enum model_weights weights)
{
    struct model_file *mf;
    struct model *m = NULL;
    struct eb_err e;
    if (model_file_open(path, &mf, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        return NULL;
    }
    struct model_load_opts o = {.weights = weights};
    if (model_load_opts(mf, be, &o, &m, &e)) fprintf(stderr, "  %s\n", e.msg);
    model_file_close(mf);
    return m;
}

/* The same in exact mode (f32 weights): what the golden tests against
 * transformers compare. */
static inline struct model *open_model_on(struct backend *be, const char *path)
{
    return open_model_weights(be, path, MODEL_WEIGHTS_F32);
}

static inline int same_ints(const int *a, int na, const int *b, int nb)
{
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* spec (no defaults file) opened at budget for a model the test loaded, by
 * the session's one policy-opening sequence (harness/exp/session.h); tok
 * may be NULL.  0, or -1 with e set. */
static inline int open_test_policy_vector(const struct model *m, const struct tokenizer *tok,
                                          const char *spec, int budget, const char *vector,
                                          struct session_policy *sp, struct eb_err *e)
{
    const struct policy_entry *entry;
    struct policy_params params;
    memset(sp, 0, sizeof *sp);
    if (session_policy_resolve(spec, NULL, NULL, budget, 1, &entry, &params, e)) return -1;
    struct policy_target t = {&m->cfg, m, tok, NULL};
    struct policy_request rq = {entry, &params, budget, vector, 1};
    return policy_target_open(&t, &rq, sp, e);
}

/* The same with the policy's default steering vector. */
static inline int open_test_policy(const struct model *m, const struct tokenizer *tok,
                                   const char *spec, int budget, struct session_policy *sp,
                                   struct eb_err *e)
{
    return open_test_policy_vector(m, tok, spec, budget, NULL, sp, e);
}

/* Greedy generation, in one batch, of the prompt and the prompt less its
 * last token, max_new tokens each (EOS ignored), with policy spec at budget
 * (spec NULL: none, FullKV).  Fills res[0..1]; the glue's max_slots and
 * compressions when asked (non-NULL).  0, or -1 with the reason on stderr. */
static inline int run_policy(const struct model *m, const char *spec, int budget,
                             const int *prompt, int n_prompt, int max_new,
                             struct gen_result *res, int *max_slots, long *compressions)
{
    struct eb_err e;
    struct session_policy sp = {0};
    struct gen_hooks hooks;
    struct gen_options opt = {.max_live = 2, .ignore_eos = 1};
    struct gen_request req[2];
    for (int i = 0; i < 2; i++)
        req[i] = (struct gen_request){.prompt = prompt, .n_prompt = n_prompt - i,
                                      .max_new = max_new, .sampling = sampler_params_greedy()};
    if (spec) {
        if (open_test_policy(m, NULL, spec, budget, &sp, &e)) {
            fprintf(stderr, "  %s\n", e.msg);
            return -1;
        }
        session_policy_hooks(&sp, NULL, &hooks);
        opt.hooks = &hooks;
    }
    int rc = generate(m, req, 2, &opt, res, NULL, &e);
    if (rc) fprintf(stderr, "  %s: %s\n", spec ? spec : "fullkv", e.msg);
    if (sp.glue) {
        struct policy_glue_stats st;
        policy_glue_stats(sp.glue, &st);
        if (max_slots) *max_slots = st.max_slots;
        if (compressions) *compressions = st.compressions;
    }
    session_policy_close(&sp);
    return rc;
}

/* First column of the first row of a query, as a number (NAN when NULL, no
 * row, or the query fails: the error goes to stderr). */
static inline int store_query_first_cell(void *ctx, int n, const char *const *names,
                                         const char *const *vals)
{
    (void)names;
    *(double *)ctx = n > 0 && vals[0] ? atof(vals[0]) : NAN;
    return 1;
}

static inline double store_query_number(struct store *st, const char *sql)
{
    double v = NAN;
    struct eb_err e = {0};
    if (store_query(st, sql, store_query_first_cell, &v, &e))
        fprintf(stderr, "  query: %s\n", e.msg);
    return v;
}

#endif
