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
 *   - skipkv-sent (evicting) stores them too, within their ranges;
 *   - the per-sentence rows (policy_trace_sentences through the runner): one
 *     per sentence, n_nonexec of them 'check', spans ordered and disjoint,
 *     the same as the policy's own for a prompt run alone; evicted steps only
 *     under an evicting preset (tau = -1 makes every earlier sentence
 *     redundant); none for fullkv; the rows and views in a results database;
 *   - seal keeps spans and labels without similarities, as long as the
 *     statistics (until the sequence id is reused). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/exp/config.h"
#include "harness/exp/model_view.h"
#include "harness/exp/policy_glue.h"
#include "harness/exp/runner.h"
#include "harness/store/store.h"
#include "harness/exp/sweep.h"
#include "kernels/backend.h"
#include "model/generate.h"
#include "model/model.h"
#include "model/model_tokenizer.h"
#include "model/modelfile.h"
#include "model/tokenizer.h"
#include "policies/registry.h"
#include "policies/steering.h"
#include "test.h"
#include "test_util.h"

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

/* The point of policy whose parameters set tau (or not). */
static int find_point(const struct sweep *s, const char *policy, int with_tau)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->pts[i].policy->name, policy) &&
            (strstr(s->pts[i].params_json, "tau") != NULL) == with_tau)
            return i;
    return -1;
}

/* The trace statistics and sentences of one prompt generated alone under spec. */
static int direct_stats(const struct model *m, const struct tokenizer *tok, const char *spec,
                        const struct runner_item *it, struct policy_trace_stats *out,
                        char **text, struct sent_info **sents, int *n_sents)
{
    struct eb_err e = {0};
    struct session_policy sp = {0};
    struct gen_hooks hooks;
    struct gen_request req = {.prompt = it->prompt, .n_prompt = it->n_prompt, .max_new = MAX_NEW,
                              .sampling = sampler_params_greedy()};
    struct gen_options opt = {0};
    struct gen_result res;
    struct gen_stats st;
    int rc = -1;
    opt.n_vocab_valid = tokenizer_n_vocab(tok);
    if (open_test_policy(m, tok, spec, 0, &sp, &e)) goto out;
    session_policy_hooks(&sp, NULL, &hooks);
    opt.hooks = &hooks;
    if (generate(m, &req, 1, &opt, &res, &st, &e)) goto out;
    size_t tl;
    int drc = tokenizer_decode(tok, res.tokens, res.n_tokens, text, &tl, &e);
    gen_results_free(&res, 1);
    if (drc || policy_trace_stats(sp.pol, 0, out) ||
        policy_trace_sentences(sp.pol, 0, sents, n_sents, &e))
        goto out;
    rc = 0;
out:
    if (rc) fprintf(stderr, "  direct run: %s\n", e.msg);
    session_policy_close(&sp);
    return rc;
}

/* The rows of sample sample_idx in o->sents: one per sentence in order,
 * n_nonexec of them 'check', spans ordered and disjoint, values in range.
 * Returns how many carry an evicted step (-1 on a failed check). */
static int check_rows(const struct run_output *o, int sample_idx, const char *what)
{
    const struct sample_record *smp = &o->samples[sample_idx];
    int n = 0, n_check = 0, n_evicted = 0, bad = 0;
    long prev_end = -1;
    for (int j = 0; j < o->n_sents; j++) {
        const struct sentence_record *x = &o->sents[j];
        if (x->sample_idx != sample_idx) continue;
        if (x->sent_idx != n || x->start_tok <= prev_end || x->end_tok < x->start_tok)
            bad = 1;
        if (!strcmp(x->kind, "check")) n_check++;
        else if (strcmp(x->kind, "others")) bad = 1;
        if (!isnan(x->max_sim) && (x->max_sim < -1.0001 || x->max_sim > 1.0001)) bad = 1;
        if (x->evicted_step != STORE_NONE) {
            n_evicted++;
            /* on_step also runs for an EOS token, which gen_tokens does not count */
            if (x->evicted_step < 1 || x->evicted_step > smp->gen_tokens + 1) bad = 1;
        }
        prev_end = (long)x->end_tok;
        n++;
    }
    CHECK_MSG(!bad && n == smp->n_sentences && n_check == smp->n_nonexec,
              "%s item %d: %d rows (%lld sentences), %d check (%lld), bad %d", what, sample_idx,
              n, (long long)smp->n_sentences, n_check, (long long)smp->n_nonexec, bad);
    return bad ? -1 : n_evicted;
}

