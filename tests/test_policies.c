/* test_policies.c - the policies' keep-sets equal the numpy transcription of
 * the spec (tools/golden/policies_ref.py) exactly; the scoring primitives
 * match it numerically; the registry parses, defaults and rejects. */
#include "test.h"

#include <cjson/cJSON.h>

#include "harness/exp/policy_glue.h"
#include "kernels/backend.h"
#include "policies/registry.h"
#include "policies/score.h"

#define FIX_JSON FIXTURE("policies/keepsets.json")
#define FIX_BIN FIXTURE("policies/tensors.bin")

static struct backend *be;
static cJSON *doc;
static float *blob;
static long n_blob;

static char *read_file(const char *path, long *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)*n + 1);
    if (s && fread(s, 1, (size_t)*n, f) != (size_t)*n) {
        free(s);
        s = NULL;
    }
    if (s) s[*n] = '\0';
    fclose(f);
    return s;
}

static int load_fixtures(void)
{
    if (doc) return 1;
    long n;
    char *js = read_file(FIX_JSON, &n);
    char *bin = js ? read_file(FIX_BIN, &n_blob) : NULL;
    if (!js || !bin) {
        free(js);
        free(bin);
        return 0;
    }
    doc = cJSON_Parse(js);
    free(js);
    blob = (float *)bin; /* malloc'd: aligned for float */
    n_blob /= 4;
    return doc != NULL;
}

static int geti(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItem(o, k)->valueint;
}

/* A cache view over one tensor set of the fixture (capacity = len). */
struct fixture_cache {
    struct cache_view cv;
    float **k, **q;
    int *len, *pos;
    unsigned char *pad;
    struct policy_model m;
};

static void fixture_cache_free(struct fixture_cache *fc)
{
    for (int l = 0; l < fc->m.n_layer; l++) {
        if (fc->k) be->free(be, fc->k[l]);
        if (fc->q) be->free(be, fc->q[l]);
    }
    free(fc->k);
    free(fc->q);
    free(fc->len);
    free(fc->pos);
    free(fc->pad);
}

static void fixture_cache(const cJSON *set, struct fixture_cache *fc)
{
    memset(fc, 0, sizeof *fc);
    int nl = geti(set, "n_layer"), nh = geti(set, "n_head"), nkv = geti(set, "n_kv");
    int hd = geti(set, "head_dim"), L = geti(set, "len"), nq = geti(set, "n_q");
    fc->m = (struct policy_model){.n_layer = nl, .n_head = nh, .n_kv = nkv, .head_dim = hd};
    fc->k = calloc((size_t)nl, sizeof *fc->k);
    fc->q = calloc((size_t)nl, sizeof *fc->q);
    fc->len = malloc((size_t)nl * nkv * sizeof *fc->len);
    fc->pos = malloc((size_t)nl * nkv * L * sizeof *fc->pos);
    const cJSON *pad = cJSON_GetObjectItem(set, "pad");
    if (cJSON_IsArray(pad)) fc->pad = malloc((size_t)nl * nkv * L);
    for (int l = 0; l < nl; l++) {
        size_t kn = (size_t)nkv * L * hd, qn = (size_t)nq * nh * hd;
        fc->k[l] = be->alloc(be, kn);
        fc->q[l] = be->alloc(be, qn);
        be->upload(be, fc->k[l], blob + cJSON_GetArrayItem(cJSON_GetObjectItem(set, "k"), l)->valueint, kn);
        be->upload(be, fc->q[l], blob + cJSON_GetArrayItem(cJSON_GetObjectItem(set, "q"), l)->valueint, qn);
        for (int h = 0; h < nkv; h++) {
            fc->len[l * nkv + h] = L;
            for (int j = 0; j < L; j++) {
                size_t at = ((size_t)l * nkv + h) * L + j;
                fc->pos[at] = 3 * j + 1; /* gaps: scoring must not depend on positions */
                if (fc->pad) fc->pad[at] = (unsigned char)cJSON_GetArrayItem(pad, j)->valueint;
            }
        }
    }
    fc->cv = (struct cache_view){
        .be = be, .n_layer = nl, .n_head = nh, .n_kv = nkv, .head_dim = hd, .capacity = L,
        .len = fc->len, .pos = fc->pos, .pad = fc->pad, .k = fc->k, .q = fc->q, .n_q = nq,
        .next_pos = 3 * L, .at_prefill = 0,
    };
}

