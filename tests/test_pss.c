/* test_pss.c - per-sample PSS statistics through the runner (needs SmolLM2:
 * the sentence policies read the tokenizer, which the tiny fixtures lack).
 *
 *   - fullkv stores no sentence fields (NULL: not measured);
 *   - fullkv-pss (SkipKV's tracker, eviction off) generates exactly FullKV's
 *     text and stores sentences, pairs above tau, PSS mean/max and N_o;
 *   - those values equal the policy's own trace statistics for the same
 *     prompt run alone (generate + glue + policy_trace_stats), while the
 *     runner ran the prompts reordered (grouped batching): a sample gets its
 *     own sequence's statistics;
 *   - skipkv-sent (evicting) stores them too, within their ranges. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/config.h"
#include "harness/policy_glue.h"
#include "harness/runner.h"
#include "harness/sweep.h"
#include "kernels/backend.h"
#include "model/generate.h"
#include "model/model.h"
#include "model/model_tokenizer.h"
#include "model/modelfile.h"
#include "model/tokenizer.h"
#include "policies/registry.h"
#include "policies/steering.h"
#include "test.h"

#define SMOL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
enum { N_ITEMS = 3, MAX_NEW = 24 };

/* Prompts of different lengths with sentences in them, so grouped batching
 * reorders them. */
static const char *const texts[N_ITEMS] = {
    "Question: Tom has 3 apples.\nHe buys 4 more.\nHow many apples does he have now?\n\n",
    "Solve.\nWhat is 2 + 2?\n",
    "A train leaves at noon.\nIt travels 60 km per hour.\nWait, check the units again.\n"
    "How far has it gone at 3 pm?\n\n",
};

static struct runner_item items[N_ITEMS];
static int *ids[N_ITEMS];

static int find_point(const struct sweep *s, const char *policy, int bs)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->pts[i].policy, policy) && s->pts[i].batch_size == bs) return i;
    return -1;
}

/* The trace statistics of one prompt generated alone under spec. */
static int direct_stats(const struct model *m, const struct tokenizer *tok, const char *spec,
                        const struct runner_item *it, struct policy_trace_stats *out,
                        char **text)
{
    struct eb_err e = {0};
    struct policy_model pm = policy_model_of(m);
    pm.tok = tok;
    struct policy *p = NULL;
    struct policy_glue *g = NULL;
    struct gen_hooks hooks;
    struct gen_request req = {.prompt = it->prompt, .n_prompt = it->n_prompt, .max_new = MAX_NEW,
                              .sampling = sampler_params_greedy()};
    struct gen_options opt = {0};
    struct gen_result res;
    struct gen_stats st;
    int rc = -1;
    opt.n_vocab_valid = tokenizer_n_vocab(tok);
    if (policy_create(spec, &pm, &p, &e) || policy_glue_create(p, 0, m, &g, &e)) goto out;
    policy_glue_hooks(g, NULL, &hooks);
    opt.hooks = &hooks;
    if (generate(m, &req, 1, &opt, &res, &st, &e)) goto out;
    size_t tl;
    int drc = tokenizer_decode(tok, res.tokens, res.n_tokens, text, &tl, &e);
    gen_results_free(&res, 1);
    if (drc || policy_trace_stats(p, 0, out)) goto out;
    rc = 0;
out:
    if (rc) fprintf(stderr, "  direct run: %s\n", e.msg);
    policy_glue_free(g);
    policy_free(p);
    return rc;
}

