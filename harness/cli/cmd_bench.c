/* cmd_bench.c - `evictbench bench`: prefill and decode tokens/s, KV bytes, peak RSS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "kernels/backend.h"
#include "model/generate.h"
#include "model/model_tokenizer.h"
#include "harness/exp/bench_policies.h"
#include "harness/cli/cli.h"
#include "harness/exp/device.h"
#include "harness/exp/session.h"
#include "harness/cli/cmd_generate.h"

static void print_help(void)
{
    printf("usage: evictbench bench [--model M] [--threads N] [--prompt-len N] [--new N]\n"
           "                       [--batches LIST] [--tsv] [--weights native|f32]\n"
           "                       [--kv-type f32|f16|bf16|auto] [--decode-prompt N]\n\n"
           "Prints prefill tokens/s for one prompt of --prompt-len tokens (default 512) and\n"
           "decode tokens/s at batch 1, 4 and 16 (--batches) generating --new tokens each\n"
           "(default 128, EOS ignored), with peak KV bytes and peak RSS.  Default model:\n"
           "smollm2-135m.  --tsv prints that table alone, tab-separated, for scripts.\n\n"
           "  --policies LIST      also a policy table: decode tokens/s, per-step policy overhead\n"
           "                       and peak KV vs FullKV for each policy (e.g.\n"
           "                       fullkv,streamingllm,h2o-rkv,snapkv-decode,rkv,h2o)\n"
           "  --budgets LIST       budgets of the policy table (default 256,512,1024)\n"
           "  --policy-new N       tokens generated per policy row (default 2048)\n"
           "  --device D           cpu (default) or cuda[:N] (a build from make cuda)\n"
           "  --weights W          native: weight matrices stay in the file's type (default);\n"
           "                       f32: dequantized at load (exact mode)\n"
           "  --kv-type T          KV cache element type: f32, f16, bf16 or auto (default:\n"
           "                       f32 on the CPU, bf16 on a GPU); shown in every row\n"
           "  --decode-prompt N    prompt tokens of each decode sequence (default 32): the\n"
           "                       context decode attends over\n\n"
           "bench --contexts LIST and bench --max-batch --max-kv-bytes N: decode speed against\n"
           "context length and the largest batch under a KV cap, FullKV against policies, into\n"
           "the bench table of --db (see evictbench bench --contexts 1 --help).\n");
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
    double jobs, barriers;      /* per decode step (decode rows; 0 where not counted) */
};

static int run_decode(struct session *s, int batch, int n_new, int prompt_len, enum kv_type kv,
                      struct bench_row *row, struct eb_err *e)
{
    const struct model *m = s->m;
    int *ids = malloc((size_t)batch * prompt_len * sizeof *ids);
    struct gen_request *req = calloc((size_t)batch, sizeof *req);
    struct gen_result *res = calloc((size_t)batch, sizeof *res);
    int rc = -1;
    if (!ids || !req || !res) { eb_fail(e, "bench: out of memory"); goto out; }
    for (int b = 0; b < batch; b++) {
        fill_tokens(ids + b * prompt_len, prompt_len, m->cfg.n_vocab, b + 1);
        req[b] = (struct gen_request){ids + b * prompt_len, prompt_len, n_new,
                                      sampler_params_greedy()};
    }
    struct session_gen_opts so = {.ignore_eos = 1, .kv_type = kv};
    struct gen_stats st;
    if (session_generate(s, req, batch, &so, res, &st, e)) goto out;
    row->tok_s = st.decode_s > 0 ? st.decode_tokens / st.decode_s : 0;
    row->kv_bytes = st.peak_kv_bytes;
    row->jobs = st.decode_steps > 0 ? (double)st.decode_jobs / st.decode_steps : 0;
    row->barriers = st.decode_steps > 0 ? (double)st.decode_barriers / st.decode_steps : 0;
    row->rss_mb = peak_rss_mb();
    gen_results_free(res, batch);
    rc = 0;
out:
    free(ids);
    free(req);
    free(res);
    return rc;
}

/* "1,4,16" -> {1, 4, 16}; the count, or -1 (and a message) for a bad list. */
static int parse_batches(const char *list, int *out, int max)
{
    int n = 0;
    const char *p = list;
    for (;;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 256 || n == max || (*end && *end != ',')) {
            cli_errorf("bench: --batches wants up to %d batch sizes in [1, 256] separated by "
                       "commas, got '%s'", max, list);
            return -1;
        }
        out[n++] = (int)v;
        if (!*end) return n;
        p = end + 1;
    }
}

