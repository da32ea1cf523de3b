/* calibrate.c - `evictbench calibrate`: build a SEAL steering vector
 * (../shared/specs/policies.md §6.1-§6.5).
 *
 *   1. generate greedily (SEAL's setting; --temperature samples instead), with
 *      the SEAL prompt in the model's chat template, on the calibration
 *      problems in dataset order, a round of --batch problems at a time;
 *   2. grade each response (harness/grade.h) and keep the first N correct and
 *      the first N incorrect; stop once both quotas are met;
 *   3. split the thought into steps at split tokens (tokens whose text
 *      contains "\n\n"): a step is the span after one split token up to the
 *      next split token or the end of the thought; the text before the first
 *      split token is not a step (no split token precedes it);
 *   4. classify each step (policies/steering.h, keyword lists of §6.2) and
 *      take, as its representation, the residual-stream hidden state entering
 *      layer L at the split token before it - recorded during generation by a
 *      model hook (causal attention makes it the state a forward over the
 *      whole response would give);
 *   5. V = mean(reflection U transition) - mean(execution), pooled over every
 *      step of every kept response, written with its header
 *      (policies/steering.h documents the format).
 *
 * The thought is <think> .. </think> (--think tags; the prompt's <think>
 * counts; no </think> means it runs to the end), or the whole response
 * (--think always, for models without <think> such as SmolLM2); the default,
 * auto, picks tags when the tokenizer has a <think> token.
 *
 * Sampling exists for small models that never reflect under greedy decoding:
 * SmolLM2-135M wrote 0 reflection/transition steps in 150 greedy responses,
 * but about 1 step in 80 under temperature 0.8.  The header's `decoding` line
 * records which was used. */
#include "harness/cli/cmd_calibrate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "datasets/dataset.h"
#include "model/generate.h"
#include "model/model_tokenizer.h"
#include "policies/sentences.h"
#include "policies/steering.h"
#include "harness/cli/cli.h"
#include "harness/exp/device.h"
#include "harness/exp/model_view.h"
#include "harness/exp/session.h"
#include "harness/grade/grade.h"
#include "util/clock.h"

#define SEAL_PROMPT                                                                                \
    "Answer the following questions. You should think step-by-step and put your final answer "    \
    "within \\boxed{}.\nQuestion: "

static void print_help(void)
{
    printf(
        "usage: evictbench calibrate --model M --data NAME --layer L --out FILE [options]\n\n"
        "Builds a SEAL steering vector V = mean(reflection + transition steps) - mean(execution\n"
        "steps) from greedy generations (specs/policies.md section 6).\n\n"
        "  --model M            registry name, GGUF file or HF directory\n"
        "  --data NAME          calibration problems (e.g. math_train_1000, synthetic:200)\n"
        "  --data-dir DIR       where the dataset files live (default: $EVICTBENCH_DATA, else\n"
        "                       datasets/data)\n"
        "  --layer L            residual stream entering decoder layer L (HF hidden_states[L]),\n"
        "                       1 <= L < n_layer\n"
        "  --out FILE           the vector file (e.g. vectors/NAME.bin)\n"
        "  --n-correct N        correct responses to keep (default 500)\n"
        "  --n-incorrect N      incorrect responses to keep (default 500)\n"
        "  --max-new N          tokens per response (default 10000, as SEAL)\n"
        "  --offset N           skip the first N problems (default 0)\n"
        "  --limit N            problems to try at most (default: the whole dataset)\n"
        "  --batch B            problems generated together (default 8)\n"
        "  --chat r1|chatml|qwen3|raw  chat template (default: the registry's, else raw)\n"
        "  --think auto|tags|always  thought region: <think>..</think>, or the whole response\n"
        "                       (models without <think>); auto: tags when the tokenizer has\n"
        "                       <think> (default)\n"
        "  --keywords reference|fixed  reference: the official list with its typo \"think\n"
        "                       differenly\" (default); fixed: \"think differently\"\n"
        "  --split vocab|pairs  step boundaries: tokens whose text contains \"\\n\\n\" (SEAL,\n"
        "                       default), or also a \"\\n\"-led token right after a \"\\n\"-ended\n"
        "                       one (tokenizers that write \"\\n\\n\" as two tokens, e.g. SmolLM2;\n"
        "                       run seal/skipkv with split=pairs then)\n"
        "  --temperature T      sample instead of greedy decoding (SEAL is greedy; small\n"
        "                       models may need sampling to write any reflection steps)\n"
        "  --top-p P --top-k K  sampling cuts (default 1 and 0: none)\n"
        "  --seed S             sampling seed; problem i of the dataset uses S + i (default 0)\n"
        "  --threads N          CPU threads (default: all cores)\n"
        "  --device D           cpu (default) or cuda[:N] (a build from make cuda)\n");
}

