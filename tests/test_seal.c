/* test_seal.c - steering vector files (round trip, mismatch and corruption
 * errors) and SEAL steering through the policy's steer hook: the hidden
 * state changes exactly at split tokens inside <think>, at the configured
 * layer only, by exactly coef * V. */
#include <unistd.h>

#include "kernels/backend.h"
#include "policies/registry.h"
#include "policies/steering.h"
#include "test.h"
#include "tok_fixture.h"

enum { DIM = 8 };

static void make_vector(struct steer_vector *sv, float *v)
{
    memset(sv, 0, sizeof *sv);
    sv->version = STEER_VERSION;
    sv->layer = 2;
    sv->dim = DIM;
    sv->n_reflection = 3;
    sv->n_transition = 1;
    sv->n_execution = 9;
    sv->n_correct = 2;
    sv->n_incorrect = 2;
    sv->max_new = 64;
    snprintf(sv->model, sizeof sv->model, "tiny");
    snprintf(sv->model_identity, sizeof sv->model_identity, "llama layers=4 embd=8 test");
    snprintf(sv->dataset, sizeof sv->dataset, "synthetic:4");
    snprintf(sv->keywords, sizeof sv->keywords, "reference");
    snprintf(sv->think, sizeof sv->think, "tags");
    snprintf(sv->created, sizeof sv->created, "2026-01-01T00:00:00Z");
    for (int i = 0; i < DIM; i++) v[i] = 0.25f * (float)(i - 3) + 0.125f;
    sv->v = v;
}

static void write_bytes(const char *path, const char *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}

static void test_vector_file(void)
{
    char path[] = "/tmp/eb_steer_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    float v[DIM];
    struct steer_vector sv, got;
    make_vector(&sv, v);
    struct eb_err e = {0};
    CHECK(steer_vector_save(path, &sv, &e) == 0);
    CHECK_MSG(steer_vector_load(path, sv.model_identity, DIM, &got, &e) == 0, "%s", e.msg);
    CHECK(got.layer == 2 && got.dim == DIM && got.n_reflection == 3 && got.n_transition == 1 &&
          got.n_execution == 9 && got.n_correct == 2 && got.n_incorrect == 2);
    CHECK(got.model_hash == steering_hash(sv.model_identity));
    CHECK_STR(got.dataset, "synthetic:4");
    CHECK_STR(got.keywords, "reference");
    int same = got.v != NULL;
    for (int i = 0; same && i < DIM; i++) same = got.v[i] == v[i];
    CHECK(same);
    steer_vector_free(&got);
    /* another model, another width */
    CHECK(steer_vector_load(path, "qwen2 layers=28 other", DIM, &got, &e) != 0);
    CHECK(strstr(e.msg, "made for model") != NULL);
    CHECK(steer_vector_load(path, NULL, DIM + 1, &got, &e) != 0 && strstr(e.msg, "dim"));
    /* corruption: truncated data, trailing bytes, bad magic, future version, no end */
    FILE *f = fopen(path, "rb");
    char buf[4096];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    write_bytes(path, buf, n - 4);
    CHECK(steer_vector_load(path, NULL, 0, &got, &e) != 0 && strstr(e.msg, "truncated"));
    buf[n] = 'x';
    write_bytes(path, buf, n + 1);
    CHECK(steer_vector_load(path, NULL, 0, &got, &e) != 0 && strstr(e.msg, "longer"));
    write_bytes(path, "hello\n", 6);
    CHECK(steer_vector_load(path, NULL, 0, &got, &e) != 0 && strstr(e.msg, "not a steering"));
    write_bytes(path, STEER_MAGIC " 9\n\n", strlen(STEER_MAGIC " 9\n\n"));
    CHECK(steer_vector_load(path, NULL, 0, &got, &e) != 0 && strstr(e.msg, "version 9"));
    write_bytes(path, STEER_MAGIC " 1\nlayer: 2\n", strlen(STEER_MAGIC " 1\nlayer: 2\n"));
    CHECK(steer_vector_load(path, NULL, 0, &got, &e) != 0 && strstr(e.msg, "no end"));
    write_bytes(path, STEER_MAGIC " 1\nlayer: 2\ndim: 8\n\n",
                strlen(STEER_MAGIC " 1\nlayer: 2\ndim: 8\n\n"));
    CHECK(steer_vector_load(path, NULL, 0, &got, &e) != 0 && strstr(e.msg, "model_hash"));
    CHECK(steer_vector_load("/nonexistent/v.bin", NULL, 0, &got, &e) != 0);
    unlink(path);
}

