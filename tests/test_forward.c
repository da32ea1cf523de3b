/* test_forward.c - logits of the forward pass against transformers' (float32, eager).
 *
 * Fixtures from tools/golden/gen_models.py: tiny random llama / llama3-scaled /
 * tied llama / qwen2 / qwen3 checkpoints in both safetensors and GGUF form, with
 * transformers' logits at every position of three prompts; and SmolLM2-135M's
 * last-position logits and top-20 per position (skipped when the model file is
 * absent).  Relative error of a position = max|ours - ref| / max|ref|. */
#include "test.h"

#include <cjson/cJSON.h>

#include "kernels/backend.h"
#include "model/model.h"

static struct backend *be;

static const char *TINY[] = {"tiny-llama", "tiny-llama3", "tiny-llama-tied", "tiny-qwen2",
                             "tiny-qwen3"};
#define SMOL_PATH "models/SmolLM2-135M-Instruct.Q4_1.gguf"

/* Whole file, NUL-terminated; *len (if non-NULL) gets the byte count. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = '\0';
    if (s && len) *len = (size_t)n;
    fclose(f);
    return s;
}

static char *read_text(const char *path)
{
    return read_file(path, NULL);
}

/* Little-endian f32 file (the test machines are little-endian). */
static float *read_f32(const char *path, size_t *n)
{
    size_t bytes = 0;
    char *s = read_file(path, &bytes);
    if (!s) return NULL;
    *n = bytes / sizeof(float);
    float *x = malloc(*n * sizeof *x + 1);
    memcpy(x, s, *n * sizeof *x);
    free(s);
    return x;
}

static int *json_ints(const cJSON *arr, int *n)
{
    *n = cJSON_GetArraySize(arr);
    int *v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *v);
    for (int i = 0; i < *n; i++) v[i] = cJSON_GetArrayItem(arr, i)->valueint;
    return v;
}

static double rel_err(const float *a, const float *b, int n)
{
    double diff = 0, mag = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > diff || isnan(d)) diff = isnan(d) ? INFINITY : d;
        if (fabs(b[i]) > mag) mag = fabs(b[i]);
    }
    return diff / (mag > 0 ? mag : 1);
}

struct golden {
    cJSON *json;
    float *logits;
    size_t n_logits;
    int vocab;
};

static int golden_load(const char *name, struct golden *g)
{
    char path[512];
    snprintf(path, sizeof path, "tests/fixtures/models/%s/golden.json", name);
    char *txt = read_text(path);
    if (!txt) return -1;
    g->json = cJSON_Parse(txt);
    free(txt);
    snprintf(path, sizeof path, "tests/fixtures/models/%s/logits.bin", name);
    g->logits = read_f32(path, &g->n_logits);
    if (!g->json || !g->logits) return -1;
    g->vocab = cJSON_GetObjectItem(g->json, "vocab")->valueint;
    return 0;
}

static void golden_free(struct golden *g)
{
    cJSON_Delete(g->json);
    free(g->logits);
}

