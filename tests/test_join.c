/* test_join.c - joined projections (backend.weight_join, model.c's
 * join_projections): q, k and v as one weight, gate and up as one, with the
 * separate weights turned into views of their rows.
 *
 *  - weight_join itself on the CPU backend: two f32 weights stacked give,
 *    through the joined weight, the rows each gave alone, bit for bit; the
 *    parts become views (view_of, bytes 0) and free cleanly; parts of
 *    different held types are refused and left untouched.
 *  - whole models: each fixture (and SmolLM2 when models/ has it) loaded
 *    twice, joined (MODEL_JOIN_ALWAYS: the CPU does not join by default)
 *    and with MODEL_JOIN_NEVER, in
 *    exact (f32) and native weights, must give the same logits in memory
 *    over tests/fwd_runs.h's workload (decode, prefill, a ragged batch).
 *    tiny-qwen2 carries q/k/v biases (one joined bias buffer), tiny-qwen3
 *    per-head q/k norms.  In exact mode every layer must have been joined
 *    (f32 parts always share a layout). */
#include "test.h"

#include "model/model.h"
#include "model/modelfile.h"
#include "test_util.h"
#include "fwd_runs.h"

#define SMOL_PATH "models/SmolLM2-135M-Instruct.Q4_1.gguf"

static void test_join_rows(void)
{
    struct backend *be = backend_cpu_create(2);
    CHECK(be && be->weight_join);
    if (!be || !be->weight_join) return;
    enum { COLS = 32, RA = 16, RB = 8, M = 3 };
    float wa[RA * COLS], wb[RB * COLS], x[M * COLS];
    for (int i = 0; i < RA * COLS; i++) wa[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;
    for (int i = 0; i < RB * COLS; i++) wb[i] = (float)((i * 53) % 19) / 9.0f - 1.0f;
    for (int i = 0; i < M * COLS; i++) x[i] = (float)((i * 29) % 17) / 8.0f - 1.0f;
    struct weight *a = be->weight_create(be, WEIGHT_F32, RA, COLS, wa, 0, 0);
    struct weight *b = be->weight_create(be, WEIGHT_F32, RB, COLS, wb, 0, 0);
    float *dx = be->alloc(be, M * COLS), *ya = be->alloc(be, M * RA), *yb = be->alloc(be, M * RB);
    float *yj = be->alloc(be, M * (RA + RB));
    CHECK(a && b && dx && ya && yb && yj);
    be->upload(be, dx, x, M * COLS);
    be->matmul(be, ya, dx, a, NULL, M);
    be->matmul(be, yb, dx, b, NULL, M);
    float ha[M * RA], hb[M * RB], hj[M * (RA + RB)];
    be->download(be, ha, ya, M * RA);
    be->download(be, hb, yb, M * RB);

    struct weight *parts[2] = {a, b};
    struct weight *j = be->weight_join(be, parts, 2);
    CHECK(j && j->rows == RA + RB && j->cols == COLS && j->bytes == (size_t)(RA + RB) * COLS * 4);
    CHECK(a->view_of == j && b->view_of == j && a->bytes == 0 && b->bytes == 0);
    CHECK((const char *)b->data == (const char *)j->data + (size_t)RA * a->row_bytes);
    be->matmul(be, yj, dx, j, NULL, M);
    be->download(be, hj, yj, M * (RA + RB));
    int same = 1;
    for (int r = 0; r < M; r++) {
        same &= memcmp(hj + r * (RA + RB), ha + r * RA, sizeof(float) * RA) == 0;
        same &= memcmp(hj + r * (RA + RB) + RA, hb + r * RB, sizeof(float) * RB) == 0;
    }
    CHECK_MSG(same, "the joined weight's rows differ from its parts'");
    be->matmul(be, ya, dx, a, NULL, M); /* the views still multiply as before */
    float ha2[M * RA];
    be->download(be, ha2, ya, M * RA);
    CHECK(memcmp(ha, ha2, sizeof ha) == 0);

    /* different held types: refused, nothing touched */
    uint8_t q8[RB * 34];
    memset(q8, 0, sizeof q8);
    struct weight *c = be->weight_create(be, WEIGHT_Q8_0, RB, COLS, q8, 0, 0);
    struct weight *d = be->weight_create(be, WEIGHT_F32, RB, COLS, wb, 0, 0);
    CHECK(c && d);
    if (c && d) {
        const void *cd = c->data, *dd = d->data;
        struct weight *mixed[2] = {d, c};
        CHECK(be->weight_join(be, mixed, 2) == NULL);
        CHECK(c->data == cd && d->data == dd && !c->view_of && !d->view_of);
        struct weight *again[2] = {a, d}; /* a view is not joined twice */
        CHECK(be->weight_join(be, again, 2) == NULL);
    }
    be->weight_free(be, c);
    be->weight_free(be, d);
    be->weight_free(be, a);
    be->weight_free(be, b);
    be->weight_free(be, j);
    float *bufs[] = {dx, ya, yb, yj};
    for (int i = 0; i < 4; i++) be->free(be, bufs[i]);
    be->destroy(be);
}

static int layers_joined(const struct model *m)
{
    int n = 0;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const struct model_layer_weights *w = &m->layers[l];
        if (!w->wqkv || !w->w_gate_up) continue;
        CHECK(w->wq->view_of == w->wqkv && w->wk->view_of == w->wqkv &&
              w->wv->view_of == w->wqkv && w->w_gate->view_of == w->w_gate_up &&
              w->w_up->view_of == w->w_gate_up);
        CHECK(w->wqkv->rows == w->wq->rows + w->wk->rows + w->wv->rows);
        n++;
    }
    return n;
}

