/* config.h - experiment configs (experiments/NAME.json): parsing and validation.
 *
 * A config names the models, datasets, prompt template, policies (with
 * parameters; a list value sweeps), budgets, batch sizes, batching modes,
 * sampling and length limits of a sweep.  Everything is checked before
 * anything runs, and every message carries the JSON path of the offending
 * value: "experiments/x.json: $.policies[2].budget: expected an integer".
 * Unknown keys are rejected.  sweep.h turns a config into points.
 *
 * Keys (types; default):
 *   name            string; the file's base name
 *   description     string; ignored
 *   mode            "generate" | "fidelity"; "generate"
 *   models          string or [string]: registry names or paths   (required)
 *   datasets        string or [string | {name, limit, offset}]  (required); a dataset
 *                   whose file is missing is an error (nothing is substituted)
 *   prompt          template name, see prompt_templates(); "r1-boxed"
 *   policies        string or [string | {name, budget(s), PARAM: value or [values]}];
 *                   ["fullkv"]
 *   budgets         number or [numbers]: KV slots (integers >= 1), or fractions of FullKV's
 *                   mean generation length on the same model and dataset slice (numbers
 *                   in (0, 1): resolved once FullKV's point has run); ignored by fullkv; [1024]
 *   batch_sizes     int or [int]; [1]
 *   batching        mode or [modes]: "padded" | "grouped" | "ragged" | "continuous"; "ragged"
 *   sampling        "greedy" or {greedy, temperature, top_p, top_k, n_samples, seed}; "greedy"
 *   max_new_tokens  int; 1024
 *   max_total_tokens int: prompt + generation cap per sample; none
 *   max_kv_bytes    int: KV-cache cap of a whole batch; exceeding it is status 'oom'; none
 *   seed            int: shorthand for sampling.seed; 0
 *   weights         "f32" (every tensor dequantized: exact, the default) | "native"
 *                   (weights stay in the file's type: quantized kernels, 3x faster)
 *   kv_type         "f32" | "f16" | "bf16" | "auto" (default): the KV cache's element type;
 *                   auto is bf16 on a GPU and f32 (exact) on the CPU.  The resolved type
 *                   is stored with each run (runs.kv_type) and joins the run key unless f32
 *   retention       bool: record the decode step at which each position left each (layer,
 *                   KV head) cache (the retention table); true
 *   steer_vector    string: the steering vector file seal/skipkv load (policies/steering.h);
 *                   none: vectors/<model name>.bin when it exists */
#ifndef EB_CONFIG_H
#define EB_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "model/model.h"
#include "util/err.h"

enum exp_batching { BATCHING_PADDED = 0, BATCHING_GROUPED, BATCHING_RAGGED, BATCHING_CONTINUOUS };
enum exp_mode { EXP_MODE_GENERATE = 0, EXP_MODE_FIDELITY };

/* A named prompt: the chat template it is rendered with and the user text,
 * in which "{problem}" stands for the problem. */
struct prompt_template {
    const char *name;   /* "r1-boxed" */
    const char *chat;   /* "r1" | "chatml" | "raw" (model/tokenizer.h) */
    int add_bos;        /* 1: prepend the tokenizer's BOS id (raw prompts) */
    const char *user;
    const char *about;
};

struct exp_dataset {
    char *name;         /* registry name, e.g. "gsm8k" or "synthetic:20:1" */
    int offset;
    int limit;          /* -1: every item from offset */
};

struct exp_policy {
    char *name;
    int64_t *budgets;   /* own budgets, NULL: the config's */
    int n_budgets;
    cJSON *params;      /* object: parameter -> value, or array of values (swept) */
};

struct exp_sampling {
    int greedy;
    double temperature, top_p;
    int top_k;
    int n_samples;      /* samples per problem; pass@1 = mean over them */
    uint64_t seed;      /* sample j of item i uses seed + i * n_samples + j */
};