static int alloc_keep(struct keep_set *ks, int nl, int nkv, int stride)
{
    ks->n_layer = nl;
    ks->n_kv = nkv;
    ks->stride = stride;
    ks->n_keep = malloc((size_t)nl * nkv * sizeof *ks->n_keep);
    ks->idx = malloc((size_t)nl * nkv * stride * sizeof *ks->idx);
    return ks->n_keep && ks->idx;
}

static void free_keep(struct keep_set *ks)
{
    free(ks->n_keep);
    free(ks->idx);
}

/* Keep-set of (l, h) equals the JSON expectation (null = unchanged; indices
 * compared as sorted sets). */
static int same_keep(struct keep_set *ks, int l, int h, const cJSON *want, char *why, size_t wn)
{
    int n = ks->n_keep[l * ks->n_kv + h];
    if (cJSON_IsNull(want)) {
        if (n != -1) snprintf(why, wn, "expected unchanged, got %d slots", n);
        return n == -1;
    }
    int nw = cJSON_GetArraySize(want);
    if (n != nw) {
        snprintf(why, wn, "expected %d slots, got %d", nw, n);
        return 0;
    }
    int *got = malloc((size_t)(n > 0 ? n : 1) * sizeof *got);
    memcpy(got, keep_set_head(ks, l, h), (size_t)n * sizeof *got);
    for (int i = 1; i < n; i++) /* insertion sort: a policy may return any order */
        for (int j = i; j > 0 && got[j - 1] > got[j]; j--) {
            int t = got[j];
            got[j] = got[j - 1];
            got[j - 1] = t;
        }
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        int w = cJSON_GetArrayItem(want, i)->valueint;
        if (got[i] != w) {
            snprintf(why, wn, "slot #%d: expected %d, got %d", i, w, got[i]);
            ok = 0;
        }
    }
    free(got);
    return ok;
}

static void test_golden_keepsets(void)
{
    if (!load_fixtures()) SKIP("%s or %s missing (tools/golden/policies_ref.py)", FIX_JSON, FIX_BIN);
    const cJSON *sets = cJSON_GetObjectItem(doc, "sets"), *c;
    int n_cases = 0, n_heads = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases")) {
        const cJSON *set = cJSON_GetArrayItem(sets, geti(c, "set"));
        const char *spec = cJSON_GetObjectItem(c, "policy")->valuestring;
        struct fixture_cache fc;
        fixture_cache(set, &fc);
        struct policy *p = NULL;
        struct eb_err e = {0};
        struct keep_set ks;
        alloc_keep(&ks, fc.m.n_layer, fc.m.n_kv, geti(set, "len"));
        if (policy_create(spec, &fc.m, &p, &e)) {
            CHECK_MSG(0, "%s: %s", spec, e.msg);
        } else {
            keep_set_none(&ks);
            int rc = p->ops->select(p->self, 0, &fc.cv, geti(c, "budget"), &ks, &e);
            CHECK_MSG(rc == 0, "%s on set %d: %s", spec, geti(c, "set"), e.msg);
            const cJSON *exp = cJSON_GetObjectItem(c, "expect");
            for (int l = 0; rc == 0 && l < fc.m.n_layer; l++)
                for (int h = 0; h < fc.m.n_kv; h++) {
                    char why[128] = "";
                    int ok = same_keep(&ks, l, h, cJSON_GetArrayItem(cJSON_GetArrayItem(exp, l), h),
                                       why, sizeof why);
                    CHECK_MSG(ok, "%s, set %d (len %d, %d/%d heads), layer %d kv head %d: %s", spec,
                              geti(c, "set"), geti(set, "len"), fc.m.n_head, fc.m.n_kv, l, h, why);
                    n_heads++;
                }
        }
        policy_free(p);
        free_keep(&ks);
        fixture_cache_free(&fc);
        n_cases++;
    }
    CHECK(n_cases >= 100);
    printf("  %d golden cases, %d (layer, kv head) keep-sets compared\n", n_cases, n_heads);
}

static int same_sets(const struct keep_set *a, const struct keep_set *b)
{
    for (int i = 0; i < a->n_layer * a->n_kv; i++) {
        if (a->n_keep[i] != b->n_keep[i]) return 0;
        for (int j = 0; j < a->n_keep[i]; j++)
            if (a->idx[(size_t)i * a->stride + j] != b->idx[(size_t)i * b->stride + j]) return 0;
    }
    return 1;
}

