/* test_beaconkv.c - RPC (policies/rpc.c) and the BeaconKV reconstruction
 * (policies/beaconkv.c):
 *   - farthest point sampling with cosine distance against
 *     tools/golden/vase_ref.py;
 *   - the RoPE rotation used to recover pre-RoPE queries equals the
 *     backend's rope, and rotating back recovers the vector;
 *   - decode scenarios (a prompt, then one token per step, compression by the
 *     policy's own trigger): kept positions after every compression equal the
 *     numpy emulation, for both RPC aggregations and two BeaconKV settings;
 *   - budget >= prompt + max_new gives FullKV's greedy output on the tiny
 *     models; a tight budget runs and protects the prompt. */
#include "test.h"
#include "test_util.h"

#include "policies/beaconkv.h"

#define CASES FIXTURE("vase/beacon_cases.json")

static struct backend *be;
static cJSON *cases;

static float *jfloats(const cJSON *arr, int *n)
{
    *n = cJSON_GetArraySize(arr);
    float *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) v[i++] = (float)x->valuedouble;
    return v;
}

static void test_fps_matches_reference(void)
{
    if (!cases) SKIP("no %s", CASES);
    const cJSON *c;
    int n_cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(cases, "fps")) {
        int cnt, n = json_int(c, "n"), dim = json_int(c, "dim"), m = json_int(c, "m"), out[64];
        float *x = jfloats(cJSON_GetObjectItem(c, "x"), &cnt);
        struct eb_err e;
        CHECK(beacon_fps(x, n, dim, m, out, &e) == 0);
        const cJSON *want = cJSON_GetObjectItem(c, "want");
        CHECK(cJSON_GetArraySize(want) == m);
        for (int i = 0; i < m; i++)
            CHECK_MSG(out[i] == cJSON_GetArrayItem(want, i)->valueint, "case %d item %d", n_cases, i);
        free(x);
        n_cases++;
    }
    CHECK(n_cases == 3);
    struct eb_err e;
    int out[4];
    float x[4] = {1, 0, 0, 1};
    CHECK(beacon_fps(x, 2, 2, 3, out, &e) == -1); /* more than there are */
}

static void test_rotation_matches_backend(void)
{
    enum { D = 8 };
    float inv[D / 2];
    for (int i = 0; i < D / 2; i++) inv[i] = (float)pow(10000.0, -(double)(2 * i) / D);
    for (int pairing = 0; pairing < 2; pairing++) {
        float x[D], y[D], z[D];
        for (int i = 0; i < D; i++) x[i] = (float)(0.3 * i - 1.1);
        memcpy(y, x, sizeof y);
        int pos = 37;
        beacon_rotate(y, D, pos, inv, pairing, 0);
        float *dx = be->alloc(be, D);
        be->upload(be, dx, x, D);
        be->rope(be, dx, 1, 1, D, &pos, inv, (enum rope_pairing)pairing);
        be->download(be, z, dx, D);
        be->free(be, dx);
        for (int i = 0; i < D; i++) CHECK_NEAR(y[i], z[i], 1e-6);
        beacon_rotate(y, D, pos, inv, pairing, 1);
        for (int i = 0; i < D; i++) CHECK_NEAR(y[i], x[i], 1e-5);
    }
}

/* ---- decode scenarios on a small cache ---- */

struct fake {
    int L, H, HKV, D, cap, total;
    float **k, **v, **q;
    int *len, *pos;
    const float *K, *Q;  /* fixture [L][HKV][total][D], [L][total][H*D] */
};

static void fake_upload_head(struct fake *f, int l, int h)
{
    int head = l * f->HKV + h;
    float *rows = malloc((size_t)f->cap * f->D * sizeof *rows);
    for (int s = 0; s < f->len[head]; s++)
        memcpy(rows + (size_t)s * f->D,
               f->K + (((size_t)l * f->HKV + h) * f->total + f->pos[(size_t)head * f->cap + s]) * f->D,
               (size_t)f->D * sizeof *rows);
    be->upload(be, f->k[l] + (size_t)h * f->cap * f->D, rows, (size_t)f->len[head] * f->D);
    be->upload(be, f->v[l] + (size_t)h * f->cap * f->D, rows, (size_t)f->len[head] * f->D);
    free(rows);
}

/* The ring: queries of positions [next_pos - w, next_pos). */
static int fake_ring(struct fake *f, int next_pos, int w)
{
    int first = next_pos - w < 0 ? 0 : next_pos - w, n = next_pos - first;
    for (int l = 0; l < f->L; l++)
        be->upload(be, f->q[l], f->Q + ((size_t)l * f->total + first) * f->H * f->D,
                   (size_t)n * f->H * f->D);
    return n;
}