static void test_steering_positions(void)
{
    char why[512];
    struct tokenizer *tok = tok_fixture_load("r1-qwen", why, sizeof why);
    if (!tok) SKIP("r1-qwen tokenizer: %s", why);
    char path[] = "/tmp/eb_steer_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    float v[DIM];
    struct steer_vector sv;
    make_vector(&sv, v);
    struct eb_err e = {0};
    CHECK(steer_vector_save(path, &sv, &e) == 0);
    struct policy_model pm = {.n_layer = 4, .n_head = 2, .n_kv = 1, .head_dim = 4,
                              .n_embd = DIM, .text = tok_fixture_text(tok), .model_identity = sv.model_identity,
                              .steer_vector = path};
    struct policy *p = NULL;
    int rc = policy_create("seal:coef=-1.5", &pm, &p, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) {
        tokenizer_free(tok);
        unlink(path);
        return;
    }
    int nl2 = tokenizer_find(tok, "ĊĊ"), open = tokenizer_find(tok, "<think>"),
        close_ = tokenizer_find(tok, "</think>");
    CHECK(nl2 >= 0 && open >= 0 && close_ >= 0);
    /* prompt ... <think> x ; then \n\n (steer) y \n\n (steer) </think> \n\n (no) */
    int prompt[] = {100, open, 200};
    int gen[] = {nl2, 5, nl2, close_, nl2};
    int want[] = {1, 0, 1, 0, 0};
    struct backend *be = backend_cpu_create(1);
    float *h = be->alloc(be, 3 * DIM), host[3 * DIM], before[3 * DIM];
    struct seq_view sv2 = {.n_prompt = 3, .capacity = 32, .prompt = prompt};
    CHECK(p->ops->begin_sequence(p->self, 0, &sv2, &e) == 0);
    unsigned s = 1;
    /* prefill: three rows, none steered (the last prompt token is no split token) */
    for (int i = 0; i < 3 * DIM; i++) before[i] = (float)((s = s * 1103515245u + 12345u) % 1000) / 250.0f - 2;
    be->upload(be, h, before, 3 * DIM);
    for (int l = 0; l < 4; l++) CHECK(p->ops->steer(p->self, 0, l, be, h, 3, DIM, &e) == 0);
    be->download(be, host, h, 3 * DIM);
    CHECK(memcmp(host, before, sizeof host) == 0);
    for (int t = 0; t < 5; t++) {
        struct step_view st = {gen[t], t + 1, 3 + t, 0};
        CHECK(p->ops->observe(p->self, 0, &st, &e) == 0);
        for (int i = 0; i < DIM; i++) before[i] = (float)(t + 1) * 0.5f - (float)i * 0.25f;
        for (int l = 0; l < 4; l++) {
            be->upload(be, h, before, DIM);
            CHECK(p->ops->steer(p->self, 0, l, be, h, 1, DIM, &e) == 0);
            be->download(be, host, h, DIM);
            int steered = l == sv.layer - 1 && want[t];
            int ok = 1;
            for (int i = 0; i < DIM; i++) {
                float expect = steered ? before[i] + (float)(-1.5 * v[i]) : before[i];
                ok &= host[i] == expect;
            }
            CHECK_MSG(ok, "token %d layer %d: %s", t, l, steered ? "not steered by -1.5 V" : "changed");
        }
    }
    struct policy_trace_stats ts;
    CHECK(policy_trace_stats(p, 0, &ts) == 0 && ts.n_steered == 2);
    CHECK_NEAR(ts.alpha, -1.5, 1e-12);
    /* a wrong layer for this model, and a vector for another model */
    struct policy *q = NULL;
    CHECK(policy_create("seal:layer=4", &pm, &q, &e) != 0 && strstr(e.msg, "layer"));
    /* the vector's own layer by name is fine; another layer is refused */
    char spec[32];
    snprintf(spec, sizeof spec, "seal:layer=%d", sv.layer);
    CHECK_MSG(policy_create(spec, &pm, &q, &e) == 0, "%s", e.msg);
    policy_free(q);
    q = NULL;
    snprintf(spec, sizeof spec, "seal:layer=%d", sv.layer == 1 ? 2 : 1);
    CHECK_MSG(policy_create(spec, &pm, &q, &e) != 0 && strstr(e.msg, "calibrated at layer"), "%s",
              e.msg);
    pm.model_identity = "some other model";
    CHECK(policy_create("seal", &pm, &q, &e) != 0 && strstr(e.msg, "made for model"));
    p->ops->end_sequence(p->self, 0);
    policy_free(p);
    be->free(be, h);
    be->destroy(be);
    tokenizer_free(tok);
    unlink(path);
}

int main(void)
{
    RUN(test_vector_file);
    RUN(test_steering_positions);
    return test_summary("seal");
}