/* rkv_batch0_bug=1: a sequence borrows the redundancy of the lowest live
 * sequence; the anchor itself, and everyone once it ends, use their own. */
static void test_rkv_batch0_bug(void)
{
    if (!load_fixtures()) SKIP("%s missing", FIX_JSON);
    const cJSON *sets = cJSON_GetObjectItem(doc, "sets");
    struct fixture_cache a, b;
    fixture_cache(cJSON_GetArrayItem(sets, 2), &a); /* 4/4 heads, 100 slots */
    fixture_cache(cJSON_GetArrayItem(sets, 3), &b); /* 4/4 heads, 176 slots */
    struct policy *bug = NULL, *own = NULL;
    struct eb_err e = {0};
    CHECK(policy_create("rkv:rkv_batch0_bug=1", &a.m, &bug, &e) == 0);
    CHECK(policy_create("rkv", &a.m, &own, &e) == 0);
    if (!bug || !own) goto out;
    struct keep_set ka, ka_own, kb, kb_own;
    alloc_keep(&ka, 2, 4, 176);
    alloc_keep(&ka_own, 2, 4, 176);
    alloc_keep(&kb, 2, 4, 176);
    alloc_keep(&kb_own, 2, 4, 176);
    struct seq_view sa = {.n_prompt = 1, .capacity = 100}, sb = {.n_prompt = 1, .capacity = 176};
    CHECK(bug->ops->begin_sequence(bug->self, 0, &sa, &e) == 0);
    CHECK(bug->ops->begin_sequence(bug->self, 1, &sb, &e) == 0);
    CHECK(bug->ops->select(bug->self, 0, &a.cv, 48, &ka, &e) == 0);
    CHECK(own->ops->select(own->self, 0, &a.cv, 48, &ka_own, &e) == 0);
    CHECK(same_sets(&ka, &ka_own)); /* the anchor is unaffected */
    CHECK(bug->ops->select(bug->self, 1, &b.cv, 48, &kb, &e) == 0);
    CHECK(own->ops->select(own->self, 1, &b.cv, 48, &kb_own, &e) == 0);
    CHECK(!same_sets(&kb, &kb_own)); /* sequence 1 scored with sequence 0's redundancy */
    bug->ops->end_sequence(bug->self, 0);
    CHECK(bug->ops->select(bug->self, 1, &b.cv, 48, &kb, &e) == 0);
    CHECK(same_sets(&kb, &kb_own)); /* now the lowest live sequence is itself */
    bug->ops->end_sequence(bug->self, 1);
    free_keep(&ka);
    free_keep(&ka_own);
    free_keep(&kb);
    free_keep(&kb_own);
out:
    policy_free(bug);
    policy_free(own);
    fixture_cache_free(&a);
    fixture_cache_free(&b);
}

static int close_vec(const float *got, const float *want, int n, double rel, char *why, size_t wn)
{
    for (int i = 0; i < n; i++) {
        double tol = rel * fabs(want[i]) + 1e-9;
        if (!(fabs(got[i] - want[i]) <= tol)) {
            snprintf(why, wn, "element %d: %.9g vs %.9g", i, got[i], want[i]);
            return 0;
        }
    }
    return 1;
}

