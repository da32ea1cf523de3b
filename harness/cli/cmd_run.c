/* cmd_run.c - `evictbench run`: one point from flags, recorded like `exp`.
 *
 * The flags fill the experiment settings (struct exp_config) and the one
 * typed point (harness/exp/point.h) directly: the policy spec is parsed by
 * the policy registry (point_set_policy_spec), nothing goes through JSON
 * text.  The JSON stored with the experiment describes the flags; it is
 * never read back. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "datasets/dataset.h"
#include "harness/cli/cli.h"
#include "harness/cli/cmd_exp.h"
#include "harness/cli/exp_common.h"
#include "harness/exp/config.h"
#include "harness/exp/device.h"
#include "harness/exp/point.h"
#include "harness/exp/sweep.h"
#include "policies/registry.h"

struct run_cli {
    struct exp_common c;
    const char *model, *dataset, *name, *prompt, *policy, *batching, *weights, *kv_type;
    long limit, offset, budget, batch, max_new, max_total, max_kv, top_k, n_samples, seed;
    double temperature, top_p;
    int greedy, fidelity, no_retention, temp_set, top_p_set, top_k_set, n_samples_set;
};

static void print_run_help(void)
{
    printf("usage: evictbench run --model M --dataset D [options]\n\n"
           "Runs one point and records it like `exp` does (a rerun skips it).\n\n"
           "  --model M            registry name (e.g. smollm2-135m), GGUF file or HF directory\n"
           "  --dataset D          dataset name (e.g. gsm8k, synthetic:20)\n"
           "  --limit N --offset K the slice of the dataset (default: all from 0)\n"
           "  --prompt TPL         r1-boxed (default), chatml-boxed, seal, rkv\n"
           "  --policy P           NAME[:key=value,...] (default fullkv)\n"
           "  --budget B           KV budget in tokens (default 1024; fullkv and fullkv-pss take none)\n"
           "  --batch B            batch size (default 1)\n"
           "  --batching MODE      ragged (default), continuous, grouped, padded\n"
           "  --weights W          f32 (exact, default) or native (the file's quantized types)\n"
           "  --kv-type T          KV cache element type: f32, f16, bf16 or auto (default:\n"
           "                       f32 on the CPU, bf16 on a GPU)\n"
           "  --max-new N          tokens to generate at most (default 1024)\n"
           "  --max-total N        cap on prompt + generated tokens\n"
           "  --max-kv-bytes N     KV bytes a batch may hold; more is recorded as 'oom'\n"
           "  --greedy             argmax decoding (the default)\n"
           "  --temperature T --top-p P --top-k K --n-samples N   sampling\n"
           "  --seed S             sampling seed (default 0)\n"
           "  --fidelity           fidelity mode (replay greedy FullKV traces under the policy)\n"
           "  --no-retention       do not record which tokens each compaction evicted\n"
           "  --name NAME          experiment name (default \"run\")\n%s", EXP_COMMON_HELP);
}

/* An integer option: its range and where it goes. */
struct int_opt {
    const char *name;
    long lo, hi;
    size_t off;                 /* offsetof(struct run_cli, field) */
    size_t set_off;             /* offsetof of its "given" flag, or 0 */
};

static const struct int_opt INT_OPTS[] = {
    {"--limit", 1, 1000000000L, offsetof(struct run_cli, limit), 0},
    {"--offset", 0, 1000000000L, offsetof(struct run_cli, offset), 0},
    {"--budget", 1, 1000000000L, offsetof(struct run_cli, budget), 0},
    {"--batch", 1, 1L << 20, offsetof(struct run_cli, batch), 0},
    {"--max-new", 1, 1L << 24, offsetof(struct run_cli, max_new), 0},
    {"--max-total", 2, 1L << 24, offsetof(struct run_cli, max_total), 0},
    {"--max-kv-bytes", 1, 1L << 53, offsetof(struct run_cli, max_kv), 0},
    {"--top-k", 0, 1000000000L, offsetof(struct run_cli, top_k), offsetof(struct run_cli, top_k_set)},
    {"--n-samples", 1, 100000, offsetof(struct run_cli, n_samples),
     offsetof(struct run_cli, n_samples_set)},
    {"--seed", 0, 1L << 53, offsetof(struct run_cli, seed), 0},
};