/* The runs written to a results database: the rows per sample and the views. */
static void check_store(struct run_output *out, int n_out)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/eb_test_pss_%d.db", (int)getpid());
    unlink(path);
    struct store *st = NULL;
    struct eb_err e = {0};
    CHECK_MSG(store_open(path, &st, &e) == 0, "%s", e.msg);
    if (!st) return;
    for (int k = 0; k < n_out; k++)
        CHECK_MSG(store_write_run(st, &out[k].run, out[k].samples, out[k].n_samples,
                                  out[k].sents, out[k].n_sents, &e) == 0, "%s", e.msg);
    CHECK(store_query_number(st, "select count(*) from sentences x join runs r on r.id = x.run_id "
                "where r.policy = 'fullkv'") == 0);
    CHECK(store_query_number(st, "select count(*) from samples s where s.n_sentences is not null") == 3 * N_ITEMS);
    CHECK(store_query_number(st, "select count(*) from samples s where s.n_sentences is not null and "
                "(s.n_sentences != (select count(*) from sentences x where x.run_id = s.run_id "
                "and x.sample_idx = s.sample_idx) or s.n_nonexec != (select count(*) from "
                "sentences x where x.run_id = s.run_id and x.sample_idx = s.sample_idx and "
                "x.kind = 'check'))") == 0);
    CHECK(store_query_number(st, "select count(*) from sentences a join sentences b on b.run_id = a.run_id and "
                "b.sample_idx = a.sample_idx and b.sent_idx = a.sent_idx + 1 "
                "where b.start_tok <= a.end_tok") == 0);
    /* every prompt here ends with a delimiter: its sentences lie in it */
    CHECK(store_query_number(st, "select count(*) from v_sentences where in_prompt = 1 and policy = 'fullkv-pss'") >=
          N_ITEMS);
    CHECK(store_query_number(st, "select count(*) from v_sentences v join samples s on s.run_id = v.run_id and "
                "s.sample_idx = v.sample_idx where v.in_prompt != (v.end_tok < s.prompt_tokens)") == 0);
    CHECK(store_query_number(st, "select count(*) from v_sentences where evicted_step is not null and "
                "policy = 'fullkv-pss'") == 0);
    CHECK(store_query_number(st, "select count(distinct policy || budget) from v_sentence_kinds") >= 1);
    CHECK(store_query_number(st, "select count(*) from v_sentence_kinds where check_share < 0 or check_share > 1 "
                "or n_traces < 1 or n_traces > 6 or policy = 'fullkv'") == 0); /* 2 skipkv-sent runs */
    CHECK(store_query_number(st, "select sum(n_traces) from v_sentence_kinds where policy = 'fullkv-pss'") <= N_ITEMS);
    store_close(st);
    unlink(path);
    char p2[80];
    snprintf(p2, sizeof p2, "%s-wal", path);
    unlink(p2);
    snprintf(p2, sizeof p2, "%s-shm", path);
    unlink(p2);
}