static int open_model(const char *path, struct model **m)
{
    struct model_file *mf;
    struct eb_err e;
    if (model_file_open(path, &mf, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        return -1;
    }
    struct model_load_opts o = {.weights = MODEL_WEIGHTS_F32}; /* exact mode, as transformers */
    int rc = model_load_opts(mf, be, &o, m, &e);
    if (rc) fprintf(stderr, "  %s\n", e.msg);
    model_file_close(mf);
    return rc;
}

/* Run prompt p in chunks of `chunk` tokens through a fresh cache; all logits into out. */
static int run_chunked(struct model *m, const int *ids, int n, int chunk, float *out)
{
    struct forward *f;
    struct kvcache *c;
    struct eb_err e;
    int V = m->cfg.n_vocab;
    if (forward_create(m, chunk, chunk, &f, &e) || model_kvcache_create(m, n, &c, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        return -1;
    }
    int rc = 0;
    for (int done = 0; done < n && rc == 0; done += chunk) {
        int len = n - done < chunk ? n - done : chunk;
        struct fwd_seq s = {.id = 0, .cache = c, .tokens = ids + done, .n_tokens = len,
                            .logits = FWD_LOGITS_ALL};
        struct fwd_batch b = {&s, 1, 0};
        rc = model_forward(f, &b, NULL, &e);
        if (rc == 0) memcpy(out + (size_t)done * V, forward_logits(f), (size_t)len * V * sizeof *out);
        else fprintf(stderr, "  %s\n", e.msg);
    }
    kvcache_free(c);
    forward_free(f);
    return rc;
}

static double worst_rel(const float *ours, const float *ref, int n_pos, int V)
{
    double worst = 0;
    for (int p = 0; p < n_pos; p++) {
        double r = rel_err(ours + (size_t)p * V, ref + (size_t)p * V, V);
        if (r > worst) worst = r;
    }
    return worst;
}

/* One model, one file format: every prompt, in one piece and in chunks of 3. */
static void check_tiny(const char *name, const char *file)
{
    struct golden g;
    char path[512];
    if (golden_load(name, &g)) {
        CHECK_MSG(0, "fixtures of %s missing (tools/golden/gen_models.py --tiny)", name);
        return;
    }
    snprintf(path, sizeof path, "tests/fixtures/models/%s%s", name, file);
    struct model *m;
    if (open_model(path, &m)) {
        CHECK_MSG(0, "cannot load %s", path);
        golden_free(&g);
        return;
    }
    CHECK(m->cfg.n_vocab == g.vocab);
    const cJSON *prompts = cJSON_GetObjectItem(g.json, "prompts");
    size_t off = 0;
    for (int i = 0; i < cJSON_GetArraySize(prompts); i++) {
        int n;
        int *ids = json_ints(cJSON_GetArrayItem(prompts, i), &n);
        float *ours = malloc((size_t)n * g.vocab * sizeof *ours);
        CHECK(off + (size_t)n * g.vocab <= g.n_logits);
        const float *ref = g.logits + off;
        int chunks[] = {n, 3};
        for (int c = 0; c < 2; c++) {
            CHECK(run_chunked(m, ids, n, chunks[c], ours) == 0);
            double r = worst_rel(ours, ref, n, g.vocab);
            CHECK_MSG(r <= 1e-4, "%s prompt %d chunk %d: relative error %.3g", path, i, chunks[c], r);
        }
        off += (size_t)n * g.vocab;
        free(ours);
        free(ids);
    }
    model_free(m);
    golden_free(&g);
}

static void test_tiny_safetensors(void)
{
    for (size_t i = 0; i < sizeof TINY / sizeof TINY[0]; i++) check_tiny(TINY[i], "");
}

static void test_tiny_gguf(void)
{
    for (size_t i = 0; i < sizeof TINY / sizeof TINY[0]; i++) check_tiny(TINY[i], "/model.gguf");
}

/* The same GGUF and safetensors model must give the same RoPE frequencies and
 * opposite pairings only for llama (GGUF stores Q/K rows interleaved). */
static void test_pairing(void)
{
    struct model *a, *b;
    if (open_model("tests/fixtures/models/tiny-llama3", &a)) { CHECK(0); return; }
    if (open_model("tests/fixtures/models/tiny-llama3/model.gguf", &b)) { CHECK(0); model_free(a); return; }
    CHECK(a->pairing == ROPE_PAIR_HALF);
    CHECK(b->pairing == ROPE_PAIR_ADJACENT);
    for (int i = 0; i < a->cfg.head_dim / 2; i++)
        CHECK_NEAR(a->inv_freq[i], b->inv_freq[i], 1e-6 * a->inv_freq[0]);
    /* Llama-3 scaling changed the low frequencies (factor 8) and kept the highest. */
    CHECK_NEAR(a->inv_freq[0], 1.0, 1e-7);
    CHECK_NEAR(a->inv_freq[7], powf(10000.0f, -14.0f / 16.0f) / 8.0f, 1e-9);
    model_free(a);
    model_free(b);
    if (open_model("tests/fixtures/models/tiny-qwen2/model.gguf", &a)) { CHECK(0); return; }
    CHECK(a->pairing == ROPE_PAIR_HALF);
    CHECK(a->layers[0].bq != NULL && a->layers[0].q_norm == NULL);
    model_free(a);
    if (open_model("tests/fixtures/models/tiny-qwen3/model.gguf", &a)) { CHECK(0); return; }
    CHECK(a->pairing == ROPE_PAIR_HALF);
    CHECK(a->layers[0].bq == NULL && a->layers[0].q_norm != NULL);
    CHECK(a->output == a->tok_embd);
    model_free(a);
}

/* Three prompts of different lengths in one ragged batch: every position of
 * every sequence still matches. */
static void test_ragged_batch(void)
{
    struct golden g;
    if (golden_load("tiny-qwen2", &g)) { CHECK(0); return; }
    struct model *m;
    if (open_model("tests/fixtures/models/tiny-qwen2", &m)) { CHECK(0); golden_free(&g); return; }
    const cJSON *prompts = cJSON_GetObjectItem(g.json, "prompts");
    enum { NS = 3 };
    int *ids[NS], n[NS], total = 0;
    struct kvcache *c[NS];
    struct fwd_seq seqs[NS];
    struct eb_err e;
    for (int i = 0; i < NS; i++) {
        ids[i] = json_ints(cJSON_GetArrayItem(prompts, i), &n[i]);
        total += n[i];
        CHECK(model_kvcache_create(m, n[i] + 1, &c[i], &e) == 0);
        seqs[i] = (struct fwd_seq){.id = i, .cache = c[i], .tokens = ids[i], .n_tokens = n[i],
                                   .logits = FWD_LOGITS_ALL};
    }
    struct forward *f;
    CHECK(forward_create(m, total, total, &f, &e) == 0);
    struct fwd_batch b = {seqs, NS, 0};
    CHECK(model_forward(f, &b, NULL, &e) == 0);
    CHECK(b.n_rows == total);
    size_t off = 0;
    for (int i = 0; i < NS; i++) {
        double r = worst_rel(forward_logits(f) + (size_t)seqs[i].logit_row0 * g.vocab, g.logits + off,
                             n[i], g.vocab);
        CHECK_MSG(r <= 1e-4, "sequence %d: relative error %.3g", i, r);
        CHECK(c[i]->next_pos == n[i]);
        off += (size_t)n[i] * g.vocab;
    }
    /* Logits for the last row only. */
    struct kvcache *c2;
    CHECK(model_kvcache_create(m, n[0], &c2, &e) == 0);
    struct fwd_seq one = {.id = 0, .cache = c2, .tokens = ids[0], .n_tokens = n[0],
                          .logits = FWD_LOGITS_LAST};
    struct fwd_batch b1 = {&one, 1, 0};
    CHECK(model_forward(f, &b1, NULL, &e) == 0);
    CHECK(rel_err(forward_logits(f), g.logits + (size_t)(n[0] - 1) * g.vocab, g.vocab) <= 1e-4);
    /* A full cache is an error, not an overflow. */
    CHECK(model_forward(f, &b1, NULL, &e) == -1);
    CHECK(strstr(e.msg, "full") != NULL);
    /* Bad token ids are an error. */
    int bad = m->cfg.n_vocab;
    struct fwd_seq sb = {.id = 0, .cache = c[0], .tokens = &bad, .n_tokens = 1, .logits = FWD_LOGITS_LAST};
    struct fwd_batch bb = {&sb, 1, 0};
    CHECK(model_forward(f, &bb, NULL, &e) == -1);
    kvcache_free(c2);
    for (int i = 0; i < NS; i++) {
        kvcache_free(c[i]);
        free(ids[i]);
    }
    forward_free(f);
    model_free(m);
    golden_free(&g);
}

struct hook_log {
    int layers_seen, hidden_calls, probs_calls;
    double probs_row_sum;
    int fail_probs_at;       /* > 0: the attn_probs call with this number fails */
};

static int log_after_layer(void *ctx, const struct fwd_batch *b, int layer, float *hidden,
                           struct eb_err *e)
{
    (void)b; (void)hidden; (void)e; (void)layer;
    ((struct hook_log *)ctx)->layers_seen++;
    return 0;
}

static int log_probs(void *ctx, const struct fwd_batch *b, int s, int layer, const float *probs,
                     int n_new, int cap, struct eb_err *e)
{
    (void)b; (void)s;
    struct hook_log *h = ctx;
    if (h->probs_calls + 1 == h->fail_probs_at) return eb_fail(e, "probs hook failed at layer %d", layer);
    float *row = malloc((size_t)cap * sizeof *row);
    be->download(be, row, probs + (size_t)(n_new - 1) * cap, (size_t)cap); /* head 0, last query */
    for (int j = 0; j < cap; j++) h->probs_row_sum += row[j];
    h->probs_calls++;
    free(row);
    return 0;
}

static int log_hidden(void *ctx, const struct fwd_batch *b, const float *hidden, struct eb_err *e)
{
    (void)b; (void)hidden; (void)e;
    ((struct hook_log *)ctx)->hidden_calls++;
    return 0;
}

static void test_hooks(void)
{
    struct model *m;
    if (open_model("tests/fixtures/models/tiny-llama", &m)) { CHECK(0); return; }
    struct forward *f;
    struct kvcache *c;
    struct eb_err e;
    int ids[] = {1, 5, 9, 200};
    CHECK(forward_create(m, 4, 4, &f, &e) == 0);
    CHECK(model_kvcache_create(m, 8, &c, &e) == 0);
    struct hook_log log = {0, 0, 0, 0, 0};
    struct model_hooks h = {&log, MODEL_NEED_ATTN_PROBS | MODEL_NEED_HIDDEN_LAST, log_after_layer,
                            log_probs, log_hidden};
    struct fwd_seq s = {.id = 0, .cache = c, .tokens = ids, .n_tokens = 4, .logits = FWD_LOGITS_LAST};
    struct fwd_batch b = {&s, 1, 0};
    CHECK(model_forward(f, &b, &h, &e) == 0);
    CHECK(log.layers_seen == m->cfg.n_layer);
    CHECK(log.probs_calls == m->cfg.n_layer);
    CHECK_NEAR(log.probs_row_sum, m->cfg.n_layer, 1e-4);
    CHECK(log.hidden_calls == 1);
    /* an observe hook's error ends the forward at once, with its message */
    kvcache_free(c);
    CHECK(model_kvcache_create(m, 8, &c, &e) == 0);
    s.cache = c;
    log = (struct hook_log){0, 0, 0, 0, 2};
    CHECK(model_forward(f, &b, &h, &e) == -1);
    CHECK_MSG(strstr(e.msg, "probs hook failed at layer 1") != NULL, "%s", e.msg);
    CHECK(log.probs_calls == 1 && log.layers_seen == 1 && log.hidden_calls == 0);
    kvcache_free(c);
    forward_free(f);
    model_free(m);
}

static void test_smollm2(void)
{
    FILE *probe = fopen(SMOL_PATH, "rb");
    if (!probe) SKIP("%s absent (make deps downloads it)", SMOL_PATH);
    fclose(probe);
    char *txt = read_text("tests/fixtures/models/smollm2-golden.json");
    size_t n_last;
    float *last = read_f32("tests/fixtures/models/smollm2-last-logits.bin", &n_last);
    cJSON *g = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    if (!g || !last) { CHECK_MSG(0, "SmolLM2 fixtures missing"); cJSON_Delete(g); free(last); return; }
    struct model *m;
    if (open_model(SMOL_PATH, &m)) { CHECK(0); cJSON_Delete(g); free(last); return; }
    int V = cJSON_GetObjectItem(g, "vocab")->valueint;
    CHECK(m->cfg.n_vocab == V);
    CHECK(m->pairing == ROPE_PAIR_ADJACENT);
    const cJSON *prompts = cJSON_GetObjectItem(g, "prompts");
    const cJSON *top_ids = cJSON_GetObjectItem(g, "top_ids");
    const cJSON *top_vals = cJSON_GetObjectItem(g, "top_vals");
    for (int i = 0; i < cJSON_GetArraySize(prompts); i++) {
        int n;
        int *ids = json_ints(cJSON_GetArrayItem(prompts, i), &n);
        float *ours = malloc((size_t)n * V * sizeof *ours);
        CHECK(run_chunked(m, ids, n, n, ours) == 0);
        double r = rel_err(ours + (size_t)(n - 1) * V, last + (size_t)i * V, V);
        CHECK_MSG(r <= 1e-3, "prompt %d last position: relative error %.3g", i, r);
        double worst = 0;
        int top1_same = 1;
        for (int p = 0; p < n; p++) {
            const cJSON *pi = cJSON_GetArrayItem(cJSON_GetArrayItem(top_ids, i), p);
            const cJSON *pv = cJSON_GetArrayItem(cJSON_GetArrayItem(top_vals, i), p);
            double diff = 0, mag = 0;
            int best = 0;
            for (int j = 1; j < V; j++)
                if (ours[(size_t)p * V + j] > ours[(size_t)p * V + best]) best = j;
            top1_same &= best == cJSON_GetArrayItem(pi, 0)->valueint;
            for (int j = 0; j < cJSON_GetArraySize(pi); j++) {
                int id = cJSON_GetArrayItem(pi, j)->valueint;
                double ref = cJSON_GetArrayItem(pv, j)->valuedouble;
                diff = fmax(diff, fabs(ours[(size_t)p * V + id] - ref));
                mag = fmax(mag, fabs(ref));
            }
            worst = fmax(worst, diff / mag);
        }
        CHECK_MSG(worst <= 1e-3, "prompt %d top-20: relative error %.3g", i, worst);
        CHECK(top1_same);
        free(ours);
        free(ids);
    }
    model_free(m);
    cJSON_Delete(g);
    free(last);
}

int main(void)
{
    be = backend_cpu_create(0);
    RUN(test_tiny_safetensors);
    RUN(test_tiny_gguf);
    RUN(test_pairing);
    RUN(test_ragged_batch);
    RUN(test_hooks);
    RUN(test_smollm2);
    be->destroy(be);
    return test_summary("forward");
}
