/* test_graph.c - step graphs (kernels/backend.h, "step graphs"; issue 37)
 * on the CPU, where no GPU records them.
 *
 * 1. kernels/step_graph.c, the decision the CUDA backend takes per step:
 *    eager, capture, replay, and what drops a recording.
 * 2. model/forward.c's side of the protocol, against a recording backend
 *    that does what a CUDA graph does: in a capture the ops are recorded
 *    and not run, graph_end runs the recording; in a replay the ops only
 *    compare their arguments with the recording, and graph_end runs the
 *    recording again.  What a graph freezes, the recorder freezes too: a
 *    replay of a step whose sequences, rows or bindings differ from the
 *    captured one counts as stale (a CUDA graph would launch the old grids
 *    over the old slots).  Whole generations (the tiny quantized fixture,
 *    native weights, so every layer runs fused) with sequences finishing at
 *    different steps and R-KV compacting must give the eager run's tokens,
 *    replay most decode steps, capture again after every change of shape,
 *    and never replay a stale recording. */
#include "test.h"
#include "test_util.h"

#include "harness/exp/policy_glue.h"
#include "kernels/step_graph.h"
#include "model/model.h"
#include "model/modelfile.h"

#define TINYQ_PATH "tests/fixtures/models/tiny-llama-q8/model.gguf"

/* ---- 1. the decision ---- */

static void test_state(void)
{
    struct step_graph g = {0};
    static const char owners[2] = {0};
    const void *me = &owners[0], *other = &owners[1];
    CHECK(step_graph_begin(&g, me, 1) == STEP_EAGER); /* first of its shape */
    step_graph_end(&g, 1);
    CHECK(step_graph_begin(&g, me, 1) == STEP_CAPTURE);
    step_graph_end(&g, 1);
    CHECK(g.captures == 1);
    for (int i = 0; i < 3; i++) {
        CHECK(step_graph_begin(&g, me, 1) == STEP_REPLAY);
        step_graph_end(&g, 1);
    }
    CHECK(g.replays == 3);
    CHECK(step_graph_begin(&g, me, 0) == STEP_EAGER); /* not to be recorded */
    step_graph_end(&g, 1);
    CHECK(step_graph_begin(&g, me, 1) == STEP_REPLAY); /* the recording lives on */
    step_graph_end(&g, 1);
    CHECK(step_graph_begin(&g, me, 2) == STEP_EAGER); /* a new shape */
    step_graph_end(&g, 1);
    CHECK(step_graph_begin(&g, me, 2) == STEP_CAPTURE);
    step_graph_end(&g, 0); /* not kept: the shape stays eager */
    CHECK(g.discarded == 1);
    CHECK(step_graph_begin(&g, me, 2) == STEP_EAGER);
    step_graph_end(&g, 1);
    CHECK(step_graph_begin(&g, me, 2) == STEP_EAGER);
    step_graph_end(&g, 1);
    CHECK(step_graph_begin(&g, me, 3) == STEP_EAGER);
    step_graph_end(&g, 1);
    CHECK(step_graph_begin(&g, me, 3) == STEP_CAPTURE);
    step_graph_end(&g, 1);
    CHECK(step_graph_begin(&g, me, 3) == STEP_REPLAY);
    step_graph_end(&g, 0); /* a failed replay drops the recording: captured again */
    CHECK(step_graph_begin(&g, me, 3) == STEP_CAPTURE);
    step_graph_end(&g, 1);
    CHECK(step_graph_begin(&g, other, 3) == STEP_EAGER); /* another forward's shape 3 */
    step_graph_end(&g, 1);
    step_graph_forget(&g);
    CHECK(step_graph_begin(&g, other, 3) == STEP_EAGER);
    step_graph_end(&g, 1);
}

/* ---- 2. the recording backend ---- */

enum rec_op { REC_EMBED, REC_IN, REC_OUT, REC_APPEND, REC_ATTN };

