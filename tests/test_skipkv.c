/* test_skipkv.c - SkipKV against tools/golden/skipkv_ref.py: the R1-Qwen
 * token-id sets, sentence segmentation and labels, PSS marks at two
 * compression steps and the exact keep-set of every (layer, kv head); plus
 * the adaptive alpha, the presets and the trace statistics. */
#include <cjson/cJSON.h>

#include "kernels/backend.h"
#include "policies/registry.h"
#include "policies/sentences.h"
#include "policies/steering.h"
#include "test.h"
#include "tok_fixture.h"

static struct tokenizer *r1_tok;
static char r1_why[512];
static cJSON *golden;

static cJSON *load_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!buf) return NULL;
    buf[got] = '\0';
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    return j;
}

static int geti(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k)->valueint;
}

static int *int_array(const cJSON *a, int *n)
{
    *n = cJSON_GetArraySize(a);
    int *v = malloc((size_t)(*n + 1) * sizeof *v);
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) v[i++] = x->valueint;
    return v;
}

static float *float_array(const cJSON *a, int *n)
{
    *n = cJSON_GetArraySize(a);
    float *v = malloc((size_t)(*n + 1) * sizeof *v);
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) v[i++] = (float)x->valuedouble;
    return v;
}

static int same_set(const int *ids, int n, const cJSON *arr)
{
    int m;
    int *ref = int_array(arr, &m);
    int ok = m == n;
    for (int i = 0; ok && i < n; i++) ok = ids[i] == ref[i];
    free(ref);
    return ok;
}

static void test_token_sets(void)
{
    if (!golden) SKIP("tests/fixtures/skipkv/golden.json missing");
    if (!r1_tok) SKIP("r1-qwen tokenizer: %s", r1_why);
    const cJSON *sets = cJSON_GetObjectItem(golden, "sets");
    struct sent_tokens t, ts;
    struct eb_err e = {0};
    CHECK(sent_tokens_from_tokenizer(r1_tok, 0, &t, &e) == 0);
    CHECK(sent_tokens_from_tokenizer(r1_tok, 1, &ts, &e) == 0);
    CHECK(same_set(t.delim, t.n_delim, cJSON_GetObjectItem(sets, "delim")));
    CHECK(same_set(t.check, t.n_check, cJSON_GetObjectItem(sets, "check")));
    CHECK(same_set(ts.check, ts.n_check, cJSON_GetObjectItem(sets, "check_space")));
    CHECK(t.think_open == geti(sets, "think_open"));
    CHECK(t.think_close == geti(sets, "think_close"));
    int n_split;
    int *split = int_array(cJSON_GetObjectItem(sets, "split"), &n_split);
    int n_mine = 0, all_in = 1;
    for (int i = 0; i < t.n_vocab; i++) n_mine += sent_tokens_is_split(&t, i);
    for (int i = 0; i < n_split; i++) all_in &= sent_tokens_is_split(&t, split[i]);
    CHECK_MSG(n_mine == n_split && all_in, "split tokens: %d here, %d in the reference", n_mine,
              n_split);
    free(split);
    sent_tokens_free(&t);
    sent_tokens_free(&ts);
}

static void test_golden_segmentation(void)
{
    if (!golden) SKIP("tests/fixtures/skipkv/golden.json missing");
    const cJSON *sets = cJSON_GetObjectItem(golden, "sets"), *c = cJSON_GetObjectItem(golden, "case");
    int nd, nc, n;
    int *delim = int_array(cJSON_GetObjectItem(sets, "delim"), &nd);
    int *check = int_array(cJSON_GetObjectItem(sets, "check"), &nc);
    int *toks = int_array(cJSON_GetObjectItem(c, "tokens"), &n);
    struct sent_tokens st;
    struct sent_tracker tr;
    struct eb_err e = {0};
    CHECK(sent_tokens_from_ids(delim, nd, check, nc, NULL, 0, 200000, geti(sets, "think_open"),
                               geti(sets, "think_close"), &st, &e) == 0);
    CHECK(sent_tracker_init(&tr, &st, 0, 0.9f, &e) == 0);
    /* the prompt in one forward (only its first check word labels, as
     * released), then one token per forward */
    int n_prompt = geti(c, "n_prompt");
    CHECK(sent_tracker_tokens(&tr, toks, n_prompt, &e) == 0);
    for (int i = n_prompt; i < n; i++) CHECK(sent_tracker_tokens(&tr, &toks[i], 1, &e) == 0);
    const cJSON *ref = cJSON_GetObjectItem(c, "sentences");
    CHECK(tr.n == cJSON_GetArraySize(ref));
    int i = 0, n_check = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, ref) {
        if (i >= tr.n) break;
        CHECK(tr.s[i].b == cJSON_GetArrayItem(s, 0)->valueint);
        CHECK(tr.s[i].e == cJSON_GetArrayItem(s, 1)->valueint);
        CHECK((int)tr.s[i].label == cJSON_GetArrayItem(s, 2)->valueint);
        n_check += cJSON_GetArrayItem(s, 2)->valueint;
        i++;
    }
    CHECK(tr.n_check == n_check);
    sent_tracker_free(&tr);
    sent_tokens_free(&st);
    free(delim);
    free(check);
    free(toks);
}

