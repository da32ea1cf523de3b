/* cmd_bench.c - `evictbench bench`: prefill and decode tokens/s, KV bytes, peak RSS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "../kernels/backend.h"
#include "../model/generate.h"
#include "../model/model_tokenizer.h"
#include "../policies/steering.h"
#include "bench_policies.h"
#include "cli.h"
#include "policy_glue.h"
#include "cmd_generate.h"

static void print_help(void)
{
    printf("usage: evictbench bench [--model M] [--threads N] [--prompt-len N] [--new N]\n"
           "                       [--weights native|f32]\n\n"
           "Prints prefill tokens/s for one prompt of --prompt-len tokens (default 512) and\n"
           "decode tokens/s at batch 1, 4 and 16 generating --new tokens each (default 128,\n"
           "EOS ignored), with peak KV bytes and peak RSS.  Default model: smollm2-135m.\n\n"
           "  --policies LIST      also a policy table: decode tokens/s, per-step policy overhead\n"
           "                       and peak KV vs FullKV for each policy (e.g.\n"
           "                       fullkv,streamingllm,h2o-rkv,snapkv-decode,rkv,h2o)\n"
           "  --budgets LIST       budgets of the policy table (default 256,512,1024)\n"
           "  --policy-new N       tokens generated per policy row (default 2048)\n"
           "  --weights W          native: weight matrices stay in the file's type (default);\n"
           "                       f32: dequantized at load (exact mode)\n");
}

static double peak_rss_mb(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return ru.ru_maxrss / 1024.0; /* Linux reports kilobytes */
}

/* Deterministic token ids that are ordinary text-ish ids of the vocabulary. */
static void fill_tokens(int *ids, int n, int vocab, int salt)
{
    unsigned x = 2166136261u ^ (unsigned)salt;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        ids[i] = 32 + (int)((x >> 8) % (unsigned)(vocab > 1064 ? 1000 : vocab - 32));
    }
}

struct bench_row {
    const char *name;
    double tok_s;
    size_t kv_bytes;
    double rss_mb;
};

static int run_decode(const struct model *m, int batch, int n_new, struct bench_row *row,
                      struct eb_err *e)
{
    enum { PROMPT = 32 };
    int *ids = malloc((size_t)batch * PROMPT * sizeof *ids);
    struct gen_request *req = calloc((size_t)batch, sizeof *req);
    struct gen_result *res = calloc((size_t)batch, sizeof *res);
    int rc = -1;
    if (!ids || !req || !res) { eb_fail(e, "bench: out of memory"); goto out; }
    for (int b = 0; b < batch; b++) {
        fill_tokens(ids + b * PROMPT, PROMPT, m->cfg.n_vocab, b + 1);
        req[b] = (struct gen_request){ids + b * PROMPT, PROMPT, n_new, sampler_params_greedy()};
    }
    struct gen_options opt = {0};
    opt.ignore_eos = 1;
    struct gen_stats st;
    if (generate(m, req, batch, &opt, res, &st, e)) goto out;
    row->tok_s = st.decode_s > 0 ? st.decode_tokens / st.decode_s : 0;
    row->kv_bytes = st.peak_kv_bytes;
    row->rss_mb = peak_rss_mb();
    gen_results_free(res, batch);
    rc = 0;
out:
    free(ids);
    free(req);
    free(res);
    return rc;
}