struct cal_cli {
    const char *model, *data, *data_dir, *out, *chat, *think, *keywords, *split;
    const char *device;         /* --device; NULL: cpu */
    long layer, n_correct, n_incorrect, max_new, offset, limit, batch, threads, top_k, seed;
    double temperature, top_p;
};

static int parse_args(int argc, char **argv, struct cal_cli *a)
{
    memset(a, 0, sizeof *a);
    a->n_correct = a->n_incorrect = 500;
    a->max_new = 10000;
    a->batch = 8;
    a->layer = -1;
    a->think = "auto";
    a->keywords = "reference";
    a->split = "vocab";
    a->top_p = 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v;
        if (strncmp(o, "--", 2) != 0) return cli_errorf("calibrate: unexpected argument '%s'", o), -1;
        if (!(v = cli_value(argc, argv, &i))) return -1;
        if (!strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--data")) a->data = v;
        else if (!strcmp(o, "--data-dir")) a->data_dir = v;
        else if (!strcmp(o, "--out")) a->out = v;
        else if (!strcmp(o, "--chat")) a->chat = v;
        else if (!strcmp(o, "--think")) a->think = v;
        else if (!strcmp(o, "--keywords")) a->keywords = v;
        else if (!strcmp(o, "--split")) a->split = v;
        else if (!strcmp(o, "--device")) {
            struct eb_err e = {0};
            if (device_ready(v, &e)) return cli_error(e.msg), -1;
            a->device = v;
        }
        else if (!strcmp(o, "--layer")) { if (cli_int(o, v, 0, 100000, &a->layer)) return -1; }
        else if (!strcmp(o, "--n-correct")) { if (cli_int(o, v, 0, 1 << 24, &a->n_correct)) return -1; }
        else if (!strcmp(o, "--n-incorrect")) { if (cli_int(o, v, 0, 1 << 24, &a->n_incorrect)) return -1; }
        else if (!strcmp(o, "--max-new")) { if (cli_int(o, v, 1, 1 << 24, &a->max_new)) return -1; }
        else if (!strcmp(o, "--offset")) { if (cli_int(o, v, 0, 1 << 30, &a->offset)) return -1; }
        else if (!strcmp(o, "--limit")) { if (cli_int(o, v, 1, 1 << 30, &a->limit)) return -1; }
        else if (!strcmp(o, "--batch")) { if (cli_int(o, v, 1, 4096, &a->batch)) return -1; }
        else if (!strcmp(o, "--threads")) { if (cli_int(o, v, 1, 1024, &a->threads)) return -1; }
        else if (!strcmp(o, "--top-k")) { if (cli_int(o, v, 0, 1 << 24, &a->top_k)) return -1; }
        else if (!strcmp(o, "--seed")) { if (cli_int(o, v, 0, 1L << 40, &a->seed)) return -1; }
        else if (!strcmp(o, "--temperature")) { if (cli_float(o, v, 0, 100, &a->temperature)) return -1; }
        else if (!strcmp(o, "--top-p")) { if (cli_float(o, v, 1e-6, 1, &a->top_p)) return -1; }
        else return cli_errorf("calibrate: unknown option '%s' (see evictbench calibrate --help)", o), -1;
    }
    if (!a->model || !a->data || !a->out || a->layer < 0)
        return cli_error("calibrate: --model, --data, --layer and --out are required (see "
                         "evictbench calibrate --help)"), -1;
    if (strcmp(a->think, "auto") && strcmp(a->think, "tags") && strcmp(a->think, "always"))
        return cli_errorf("calibrate: --think %s: expected auto, tags or always", a->think), -1;
    if (strcmp(a->keywords, "reference") && strcmp(a->keywords, "fixed"))
        return cli_errorf("calibrate: --keywords %s: expected reference or fixed", a->keywords), -1;
    if (strcmp(a->split, "vocab") && strcmp(a->split, "pairs"))
        return cli_errorf("calibrate: --split %s: expected vocab or pairs", a->split), -1;
    if (a->n_correct + a->n_incorrect == 0)
        return cli_error("calibrate: --n-correct and --n-incorrect are both 0"), -1;
    return 0;
}