static void run_scenario(const cJSON *run)
{
    const cJSON *cfg = cJSON_GetObjectItem(cases, "config");
    struct fake f = {.L = json_int(cfg, "n_layer"), .H = json_int(cfg, "n_head"), .HKV = json_int(cfg, "n_kv"),
                     .D = json_int(cfg, "head_dim"),
                     .cap = json_int(cfg, "n_prompt") + json_int(cfg, "steps")};
    int n_prompt = json_int(cfg, "n_prompt"), steps = json_int(cfg, "steps"), budget = json_int(cfg, "budget");
    f.total = n_prompt + steps;
    int nk, nq;
    float *K = jfloats(cJSON_GetObjectItem(cases, "k"), &nk);
    float *Q = jfloats(cJSON_GetObjectItem(cases, "q"), &nq);
    f.K = K;
    f.Q = Q;
    float inv[64];
    for (int i = 0; i < f.D / 2; i++) inv[i] = (float)pow(10000.0, -(double)(2 * i) / f.D);
    struct policy_model pm = {.n_layer = f.L, .n_head = f.H, .n_kv = f.HKV, .head_dim = f.D};
    const char *spec = cJSON_GetObjectItem(run, "spec")->valuestring;
    struct policy *p;
    struct eb_err e;
    if (policy_create(spec, &pm, &p, &e)) {
        CHECK_MSG(0, "%s: %s", spec, e.msg);
        free(K); free(Q);
        return;
    }
    f.k = calloc((size_t)f.L, sizeof *f.k);
    f.v = calloc((size_t)f.L, sizeof *f.v);
    f.q = calloc((size_t)f.L, sizeof *f.q);
    for (int l = 0; l < f.L; l++) {
        f.k[l] = be->alloc(be, (size_t)f.HKV * f.cap * f.D);
        f.v[l] = be->alloc(be, (size_t)f.HKV * f.cap * f.D);
        f.q[l] = be->alloc(be, (size_t)p->info.q_window * f.H * f.D);
    }
    f.len = calloc((size_t)f.L * f.HKV, sizeof *f.len);
    f.pos = calloc((size_t)f.L * f.HKV * f.cap, sizeof *f.pos);
    struct keep_set ks = {f.L, f.HKV, f.cap, calloc((size_t)f.L * f.HKV, sizeof(int)),
                          calloc((size_t)f.L * f.HKV * f.cap, sizeof(int))};
    struct seq_view sv = {.n_prompt = n_prompt, .capacity = f.cap};
    CHECK(p->ops->begin_sequence(p->self, 0, &sv, &e) == 0);
    const cJSON *events = cJSON_GetObjectItem(run, "events");
    int ev = 0, n_events = cJSON_GetArraySize(events);
    for (int t = -1; t < steps; t++) {
        /* t = -1: the prompt; then the token at position n_prompt + t. */
        int first = t < 0 ? 0 : n_prompt + t, last = t < 0 ? n_prompt : n_prompt + t + 1;
        for (int i = 0; i < f.L * f.HKV; i++)
            for (int x = first; x < last; x++) f.pos[(size_t)i * f.cap + f.len[i]++] = x;
        for (int l = 0; l < f.L; l++)
            for (int h = 0; h < f.HKV; h++) fake_upload_head(&f, l, h);
        struct cache_view cv = {
            .be = be, .n_layer = f.L, .n_head = f.H, .n_kv = f.HKV, .head_dim = f.D,
            .capacity = f.cap, .len = f.len, .pos = f.pos, .k = f.k, .v = f.v, .q = f.q,
            .n_q = fake_ring(&f, last, p->info.q_window), .next_pos = last, .at_prefill = t < 0,
            .rope_inv_freq = inv, .rope_pairing = ROPE_PAIR_HALF,
        };
        int rc = p->ops->select(p->self, 0, &cv, budget, &ks, &e);
        CHECK_MSG(rc == 0, "%s step %d: %s", spec, t, e.msg);
        if (rc) break;
        for (int i = 0; i < f.L * f.HKV; i++) { /* compact, position order */
            if (ks.n_keep[i] < 0) continue;
            unsigned char keep[256] = {0};
            if (f.len[i] > 256) break;
            for (int j = 0; j < ks.n_keep[i]; j++) keep[ks.idx[(size_t)i * ks.stride + j]] = 1;
            int o = 0;
            for (int j = 0; j < f.len[i]; j++)
                if (keep[j]) f.pos[(size_t)i * f.cap + o++] = f.pos[(size_t)i * f.cap + j];
            f.len[i] = o;
        }
        if (ev < n_events && json_int(cJSON_GetArrayItem(events, ev), "step") == t) {
            const cJSON *want = cJSON_GetObjectItem(cJSON_GetArrayItem(events, ev), "kept_positions");
            for (int l = 0; l < f.L; l++)
                for (int h = 0; h < f.HKV; h++) {
                    const cJSON *w = cJSON_GetArrayItem(cJSON_GetArrayItem(want, l), h);
                    int i = l * f.HKV + h, same = f.len[i] == cJSON_GetArraySize(w);
                    for (int j = 0; same && j < f.len[i]; j++)
                        same = f.pos[(size_t)i * f.cap + j] == cJSON_GetArrayItem(w, j)->valueint;
                    CHECK_MSG(same, "%s step %d layer %d head %d: kept positions differ", spec, t, l, h);
                }
            ev++;
        } else if (t >= 0) {
            /* No compression expected here: nothing may have been evicted. */
            for (int i = 0; i < f.L * f.HKV; i++)
                CHECK_MSG(ks.n_keep[i] < 0 || ks.n_keep[i] == f.len[i], "%s step %d: unexpected eviction", spec, t);
        }
    }
    CHECK_MSG(ev == n_events, "%s: %d of %d compressions seen", spec, ev, n_events);
    p->ops->end_sequence(p->self, 0);
    for (int l = 0; l < f.L; l++) {
        be->free(be, f.k[l]);
        be->free(be, f.v[l]);
        be->free(be, f.q[l]);
    }
    free(f.k); free(f.v); free(f.q); free(f.len); free(f.pos); free(ks.n_keep); free(ks.idx);
    free(K); free(Q);
    policy_free(p);
}

