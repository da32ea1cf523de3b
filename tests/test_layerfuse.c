/* test_layerfuse.c - the CPU backend's fused layer blocks (cpu_layer.c)
 * against the single ops, bit for bit.
 *
 * The same model file loaded with weights kept quantized, run twice on
 * backends of 1, 2 and 3 threads: with the fused blocks (default) and with
 * EVICTBENCH_CPU_FUSED=0 (every op its own job); the fixtures with
 * EVICTBENCH_CPU_FUSED=all, so that their tiny blocks still run threaded.  Every logit must be equal
 * in memory, for
 *   - decode: one token per forward (rows <= 32: each thread quantizes all
 *     rows itself);
 *   - prefill: 40 tokens in one forward (rows > 32: rows split, barriers);
 *   - a ragged batch of three sequences.
 * The fused run must also start fewer parallel jobs (it ran, and it is what
 * it claims).  With a KV table (layer_in_args.tab) the fused block appends
 * the layer's rows itself, leaving caches and query rings as kv_append does.
 * Fixtures: tools/golden/gen_quant_models.py; the SmolLM2 and
 * Qwen2.5-1.5B GGUFs when models/ has them (else a SKIP line). */
#include "test.h"

#include "model/model.h"
#include "model/modelfile.h"
#include "test_util.h"
#include "fwd_runs.h"

#define SMOL_PATH "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define QWEN15_PATH "models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

/* fused: the value of EVICTBENCH_CPU_FUSED for the fused run ("all": the
 * threaded path even on tiny fixtures, whose single ops run on one thread). */
static void check_file(const char *path, int threads, const char *fused_mode)
{
    struct model_file *mf;
    struct eb_err e;
    if (model_file_open(path, &mf, &e)) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    struct backend *be = backend_cpu_create(threads);
    struct model *m = NULL;
    struct model_load_opts native = {.weights = MODEL_WEIGHTS_NATIVE};
    CHECK(be && model_load_opts(mf, be, &native, &m, &e) == 0);
    if (!m) goto done;
    size_t n = (size_t)3 * N_TOK * m->cfg.n_vocab;
    float *fused = malloc(n * sizeof *fused), *single = malloc(n * sizeof *single);
    CHECK(fused && single);
    if (fused && single) {
        setenv("EVICTBENCH_CPU_FUSED", "0", 1);
        long jobs_single = run_all(m, single);
        setenv("EVICTBENCH_CPU_FUSED", fused_mode, 1);
        long jobs_fused = run_all(m, fused);
        unsetenv("EVICTBENCH_CPU_FUSED");
        CHECK(jobs_fused > 0 || threads == 1);
        size_t diff = 0;
        for (size_t i = 0; i < n; i++) diff += memcmp(&fused[i], &single[i], sizeof *fused) != 0;
        CHECK_MSG(diff == 0, "%s, %d threads: %zu of %zu logits differ fused vs single ops", path,
                  threads, diff, n);
        if (threads > 1 && strcmp(fused_mode, "all") != 0)
            CHECK_MSG(jobs_fused < jobs_single, "%s: fused %ld jobs, single ops %ld", path,
                      jobs_fused, jobs_single);
        fprintf(stderr, "  note: %s, %d threads: %ld parallel jobs fused, %ld single ops\n", path,
                threads, jobs_fused, jobs_single);
    }
    free(fused);
    free(single);
done:
    model_free(m);
    if (be) be->destroy(be);
    model_file_close(mf);
}

/* ---- RoPE fused with the KV append (layer_in_args.tab) ---- */

static long appends_via_vtable; /* kv_append calls that came through struct backend */
static int (*cpu_append)(struct backend *, struct kv_table *, int, const float *, const float *,
                         const float *);

static int counted_append(struct backend *be, struct kv_table *t, int layer, const float *k,
                          const float *v, const float *q)
{
    appends_via_vtable++;
    return cpu_append(be, t, layer, k, v, q);
}

enum { APP_SEQ = 2, APP_CAP = 48, APP_WINDOW = 5 };

/* A batched prefill (12 and 7 tokens) then 6 decode steps of both, with f16
 * caches and query rings; out: every cache's K and V bytes, lengths and ring
 * (oldest first), laid end to end.  Returns the bytes written, or 0. */