/* One option with a value; 0, or -1 (message printed). */
static int run_value(struct run_cli *a, const char *o, const char *v)
{
    const char **str[] = {&a->model, &a->dataset, &a->name, &a->prompt, &a->policy,
                          &a->batching, &a->weights, &a->kv_type};
    static const char *const str_names[] = {"--model", "--dataset", "--name", "--prompt",
                                            "--policy", "--batching", "--weights",
                                            "--kv-type"};
    for (size_t k = 0; k < sizeof str_names / sizeof *str_names; k++)
        if (!strcmp(o, str_names[k])) { *str[k] = v; return 0; }
    for (size_t k = 0; k < sizeof INT_OPTS / sizeof *INT_OPTS; k++) {
        const struct int_opt *io = &INT_OPTS[k];
        if (strcmp(o, io->name)) continue;
        if (cli_int(o, v, io->lo, io->hi, (long *)((char *)a + io->off))) return -1;
        if (io->set_off) *(int *)((char *)a + io->set_off) = 1;
        return 0;
    }
    if (!strcmp(o, "--temperature")) {
        a->temp_set = 1;
        return cli_float(o, v, 0, 100, &a->temperature);
    }
    if (!strcmp(o, "--top-p")) {
        a->top_p_set = 1;
        if (cli_float(o, v, 0, 1, &a->top_p)) return -1;
        return a->top_p > 0 ? 0 : (cli_error("--top-p: expected a number in (0, 1]"), -1);
    }
    cli_errorf("run: unknown option '%s' (see evictbench run --help)", o);
    return -1;
}

/* 0: parsed; 1: --help printed; 2: bad usage (message printed). */
static int parse_run_args(int argc, char **argv, struct run_cli *a)
{
    memset(a, 0, sizeof *a);
    a->c.db = "results/results.db";
    a->name = "run";
    a->policy = "fullkv";
    a->limit = -1;
    a->budget = 1024;
    a->batch = 1;
    a->max_new = 1024;
    a->n_samples = 1;
    a->top_p = 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) { print_run_help(); return 1; }
        int k = exp_common_option(argc, argv, &i, &a->c);
        if (k < 0) return 2;
        if (k) continue;
        if (!strcmp(o, "--greedy")) { a->greedy = 1; continue; }
        if (!strcmp(o, "--fidelity")) { a->fidelity = 1; continue; }
        if (!strcmp(o, "--no-retention")) { a->no_retention = 1; continue; }
        if (strncmp(o, "--", 2)) return cli_errorf("run: unexpected argument '%s'", o), 2;
        if (!(v = cli_value(argc, argv, &i)) || run_value(a, o, v)) return 2;
    }
    if (!a->model || !a->dataset)
        return cli_error("run: --model and --dataset are required (see evictbench run --help)"), 2;
    if (a->greedy && (a->temp_set || a->top_p_set || a->top_k_set || a->n_samples_set))
        return cli_error("run: --greedy cannot be combined with sampling options"), 2;
    return 0;
}

/* Sampling as a config's "sampling" section decides it: greedy unless a
 * temperature > 0 is given; greedy takes one sample and no cuts. */
static int run_sampling(const struct run_cli *a, struct exp_sampling *s, struct eb_err *e)
{
    s->greedy = !(a->temp_set && a->temperature > 0);
    s->temperature = s->greedy ? 0 : a->temperature;
    s->top_p = s->greedy ? 1 : a->top_p;
    s->top_k = s->greedy ? 0 : (int)a->top_k;
    s->n_samples = (int)a->n_samples;
    s->seed = (uint64_t)a->seed;
    if (s->greedy && s->n_samples > 1)
        return eb_fail(e, "run: --n-samples: greedy decoding gives one sample per problem "
                          "(give --temperature > 0)");
    if (a->fidelity && !s->greedy)
        return eb_fail(e, "run: --fidelity replays greedy FullKV traces; drop the sampling options");
    return 0;
}