static void test_scenarios_match_reference(void)
{
    if (!cases) SKIP("no %s", CASES);
    const cJSON *run;
    int n = 0;
    cJSON_ArrayForEach(run, cJSON_GetObjectItem(cases, "runs")) {
        run_scenario(run);
        n++;
    }
    CHECK(n == 5);
}

static void test_parameters(void)
{
    struct policy_model pm = {.n_layer = 1, .n_head = 4, .n_kv = 2, .head_dim = 8};
    struct policy *p;
    struct eb_err e;
    CHECK(policy_create("beaconkv:buf_lower=64,buf_upper=32", &pm, &p, &e) == -1 &&
          strstr(e.msg, "buf_lower"));
    CHECK(policy_create("rpc:kernel=6", &pm, &p, &e) == -1 && strstr(e.msg, "odd"));
    CHECK(policy_create("beaconkv", &pm, &p, &e) == 0);
    /* The run's parameters say it is a reconstruction, and every guess is named. */
    CHECK(strstr(p->spec, "reconstruction=approximate") != NULL);
    CHECK(strstr(p->spec, "buf_upper=128") && strstr(p->spec, "beacons=16") &&
          strstr(p->spec, "recent=16"));
    CHECK(p->info.notice && strstr(p->info.notice, "APPROXIMATE"));
    policy_free(p);
    CHECK(policy_create("rpc", &pm, &p, &e) == 0);
    CHECK(strstr(p->spec, "interval=1024") && strstr(p->spec, "selector=32"));
    CHECK(p->info.notice == NULL);
    policy_free(p);
}

/* ---- end to end ---- */

static void test_budget_above_length_is_fullkv(void)
{
    static const char *TINY[] = {"tiny-llama", "tiny-qwen2", "tiny-qwen3"};
    static const char *SPECS[] = {"rpc:interval=8", "rpc-fixed:interval=8", "beaconkv:buffer=8"};
    static const char *TIGHT[] = {"rpc:interval=8,selector=4", "rpc-fixed:interval=8,selector=4",
                                  "beaconkv:buffer=8,recent=4,beacons=4,buf_upper=16,buf_lower=4"};
    for (size_t i = 0; i < sizeof TINY / sizeof TINY[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/fixtures/models/%s/model.gguf", TINY[i]);
        if (!file_exists(path)) SKIP("no %s", path);
        struct model *m = open_model_on(be, path);
        if (!m) { CHECK_MSG(0, "cannot load %s", path); continue; }
        int prompt[20], n_prompt = 20, max_new = 40;
        for (int t = 0; t < n_prompt; t++) prompt[t] = 1 + (t * 37) % (m->cfg.n_vocab - 1);
        struct gen_result full[2], r[2];
        if (run_policy(m, NULL, 0, prompt, n_prompt, max_new, full, NULL, NULL)) { CHECK(0); model_free(m); continue; }
        for (size_t s = 0; s < sizeof SPECS / sizeof SPECS[0]; s++) {
            if (run_policy(m, SPECS[s], n_prompt + max_new + 40, prompt, n_prompt, max_new, r, NULL, NULL)) { CHECK(0); continue; }
            for (int q = 0; q < 2; q++) {
                CHECK_MSG(same_ints(r[q].tokens, r[q].n_tokens, full[q].tokens, full[q].n_tokens),
                          "%s on %s differs from FullKV", SPECS[s], TINY[i]);
            }
            gen_results_free(r, 2);
            int slots = 0;
            if (run_policy(m, TIGHT[s], 32, prompt, n_prompt, max_new, r, &slots, NULL)) { CHECK(0); continue; }
            CHECK(r[0].n_tokens == max_new && r[1].n_tokens == max_new);
            CHECK_MSG(slots < n_prompt + max_new, "%s: %d slots, nothing evicted", TIGHT[s], slots);
            gen_results_free(r, 2);
        }
        gen_results_free(full, 2);
        model_free(m);
    }
}

int main(void)
{
    be = backend_cpu_create(1);
    cases = read_json(CASES);
    RUN(test_fps_matches_reference);
    RUN(test_rotation_matches_backend);
    RUN(test_scenarios_match_reference);
    RUN(test_parameters);
    RUN(test_budget_above_length_is_fullkv);
    cJSON_Delete(cases);
    be->destroy(be);
    return test_summary("beaconkv");
}