struct rec_call {
    enum rec_op op;
    struct layer_in_args in;
    struct layer_out_args out;
    struct attn_layer_args attn;
    struct kv_table *t;
    int layer, n;
    float *y;
    const float *k, *v, *q;
    const struct weight *w;
    const int *ids;
};

enum { REC_MAX = 4096, SIG_MAX = 64 };

struct recorder {
    struct backend be; /* first: the wrapper's struct backend * is a struct recorder * */
    struct backend *inner;
    struct step_graph g;
    struct rec_call *calls;
    int n_calls, at;   /* recorded; the next to compare in a replay */
    /* the shape as the backend sees it: the last kv_table_step, binds so far */
    struct kv_step_seq step[SIG_MAX];
    int n_step;
    long binds;
    struct kv_step_seq sig[SIG_MAX]; /* at the capture */
    int sig_n;
    long sig_binds;
    long stale, mismatched, failed_runs, graph_steps;
};

static struct recorder *rec_of(struct backend *be)
{
    return (struct recorder *)be;
}

static int same_shape(const struct recorder *r)
{
    if (r->n_step != r->sig_n || r->binds != r->sig_binds) return 0;
    for (int i = 0; i < r->n_step; i++) {
        const struct kv_step_seq *a = &r->step[i], *b = &r->sig[i];
        if (a->slot != b->slot || a->row0 != b->row0 || a->n_new != b->n_new ||
            a->n_pad != b->n_pad)
            return 0;
    }
    return 1;
}

static int rec_kv_table_bind(struct backend *be, struct kv_table *t, int slot,
                             const struct kv_seq_desc *d)
{
    struct recorder *r = rec_of(be);
    r->binds++;
    return r->inner->kv_table_bind(r->inner, t, slot, d);
}

static int rec_kv_table_step(struct backend *be, struct kv_table *t, int n_seq,
                             const struct kv_step_seq *seqs)
{
    struct recorder *r = rec_of(be);
    r->n_step = n_seq <= SIG_MAX ? n_seq : 0;
    if (r->n_step) memcpy(r->step, seqs, (size_t)n_seq * sizeof *seqs);
    return r->inner->kv_table_step(r->inner, t, n_seq, seqs);
}

/* The arguments a replayed call must repeat (field by field: the argument
 * structs' padding is not theirs to compare). */
static int same_call(const struct rec_call *a, const struct rec_call *b)
{
    if (a->op != b->op) return 0;
    switch (a->op) {
    case REC_EMBED: return a->y == b->y && a->w == b->w && a->ids == b->ids && a->n == b->n;
    case REC_IN:
        return a->in.rows == b->in.rows && a->in.x == b->in.x && a->in.q == b->in.q &&
               a->in.k == b->in.k && a->in.v == b->in.v && a->in.wq == b->in.wq &&
               a->in.wqkv == b->in.wqkv && a->in.pos_dev == b->in.pos_dev &&
               a->in.qkv_out == b->in.qkv_out;
    case REC_OUT:
        return a->out.rows == b->out.rows && a->out.x == b->out.x && a->out.att == b->out.att &&
               a->out.wo == b->out.wo && a->out.w_down == b->out.w_down &&
               a->out.hb == b->out.hb;
    case REC_APPEND:
        return a->t == b->t && a->layer == b->layer && a->k == b->k && a->v == b->v &&
               a->q == b->q;
    case REC_ATTN:
        return a->t == b->t && a->attn.layer == b->attn.layer && a->attn.out == b->attn.out &&
               a->attn.q == b->attn.q && a->attn.probs == b->attn.probs &&
               a->attn.scale == b->attn.scale;
    }
    return 0;
}

/* A recorded op: 1 when the caller's call was taken (recorded or compared),
 * 0 when it runs now (eager). */
static int take(struct recorder *r, const struct rec_call *c)
{
    if (r->g.mode == STEP_CAPTURE) {
        if (r->n_calls < REC_MAX) r->calls[r->n_calls++] = *c;
        else r->mismatched++;
        return 1;
    }
    if (r->g.mode != STEP_REPLAY) return 0;
    /* a replay: the same op with the same arguments, or the recording is wrong */
    if (r->at >= r->n_calls || !same_call(&r->calls[r->at], c)) r->mismatched++;
    r->at++;
    return 1;
}