static int run_prefill(struct session *s, int len, enum kv_type kv, struct bench_row *row,
                       struct eb_err *e)
{
    const struct model *m = s->m;
    int *ids = malloc((size_t)len * sizeof *ids);
    if (!ids) return eb_fail(e, "bench: out of memory");
    fill_tokens(ids, len, m->cfg.n_vocab, 0);
    struct gen_request req = {ids, len, 1, sampler_params_greedy()};
    struct session_gen_opts so = {.ignore_eos = 1, .prefill_chunk = len, .kv_type = kv};
    struct gen_result res;
    struct gen_stats st;
    double best = 0;
    for (int rep = 0; rep < 2; rep++) { /* the first run warms caches and page tables */
        if (session_generate(s, &req, 1, &so, &res, &st, e)) { free(ids); return -1; }
        gen_results_free(&res, 1);
        double r = st.prefill_s > 0 ? st.prefill_tokens / st.prefill_s : 0;
        if (r > best) best = r;
        row->kv_bytes = st.peak_kv_bytes;
    }
    row->jobs = row->barriers = 0;
    free(ids);
    row->tok_s = best;
    row->rss_mb = peak_rss_mb();
    return 0;
}

/* The runtime table: prefill and decode rows, the weight types they multiply
 * and the two speed-up ratios; with tsv, only the rows, tab-separated, for
 * tools/bench_peer.sh. */
static void print_table(const struct model *m, const struct backend *be, const char *model,
                        long threads, const struct bench_row *rows, long n_new,
                        const int *batches, int n_batches, int tsv, enum kv_type kv)
{
    const char *kvn = kv_type_name(kv);
    if (tsv) {
        printf("test\ttokens_per_s\tpeak_kv_bytes\tpeak_rss_mb\tkv_type\tjobs_per_step\t"
               "barriers_per_step\n");
        for (int i = 0; i <= n_batches; i++)
            printf("%s\t%.2f\t%zu\t%.1f\t%s\t%.1f\t%.1f\n", rows[i].name, rows[i].tok_s,
                   rows[i].kv_bytes, rows[i].rss_mb, kvn, rows[i].jobs, rows[i].barriers);
        fflush(stdout);
        return;
    }
    char types[64];
    model_weight_types(m, types, sizeof types);
    printf("model %s: %s, %d layers, hidden %d, %d/%d heads; %s weights %.1f MB; backend %s, "
           "%s threads\n", model, model_arch_name(m->cfg.arch), m->cfg.n_layer, m->cfg.n_embd,
           m->cfg.n_head, m->cfg.n_head_kv, model_weights_name(m->weights),
           m->weight_bytes / 1048576.0, be->name, threads > 0 ? "fixed" : "all");
    printf("%-18s %-20s %4s %12s %16s %14s %22s\n", "test", "weights", "KV", "tokens/s",
           "peak KV bytes", "peak RSS MB", "jobs/barriers per step");
    for (int i = 0; i <= n_batches; i++) {
        char syncs[32] = "-";
        if (rows[i].jobs > 0)
            snprintf(syncs, sizeof syncs, "%.0f / %.0f", rows[i].jobs, rows[i].barriers);
        printf("%-18s %-20s %4s %12.1f %16zu %14.1f %22s\n", rows[i].name, types, kvn,
               rows[i].tok_s, rows[i].kv_bytes, rows[i].rss_mb, syncs);
    }
    double d1 = rows[1].tok_s;
    printf("decode batch %d / batch %d: %.2fx (target >= 5x); prefill / decode batch %d: "
           "%.1fx (target >= 10x); %ld new tokens per sequence\n", batches[n_batches - 1],
           batches[0], d1 > 0 ? rows[n_batches].tok_s / d1 : 0, batches[0],
           d1 > 0 ? rows[0].tok_s / d1 : 0, n_new);
    fflush(stdout);
}

/* What `bench` was asked for. */
struct bench_cli {
    const char *model, *policies, *budgets, *device;
    int batches[8], n_batches, tsv;
    int kv_type;                /* an enum kv_type or DEVICE_KV_AUTO */
    long threads, prompt_len, n_new, policy_new, decode_prompt;
    struct model_load_opts load;
};