/* The flags as JSON, stored with the experiment (provenance only). */
static char *describe(const struct run_cli *a)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "name", a->name);
    cJSON_AddStringToObject(o, "mode", a->fidelity ? "fidelity" : "generate");
    cJSON_AddStringToObject(o, "models", a->model);
    cJSON *ds = cJSON_AddObjectToObject(o, "datasets");
    if (ds) {
        cJSON_AddStringToObject(ds, "name", a->dataset);
        if (a->offset) cJSON_AddNumberToObject(ds, "offset", (double)a->offset);
        if (a->limit >= 0) cJSON_AddNumberToObject(ds, "limit", (double)a->limit);
    }
    cJSON_AddStringToObject(o, "policies", a->policy);
    cJSON_AddNumberToObject(o, "budgets", (double)a->budget);
    cJSON_AddNumberToObject(o, "batch_sizes", (double)a->batch);
    cJSON_AddStringToObject(o, "batching", a->batching ? a->batching : "ragged");
    cJSON_AddStringToObject(o, "prompt", a->prompt ? a->prompt : "r1-boxed");
    cJSON_AddStringToObject(o, "weights", a->weights ? a->weights : "f32");
    if (a->kv_type) cJSON_AddStringToObject(o, "kv_type", a->kv_type);
    cJSON_AddNumberToObject(o, "max_new_tokens", (double)a->max_new);
    if (a->max_total) cJSON_AddNumberToObject(o, "max_total_tokens", (double)a->max_total);
    if (a->max_kv) cJSON_AddNumberToObject(o, "max_kv_bytes", (double)a->max_kv);
    if (a->no_retention) cJSON_AddFalseToObject(o, "retention");
    cJSON_AddNumberToObject(o, "seed", (double)a->seed);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* The stored description names the policy as a config would:
 * {"name": ..., its parameters as stored with the run}. */
static int describe_policy(struct exp_config *cfg, const struct point *p, struct eb_err *e)
{
    cJSON *o = cJSON_Parse(cfg->json), *pol = policy_params_json(&p->params, 1);
    int ok = o && pol && cJSON_IsObject(pol) && cJSON_AddStringToObject(pol, "name", p->policy->name) &&
             cJSON_ReplaceItemInObjectCaseSensitive(o, "policies", pol);
    if (!ok) cJSON_Delete(pol);
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!s) return eb_fail(e, "run: out of memory");
    free(cfg->json);
    cfg->json = s;
    return 0;
}

/* The settings a config would hold, from the flags. */
static int run_config_of(const struct run_cli *a, struct exp_config *cfg, struct eb_err *e)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->mode = a->fidelity ? EXP_MODE_FIDELITY : EXP_MODE_GENERATE;
    cfg->max_new_tokens = (int)a->max_new;
    cfg->max_total_tokens = (int)a->max_total;
    cfg->max_kv_bytes = a->max_kv;
    cfg->retention = !a->no_retention;
    if (!(cfg->prompt = prompt_template_find(a->prompt ? a->prompt : "r1-boxed"))) {
        char known[256] = "";
        int nt;
        const struct prompt_template *t = prompt_templates(&nt);
        for (int i = 0; i < nt; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), " %s", t[i].name);
        return eb_fail(e, "run: --prompt: unknown template \"%.40s\" (known:%s)", a->prompt, known);
    }
    if (a->weights && model_weights_parse(a->weights, &cfg->weights))
        return eb_fail(e, "run: --weights: expected f32 or native, got '%s'", a->weights);
    cfg->kv_type = DEVICE_KV_AUTO;
    if (a->kv_type && device_kv_type_parse(a->kv_type, &cfg->kv_type))
        return eb_fail(e, "run: --kv-type: expected f32, f16, bf16 or auto, got '%s'", a->kv_type);
    if (run_sampling(a, &cfg->sampling, e)) return -1;
    if (exp_config_set_device(cfg, a->c.device, e)) return eb_wrap(e, "run: --device");
    struct eb_err de = {0};
    if (!dataset_find(a->dataset, &de)) return eb_fail(e, "run: --dataset: %s", de.msg);
    int sn;
    uint32_t seed;
    if (!strncmp(a->dataset, "synthetic", 9) && synthetic_parse_name(a->dataset, &sn, &seed, &de))
        return eb_fail(e, "run: --dataset: %s", de.msg);
    cfg->source = strdup("run");
    cfg->name = strdup(a->name);
    cfg->json = describe(a);
    cfg->models = calloc(1, sizeof *cfg->models);
    cfg->datasets = calloc(1, sizeof *cfg->datasets);
    if (!cfg->source || !cfg->name || !cfg->json || !cfg->models || !cfg->datasets)
        return eb_fail(e, "run: out of memory");
    cfg->n_models = cfg->n_datasets = 1;
    cfg->datasets[0] = (struct exp_dataset){strdup(a->dataset), (int)a->offset, (int)a->limit};
    if (!(cfg->models[0] = strdup(a->model)) || !cfg->datasets[0].name)
        return eb_fail(e, "run: out of memory");
    return 0;
}