static void rec_embed_dev(struct backend *be, float *y, const struct weight *w, const int *ids,
                          int n)
{
    struct recorder *r = rec_of(be);
    struct rec_call c;
    memset(&c, 0, sizeof c);
    c.op = REC_EMBED, c.y = y, c.w = w, c.ids = ids, c.n = n;
    if (!take(r, &c)) r->inner->embed_weight_dev(r->inner, y, w, ids, n);
}

static int rec_layer_in(struct backend *be, const struct layer_in_args *a)
{
    struct recorder *r = rec_of(be);
    struct rec_call c;
    memset(&c, 0, sizeof c);
    c.op = REC_IN, c.in = *a;
    return take(r, &c) ? 0 : r->inner->layer_in(r->inner, a);
}

static int rec_layer_out(struct backend *be, const struct layer_out_args *a)
{
    struct recorder *r = rec_of(be);
    struct rec_call c;
    memset(&c, 0, sizeof c);
    c.op = REC_OUT, c.out = *a;
    return take(r, &c) ? 0 : r->inner->layer_out(r->inner, a);
}

static int rec_kv_append(struct backend *be, struct kv_table *t, int layer, const float *k,
                         const float *v, const float *q)
{
    struct recorder *r = rec_of(be);
    struct rec_call c;
    memset(&c, 0, sizeof c);
    c.op = REC_APPEND, c.t = t, c.layer = layer, c.k = k, c.v = v, c.q = q;
    return take(r, &c) ? 0 : r->inner->kv_append(r->inner, t, layer, k, v, q);
}

static int rec_attention_layer(struct backend *be, struct kv_table *t,
                               const struct attn_layer_args *a)
{
    struct recorder *r = rec_of(be);
    struct rec_call c;
    memset(&c, 0, sizeof c);
    c.op = REC_ATTN, c.t = t, c.attn = *a;
    return take(r, &c) ? 0 : r->inner->attention_layer(r->inner, t, a);
}

/* The recording, run on the inner backend: what a graph launch does. */
static int run_recording(struct recorder *r)
{
    struct backend *in = r->inner;
    for (int i = 0; i < r->n_calls; i++) {
        const struct rec_call *c = &r->calls[i];
        int rc = 0;
        switch (c->op) {
        case REC_EMBED: in->embed_weight_dev(in, c->y, c->w, c->ids, c->n); break;
        case REC_IN: rc = in->layer_in(in, &c->in); break;
        case REC_OUT: rc = in->layer_out(in, &c->out); break;
        case REC_APPEND: rc = in->kv_append(in, c->t, c->layer, c->k, c->v, c->q); break;
        case REC_ATTN: rc = in->attention_layer(in, c->t, &c->attn); break;
        }
        if (rc) return -1; /* a fused block not served, or an op that failed */
    }
    return 0;
}

static int rec_graph_begin(struct backend *be, const void *owner, unsigned long shape)
{
    struct recorder *r = rec_of(be);
    int mode = step_graph_begin(&r->g, owner, shape);
    if (mode == STEP_CAPTURE) {
        r->n_calls = 0;
        r->sig_n = r->n_step;
        memcpy(r->sig, r->step, (size_t)r->n_step * sizeof *r->step);
        r->sig_binds = r->binds;
    } else if (mode == STEP_REPLAY) {
        r->at = 0;
        if (!same_shape(r)) r->stale++;
    }
    return mode;
}

static int rec_graph_end(struct backend *be, int ok)
{
    struct recorder *r = rec_of(be);
    int mode = r->g.mode, ran = 0;
    if (mode == STEP_REPLAY && r->at != r->n_calls) r->mismatched++;
    if (ok && mode != STEP_EAGER) {
        ran = run_recording(r) == 0;
        if (!ran) r->failed_runs++;
        r->graph_steps++;
    }
    step_graph_end(&r->g, ok && ran);
    return !ok || ran ? 0 : -1;
}