/* 0: parsed; 1: --help printed; 2: bad usage (message printed). */
static int parse_bench_args(int argc, char **argv, struct bench_cli *a)
{
    *a = (struct bench_cli){.model = "smollm2-135m", .budgets = "256,512,1024",
                            .batches = {1, 4, 16}, .n_batches = 3, .prompt_len = 512,
                            .n_new = 128, .policy_new = 2048, .decode_prompt = 32,
                            .kv_type = DEVICE_KV_AUTO,
                            .load = {.weights = MODEL_WEIGHTS_NATIVE}};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) { print_help(); return 1; }
        if (!strcmp(o, "--tsv")) { a->tsv = 1; continue; }
        if (strcmp(o, "--model") && strcmp(o, "--threads") && strcmp(o, "--prompt-len") &&
            strcmp(o, "--new") && strcmp(o, "--policies") && strcmp(o, "--budgets") &&
            strcmp(o, "--policy-new") && strcmp(o, "--device") && strcmp(o, "--batches") &&
            strcmp(o, "--weights") && strcmp(o, "--kv-type") && strcmp(o, "--decode-prompt"))
            return cli_errorf("bench: unknown option '%s' (see evictbench bench --help)", o), 2;
        if (!(v = cli_value(argc, argv, &i))) return 2;
        if (!strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--policies")) a->policies = v;
        else if (!strcmp(o, "--budgets")) a->budgets = v;
        else if (!strcmp(o, "--device")) a->device = v;
        else if (!strcmp(o, "--batches")) {
            if ((a->n_batches = parse_batches(v, a->batches, 8)) < 0) return 2;
        } else if (!strcmp(o, "--weights")) {
            if (model_weights_parse(v, &a->load.weights))
                return cli_errorf("bench: --weights must be native or f32, not '%s'", v), 2;
        } else if (!strcmp(o, "--kv-type")) {
            if (device_kv_type_parse(v, &a->kv_type))
                return cli_errorf("bench: --kv-type: expected f32, f16, bf16 or auto, not '%s'",
                                  v), 2;
        } else if (!strcmp(o, "--decode-prompt")) {
            if (cli_int(o, v, 1, 1 << 20, &a->decode_prompt)) return 2;
        } else if (!strcmp(o, "--policy-new")) {
            if (cli_int(o, v, 1, 1 << 20, &a->policy_new)) return 2;
        } else if (!strcmp(o, "--threads")) {
            if (cli_int(o, v, 1, 1024, &a->threads)) return 2;
        } else if (!strcmp(o, "--prompt-len")) {
            if (cli_int(o, v, 1, 1 << 20, &a->prompt_len)) return 2;
        } else if (cli_int(o, v, 1, 1 << 20, &a->n_new)) {
            return 2;
        }
    }
    return 0;
}

/* The prefill row and one decode row per batch size, then the table. */
static int runtime_table(const struct bench_cli *a, struct session *s, struct eb_err *e)
{
    struct bench_row rows[9];
    char names[9][32];
    enum kv_type kv = device_kv_type(a->device, a->kv_type);
    snprintf(names[0], sizeof names[0], "prefill %ld", a->prompt_len);
    rows[0].name = names[0];
    if (run_prefill(s, (int)a->prompt_len, kv, &rows[0], e)) return -1;
    for (int i = 0; i < a->n_batches; i++) {
        snprintf(names[i + 1], sizeof names[i + 1], "decode batch %d", a->batches[i]);
        rows[i + 1].name = names[i + 1];
        if (run_decode(s, a->batches[i], (int)a->n_new, (int)a->decode_prompt, kv, &rows[i + 1], e))
            return -1;
    }
    print_table(s->m, s->be, a->model, a->threads, rows, a->n_new, a->batches, a->n_batches, a->tsv,
                kv);
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--contexts") || !strcmp(argv[i], "--max-batch"))
            return cmd_bench_long(argc, argv);
    struct bench_cli a;
    int prc = parse_bench_args(argc, argv, &a);
    if (prc) return prc == 1 ? 0 : 2;

    struct eb_err e = {0};
    struct session s;
    struct session_opts so = {a.device, (int)a.threads, 0};
    session_init(&s, &so);
    int rc = 0;
    if (device_ready(a.device, &e)) rc = cli_error(e.msg);
    else if (session_model(&s, a.model, a.load.weights, &e)) rc = cli_error(e.msg);
    /* The sentence and steering policies read the tokenizer. */
    else if (a.policies && !s.tok)
        rc = cli_errorf("bench: %s: the model has no tokenizer (the policy table needs one)", a.model);
    else if (runtime_table(&a, &s, &e))
        rc = cli_error(e.msg);
    else if (a.policies &&
             bench_policies_for(&s, a.policies, a.budgets, (int)a.policy_new, 32,
                                device_kv_type(a.device, a.kv_type), stdout, &e))
        rc = cli_error(e.msg);
    session_close(&s);
    return rc;
}