static void test_pss_samples(void)
{
    if (access(SMOL, R_OK) != 0) SKIP("%s absent (make deps downloads it)", SMOL);
    struct eb_err e = {0};
    struct model_file *mf = NULL;
    struct tokenizer *tok = NULL;
    struct backend *be = NULL;
    struct model *m = NULL;
    struct runner *r = NULL;
    struct exp_config c;
    struct sweep s;
    struct run_output out[3];
    memset(&c, 0, sizeof c);
    memset(&s, 0, sizeof s);
    memset(out, 0, sizeof out);
    CHECK(model_file_open(SMOL, &mf, &e) == 0);
    CHECK(mf && model_file_tokenizer(mf, &tok, &e) == 0);
    if (!tok) goto done;
    for (int i = 0; i < N_ITEMS; i++) {
        int n = 0;
        CHECK(tokenizer_encode(tok, texts[i], strlen(texts[i]), 0, &ids[i], &n, &e) == 0);
        items[i] = (struct runner_item){.id = NULL, .reference = "7", .prompt = ids[i],
                                        .n_prompt = n};
    }
    const char *cfg = "{\"models\": \"" SMOL "\", \"datasets\": \"synthetic:3\","
                      " \"policies\": [\"fullkv\", \"fullkv-pss\", \"skipkv-sent\"],"
                      " \"budgets\": 24, \"batch_sizes\": 3, \"batching\": \"grouped\","
                      " \"max_new_tokens\": 24}";
    CHECK(exp_config_parse(cfg, strlen(cfg), "pss.json", &c, &e) == 0);
    CHECK_MSG(sweep_expand(&c, NULL, runner_policy_check, &s, &e) == 0, "%s", e.msg);
    struct runner_opts o;
    memset(&o, 0, sizeof o);
    o.threads = 2;
    CHECK(runner_create(&o, &r, &e) == 0);
    /* grouped batches of 3: the runner reorders the prompts by length */
    const char *pol[3] = {"fullkv", "fullkv-pss", "skipkv-sent"};
    const int bs[3] = {3, 3, 3};
    for (int k = 0; k < 3; k++) {
        int i = find_point(&s, pol[k], bs[k]);
        CHECK_MSG(i >= 0, "no point %s bs %d", pol[k], bs[k]);
        if (i < 0) goto done;
        CHECK_MSG(runner_run_items(r, &c, &s.pts[i], items, N_ITEMS, &out[k], &e) == 0, "%s",
                  e.msg);
        CHECK_MSG(!strcmp(out[k].run.status, "ok") && out[k].n_samples == N_ITEMS,
                  "%s: %s %s", pol[k], out[k].run.status, out[k].run.error ? out[k].run.error : "");
        if (out[k].n_samples != N_ITEMS) goto done;
    }
    for (int i = 0; i < N_ITEMS; i++) {
        const struct sample_record *full = &out[0].samples[i], *p3 = &out[1].samples[i],
                                   *sk = &out[2].samples[i];
        /* fullkv measures nothing */
        CHECK(full->n_sentences < 0 && full->n_redundant_pairs < 0 && isnan(full->pss_mean) &&
              full->n_nonexec < 0 && isnan(full->steer_alpha_final));
        /* the observer changes nothing */
        CHECK_STR(p3->text, full->text);
        /* measured, in range, no steering */
        CHECK_MSG(p3->n_sentences >= 2, "item %d: %lld sentences", i, (long long)p3->n_sentences);
        CHECK(p3->n_redundant_pairs >= 0 && p3->n_nonexec >= 0);
        CHECK(isfinite(p3->pss_mean) && isfinite(p3->pss_max));
        CHECK(p3->pss_mean >= -1.0001 && p3->pss_mean <= p3->pss_max + 1e-9 &&
              p3->pss_max <= 1.0001);
        CHECK(isnan(p3->steer_alpha_final));
        /* the evicting preset stores them as well (PSS NULL when no pair of complete
         * sentences was compared) */
        CHECK_MSG(sk->n_sentences >= 1 && sk->n_redundant_pairs >= 0 &&
                  (isnan(sk->pss_mean) || (sk->pss_mean <= sk->pss_max + 1e-9 &&
                                           sk->pss_max <= 1.0001)) &&
                  isnan(sk->steer_alpha_final),
                  "item %d: %lld sentences, %lld pairs, pss %g..%g, alpha %g", i,
                  (long long)sk->n_sentences, (long long)sk->n_redundant_pairs, sk->pss_mean,
                  sk->pss_max, sk->steer_alpha_final);
    }
    CHECK(out[1].samples[2].n_nonexec >= 1); /* "Wait" in item 2's prompt */
    CHECK(out[1].samples[0].n_compressions == 0);

    /* The same numbers straight from the policy, each prompt alone. */
    be = backend_cpu_create(2);
    CHECK(be && model_load(mf, be, &m, &e) == 0);
    for (int i = 0; m && i < N_ITEMS; i++) {
        struct policy_trace_stats t;
        char *text = NULL;
        CHECK(direct_stats(m, tok, "fullkv-pss", &items[i], &t, &text) == 0);
        const struct sample_record *p3 = &out[1].samples[i];
        CHECK_STR(text, p3->text);
        CHECK(t.valid && t.s.n_sentences == p3->n_sentences && t.s.n_check == p3->n_nonexec &&
              t.s.n_pairs_above == p3->n_redundant_pairs);
        CHECK_NEAR(t.s.pss_mean, p3->pss_mean, 1e-3);
        CHECK_NEAR(t.s.pss_max, p3->pss_max, 1e-3);
        CHECK(t.alpha == 0.0 && t.n_steered == 0);
        free(text);
    }
done:
    for (int k = 0; k < 3; k++) run_output_free(&out[k]);
    runner_free(r);
    sweep_free(&s);
    exp_config_free(&c);
    for (int i = 0; i < N_ITEMS; i++) free(ids[i]);
    model_free(m);
    if (be) be->destroy(be);
    tokenizer_free(tok);
    model_file_close(mf);
}