static void test_golden_primitives(void)
{
    if (!load_fixtures()) SKIP("%s missing", FIX_JSON);
    const cJSON *sets = cJSON_GetObjectItem(doc, "sets"), *p;
    int n = 0;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(doc, "primitives")) {
        const cJSON *set = cJSON_GetArrayItem(sets, geti(p, "set"));
        struct fixture_cache fc;
        fixture_cache(set, &fc);
        int L = geti(set, "len"), h = geti(p, "kv_head"), hd = fc.m.head_dim;
        const unsigned char *pad = cache_view_pad(&fc.cv, 0, h);
        float *out = be->alloc(be, (size_t)L), *pooled = be->alloc(be, (size_t)L);
        float host[512];
        char why[128];
        struct window_score_args a = {
            .out = out, .q = fc.q[0] + (size_t)(32 - 8) * fc.m.n_head * hd,
            .k = cache_view_k(&fc.cv, 0, h), .n_head = fc.m.n_head, .n_kv = fc.m.n_kv,
            .kv_head = h, .head_dim = hd, .n_q = 8, .len = L, .n_cand = L - 8, .softmax_all = 0,
            .gqa = SCORE_GQA_MAX, .pad = pad, .scale = 1.0f / sqrtf((float)hd)};
        CHECK(be->window_scores(be, &a) == 0);
        be->download(be, host, out, (size_t)(L - 8));
        CHECK_MSG(close_vec(host, blob + geti(p, "cand_w8_max"), L - 8, 1e-4, why, sizeof why),
                  "window scores (candidates, max), set %d head %d: %s", geti(p, "set"), h, why);
        CHECK(be->pool1d(be, pooled, out, L - 8, 7, SCORE_POOL_MAX) == 0);
        be->download(be, host, pooled, (size_t)(L - 8));
        CHECK_MSG(close_vec(host, blob + geti(p, "cand_w8_max_maxpool7"), L - 8, 1e-4, why,
                            sizeof why), "max-pool 7: %s", why);

        a.q = fc.q[0];
        a.n_q = 32;
        a.n_cand = L - 32;
        a.softmax_all = 1;
        a.gqa = SCORE_GQA_MEAN;
        CHECK(be->window_scores(be, &a) == 0);
        be->download(be, host, out, (size_t)(L - 32));
        CHECK_MSG(close_vec(host, blob + geti(p, "all_w32_mean"), L - 32, 1e-4, why, sizeof why),
                  "window scores (all, mean), set %d head %d: %s", geti(p, "set"), h, why);
        CHECK(be->pool1d(be, pooled, out, L - 32, 5, SCORE_POOL_AVG) == 0);
        be->download(be, host, pooled, (size_t)(L - 32));
        CHECK_MSG(close_vec(host, blob + geti(p, "all_w32_mean_avgpool5"), L - 32, 1e-4, why,
                            sizeof why), "avg-pool 5: %s", why);

        for (int quirk = 0; quirk <= 1; quirk++) {
            struct redundancy_args r = {out, cache_view_k(&fc.cv, 0, h), L, hd, 0.5f, quirk, pad};
            CHECK(be->key_redundancy(be, &r) == 0);
            be->download(be, host, out, (size_t)L);
            const char *name = quirk ? "redundancy_quirk" : "redundancy_noquirk";
            CHECK_MSG(close_vec(host, blob + geti(p, name), L, 1e-4, why, sizeof why),
                      "%s, set %d head %d: %s", name, geti(p, "set"), h, why);
        }
        be->free(be, out);
        be->free(be, pooled);
        fixture_cache_free(&fc);
        n++;
    }
    CHECK(n >= 8);
}

/* Original H2O, forward by forward: observe_attn with the reference's
 * probabilities, then select, then the same keep-sets. */
static void test_golden_h2o(void)
{
    if (!load_fixtures()) SKIP("%s missing", FIX_JSON);
    const cJSON *run;
    int n_checked = 0;
    cJSON_ArrayForEach(run, cJSON_GetObjectItem(doc, "h2o")) {
        struct policy_model m = {.n_layer = geti(run, "n_layer"), .n_head = geti(run, "n_head"),
                                 .n_kv = geti(run, "n_kv"), .head_dim = geti(run, "head_dim")};
        int budget = geti(run, "budget"), cap = 256;
        struct policy *p = NULL;
        struct eb_err e = {0};
        if (policy_create("h2o", &m, &p, &e)) {
            CHECK_MSG(0, "%s", e.msg);
            continue;
        }
        struct seq_view sv = {.n_prompt = 24, .capacity = cap};
        CHECK(p->ops->begin_sequence(p->self, 7, &sv, &e) == 0);
        int *len = calloc((size_t)m.n_layer * m.n_kv, sizeof *len);
        struct keep_set ks;
        alloc_keep(&ks, m.n_layer, m.n_kv, cap);
        const cJSON *fw;
        int step = 0;
        cJSON_ArrayForEach(fw, cJSON_GetObjectItem(run, "forwards")) {
            int n_new = geti(fw, "n_new");
            for (int i = 0; i < m.n_layer * m.n_kv; i++) len[i] += n_new;
            for (int l = 0; l < m.n_layer; l++) {
                struct attn_view av = {l, blob + cJSON_GetArrayItem(cJSON_GetObjectItem(fw, "probs"), l)->valueint,
                                       m.n_head, n_new, len[l * m.n_kv], len + l * m.n_kv};
                CHECK(p->ops->observe_attn(p->self, 7, &av, &e) == 0);
            }
            struct cache_view cv = {.be = be, .n_layer = m.n_layer, .n_head = m.n_head,
                                    .n_kv = m.n_kv, .head_dim = m.head_dim, .capacity = cap,
                                    .len = len};
            keep_set_none(&ks);
            CHECK(p->ops->select(p->self, 7, &cv, budget, &ks, &e) == 0);
            const cJSON *exp = cJSON_GetObjectItem(fw, "expect");
            for (int l = 0; l < m.n_layer; l++)
                for (int h = 0; h < m.n_kv; h++) {
                    char why[128] = "";
                    CHECK_MSG(same_keep(&ks, l, h, cJSON_GetArrayItem(cJSON_GetArrayItem(exp, l), h),
                                        why, sizeof why),
                              "h2o %d/%d heads, forward %d, layer %d kv head %d: %s", m.n_head,
                              m.n_kv, step, l, h, why);
                    int n = ks.n_keep[l * m.n_kv + h];
                    if (n >= 0) len[l * m.n_kv + h] = n;
                    n_checked++;
                }
            step++;
        }
        p->ops->end_sequence(p->self, 7);
        free(len);
        free_keep(&ks);
        policy_free(p);
    }
    CHECK(n_checked > 100);
}