/* The one point of the flags. */
static int run_point_of(const struct run_cli *a, const struct exp_config *cfg, struct point *p,
                        struct eb_err *e)
{
    memset(p, 0, sizeof *p);
    const char *dname = exp_dataset_resolve(&cfg->datasets[0], a->c.data_dir);
    size_t nl = strcspn(a->policy, ":");
    int fullkv = nl == 6 && !strncmp(a->policy, "fullkv", 6);
    if (fullkv && a->fidelity)
        return eb_fail(e, "run: --fidelity needs a policy other than fullkv (FullKV is the "
                          "reference it is compared with)");
    p->model = cfg->models[0];
    p->data_offset = (int)a->offset;
    p->data_limit = (int)a->limit;
    p->budget = policy_spec_keeps_all(a->policy) ? POLICY_NO_BUDGET : (int)a->budget;
    p->batch_size = (int)a->batch;
    p->batching = BATCHING_RAGGED;
    if (a->batching && batching_parse(a->batching, &p->batching))
        return eb_fail(e, "run: --batching: expected padded, grouped, ragged or continuous, got "
                          "'%s'", a->batching);
    if (p->batch_size == 1) p->batching = BATCHING_RAGGED;
    if (!(p->dataset = strdup(dname ? dname : a->dataset))) return eb_fail(e, "run: out of memory");
    if (point_set_policy_spec(p, a->policy, e)) return eb_wrap(e, "run: --policy");
    return sweep_point_finish(p, cfg, a->c.data_dir, e);
}

/* The one point of the flags, and the experiment's description with it. */
static int run_point_and_json(const struct run_cli *a, struct exp_config *cfg, struct point *p,
                              struct eb_err *e)
{
    return run_point_of(a, cfg, p, e) || describe_policy(cfg, p, e) ? -1 : 0;
}

int cmd_run(int argc, char **argv)
{
    struct run_cli a;
    int prc = parse_run_args(argc, argv, &a);
    if (prc) return prc == 1 ? 0 : 2;
    struct exp_config cfg;
    struct eb_err e = {0};
    struct sweep sw = {&cfg, NULL, 0};
    int rc = 1;
    if (run_config_of(&a, &cfg, &e)) {
        rc = cli_error(e.msg);
        goto done;
    }
    if (!a.c.dry_run && (device_ready(cfg.device, &e) ||
                         exp_config_check_resources(&cfg, a.c.data_dir, &e))) {
        rc = cli_error(e.msg);
        goto done;
    }
    if (!(sw.pts = calloc(1, sizeof *sw.pts))) { rc = cli_error("run: out of memory"); goto done; }
    sw.n = 1;
    if (run_point_and_json(&a, &cfg, &sw.pts[0], &e)) {
        rc = cli_error(e.msg);
        goto done;
    }
    rc = exp_run_sweep(&cfg, &sw, &a.c);
    sw.pts = NULL;   /* exp_run_sweep took it */
done:
    sweep_free(&sw);
    exp_config_free(&cfg);
    return rc;
}