static void check_file(const char *path, enum model_weights mode)
{
    struct model_file *mf;
    struct eb_err e;
    if (model_file_open(path, &mf, &e)) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    struct backend *be = backend_cpu_create(2);
    struct model *joined = NULL, *apart = NULL;
    struct model_load_opts oj = {.weights = mode, .join = MODEL_JOIN_ALWAYS};
    struct model_load_opts os = {.weights = mode, .join = MODEL_JOIN_NEVER};
    CHECK(be && model_load_opts(mf, be, &oj, &joined, &e) == 0);
    CHECK(be && model_load_opts(mf, be, &os, &apart, &e) == 0);
    if (!joined || !apart) goto done;
    int n_joined = layers_joined(joined);
    CHECK(layers_joined(apart) == 0);
    /* the CPU does not join by default (it gains nothing by it) */
    struct model *plain = NULL;
    struct model_load_opts od = {.weights = mode};
    CHECK(model_load_opts(mf, be, &od, &plain, &e) == 0 && plain && layers_joined(plain) == 0);
    model_free(plain);
    if (mode == MODEL_WEIGHTS_F32)
        CHECK_MSG(n_joined == joined->cfg.n_layer, "%s: %d of %d layers joined in exact mode",
                  path, n_joined, joined->cfg.n_layer);
    CHECK(joined->weight_bytes == apart->weight_bytes);
    size_t n = (size_t)3 * N_TOK * joined->cfg.n_vocab;
    float *lj = malloc(n * sizeof *lj), *ls = malloc(n * sizeof *ls);
    CHECK(lj && ls);
    if (lj && ls) {
        CHECK(run_all(joined, lj) >= 0 && run_all(apart, ls) >= 0);
        size_t diff = 0;
        for (size_t i = 0; i < n; i++) diff += memcmp(&lj[i], &ls[i], sizeof *lj) != 0;
        CHECK_MSG(diff == 0, "%s (%s): %zu of %zu logits differ joined vs separate", path,
                  model_weights_name(mode), diff, n);
        fprintf(stderr, "  note: %s (%s): %d of %d layers joined, logits equal\n", path,
                model_weights_name(mode), n_joined, joined->cfg.n_layer);
    }
    free(lj);
    free(ls);
done:
    model_free(joined);
    model_free(apart);
    if (be) be->destroy(be);
    model_file_close(mf);
}

static void test_models(void)
{
    static const char *const paths[] = {
        "tests/fixtures/models/tiny-llama-q/model.gguf",
        "tests/fixtures/models/tiny-kquant/model.gguf",
        "tests/fixtures/models/tiny-qwen2/model.gguf",
        "tests/fixtures/models/tiny-qwen3/model.gguf",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        check_file(paths[i], MODEL_WEIGHTS_NATIVE);
        check_file(paths[i], MODEL_WEIGHTS_F32);
    }
}

static void test_smollm2(void)
{
    if (!file_exists(SMOL_PATH)) SKIP("%s absent (make deps)", SMOL_PATH);
    else check_file(SMOL_PATH, MODEL_WEIGHTS_NATIVE);
}

int main(void)
{
    RUN(test_join_rows);
    RUN(test_models);
    RUN(test_smollm2);
    return test_summary("join");
}