static size_t append_run(struct model *m, unsigned char *out, size_t cap)
{
    struct forward *f = NULL;
    struct kvcache *c[APP_SEQ] = {0};
    struct eb_err e;
    size_t n = 0;
    const struct model_config *mc = &m->cfg;
    int ids[12], V = mc->n_vocab;
    for (int i = 0; i < 12; i++) ids[i] = (i * 97 + 5) % V;
    if (forward_create(m, 24, 24, &f, &e)) goto done;
    for (int s = 0; s < APP_SEQ; s++)
        if (model_kvcache_create_as(m, APP_CAP, KV_F16, &c[s], &e) ||
            kvcache_qring_enable(c[s], APP_WINDOW, mc->n_head * mc->head_dim, &e))
            goto done;
    for (int step = 0; step < 7; step++) {
        struct fwd_seq q[APP_SEQ];
        for (int s = 0; s < APP_SEQ; s++)
            q[s] = (struct fwd_seq){.id = s, .cache = c[s], .tokens = ids + (step ? step + s : 0),
                                    .n_tokens = step ? 1 : (s ? 7 : 12),
                                    .logits = FWD_LOGITS_LAST};
        struct fwd_batch b = {.seqs = q, .n_seq = APP_SEQ};
        if (model_forward(f, &b, NULL, &e)) goto done;
    }
    size_t qd = (size_t)mc->n_head * mc->head_dim;
    float *ring = malloc(APP_WINDOW * qd * sizeof *ring);
    for (int s = 0; s < APP_SEQ && ring; s++)
        for (int l = 0; l < mc->n_layer; l++) {
            const struct kvcache *kc = c[s];
            size_t rq = (size_t)kvcache_qring_gather(kc, l, ring) * qd * sizeof *ring;
            size_t lens = (size_t)kc->n_kv * sizeof *kc->len;
            if (n + 2 * (size_t)kc->n_kv * kc->capacity * kc->row_bytes + rq + lens > cap) {
                n = 0;
                goto done_ring;
            }
            for (int h = 0; h < kc->n_kv; h++) { /* each head's valid slots */
                size_t at = (size_t)h * kc->capacity * kc->row_bytes;
                size_t rows = (size_t)kc->len[l * kc->n_kv + h] * kc->row_bytes;
                memcpy(out + n, (const char *)kc->k[l] + at, rows), n += rows;
                memcpy(out + n, (const char *)kc->v[l] + at, rows), n += rows;
            }
            memcpy(out + n, kc->len + (size_t)l * kc->n_kv, lens), n += lens;
            memcpy(out + n, ring, rq), n += rq;
        }
done_ring:
    free(ring);
done:
    if (!n) fprintf(stderr, "  append_run: %s\n", e.msg);
    for (int s = 0; s < APP_SEQ; s++) kvcache_free(c[s]);
    forward_free(f);
    return n;
}

/* The fused layer_in that appends leaves the caches, lengths and query rings
 * byte for byte as layer_in then kv_append does, and it made the append
 * itself: no kv_append came through the vtable. */
static void test_append_fused(void)
{
    struct backend *be = backend_cpu_create(2);
    /* quantized weights: the fused blocks serve them */
    struct model *m = be ? open_model_weights(be, "tests/fixtures/models/tiny-llama-q/model.gguf",
                                              MODEL_WEIGHTS_NATIVE) : NULL;
    CHECK(m != NULL);
    size_t cap = (size_t)64 << 20;
    unsigned char *fused = malloc(cap), *single = malloc(cap);
    if (m && fused && single) {
        cpu_append = be->kv_append;
        be->kv_append = counted_append;
        setenv("EVICTBENCH_CPU_FUSED", "0", 1);
        appends_via_vtable = 0;
        size_t n_single = append_run(m, single, cap);
        long single_calls = appends_via_vtable;
        setenv("EVICTBENCH_CPU_FUSED", "all", 1);
        appends_via_vtable = 0;
        size_t n_fused = append_run(m, fused, cap);
        long fused_calls = appends_via_vtable;
        unsetenv("EVICTBENCH_CPU_FUSED");
        be->kv_append = cpu_append;
        CHECK(n_single > 0 && n_single == n_fused);
        CHECK_MSG(n_single > 0 && memcmp(single, fused, n_single) == 0,
                  "caches, lengths or rings differ with the append fused");
        CHECK_MSG(single_calls == 7L * m->cfg.n_layer && fused_calls == 0,
                  "kv_append through the vtable: %ld single, %ld fused", single_calls,
                  fused_calls);
    }
    free(fused);
    free(single);
    model_free(m);
    if (be) be->destroy(be);
}

static void test_fixtures(void)
{
    for (int t = 1; t <= 3; t++) {
        check_file("tests/fixtures/models/tiny-llama-q/model.gguf", t, "all");
        check_file("tests/fixtures/models/tiny-kquant/model.gguf", t, "all");
    }
}

static void test_smollm2(void)
{
    if (!file_exists(SMOL_PATH)) SKIP("%s absent (make deps)", SMOL_PATH);
    else check_file(SMOL_PATH, 2, "1");
}

static void test_qwen15(void)
{
    if (!file_exists(QWEN15_PATH)) SKIP("%s absent (make deps)", QWEN15_PATH);
    else check_file(QWEN15_PATH, 2, "1");
}

int main(void)
{
    RUN(test_fixtures);
    RUN(test_append_fused);
    RUN(test_smollm2);
    RUN(test_qwen15);
    return test_summary("layerfuse");
}