/* Drive the skipkv-sent policy through its vtable and compare keep-sets. */
static void test_golden_keepsets(void)
{
    if (!golden) SKIP("tests/fixtures/skipkv/golden.json missing");
    if (!r1_tok) SKIP("r1-qwen tokenizer: %s", r1_why);
    const cJSON *c = cJSON_GetObjectItem(golden, "case");
    int n_layer = geti(golden, "n_layer"), n_head = geti(golden, "n_head");
    int n_kv = geti(golden, "n_kv"), hd = geti(golden, "head_dim"), dim = geti(golden, "dim");
    int w = geti(golden, "window"), budget = geti(golden, "budget");
    struct policy_model pm = {.n_layer = n_layer, .n_head = n_head, .n_kv = n_kv,
                              .head_dim = hd, .n_embd = dim, .text = tok_fixture_text(r1_tok)};
    struct policy *p = NULL;
    struct eb_err e = {0};
    int rc = policy_create("skipkv-sent:tau=0.9", &pm, &p, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) return;
    CHECK(p->info.needs & POLICY_NEED_HIDDEN_LAST);
    int n_tok, n_hid, n_prompt = geti(c, "n_prompt");
    int *toks = int_array(cJSON_GetObjectItem(c, "tokens"), &n_tok);
    float *hidden = float_array(cJSON_GetObjectItem(c, "hidden"), &n_hid);
    struct backend *be = backend_cpu_create(1);
    enum { CAP = 64 };
    struct seq_view sv = {.n_prompt = n_prompt, .capacity = CAP, .prompt = toks};
    CHECK(p->ops->begin_sequence(p->self, 3, &sv, &e) == 0);
    int fed_tok = n_prompt, fed_rows = 0, step = 0;
    const cJSON *comp;
    cJSON_ArrayForEach(comp, cJSON_GetObjectItem(c, "compressions")) {
        int upto = geti(comp, "n_tokens"), rows = geti(comp, "n_rows");
        /* As the glue runs them: a forward's rows, then its sampled token;
         * the forward before the compressing one raises the step flag. */
        for (; fed_tok < upto; fed_tok++) {
            while (fed_rows < fed_tok) { /* in uneven chunks, as chunked prefill gives them */
                int n = fed_tok - fed_rows < 7 ? fed_tok - fed_rows : 7;
                CHECK(p->ops->observe_hidden(p->self, 3, hidden + (size_t)fed_rows * dim, n, dim,
                                             &e) == 0);
                fed_rows += n;
            }
            struct step_view stv = {toks[fed_tok], fed_tok - n_prompt + 1, fed_tok,
                                    fed_tok == upto - 2};
            CHECK(p->ops->observe(p->self, 3, &stv, &e) == 0);
        }
        CHECK(fed_rows == rows);
        /* the cache view of this step */
        int len[8], *pos = calloc((size_t)n_layer * n_kv * CAP, sizeof *pos);
        float *kbuf[4], *qbuf[4];
        const cJSON *layers = cJSON_GetObjectItem(comp, "layers");
        for (int l = 0; l < n_layer; l++) {
            const cJSON *L = cJSON_GetArrayItem(layers, l);
            int nq;
            float *q = float_array(cJSON_GetObjectItem(L, "q"), &nq);
            qbuf[l] = be->alloc(be, (size_t)nq);
            be->upload(be, qbuf[l], q, (size_t)nq);
            free(q);
            kbuf[l] = be->alloc(be, (size_t)n_kv * CAP * hd);
            for (int h = 0; h < n_kv; h++) {
                const cJSON *H = cJSON_GetArrayItem(cJSON_GetObjectItem(L, "heads"), h);
                int np, nk;
                int *hp = int_array(cJSON_GetObjectItem(H, "pos"), &np);
                float *k = float_array(cJSON_GetObjectItem(H, "k"), &nk);
                len[l * n_kv + h] = np;
                memcpy(pos + ((size_t)l * n_kv + h) * CAP, hp, (size_t)np * sizeof *hp);
                be->upload(be, kbuf[l] + (size_t)h * CAP * hd, k, (size_t)nk);
                free(hp);
                free(k);
            }
        }
        struct cache_view cv = {.be = be, .n_layer = n_layer, .n_head = n_head, .n_kv = n_kv,
                                .head_dim = hd, .capacity = CAP, .len = len, .pos = pos,
                                .pad = NULL, .k = kbuf, .q = qbuf, .n_q = w,
                                .next_pos = rows, .at_prefill = 0};
        int n_keep[8], idx[8 * CAP];
        struct keep_set ks = {n_layer, n_kv, CAP, n_keep, idx};
        rc = p->ops->select(p->self, 3, &cv, budget, &ks, &e);
        CHECK_MSG(rc == 0, "%s", e.msg);
        for (int l = 0; rc == 0 && l < n_layer; l++)
            for (int h = 0; h < n_kv; h++) {
                const cJSON *H = cJSON_GetArrayItem(
                    cJSON_GetObjectItem(cJSON_GetArrayItem(layers, l), "heads"), h);
                int nk;
                int *want = int_array(cJSON_GetObjectItem(H, "keep"), &nk);
                int got = n_keep[l * n_kv + h], same = got == nk;
                const int *mine = keep_set_head(&ks, l, h);
                for (int i = 0; same && i < nk; i++) same = mine[i] == want[i];
                CHECK_MSG(same, "step %d layer %d head %d: keep-set differs (%d vs %d slots)",
                          step, l, h, got, nk);
                free(want);
            }
        struct policy_trace_stats ts;
        CHECK(policy_trace_stats(p, 3, &ts) == 0);
        CHECK(ts.s.n_sentences == geti(comp, "n_sentences"));
        CHECK(ts.s.n_check == geti(comp, "n_check"));
        CHECK(ts.s.n_redundant == cJSON_GetArraySize(cJSON_GetObjectItem(comp, "redundant")));
        for (int l = 0; l < n_layer; l++) {
            be->free(be, kbuf[l]);
            be->free(be, qbuf[l]);
        }
        free(pos);
        step++;
    }
    CHECK(step == 2);
    p->ops->end_sequence(p->self, 3);
    struct policy_trace_stats ts;
    CHECK(policy_trace_stats(p, 3, &ts) == 0 && ts.valid);
    CHECK(ts.s.pss_max > 0.9 && ts.s.pss_max <= 1.0 + 1e-6);
    policy_free(p);
    be->destroy(be);
    free(toks);
    free(hidden);
}