static void rec_graph_forget(struct backend *be)
{
    step_graph_forget(&rec_of(be)->g);
}

static void rec_graph_counts(const struct backend *be, unsigned long *captures,
                             unsigned long *replays, unsigned long *discarded)
{
    const struct step_graph *g = &((const struct recorder *)be)->g;
    *captures = g->captures, *replays = g->replays, *discarded = g->discarded;
}

static void rec_destroy(struct backend *be)
{
    struct recorder *r = rec_of(be);
    r->inner->destroy(r->inner);
    free(r->calls);
    free(r);
}

static struct recorder *recorder_create(struct backend *inner)
{
    struct recorder *r = calloc(1, sizeof *r);
    if (!r || !(r->calls = calloc(REC_MAX, sizeof *r->calls))) {
        free(r);
        return NULL;
    }
    r->inner = inner;
    r->be = *inner; /* every other op runs on the inner backend's state */
    r->be.destroy = rec_destroy;
    r->be.kv_table_bind = rec_kv_table_bind;
    r->be.kv_table_step = rec_kv_table_step;
    r->be.embed_weight_dev = rec_embed_dev;
    r->be.layer_in = rec_layer_in;
    r->be.layer_out = rec_layer_out;
    r->be.kv_append = rec_kv_append;
    r->be.attention_layer = rec_attention_layer;
    r->be.graph_begin = rec_graph_begin;
    r->be.graph_end = rec_graph_end;
    r->be.graph_forget = rec_graph_forget;
    r->be.graph_counts = rec_graph_counts;
    return r;
}

/* ---- whole generations ---- */

enum { N_REQ = 4, MAX_NEW = 40, BUDGET = 24 };

struct outcome {
    struct gen_result res[N_REQ];
    struct gen_stats st;
};

/* N_REQ greedy requests of different prompt and output lengths, all in
 * flight, with policy spec (NULL: FullKV); max_live < N_REQ admits the rest
 * as slots free up. */
static int generate_all(struct model *m, const char *spec, int max_live, struct outcome *o)
{
    memset(o, 0, sizeof *o);
    int prompts[N_REQ][40];
    struct gen_request req[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        int len = 12 + 7 * i;
        for (int t = 0; t < len; t++) prompts[i][t] = (t * 37 + i * 11 + 3) % m->cfg.n_vocab;
        req[i] = (struct gen_request){.prompt = prompts[i], .n_prompt = len,
                                      .max_new = MAX_NEW - 6 * i,
                                      .sampling = sampler_params_greedy()};
    }
    struct eb_err e = {0};
    struct session_policy sp = {0};
    struct gen_hooks hooks;
    struct gen_options opt = {.max_live = max_live, .ignore_eos = 1};
    int rc = 0;
    if (spec) {
        rc = open_test_policy(m, NULL, spec, BUDGET, &sp, &e);
        if (rc == 0) {
            session_policy_hooks(&sp, NULL, &hooks);
            opt.hooks = &hooks;
        }
    }
    if (rc == 0) rc = generate(m, req, N_REQ, &opt, o->res, &o->st, &e);
    if (rc) fprintf(stderr, "  %s: %s\n", spec ? spec : "fullkv", e.msg);
    if (spec) session_policy_close(&sp);
    return rc;
}

static void outcome_free(struct outcome *o)
{
    gen_results_free(o->res, N_REQ);
}

/* The same model file loaded twice, on a plain and on a recording CPU
 * backend; spec's generations compared. */