/* Hidden rows entering layer L at split tokens, per request of a round. */
struct capture {
    int n, cap;
    int *pos;                /* absolute position of the split token */
    float *rows;             /* [cap][dim] */
};

struct cal_ctx {
    const struct model *m;
    const struct sent_tokens *tok;
    int layer, dim;
    struct capture *cap;     /* [round size] */
    const int *n_prompt;     /* [round size] */
    int **prompts;           /* [round size] */
    int *last;               /* [round size]: the token before each sequence's next row */
    int pairs;
    float *row;              /* host [dim] */
    int failed;
};


static int cal_after_layer(void *vctx, const struct fwd_batch *b, int layer, float *hidden,
                           struct eb_err *e)
{
    struct cal_ctx *c = vctx;
    if (layer != c->layer - 1) return 0;
    for (int s = 0; s < b->n_seq; s++) {
        const struct fwd_seq *q = &b->seqs[s];
        struct capture *cp = &c->cap[q->id];
        int pos0 = q->cache->next_pos; /* advanced only after the last layer */
        for (int i = 0; i < q->n_tokens; i++) {
            int prev = i > 0 ? q->tokens[i - 1] : c->last[q->id];
            if (i == q->n_tokens - 1) c->last[q->id] = q->tokens[i];
            if (pos0 + i < c->n_prompt[q->id] ||
                !sent_tokens_split_at(c->tok, prev, q->tokens[i], c->pairs))
                continue;
            if (cp->n == cp->cap) {
                int nc = cp->cap ? cp->cap * 2 : 64;
                int *np = realloc(cp->pos, (size_t)nc * sizeof *np);
                if (np) cp->pos = np;
                float *nr = np ? realloc(cp->rows, (size_t)nc * c->dim * sizeof *nr) : NULL;
                if (nr) cp->rows = nr;
                if (!np || !nr) return eb_fail(e, "calibrate: out of memory for hidden states");
                cp->cap = nc;
            }
            c->m->be->download(c->m->be, cp->rows + (size_t)cp->n * c->dim,
                               hidden + (size_t)(q->row0 + i) * c->dim, (size_t)c->dim);
            cp->pos[cp->n++] = pos0 + i;
        }
    }
    return 0;
}

struct sums {
    double *nonexec, *exec;  /* [dim] */
    int n_refl, n_trans, n_exec;
};

/* The steps of one kept response: add their representations to the sums. */
static int add_steps(const struct tokenizer *tok, const struct sent_tokens *st, int think_tags,
                     int fixed_typo, int pairs, const int *prompt, int n_prompt, const int *gen, int n_gen,
                     const struct capture *cp, int dim, struct sums *S, struct eb_err *e)
{
    /* the thought region [r0, r1) in generated-token indices */
    int r0 = 0, r1 = n_gen;
    if (think_tags) {
        int open_in_prompt = 0;
        for (int i = 0; i < n_prompt; i++)
            if (prompt[i] == st->think_open) open_in_prompt = 1;
            else if (prompt[i] == st->think_close) open_in_prompt = 0;
        r0 = open_in_prompt ? 0 : -1;
        for (int i = 0; i < n_gen; i++) {
            if (r0 < 0 && gen[i] == st->think_open) r0 = i + 1;
            else if (r0 >= 0 && gen[i] == st->think_close) { r1 = i; break; }
        }
        if (r0 < 0) return 0; /* no thought */
    }
    int c = 0; /* captures are in position order */
    for (int i = r0; i < r1; i++) {
        int prev = i > 0 ? gen[i - 1] : n_prompt > 0 ? prompt[n_prompt - 1] : -1;
        if (!sent_tokens_split_at(st, prev, gen[i], pairs)) continue;
        int j = i + 1;
        while (j < r1 && !sent_tokens_split_at(st, gen[j - 1], gen[j], pairs)) j++;
        int pos = n_prompt + i;
        while (c < cp->n && cp->pos[c] < pos) c++;
        if (c >= cp->n || cp->pos[c] != pos) continue; /* the final token never ran a forward */
        if (j == i + 1) continue;                      /* an empty step */
        char *text = NULL;
        size_t len = 0;
        if (tokenizer_decode(tok, gen + i + 1, j - i - 1, &text, &len, e)) return -1;
        enum step_class k = steering_classify(text, len, fixed_typo);
        free(text);
        const float *h = cp->rows + (size_t)c * dim;
        double *acc = k == STEP_EXECUTION ? S->exec : S->nonexec;
        for (int d = 0; d < dim; d++) acc[d] += h[d];
        if (k == STEP_REFLECTION) S->n_refl++;
        else if (k == STEP_TRANSITION) S->n_trans++;
        else S->n_exec++;
    }
    return 0;
}