static void test_pss_samples(void)
{
    if (access(SMOL, R_OK) != 0) SKIP("%s absent (make deps downloads it)", SMOL);
    enum { N_RUNS = 4 };
    struct eb_err e = {0};
    struct model_file *mf = NULL;
    struct tokenizer *tok = NULL;
    struct backend *be = NULL;
    struct model *m = NULL;
    struct runner *r = NULL;
    struct exp_config c;
    struct sweep s;
    struct run_output out[N_RUNS];
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
                      " \"policies\": [\"fullkv\", \"fullkv-pss\", \"skipkv-sent\","
                      " {\"name\": \"skipkv-sent\", \"tau\": -1, \"divide_length\": 8}],"
                      " \"budgets\": 24, \"batch_sizes\": 3, \"batching\": \"grouped\","
                      " \"max_new_tokens\": 24}";
    CHECK(exp_config_parse(cfg, strlen(cfg), "pss.json", &c, &e) == 0);
    CHECK_MSG(sweep_expand(&c, NULL, &s, &e) == 0, "%s", e.msg);
    struct runner_opts o;
    memset(&o, 0, sizeof o);
    o.threads = 2;
    CHECK(runner_create(&o, &r, &e) == 0);
    /* grouped batches of 3: the runner reorders the prompts by length */
    const char *pol[N_RUNS] = {"fullkv", "fullkv-pss", "skipkv-sent", "skipkv-sent"};
    const int with_tau[N_RUNS] = {0, 0, 0, 1};
    for (int k = 0; k < N_RUNS; k++) {
        int i = find_point(&s, pol[k], with_tau[k]);
        CHECK_MSG(i >= 0, "no point %s%s", pol[k], with_tau[k] ? " with tau" : "");
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

    /* Per-sentence rows: none for fullkv; never evicted under the observer;
     * evicted under tau = -1, where every earlier sentence is redundant, and
     * a compression every 8 tokens (sentences are compared in the forward
     * before a decode compression, as released; the prompt's gets no penalty). */
    CHECK(out[0].n_sents == 0);
    int evicted[N_RUNS] = {0};
    for (int k = 1; k < N_RUNS; k++)
        for (int i = 0; i < N_ITEMS; i++) {
            int ne = check_rows(&out[k], i, pol[k]);
            if (ne > 0) evicted[k] += ne;
        }
    CHECK(evicted[1] == 0);
    CHECK_MSG(evicted[3] >= N_ITEMS, "%d sentences evicted under tau = -1", evicted[3]);
    check_store(out, N_RUNS);

    /* The same numbers straight from the policy, each prompt alone. */
    be = backend_cpu_create(2);
    CHECK(be && model_load(mf, be, &m, &e) == 0);
    for (int i = 0; m && i < N_ITEMS; i++) {
        struct policy_trace_stats t;
        char *text = NULL;
        struct sent_info *v = NULL;
        int nv = 0;
        CHECK(direct_stats(m, tok, "fullkv-pss", &items[i], &t, &text, &v, &nv) == 0);
        const struct sample_record *p3 = &out[1].samples[i];
        CHECK_STR(text, p3->text);
        CHECK(t.valid && t.s.n_sentences == p3->n_sentences && t.s.n_check == p3->n_nonexec &&
              t.s.n_pairs_above == p3->n_redundant_pairs);
        CHECK_NEAR(t.s.pss_mean, p3->pss_mean, 1e-3);
        CHECK_NEAR(t.s.pss_max, p3->pss_max, 1e-3);
        CHECK(t.alpha == 0.0 && t.n_steered == 0);
        /* the runner's rows of this sample are the policy's sentences */
        int j = 0, same = nv == p3->n_sentences;
        for (int x = 0; same && x < out[1].n_sents; x++) {
            const struct sentence_record *row = &out[1].sents[x];
            if (row->sample_idx != i) continue;
            same = j < nv && row->start_tok == v[j].start && row->end_tok == v[j].end &&
                   !strcmp(row->kind, sent_label_name(v[j].label)) &&
                   isnan(row->max_sim) == isnan(v[j].max_sim) &&
                   (isnan(v[j].max_sim) || fabs(row->max_sim - v[j].max_sim) < 1e-3);
            j++;
        }
        CHECK_MSG(same && j == nv, "item %d: the runner's sentence rows differ from the policy's", i);
        free(v);
        free(text);
    }
done:
    for (int k = 0; k < N_RUNS; k++) run_output_free(&out[k]);
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

/* seal (labels only): spans and labels of the prompt's and the generated
 * sentences, no similarity, no eviction; kept after the sequence ends until
 * its id is reused.  Only SmolLM2's tokenizer is needed (no forward). */
static void test_seal_sentences(void)
{
    if (access(SMOL, R_OK) != 0) SKIP("%s absent (make deps downloads it)", SMOL);
    enum { DIM = 8 };
    struct eb_err e = {0};
    struct model_file *mf = NULL;
    struct tokenizer *tok = NULL;
    CHECK(model_file_open(SMOL, &mf, &e) == 0);
    CHECK(mf && model_file_tokenizer(mf, &tok, &e) == 0);
    model_file_close(mf);
    if (!tok) return;
    char path[] = "/tmp/eb_pss_steer_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    float vec[DIM];
    struct steer_vector sv;
    memset(&sv, 0, sizeof sv);
    sv.version = STEER_VERSION;
    sv.layer = 2;
    sv.dim = DIM;
    snprintf(sv.model_identity, sizeof sv.model_identity, "test identity");
    for (int i = 0; i < DIM; i++) vec[i] = 0.5f;
    sv.v = vec;
    CHECK_MSG(steer_vector_save(path, &sv, &e) == 0, "%s", e.msg);
    struct token_text text = token_text_of(tok);
    struct policy_model pm = {.n_layer = 4, .n_head = 2, .n_kv = 1, .head_dim = 4, .n_embd = DIM,
                              .text = &text, .model_identity = sv.model_identity,
                              .steer_vector = path};
    struct policy *p = NULL, *full = NULL;
    int *prompt = NULL, *gen = NULL, *prompt2 = NULL, np = 0, ng = 0, np2 = 0;
    struct sent_info *v = NULL;
    int n = 0;
    CHECK_MSG(policy_create("seal", &pm, &p, &e) == 0, "%s", e.msg);
    const char *pt = "Solve.\nWait, what is 2 + 2?\n", *gt = "It is 4.\nWait, is it?\nSo 4";
    CHECK(tokenizer_encode(tok, pt, strlen(pt), 0, &prompt, &np, &e) == 0);
    CHECK(tokenizer_encode(tok, gt, strlen(gt), 0, &gen, &ng, &e) == 0);
    CHECK(tokenizer_encode(tok, "One.\n", 5, 0, &prompt2, &np2, &e) == 0);
    if (!p || !prompt || !gen || !prompt2) goto done;
    struct seq_view sq = {.n_prompt = np, .capacity = np + ng, .prompt = prompt};
    CHECK(p->ops->begin_sequence(p->self, 0, &sq, &e) == 0);
    for (int t = 0; t < ng; t++) {
        struct step_view st = {gen[t], t + 1, np + t, 0};
        CHECK(p->ops->observe(p->self, 0, &st, &e) == 0);
    }
    /* live, then finished: the same rows */
    CHECK(policy_trace_sentences(p, 0, &v, &n, &e) == 0 && n == 4);
    free(v);
    p->ops->end_sequence(p->self, 0);
    CHECK(policy_trace_sentences(p, 0, &v, &n, &e) == 0);
    struct policy_trace_stats ts;
    CHECK(policy_trace_stats(p, 0, &ts) == 0 && ts.s.n_sentences == n);
    CHECK_MSG(n == 4 && v, "%d sentences", n);
    if (n == 4 && v) {
        int ok = 1, n_check = 0;
        for (int i = 0; i < n; i++) {
            ok &= isnan(v[i].max_sim) && v[i].evicted_step == -1 && v[i].start <= v[i].end;
            if (i > 0) ok &= v[i].start == v[i - 1].end + 1;
            n_check += v[i].label == SENT_CHECK;
        }
        CHECK(ok && v[0].start == 0 && v[1].end == np - 1);
        CHECK(v[0].in_prompt && v[1].in_prompt && !v[2].in_prompt && !v[3].in_prompt);
        CHECK(v[1].label == SENT_CHECK && v[3].label == SENT_CHECK && n_check == ts.s.n_check);
    }
    free(v);
    v = NULL;
    /* another sequence id, an unknown one, a policy without sentences */
    CHECK(policy_trace_sentences(p, 5, &v, &n, &e) == 1 && v == NULL && n == 0);
    CHECK(policy_create("fullkv", &pm, &full, &e) == 0);
    CHECK(full && policy_trace_sentences(full, 0, &v, &n, &e) == 1);
    /* the id reused: a new trace */
    struct seq_view sq2 = {.n_prompt = np2, .capacity = np2 + 4, .prompt = prompt2};
    CHECK(p->ops->begin_sequence(p->self, 0, &sq2, &e) == 0);
    CHECK(policy_trace_sentences(p, 0, &v, &n, &e) == 0 && n == 1 && v && v[0].end == np2 - 1);
    free(v);
    p->ops->end_sequence(p->self, 0);
done:
    policy_free(full);
    policy_free(p);
    free(prompt);
    free(gen);
    free(prompt2);
    tokenizer_free(tok);
    unlink(path);
}

int main(void)
{
    RUN(test_fullkv_pss_preset);
    RUN(test_config_steer_vector);
    RUN(test_pss_samples);
    RUN(test_seal_sentences);
    return test_summary("pss");
}