struct exp_config {
    char *source;       /* the path, for messages */
    char *name;
    char *json;         /* the config as unformatted JSON (stored with the experiment) */
    enum exp_mode mode;
    char **models;
    int n_models;
    struct exp_dataset *datasets;
    int n_datasets;
    const struct prompt_template *prompt;
    struct exp_policy *policies;
    int n_policies;
    int64_t *budgets;       /* KV slots */
    int n_budgets;
    double *budget_fracs;   /* fractions of FullKV's mean generation length (cmd_exp
                             * resolves them into budgets once FullKV has run) */
    int n_budget_fracs;
    int *batch_sizes;
    int n_batch_sizes;
    enum exp_batching *batchings;
    int n_batchings;
    struct exp_sampling sampling;
    int max_new_tokens;
    int max_total_tokens;   /* 0: none */
    int64_t max_kv_bytes;   /* 0: none */
    char *steer_vector;     /* NULL: the policies' default */
    enum model_weights weights; /* "weights": f32 (exact, default) or native (the file's type) */
    int retention;          /* "retention": record which tokens each compaction evicted
                             * (the retention table); default true, false for large sweeps */
    int kv_type;            /* "kv_type": an enum kv_type, or DEVICE_KV_AUTO (default) */
    char *device;           /* "device": cpu or cuda[:N], where the points run (a command's
                             * --device overrides it); NULL: cpu.  The device's kind joins
                             * the run key: a GPU computes in 16 bits, another measurement */
};

/* The KV cache element type the config's points run with (kv_type resolved
 * for its device). */
enum kv_type exp_config_kv_type(const struct exp_config *c);

/* A command's --device (NULL: keep the config's) replaces c->device. */
int exp_config_set_device(struct exp_config *c, const char *device, struct eb_err *e);

/* A command's --model (NULL: keep the config's) replaces the config's models
 * with that one, in the points and in the JSON stored with the experiment:
 * the sweep as written, on another model.  Run keys follow (they hash the
 * model's name and file). */
int exp_config_set_model(struct exp_config *c, const char *model, struct eb_err *e);

/* The config's JSON text with its device set to c->device (a copy another
 * process expands to the same points); malloc'd, NULL when out of memory. */
char *exp_config_json(const struct exp_config *c);

/* The prompt templates, in listing order; *n receives the count. */
const struct prompt_template *prompt_templates(int *n);
const struct prompt_template *prompt_template_find(const char *name);

/* The user text for one problem (malloc'd); NULL when out of memory. */
char *prompt_user_text(const struct prompt_template *t, const char *problem);

/* Canonical description of a template for the run key: chat, BOS and user
 * text (malloc'd); NULL when out of memory. */
char *prompt_template_key(const struct prompt_template *t);

const char *batching_name(enum exp_batching b);
int batching_parse(const char *s, enum exp_batching *out);

/* Parse and validate config text.  source names it in messages.  On failure
 * *out is left empty (safe to free). */
int exp_config_parse(const char *text, size_t len, const char *source, struct exp_config *out,
                     struct eb_err *e);

/* The config's "budgets" (config_budget.c): integers >= 1 into budgets,
 * numbers in (0, 1) into budget_fracs. */
int exp_config_parse_budgets(const cJSON *v, const char *source, struct exp_config *cfg,
                             struct eb_err *e);

/* The fractions of cfg resolved against FullKV's mean generation length:
 * slots (>= 1, rounded, duplicates dropped) into out (room for
 * n_budget_fracs); their count. */
int exp_config_resolve_fracs(const struct exp_config *cfg, double fullkv_len, int64_t *out);

/* Read a config: a path ending in ".json", or NAME for experiments/NAME.json. */
int exp_config_load(const char *path_or_name, struct exp_config *out, struct eb_err *e);

void exp_config_free(struct exp_config *c);

/* Check before running that every model file and dataset exists; the message says which one is missing and how to get it.  (Policy
 * names and parameters are checked by sweep_expand.) */
int exp_config_check_resources(const struct exp_config *c, const char *data_dir,
                               struct eb_err *e);

/* The dataset a config entry resolves to in data_dir: its name when
 * available, else NULL. */
const char *exp_dataset_resolve(const struct exp_dataset *d, const char *data_dir);

#endif