static int run_prefill(const struct model *m, int len, struct bench_row *row, struct eb_err *e)
{
    int *ids = malloc((size_t)len * sizeof *ids);
    if (!ids) return eb_fail(e, "bench: out of memory");
    fill_tokens(ids, len, m->cfg.n_vocab, 0);
    struct gen_request req = {ids, len, 1, sampler_params_greedy()};
    struct gen_options opt = {0};
    opt.ignore_eos = 1;
    opt.prefill_chunk = len;
    struct gen_result res;
    struct gen_stats st;
    double best = 0;
    for (int rep = 0; rep < 2; rep++) { /* the first run warms caches and page tables */
        if (generate(m, &req, 1, &opt, &res, &st, e)) { free(ids); return -1; }
        gen_results_free(&res, 1);
        double r = st.prefill_s > 0 ? st.prefill_tokens / st.prefill_s : 0;
        if (r > best) best = r;
        row->kv_bytes = st.peak_kv_bytes;
    }
    free(ids);
    row->tok_s = best;
    row->rss_mb = peak_rss_mb();
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    const char *model = "smollm2-135m";
    const char *policies = NULL, *budgets = "256,512,1024";
    long threads = 0, prompt_len = 512, n_new = 128, policy_new = 2048;
    struct model_load_opts load = {.weights = MODEL_WEIGHTS_NATIVE};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) { print_help(); return 0; }
        if (strcmp(o, "--model") && strcmp(o, "--threads") && strcmp(o, "--prompt-len") &&
            strcmp(o, "--new") && strcmp(o, "--policies") && strcmp(o, "--budgets") &&
            strcmp(o, "--policy-new") && strcmp(o, "--weights"))
            return cli_errorf("bench: unknown option '%s' (see evictbench bench --help)", o);
        if (!(v = cli_value(argc, argv, &i))) return 2;
        if (!strcmp(o, "--model")) model = v;
        else if (!strcmp(o, "--policies")) policies = v;
        else if (!strcmp(o, "--budgets")) budgets = v;
        else if (!strcmp(o, "--weights")) {
            if (model_weights_parse(v, &load.weights))
                return cli_errorf("bench: --weights must be native or f32, not '%s'", v);
        }
        else if (!strcmp(o, "--policy-new")) { if (cli_int(o, v, 1, 1 << 20, &policy_new)) return 2; }
        else if (!strcmp(o, "--threads")) { if (cli_int(o, v, 1, 1024, &threads)) return 2; }
        else if (!strcmp(o, "--prompt-len")) { if (cli_int(o, v, 1, 1 << 20, &prompt_len)) return 2; }
        else if (cli_int(o, v, 1, 1 << 20, &n_new)) return 2;
    }

    struct eb_err e = {0};
    struct model_file *mf = NULL;
    struct model *m = NULL;
    struct backend *be = backend_cpu_create((int)threads);
    if (!be) return cli_error("bench: cannot create the CPU backend");
    if (model_file_open(model, &mf, &e) || model_load_opts(mf, be, &load, &m, &e)) {
        model_file_close(mf);
        be->destroy(be);
        return cli_error(e.msg);
    }
    /* The sentence and steering policies read the tokenizer and the model's
     * identity (their steering vectors must match it). */
    struct tokenizer *tok = NULL;
    if (policies && model_file_tokenizer(mf, &tok, &e)) {
        model_file_close(mf);
        model_free(m);
        be->destroy(be);
        return cli_error(e.msg);
    }
    model_file_close(mf); /* the model keeps what it still reads */

    int batches[] = {1, 4, 16};
    struct bench_row rows[4];
    char names[4][32];
    int rc = 0;
    snprintf(names[0], sizeof names[0], "prefill %ld", prompt_len);
    rows[0].name = names[0];
    if (run_prefill(m, (int)prompt_len, &rows[0], &e)) rc = cli_error(e.msg);
    for (int i = 0; i < 3 && rc == 0; i++) {
        snprintf(names[i + 1], sizeof names[i + 1], "decode batch %d", batches[i]);
        rows[i + 1].name = names[i + 1];
        if (run_decode(m, batches[i], (int)n_new, &rows[i + 1], &e)) rc = cli_error(e.msg);
    }
    if (rc == 0) {
        char types[64];
        model_weight_types(m, types, sizeof types);
        printf("model %s: %s, %d layers, hidden %d, %d/%d heads; %s weights %.1f MB; backend %s, "
               "%s threads\n", model, model_arch_name(m->cfg.arch), m->cfg.n_layer, m->cfg.n_embd,
               m->cfg.n_head, m->cfg.n_head_kv, model_weights_name(m->weights),
               m->weight_bytes / 1048576.0, be->name, threads > 0 ? "fixed" : "all");
        printf("%-18s %-20s %12s %16s %14s\n", "test", "weights", "tokens/s", "peak KV bytes",
               "peak RSS MB");
        for (int i = 0; i < 4; i++)
            printf("%-18s %-20s %12.1f %16zu %14.1f\n", rows[i].name, types, rows[i].tok_s,
                   rows[i].kv_bytes, rows[i].rss_mb);
        double d1 = rows[1].tok_s;
        printf("decode batch 16 / batch 1: %.2fx (target >= 3x); prefill / decode batch 1: %.1fx "
               "(target >= 10x); %ld new tokens per sequence\n",
               d1 > 0 ? rows[3].tok_s / d1 : 0, d1 > 0 ? rows[0].tok_s / d1 : 0, n_new);
        fflush(stdout);
    }
    if (rc == 0 && policies) {
        char identity[256];
        struct policy_model pm = policy_model_of(m);
        pm.tok = tok;
        pm.model_name = model;
        pm.model_identity = identity;
        if (steering_model_identity(&m->cfg, identity, sizeof identity, &e) ||
            bench_policies_for(m, &pm, policies, budgets, (int)policy_new, 32, stdout, &e))
            rc = cli_error(e.msg);
    }
    tokenizer_free(tok);
    model_free(m);
    be->destroy(be);
    return rc;
}