static void test_pool_and_topk(void)
{
    float in[6] = {1, 5, 2, 2, 0, 3}, out[6];
    CHECK(be->pool1d(be, out, in, 6, 3, SCORE_POOL_MAX) == 0);
    float want_max[6] = {5, 5, 5, 2, 3, 3};
    for (int i = 0; i < 6; i++) CHECK(out[i] == want_max[i]);
    CHECK(be->pool1d(be, out, in, 6, 3, SCORE_POOL_AVG) == 0);
    CHECK_NEAR(out[0], 6.0 / 3, 1e-6); /* the zero padding counts */
    CHECK_NEAR(out[5], 3.0 / 3, 1e-6);
    CHECK(be->pool1d(be, out, in, 6, 4, SCORE_POOL_MAX) == -1); /* even kernel */
    CHECK(be->pool1d(be, in, in, 6, 3, SCORE_POOL_MAX) == -1);  /* in place */

    struct score_buf b = {0};
    struct eb_err e;
    double s[7] = {0.5, 0.9, 0.5, NAN, 0.9, 0.1, 0.5};
    int idx[7];
    CHECK(score_topk(&b, s, 7, 3, idx, &e) == 0);
    CHECK(idx[0] == 0 && idx[1] == 1 && idx[2] == 4); /* ties: lower index first */
    CHECK(score_topk(&b, s, 7, 6, idx, &e) == 0);
    for (int i = 0; i < 6; i++) CHECK(idx[i] != 3);   /* NaN ranks last */
    CHECK(score_topk(&b, s, 7, 8, idx, &e) == -1);
    score_buf_free(&b);

    /* Redundancy by hand: keys 0 and 2 identical, 1 orthogonal, 3 = -key 0. */
    float k[4][2] = {{1, 0}, {0, 1}, {2, 0}, {-1, 0}};
    float *kd = be->alloc(be, 8), *r = be->alloc(be, 4), host[4];
    be->upload(be, kd, &k[0][0], 8);
    struct redundancy_args a = {r, kd, 4, 2, 0.5f, 0, NULL};
    CHECK(be->key_redundancy(be, &a) == 0);
    be->download(be, host, r, 4);
    /* C = [[0,0,1,-1],[0,0,0,0],[1,0,0,-1],[-1,0,-1,0]]; rows 0 and 2 zero their
     * only match (columns 2 and 0), so the column means are {-1,0,-1,-2}/4. */
    double col[4] = {(0 + 0 + 0 - 1) / 4.0, 0.0, (0 + 0 + 0 - 1) / 4.0, (-1 + 0 - 1 + 0) / 4.0};
    double mx = 0, sum = 0;
    for (int j = 0; j < 4; j++) sum += exp(col[j] - mx);
    for (int j = 0; j < 4; j++) CHECK_NEAR(host[j], exp(col[j] - mx) / sum, 1e-6);
    a.no_match_zero_col0 = 1; /* rows 1 and 3 have no match: C[1][0], C[3][0] zeroed */
    CHECK(be->key_redundancy(be, &a) == 0);
    be->download(be, host, r, 4);
    col[0] = 0.0;
    sum = 0;
    for (int j = 0; j < 4; j++) sum += exp(col[j]);
    for (int j = 0; j < 4; j++) CHECK_NEAR(host[j], exp(col[j]) / sum, 1e-6);
    be->free(be, kd);
    be->free(be, r);
}