/* Greedy unless --temperature > 0; problem i of the dataset gets seed + i,
 * so a response depends neither on --batch nor on --offset. */
static struct sampler_params sampling_for(const struct cal_cli *a, int i)
{
    struct sampler_params p = sampler_params_greedy();
    if (a->temperature > 0) {
        p.greedy = 0;
        p.temperature = (float)a->temperature;
        p.top_p = (float)a->top_p;
        p.top_k = (int)a->top_k;
        p.seed = (uint64_t)a->seed + (uint64_t)i;
    }
    return p;
}

static void progress(int done, int limit, int got_c, int want_c, int got_i, int want_i,
                     double elapsed)
{
    /* the fraction of the quotas filled, or of the problems, whichever is further */
    double fq = (double)(got_c + got_i) / (want_c + want_i), fp = (double)done / limit;
    double f = fq > fp ? fq : fp;
    if (f > 1) f = 1;
    int bar = (int)(f * 30);
    char b[31];
    for (int i = 0; i < 30; i++) b[i] = i < bar ? '#' : '.';
    b[30] = '\0';
    double eta = f > 0 ? elapsed * (1 - f) / f : 0;
    fprintf(stderr, "\rcalibrate: [%s] %d problems, correct %d/%d, incorrect %d/%d, %.0f s, "
                    "ETA %.0f s   ", b, done, got_c, want_c, got_i, want_i, elapsed, eta);
    fflush(stderr);
}

/* Everything one calibrate command holds; cal_state_free releases it. */
struct cal_state {
    enum chat_template tpl;
    struct session s;
    struct dataset ds;
    enum grade_dataset gds;
    struct sent_tokens st;
    struct sums S;
    int round, dim, think_tags;
    int **prompts, *n_prompt, *last;
    struct capture *caps;
    struct gen_request *reqs;
    struct gen_result *res;
    float *row;
    struct cal_ctx cc;
    struct model_hooks mh;
    struct gen_hooks gh;
    struct session_gen_opts so;
    int got_c, got_i;
};

static void cal_state_free(struct cal_state *g)
{
    for (int i = 0; g->prompts && i < g->round; i++) free(g->prompts[i]);
    for (int i = 0; g->caps && i < g->round; i++) {
        free(g->caps[i].pos);
        free(g->caps[i].rows);
    }
    free(g->prompts);
    free(g->n_prompt);
    free(g->caps);
    free(g->reqs);
    free(g->res);
    free(g->row);
    free(g->last);
    free(g->S.nonexec);
    free(g->S.exec);
    sent_tokens_free(&g->st);
    dataset_free(&g->ds);
    session_close(&g->s);
}

/* Model, tokenizer, sentence tokens, data and buffers; the capture hook. */
static int cal_open(const struct cal_cli *a, struct cal_state *g, struct eb_err *e)
{
    int round = g->round = (int)a->batch;
    g->prompts = calloc((size_t)round, sizeof *g->prompts);
    g->n_prompt = calloc((size_t)round, sizeof *g->n_prompt);
    g->caps = calloc((size_t)round, sizeof *g->caps);
    g->reqs = calloc((size_t)round, sizeof *g->reqs);
    g->res = calloc((size_t)round, sizeof *g->res);
    g->last = calloc((size_t)round, sizeof *g->last);
    if (!g->prompts || !g->n_prompt || !g->caps || !g->reqs || !g->res || !g->last)
        return eb_fail(e, "calibrate: out of memory");
    struct session_opts so = {a->device, (int)a->threads, 0};
    session_init(&g->s, &so);
    if (session_open(&g->s, a->model, MODEL_WEIGHTS_F32, 1, e)) return -1;
    const struct model_config *cfg = session_config(&g->s);
    if (a->layer < 1 || a->layer >= cfg->n_layer)
        return eb_fail(e, "calibrate: --layer %ld outside [1, %d) for this model", a->layer, cfg->n_layer);
    if (sent_tokens_from_tokenizer(g->s.tok, 0, &g->st, e)) return eb_wrap(e, "calibrate");
    g->think_tags = !strcmp(a->think, "tags") || (!strcmp(a->think, "auto") && g->st.think_open >= 0);
    if (g->think_tags && g->st.think_open < 0)
        return eb_fail(e, "calibrate: --think tags, but the tokenizer has no <think> token (use --think always)");
    if (dataset_load(a->data, a->data_dir, (int)a->offset, (int)a->limit, &g->ds, e)) return -1;
    g->gds = grade_dataset_from_name(a->data);
    if (session_load(&g->s, e)) return eb_wrap(e, "calibrate");
    int dim = g->dim = g->s.m->cfg.n_embd;
    g->S.nonexec = calloc((size_t)dim, sizeof *g->S.nonexec);
    g->S.exec = calloc((size_t)dim, sizeof *g->S.exec);
    g->row = malloc((size_t)dim * sizeof *g->row);
    if (!g->S.nonexec || !g->S.exec || !g->row) return eb_fail(e, "calibrate: out of memory");
    g->cc = (struct cal_ctx){g->s.m, &g->st, (int)a->layer, dim, g->caps, g->n_prompt, g->prompts,
                             g->last, !strcmp(a->split, "pairs"), g->row, 0};
    g->mh = (struct model_hooks){.ctx = &g->cc, .after_layer = cal_after_layer};
    g->gh = (struct gen_hooks){.ctx = &g->cc, .model = &g->mh};
    g->so = (struct session_gen_opts){.max_live = round, .hooks = &g->gh};
    return 0;
}