/* The config key steer_vector: a non-empty string, checked for existence
 * before anything runs. */
static void test_config_steer_vector(void)
{
    struct exp_config c;
    struct eb_err e = {0};
    const char *ok = "{\"models\": \"tests/fixtures/models/tiny-llama\", \"datasets\": \"synthetic:1\", \"steer_vector\": "
                     "\"/nonexistent/v.bin\"}";
    CHECK(exp_config_parse(ok, strlen(ok), "a.json", &c, &e) == 0);
    CHECK_STR(c.steer_vector, "/nonexistent/v.bin");
    CHECK(exp_config_check_resources(&c, NULL, &e) == -1);
    CHECK(strstr(e.msg, "$.steer_vector") != NULL);
    exp_config_free(&c);
    const char *bad = "{\"models\": \"x\", \"datasets\": \"synthetic:1\", \"steer_vector\": 3}";
    CHECK(exp_config_parse(bad, strlen(bad), "b.json", &c, &e) == -1);
    CHECK_MSG(strstr(e.msg, "$.steer_vector") != NULL, "%s", e.msg);
    exp_config_free(&c);
    const char *empty = "{\"models\": \"x\", \"datasets\": \"synthetic:1\", \"steer_vector\": \"\"}";
    CHECK(exp_config_parse(empty, strlen(empty), "c.json", &c, &e) == -1);
    exp_config_free(&c);
}

/* fullkv-pss is an observer: it never selects and needs no budget. */
static void test_fullkv_pss_preset(void)
{
    const struct policy_entry *en;
    struct policy_params pp;
    struct eb_err e = {0};
    CHECK(policy_parse("fullkv-pss", &en, &pp, &e) == 0);
    CHECK(policy_param_int(&pp, "evict") == 0 && policy_param_int(&pp, "steer") == 0 &&
          policy_param_int(&pp, "sentence") == 1);
    CHECK(policy_parse("skipkv", &en, &pp, &e) == 0 && policy_param_int(&pp, "evict") == 1);
}

int main(void)
{
    RUN(test_fullkv_pss_preset);
    RUN(test_config_steer_vector);
    RUN(test_pss_samples);
    return test_summary("pss");
}