static void test_registry(void)
{
    const struct policy_entry *en;
    struct policy_params pp;
    struct eb_err e = {0};
    CHECK(policy_parse("rkv", &en, &pp, &e) == 0);
    CHECK_STR(en->name, "rkv");
    CHECK_NEAR(policy_param(&pp, "lambda"), 0.1, 1e-12);
    CHECK(policy_param_int(&pp, "window") == 8 && policy_param_int(&pp, "kernel") == 7);
    CHECK(policy_param_int(&pp, "divide_length") == 128);
    CHECK(policy_param_int(&pp, "rkv_batch0_bug") == 0);
    CHECK(policy_parse("rkv-code", &en, &pp, &e) == 0);
    CHECK_NEAR(policy_param(&pp, "lambda"), 0.07, 1e-12);
    CHECK(policy_parse("snapkv", &en, &pp, &e) == 0);
    CHECK(policy_param_int(&pp, "window") == 32 && policy_param_int(&pp, "kernel") == 5);
    CHECK(policy_parse("snapkv-decode:gqa=mean", &en, &pp, &e) == 0);
    CHECK(en->ops == policy_registry_find("snapkv")->ops); /* a preset, not a copy */
    CHECK(policy_param_int(&pp, "window") == 8 && policy_param_int(&pp, "kernel") == 7);
    CHECK(policy_param_int(&pp, "gqa") == 1);
    CHECK(policy_parse("rkv:lambda=0.25,gqa=mean,rkv_batch0_bug=true", &en, &pp, &e) == 0);
    CHECK_NEAR(policy_param(&pp, "lambda"), 0.25, 1e-12);
    CHECK(policy_param_int(&pp, "rkv_batch0_bug") == 1);
    char buf[256];
    policy_params_format(en, &pp, buf, sizeof buf);
    CHECK(strstr(buf, "rkv:lambda=0.25,") == buf && strstr(buf, "gqa=mean"));
    struct policy_params again;
    CHECK(policy_parse(buf, &en, &again, &e) == 0); /* the canonical form parses back */
    for (int i = 0; i < pp.n; i++) CHECK(again.val[i] == pp.val[i]);

    CHECK(policy_parse("nope", &en, &pp, &e) == -1);
    CHECK(strstr(e.msg, "unknown policy 'nope'") && strstr(e.msg, "rkv") && strstr(e.msg, "h2o-rkv"));
    CHECK(policy_parse("rkv:lamda=0.1", &en, &pp, &e) == -1);
    CHECK(strstr(e.msg, "unknown parameter 'lamda'") && strstr(e.msg, "valid: lambda, window"));
    CHECK(policy_parse("rkv:lambda=1.5", &en, &pp, &e) == -1);
    CHECK(strstr(e.msg, "lambda=1.5") && strstr(e.msg, "[0, 1]"));
    CHECK(policy_parse("rkv:lambda=abc", &en, &pp, &e) == -1);
    CHECK(policy_parse("rkv:window=0", &en, &pp, &e) == -1);
    CHECK(policy_parse("rkv:window=8.5", &en, &pp, &e) == -1);
    CHECK(policy_parse("rkv:gqa=min", &en, &pp, &e) == -1);
    CHECK(strstr(e.msg, "max|mean"));
    CHECK(policy_parse("rkv:window=8,window=4", &en, &pp, &e) == -1);
    CHECK(strstr(e.msg, "twice"));
    CHECK(policy_parse("rkv:", &en, &pp, &e) == -1);
    CHECK(policy_parse("rkv:window", &en, &pp, &e) == -1);
    CHECK(policy_parse("rkv:window=8,", &en, &pp, &e) == -1);
    CHECK(policy_parse("rkv:=3", &en, &pp, &e) == -1);
    CHECK(policy_parse("", &en, &pp, &e) == -1);
    CHECK(policy_parse("fullkv:x=1", &en, &pp, &e) == -1);
    CHECK(strstr(e.msg, "valid: none"));
    CHECK(policy_parse(NULL, &en, &pp, &e) == -1);

    cJSON *j = cJSON_Parse("{\"name\": \"rkv\", \"lambda\": 0.2, \"window\": 16, "
                           "\"no_match_zero_col0\": false}");
    CHECK(policy_parse_json(j, &en, &pp, &e) == 0);
    CHECK_NEAR(policy_param(&pp, "lambda"), 0.2, 1e-12);
    CHECK(policy_param_int(&pp, "window") == 16 && policy_param_int(&pp, "no_match_zero_col0") == 0);
    cJSON_Delete(j);
    j = cJSON_Parse("{\"name\": \"snapkv-decode\", \"params\": {\"kernel\": 3, \"pool\": \"avg\"}}");
    CHECK(policy_parse_json(j, &en, &pp, &e) == 0);
    CHECK(policy_param_int(&pp, "kernel") == 3 && policy_param_int(&pp, "pool") == 1);
    cJSON_Delete(j);
    j = cJSON_Parse("\"h2o:heavy_ratio=0.25\"");
    CHECK(policy_parse_json(j, &en, &pp, &e) == 0);
    CHECK_NEAR(policy_param(&pp, "heavy_ratio"), 0.25, 1e-12);
    cJSON_Delete(j);
    const char *bad[] = {"{\"name\": \"rkv\", \"window\": 8.5}", "{\"name\": \"rkv\", \"foo\": 1}",
                         "{\"lambda\": 0.1}", "{\"name\": \"rkv\", \"window\": [8]}", "[1]",
                         "{\"name\": \"rkv\", \"params\": 3}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = cJSON_Parse(bad[i]);
        CHECK_MSG(policy_parse_json(j, &en, &pp, &e) == -1, "%s accepted", bad[i]);
        cJSON_Delete(j);
    }
    /* One parser: a value refused in a spec is refused in JSON with the same
     * message, and an accepted one means the same. */
    const char *same[][2] = {
        {"rkv:window=8.5", "{\"name\": \"rkv\", \"window\": 8.5}"},
        {"rkv:lambda=1.5", "{\"name\": \"rkv\", \"lambda\": 1.5}"},
        {"rkv:gqa=min", "{\"name\": \"rkv\", \"gqa\": \"min\"}"},
        {"rkv:rkv_batch0_bug=2", "{\"name\": \"rkv\", \"rkv_batch0_bug\": 2}"},
        {"rkv:gqa=1", "{\"name\": \"rkv\", \"gqa\": 1}"},
        {"rkv:lamda=0.1", "{\"name\": \"rkv\", \"lamda\": 0.1}"},
        {"rkv:window=8,window=4", "{\"name\": \"rkv\", \"window\": 8, \"params\": {\"window\": 4}}"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        struct eb_err e2 = {0};
        j = cJSON_Parse(same[i][1]);
        CHECK(policy_parse(same[i][0], &en, &pp, &e) == -1 &&
              policy_parse_json(j, &en, &pp, &e2) == -1);
        CHECK_MSG(!strcmp(e.msg, e2.msg), "'%s' vs '%s'", e.msg, e2.msg);
        cJSON_Delete(j);
    }
    j = cJSON_Parse("{\"name\": \"rkv\", \"window\": 16, \"rkv_batch0_bug\": true, \"gqa\": \"mean\"}");
    CHECK(policy_parse("rkv:window=16,rkv_batch0_bug=1,gqa=mean", &en, &again, &e) == 0 &&
          policy_parse_json(j, &en, &pp, &e) == 0 && !memcmp(pp.val, again.val, sizeof pp.val));
    cJSON_Delete(j);

    /* The baseline entries instantiate with their defaults (others, such as
     * the steering policies, also need a tokenizer); bad values are refused. */
    struct policy_model m = {.n_layer = 2, .n_head = 4, .n_kv = 2, .head_dim = 8};
    const char *names[] = {"fullkv", "streamingllm", "h2o", "h2o-rkv", "snapkv", "snapkv-decode",
                           "rkv", "rkv-code"};
    int n;
    policy_registry(&n);
    CHECK(n >= 8);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        struct policy *p;
        CHECK(policy_registry_find(names[i]) != NULL);
        CHECK_MSG(policy_create(names[i], &m, &p, &e) == 0, "%s: %s", names[i], e.msg);
        if (p) CHECK(strstr(p->spec, names[i]) == p->spec);
        policy_free(p);
    }
    struct policy *p;
    CHECK(policy_create("rkv:kernel=4", &m, &p, &e) == -1 && p == NULL);
    CHECK(strstr(e.msg, "odd"));
    struct policy_model bad_m = {.n_layer = 2, .n_head = 4, .n_kv = 3, .head_dim = 8};
    CHECK(policy_create("rkv", &bad_m, &p, &e) == -1);
}