/* Render and encode problems [start, start + n) into the round's requests. */
static int encode_round(const struct cal_cli *a, struct cal_state *g, int start, int n,
                        struct eb_err *e)
{
    for (int i = 0; i < n; i++) {
        const struct dataset_item *it = &g->ds.items[start + i];
        size_t ql = strlen(SEAL_PROMPT) + strlen(it->problem) + 1;
        char *user = malloc(ql);
        if (!user) return eb_fail(e, "calibrate: out of memory");
        snprintf(user, ql, "%s%s", SEAL_PROMPT, it->problem);
        free(g->prompts[i]);
        g->prompts[i] = NULL;
        int erc = session_encode(&g->s, g->tpl, 0, user, strlen(user), &g->prompts[i],
                                 &g->n_prompt[i], e);
        free(user);
        if (erc) {
            char what[160];
            snprintf(what, sizeof what, "calibrate: problem %.100s", it->id);
            return eb_wrap(e, what);
        }
        g->reqs[i] = (struct gen_request){.prompt = g->prompts[i], .n_prompt = g->n_prompt[i],
                                          .max_new = (int)a->max_new,
                                          .sampling = sampling_for(a, (int)a->offset + start + i)};
        g->caps[i].n = 0;
        g->last[i] = -1;
    }
    return 0;
}

/* Grade the round's responses; keep the steps of those the quotas still need. */
static int grade_round(const struct cal_cli *a, struct cal_state *g, int start, int n,
                       struct eb_err *e)
{
    for (int i = 0; i < n; i++) {
        const struct gen_result *r = &g->res[i];
        char *text = NULL;
        size_t tl = 0;
        int ok = tokenizer_decode(g->s.tok, r->tokens, r->n_tokens, &text, &tl, e) == 0;
        int correct = ok ? grade_answer(text, g->ds.items[start + i].answer, g->gds, NULL) : -1;
        free(text);
        if (correct < 0)
            return eb_fail(e, "calibrate: grading problem %s failed", g->ds.items[start + i].id);
        if (!(correct ? g->got_c < a->n_correct : g->got_i < a->n_incorrect)) continue;
        if (add_steps(g->s.tok, &g->st, g->think_tags, !strcmp(a->keywords, "fixed"), g->cc.pairs,
                      g->prompts[i], g->n_prompt[i], r->tokens, r->n_tokens, &g->caps[i], g->dim,
                      &g->S, e))
            return eb_wrap(e, "calibrate");
        if (correct) g->got_c++;
        else g->got_i++;
    }
    return 0;
}