static void test_alpha_and_presets(void)
{
    CHECK_NEAR(steering_alpha(-1.25, 0.02, 0), -1.25, 1e-12);
    CHECK_NEAR(steering_alpha(-1.25, 0.02, 10), -1.45, 1e-12);
    CHECK_NEAR(steering_alpha(-1.0, 0.0, 10), -1.0, 1e-12);
    const struct policy_entry *en;
    struct policy_params pp;
    struct eb_err e = {0};
    CHECK(policy_parse("skipkv-sent", &en, &pp, &e) == 0);
    CHECK(policy_param_int(&pp, "steer") == 0 && policy_param_int(&pp, "sentence") == 1);
    CHECK(policy_parse("skipkv-sent-steer", &en, &pp, &e) == 0);
    CHECK(policy_param_int(&pp, "steer") == 1 && policy_param_int(&pp, "batching") == 0);
    CHECK(policy_parse("skipkv", &en, &pp, &e) == 0);
    CHECK(policy_param_int(&pp, "batching") == 1);
    CHECK_NEAR(policy_param(&pp, "alpha0"), -1.25, 1e-12);
    CHECK_NEAR(policy_param(&pp, "gamma"), 0.02, 1e-12);
    CHECK_NEAR(policy_param(&pp, "tau"), 0.95, 1e-12);
    CHECK(policy_parse("seal-static", &en, &pp, &e) == 0);
    CHECK_NEAR(policy_param(&pp, "gamma"), 0.0, 1e-12);
    CHECK(policy_parse("seal:coef=-2", &en, &pp, &e) == 0);
    CHECK_NEAR(policy_param(&pp, "coef"), -2.0, 1e-12);
    CHECK(policy_parse("skipkv:bogus=1", &en, &pp, &e) != 0);
    /* without a tokenizer the policies refuse clearly */
    struct policy_model pm = {.n_layer = 2, .n_head = 4, .n_kv = 2, .head_dim = 8, .n_embd = 16};
    struct policy *p = NULL;
    CHECK(policy_create("skipkv-sent", &pm, &p, &e) != 0 && strstr(e.msg, "tokenizer"));
    CHECK(policy_create("seal", &pm, &p, &e) != 0 && strstr(e.msg, "tokenizer"));
    if (r1_tok) { /* and without a vector, the steering ones say where to get one */
        pm.text = tok_fixture_text(r1_tok);
        pm.model_name = "no-such-model";
        CHECK(policy_create("skipkv", &pm, &p, &e) != 0 && strstr(e.msg, "calibrate"));
        CHECK(policy_create("seal", &pm, &p, &e) != 0 && strstr(e.msg, "calibrate"));
    }
}

int main(void)
{
    golden = load_json(FIXTURE("skipkv/golden.json"));
    r1_tok = tok_fixture_load("r1-qwen", r1_why, sizeof r1_why);
    RUN(test_token_sets);
    RUN(test_golden_segmentation);
    RUN(test_golden_keepsets);
    RUN(test_alpha_and_presets);
    tokenizer_free(r1_tok);
    cJSON_Delete(golden);
    return test_summary("skipkv");
}