static void check_generations(const char *spec, int max_live, int expect_compactions)
{
    struct model_file *mf = NULL;
    struct eb_err e;
    if (model_file_open(TINYQ_PATH, &mf, &e)) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    struct backend *plain = backend_cpu_create(2);
    struct recorder *r = recorder_create(backend_cpu_create(2));
    struct model *m0 = NULL, *m1 = NULL;
    struct model_load_opts native = {.weights = MODEL_WEIGHTS_NATIVE};
    CHECK(plain && r);
    if (!plain || !r) goto done;
    CHECK(model_load_opts(mf, plain, &native, &m0, &e) == 0);
    CHECK(model_load_opts(mf, &r->be, &native, &m1, &e) == 0);
    if (!m0 || !m1) goto done;
    struct outcome eager, graphed;
    int rc0 = generate_all(m0, spec, max_live, &eager);
    int rc1 = generate_all(m1, spec, max_live, &graphed);
    CHECK(rc0 == 0 && rc1 == 0);
    if (rc0 == 0 && rc1 == 0) {
        for (int i = 0; i < N_REQ; i++)
            CHECK_MSG(same_ints(eager.res[i].tokens, eager.res[i].n_tokens,
                                graphed.res[i].tokens, graphed.res[i].n_tokens),
                      "%s: request %d's tokens differ with step graphs", spec ? spec : "fullkv",
                      i);
        const struct gen_stats *st = &graphed.st;
        fprintf(stderr, "  note: %s, %d live: %ld decode steps, %ld as graphs, %ld captures; "
                        "%ld stale, %ld mismatched; fused %ld/%ld of %d layers\n",
                spec ? spec : "fullkv", max_live, st->decode_steps, st->decode_graph_steps,
                st->decode_graph_captures, r->stale, r->mismatched, st->decode_fused_in,
                st->decode_fused_out, m1->cfg.n_layer);
        CHECK(st->graphs == 1 && eager.st.graphs == 0);
        CHECK_MSG(r->stale == 0, "%ld replays of a stale recording", r->stale);
        CHECK_MSG(r->mismatched == 0, "%ld replayed calls differ from the recording",
                  r->mismatched);
        CHECK(r->failed_runs == 0);
        /* most decode steps replay; shapes change when sequences finish or
         * are admitted, and when a compaction rebinds a cache */
        CHECK_MSG(st->decode_graph_steps * 2 > st->decode_steps, "%ld of %ld steps as graphs",
                  st->decode_graph_steps, st->decode_steps);
        CHECK(st->decode_graph_captures >= 2);
        if (expect_compactions)
            CHECK_MSG(st->decode_graph_captures > N_REQ,
                      "%ld captures: compactions should force new ones",
                      st->decode_graph_captures);
        CHECK(st->decode_graph_steps <= st->decode_steps);
    }
    outcome_free(&eager);
    outcome_free(&graphed);
done:
    model_free(m0);
    model_free(m1);
    if (plain) plain->destroy(plain);
    if (r) r->be.destroy(&r->be);
    model_file_close(mf);
}

static void test_fullkv(void)
{
    check_generations(NULL, N_REQ, 0);
    check_generations(NULL, 2, 0); /* admissions as slots free up */
}

static void test_rkv(void)
{
    check_generations("rkv:divide_length=8", N_REQ, 1);
}

/* Hooks that read every layer (H2O sums attention probabilities) keep every
 * step eager: nothing is recorded. */
static void test_per_layer_hooks(void)
{
    struct model_file *mf = NULL;
    struct eb_err e;
    if (model_file_open(TINYQ_PATH, &mf, &e)) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    struct recorder *r = recorder_create(backend_cpu_create(1));
    struct model *m = NULL;
    struct model_load_opts native = {.weights = MODEL_WEIGHTS_NATIVE};
    CHECK(r && model_load_opts(mf, &r->be, &native, &m, &e) == 0);
    struct outcome o;
    if (m && generate_all(m, "h2o", N_REQ, &o) == 0) {
        CHECK_MSG(o.st.decode_graph_steps == 0, "%ld steps as graphs under per-layer hooks",
                  o.st.decode_graph_steps);
        CHECK(o.st.decode_steps > 0);
        outcome_free(&o);
    } else {
        CHECK(0);
    }
    model_free(m);
    if (r) r->be.destroy(&r->be);
    model_file_close(mf);
}

int main(void)
{
    RUN(test_state);
    RUN(test_fullkv);
    RUN(test_rkv);
    RUN(test_per_layer_hooks);
    return test_summary("graph");
}