/* The vector (mean non-execution minus mean execution step) and its header. */
static int write_vector(const struct cal_cli *a, struct cal_state *g, double t0, struct eb_err *e)
{
    const struct sums *S = &g->S;
    int n_non = S->n_refl + S->n_trans, dim = g->dim;
    if (n_non == 0 || S->n_exec == 0)
        return eb_fail(e, "calibrate: no %s steps in %d kept responses (reflection %d, transition %d, "
                          "execution %d): more problems or tokens are needed",
                       n_non == 0 ? "reflection/transition" : "execution", g->got_c + g->got_i,
                       S->n_refl, S->n_trans, S->n_exec);
    struct steer_vector sv = {0};
    sv.version = STEER_VERSION;
    sv.layer = (int)a->layer;
    sv.dim = dim;
    sv.n_reflection = S->n_refl;
    sv.n_transition = S->n_trans;
    sv.n_execution = S->n_exec;
    sv.n_correct = g->got_c;
    sv.n_incorrect = g->got_i;
    sv.max_new = (int)a->max_new;
    snprintf(sv.model, sizeof sv.model, "%s", a->model);
    if (steering_model_identity(&g->s.m->cfg, sv.model_identity, sizeof sv.model_identity, e))
        return eb_wrap(e, "calibrate");
    snprintf(sv.dataset, sizeof sv.dataset, "%s", a->data);
    snprintf(sv.keywords, sizeof sv.keywords, "%s", a->keywords);
    snprintf(sv.think, sizeof sv.think, "%s", g->think_tags ? "tags" : "always");
    if (a->temperature > 0)
        snprintf(sv.decoding, sizeof sv.decoding, "temperature=%g top_p=%g top_k=%ld seed=%ld",
                 a->temperature, a->top_p, a->top_k, a->seed);
    else
        snprintf(sv.decoding, sizeof sv.decoding, "greedy");
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(sv.created, sizeof sv.created, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    sv.v = g->row;
    for (int d = 0; d < dim; d++)
        g->row[d] = (float)(S->nonexec[d] / n_non - S->exec[d] / S->n_exec);
    if (steer_vector_save(a->out, &sv, e)) return eb_wrap(e, "calibrate");
    double norm = 0;
    for (int d = 0; d < dim; d++) norm += (double)g->row[d] * g->row[d];
    fprintf(stderr, "calibrate: wrote %s: layer %d, dim %d, %d correct + %d incorrect responses, "
                    "steps: reflection %d, transition %d, execution %d, |V| = %.4g, %.1f s\n",
            a->out, sv.layer, dim, g->got_c, g->got_i, S->n_refl, S->n_trans, S->n_exec,
            sqrt(norm), clock_now_s() - t0);
    return 0;
}

/* Generate and grade rounds of problems until both quotas are met or the data runs out. */
static int cal_rounds(const struct cal_cli *a, struct cal_state *g, double t0, struct eb_err *e)
{
    int done_n = 0, n_items = g->ds.n;
    progress(0, n_items, 0, (int)a->n_correct, 0, (int)a->n_incorrect, 0);
    for (int start = 0; start < n_items && (g->got_c < a->n_correct || g->got_i < a->n_incorrect);
         start += g->round) {
        int n = n_items - start < g->round ? n_items - start : g->round;
        if (encode_round(a, g, start, n, e)) return -1;
        if (session_generate(&g->s, g->reqs, n, &g->so, g->res, NULL, e))
            return eb_wrap(e, "calibrate");
        int rc = grade_round(a, g, start, n, e);
        gen_results_free(g->res, n);
        if (rc) return -1;
        done_n += n;
        progress(done_n, n_items, g->got_c, (int)a->n_correct, g->got_i, (int)a->n_incorrect,
                 clock_now_s() - t0);
    }
    return 0;
}

int cmd_calibrate(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { print_help(); return 0; }
    struct cal_cli a;
    if (parse_args(argc, argv, &a)) return 2;
    struct eb_err e = {0};
    struct cal_state g;
    memset(&g, 0, sizeof g);
    if (model_chat_template(a.model, a.chat, &g.tpl, &e)) return cli_errorf("calibrate: %s", e.msg);
    double t0 = clock_now_s();
    int rc = 1;
    if (cal_open(&a, &g, &e)) {
        cli_error(e.msg);
    } else if (cal_rounds(&a, &g, t0, &e)) {
        fputc('\n', stderr);
        cli_error(e.msg);
    } else {
        fputc('\n', stderr);
        rc = write_vector(&a, &g, t0, &e) ? cli_error(e.msg) : 0;
    }
    if (rc == 0 && (g.got_c < a.n_correct || g.got_i < a.n_incorrect))
        fprintf(stderr, "calibrate: note: the data ran out before the quotas (%d/%ld correct, "
                        "%d/%ld incorrect)\n", g.got_c, a.n_correct, g.got_i, a.n_incorrect);
    cal_state_free(&g);
    return rc;
}