static void test_budget_checks(void)
{
    struct policy_model m = {.n_layer = 2, .n_head = 4, .n_kv = 2, .head_dim = 8};
    struct policy *p;
    struct eb_err e;
    CHECK(policy_create("rkv", &m, &p, &e) == 0);
    CHECK(policy_check_budget(p, 9, &e) == 0);
    CHECK(policy_check_budget(p, 8, &e) == -1 && strstr(e.msg, "window"));
    CHECK(policy_check_budget(p, 0, &e) == -1 && strstr(e.msg, "> 0"));
    CHECK(policy_check_budget(p, -5, &e) == -1);
    policy_free(p);
    CHECK(policy_create("snapkv", &m, &p, &e) == 0);
    CHECK(policy_check_budget(p, 32, &e) == -1);
    CHECK(policy_check_budget(p, 33, &e) == 0);
    policy_free(p);
    CHECK(policy_create("fullkv", &m, &p, &e) == 0);
    CHECK(policy_check_budget(p, 0, &e) == 0); /* no budget needed */
    CHECK(policy_check_budget(p, -1, &e) == -1);
    policy_free(p);
    CHECK(policy_create("h2o", &m, &p, &e) == 0);
    CHECK(policy_check_budget(p, 1, &e) == 0 && policy_check_budget(p, 0, &e) == -1);
    policy_free(p);
}

static int cmp_int_asc(const void *pa, const void *pb)
{
    int a = *(const int *)pa, b = *(const int *)pb;
    return (a > b) - (a < b);
}

/* score_topk_ranked and score_topk equal a full sort by score_pair_cmp on
 * every path: scores already in rank order (no sort), and the selection of
 * the k best (quickselect) for every k. */
static void test_topk_paths(void)
{
    enum { N = 200 };
    struct score_buf b = {0};
    struct eb_err e;
    double s[N];
    int idx[N], want[N];
    struct score_pair pr[N];
    unsigned x = 7;
    for (int shape = 0; shape < 4; shape++)
        for (int k = 0; k <= N; k += (k < 8 ? 1 : 24)) {
            for (int j = 0; j < N; j++) {
                x = x * 1664525u + 1013904223u;
                double v = (double)((x >> 20) % 9);             /* many ties */
                s[j] = shape == 0 ? -j                            /* StreamingLLM's ages */
                     : shape == 1 ? (double)(N - j) / 3 - (j % 2) /* rises: the general path */
                     : shape == 2 ? 10.0 - j / 7                  /* non-increasing, ties */
                     : v;
            }
            if (shape == 2 && k == N) s[N - 1] = NAN;          /* a NaN: not in rank order */
            for (int j = 0; j < N; j++) pr[j] = (struct score_pair){s[j], j};
            qsort(pr, N, sizeof *pr, score_pair_cmp);
            for (int j = 0; j < N; j++) want[j] = pr[j].i;
            CHECK(score_topk_ranked(&b, s, N, k, idx, &e) == 0);
            int same = 1;
            for (int j = 0; j < k; j++) same &= idx[j] == want[j];
            CHECK_MSG(same, "shape %d, top-%d differs from the full sort", shape, k);
            qsort(want, (size_t)k, sizeof *want, cmp_int_asc);
            CHECK(score_topk(&b, s, N, k, idx, &e) == 0);
            for (int j = 0; j < k; j++) same &= idx[j] == want[j];
            CHECK_MSG(same, "shape %d, top-%d by position differs from the full sort", shape, k);
        }
    score_buf_free(&b);
}

int main(void)
{
    be = backend_cpu_create(2);
    RUN(test_registry);
    RUN(test_budget_checks);
    RUN(test_pool_and_topk);
    RUN(test_topk_paths);
    RUN(test_golden_primitives);
    RUN(test_golden_keepsets);
    RUN(test_golden_h2o);
    RUN(test_rkv_batch0_bug);
    cJSON_Delete(doc);
    free(blob);
    be->destroy(be);
    return test_summary("policies");
}
