/* cmd_generate.c - `evictbench generate`: text from a model, one prompt
 * streamed to stdout, or a JSONL file of prompts generated in ragged batches. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "kernels/backend.h"
#include "model/generate.h"
#include "model/model_tokenizer.h"
#include "model/unicode.h"
#include "policies/registry.h"
#include "policies/steering.h"
#include "harness/cli/cli.h"
#include "harness/exp/device.h"
#include "harness/cli/cmd_generate.h"
#include "harness/cli/gen_stats_print.h"
#include "harness/exp/policy_glue.h"
#include "harness/exp/session.h"

static void print_help(void)
{
    printf(
        "usage: evictbench generate --model M (--prompt TEXT | --prompts FILE.jsonl) [options]\n"
        "       evictbench generate --model M [options] -- TEXT\n\n"
        "  --model M            registry name (e.g. smollm2-135m), GGUF file or HF directory\n"
        "  --chat r1|chatml|qwen3|qwen2.5|raw  chat template (default: the registry's, else raw);\n"
        "                       special tokens in the text are matched (raw: as given)\n"
        "  --prompt TEXT        one prompt; the generated text streams to stdout\n"
        "  -- TEXT              the end of options: TEXT is the prompt (may start with '-')\n"
        "  --prompts FILE       JSONL lines {\"id\": ..., \"prompt\": \"...\"}; writes lines\n"
        "                       {\"id\", \"text\", \"prompt_tokens\", \"gen_tokens\", \"finish\"}\n"
        "  --max-new N          tokens to generate at most (default 256)\n"
        "  --ignore-eos         generate exactly --max-new tokens per prompt (EOS does not stop)\n"
        "  --greedy             argmax decoding (the default)\n"
        "  --temperature T --top-p P --top-k K   sampling (top-p 1 and top-k 0 disable the cuts)\n"
        "  --seed S             sampling seed; prompt i of a file uses S + i (default 0)\n"
        "  --batch B            sequences generated together (default 8)\n"
        "  --out FILE           write the JSONL results to FILE instead of stdout (with\n"
        "                       --prompt: the text still streams, FILE gets its JSONL line)\n"
        "  --stats              print prefill/decode tokens/s, KV bytes and (CPU) backend\n"
        "                       calls per decode step to stderr\n"
        "  --threads N          CPU threads (default: all cores)\n"
        "  --device D           cpu (default) or cuda[:N] (a build from make cuda)\n"
        "  --weights W          f32: dequantized at load (exact mode, default);\n"
        "                       native: weight matrices stay in the file's type\n"
        "  --kv-type T          KV cache element type: f32, f16, bf16 or auto (default: f32\n"
        "                       on the CPU, bf16 on a GPU)\n"
        "  --mem-limit MB       memory the batch may use (default: weights + available RAM)\n"
        "  --policy P[:k=v,...] KV-cache eviction policy (fullkv, streamingllm, h2o, h2o-rkv,\n"
        "                       snapkv, snapkv-decode, rkv, ...); --stats adds its counters\n"
        "  --budget N           KV slots per layer and kv head after a compression (the\n"
        "                       policy's window included)\n"
        "  --no-policy-defaults do not add the model's defaults from\n"
        "                       policies/policy_defaults.json (seal/skipkv layer, split, think,\n"
        "                       ...); parameters given in --policy always win\n"
        "  --steer-vector FILE  steering vector for seal/skipkv (evictbench calibrate; default\n"
        "                       vectors/<model name>.bin when it exists)\n");
}

struct gen_cli {
    const char *model, *chat, *prompt, *prompts_path, *out_path, *policy, *steer_vector;
    const char *device;         /* --device; NULL: cpu */
    int kv_type;                /* --kv-type: an enum kv_type or DEVICE_KV_AUTO */
    long budget, max_new, batch, threads, top_k, mem_limit_mb;
    double temperature, top_p;
    unsigned long long seed;
    int greedy_flag, sampling_flag, stats, no_policy_defaults, ignore_eos;
    struct model_load_opts load;
};

struct prompt_item {
    cJSON *id;       /* the id exactly as given (any JSON value), or NULL */
    int *ids;
    int n;
};

/* Streaming of a single prompt's text through on_step. */
struct stream_ctx {
    const struct tokenizer *tok;
    const int *eos;
    int n_eos;
    struct utf8_stream us;
};

static int stream_step(void *ctx, int seq, int token, struct kvcache *cache, struct eb_err *e)
{
    (void)seq; (void)cache; (void)e;
    struct stream_ctx *s = ctx;
    for (int i = 0; i < s->n_eos; i++)
        if (token == s->eos[i]) return 0;
    size_t len;
    const char *b = tokenizer_token_bytes(s->tok, token, &len);
    if (!b) return 0;
    /* Invalid bytes may expand to U+FFFD (3 bytes each): size for the worst case. */
    char small[512], *buf = small;
    size_t cap = 3 * len + 16;
    if (cap > sizeof small && !(buf = malloc(cap))) return eb_fail(e, "out of memory");
    if (buf == small) cap = sizeof small;
    size_t n = utf8_stream_feed(&s->us, b, len, buf, cap);
    fwrite(buf, 1, n, stdout);
    fflush(stdout);
    if (buf != small) free(buf);
    return 0;
}

static int parse_sampling_opt(const char *o, const char *v, struct gen_cli *a);
static int check_args(const struct gen_cli *a);

static int parse_args(int argc, char **argv, struct gen_cli *a)
{
    memset(a, 0, sizeof *a);
    a->max_new = 256;
    a->batch = 8;
    a->top_p = 1.0;
    a->temperature = 1.0;
    a->kv_type = DEVICE_KV_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v;
        if (!strcmp(o, "--greedy")) { a->greedy_flag = 1; continue; }
        if (!strcmp(o, "--stats")) { a->stats = 1; continue; }
        if (!strcmp(o, "--ignore-eos")) { a->ignore_eos = 1; continue; }
        if (!strcmp(o, "--no-policy-defaults")) { a->no_policy_defaults = 1; continue; }
        if (!strcmp(o, "--")) {  /* the end of options: what follows is the prompt text */
            if (i + 2 != argc)
                return cli_error("generate: '--' must be followed by exactly one argument, the prompt text"), -1;
            if (a->prompt) return cli_error("generate: the prompt is given twice (--prompt and after '--')"), -1;
            a->prompt = argv[++i];
            continue;
        }
        if (strncmp(o, "--", 2) != 0) return cli_errorf("generate: unexpected argument '%s'", o), -1;
        if (!strcmp(o, "--model") || !strcmp(o, "--chat") || !strcmp(o, "--prompt") ||
            !strcmp(o, "--prompts") || !strcmp(o, "--out") || !strcmp(o, "--max-new") ||
            !strcmp(o, "--batch") || !strcmp(o, "--threads") || !strcmp(o, "--top-k") ||
            !strcmp(o, "--temperature") || !strcmp(o, "--top-p") || !strcmp(o, "--seed") ||
            !strcmp(o, "--mem-limit") || !strcmp(o, "--policy") || !strcmp(o, "--budget") ||
            !strcmp(o, "--steer-vector") || !strcmp(o, "--device") || !strcmp(o, "--weights") ||
            !strcmp(o, "--kv-type")) {
            if (!(v = cli_value(argc, argv, &i))) return -1;
        } else {
            return cli_errorf("generate: unknown option '%s' (see evictbench generate --help)", o), -1;
        }
        if (!strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--chat")) a->chat = v;
        else if (!strcmp(o, "--prompt")) {
            if (a->prompt) return cli_error("generate: the prompt is given twice"), -1;
            a->prompt = v;
        }
        else if (!strcmp(o, "--prompts")) a->prompts_path = v;
        else if (!strcmp(o, "--out")) a->out_path = v;
        else if (!strcmp(o, "--policy")) a->policy = v;
        else if (!strcmp(o, "--steer-vector")) a->steer_vector = v;
        else if (!strcmp(o, "--weights")) {
            if (model_weights_parse(v, &a->load.weights))
                return cli_errorf("--weights: must be native or f32, not '%s'", v), -1;
        }
        else if (!strcmp(o, "--kv-type")) {
            if (device_kv_type_parse(v, &a->kv_type))
                return cli_errorf("generate: --kv-type: expected f32, f16, bf16 or auto, "
                                  "not '%s'", v), -1;
        }
        else if (!strcmp(o, "--budget")) { if (cli_int(o, v, 1, 1 << 30, &a->budget)) return -1; }
        else if (!strcmp(o, "--max-new")) { if (cli_int(o, v, 1, 1 << 30, &a->max_new)) return -1; }
        else if (!strcmp(o, "--batch")) { if (cli_int(o, v, 1, 1 << 20, &a->batch)) return -1; }
        else if (!strcmp(o, "--threads")) { if (cli_int(o, v, 1, 1024, &a->threads)) return -1; }
        else if (!strcmp(o, "--device")) {
            struct eb_err e = {0};
            if (device_ready(v, &e)) return cli_error(e.msg), -1;
            a->device = v;
        }
        else if (!strcmp(o, "--mem-limit")) { if (cli_int(o, v, 1, 1L << 40, &a->mem_limit_mb)) return -1; }
        else if (parse_sampling_opt(o, v, a)) return -1;
    }
    return check_args(a);
}

/* The options that pick tokens: --top-k, --temperature, --top-p, --seed. */
static int parse_sampling_opt(const char *o, const char *v, struct gen_cli *a)
{
    double d;
    if (!strcmp(o, "--top-k")) {
        if (cli_int(o, v, 0, 1 << 30, &a->top_k)) return -1;
        a->sampling_flag = 1;
    } else if (!strcmp(o, "--temperature")) {
        if (cli_float(o, v, 0.0, 100.0, &a->temperature)) return -1;
        a->sampling_flag = 1;
    } else if (!strcmp(o, "--top-p")) {
        if (cli_float(o, v, 0.0, 1.0, &a->top_p)) return -1;
        if (a->top_p <= 0.0) return cli_error("--top-p: must be > 0"), -1;
        a->sampling_flag = 1;
    } else if (!strcmp(o, "--seed")) {
        if (cli_float(o, v, 0, 1.8e19, &d)) return -1;
        char *end;
        errno = 0;
        a->seed = strtoull(v, &end, 10);
        if (errno || *end) return cli_errorf("--seed: expected a non-negative integer, got '%s'", v), -1;
    }
    return 0;
}

/* Options that only make sense together. */
static int check_args(const struct gen_cli *a)
{
    if (!a->model) return cli_error("generate: missing --model (see evictbench generate --help)"), -1;
    if (a->budget && !a->policy) return cli_error("generate: --budget needs --policy"), -1;
    if (a->steer_vector && !a->policy)
        return cli_error("generate: --steer-vector needs --policy (seal, skipkv, ...)"), -1;
    if (!a->prompt == !a->prompts_path)
        return cli_error("generate: give exactly one of --prompt TEXT and --prompts FILE"), -1;
    if (a->greedy_flag && a->sampling_flag)
        return cli_error("generate: --greedy cannot be combined with --temperature/--top-p/--top-k"), -1;
    return 0;
}

static char *read_whole(const char *path, size_t *len, struct eb_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) return eb_fail(e, "%s: %s", path, strerror(errno)), NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n + 1 < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return eb_fail(e, "%s: out of memory", path), NULL;
    if (err) { free(buf); return eb_fail(e, "%s: read error", path), NULL; }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Parse the JSONL prompts file into items (encoded).  Blank lines are skipped. */
static int load_prompts(const char *path, const struct session *ss, enum chat_template tpl,
                        struct prompt_item **out, int *n_out, struct eb_err *e)
{
    size_t len;
    char *buf = read_whole(path, &len, e);
    if (!buf) return -1;
    struct prompt_item *items = NULL;
    int n = 0, cap = 0, line_no = 0, rc = -1;
    char *p = buf, *end = buf + len;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *line_end = nl ? nl : end;
        size_t ll = (size_t)(line_end - p);
        line_no++;
        char *next = nl ? nl + 1 : end;
        size_t bad = utf8_validate((const unsigned char *)p, ll);
        if (bad != ll) { eb_fail(e, "%s:%d: not valid UTF-8 (byte %zu)", path, line_no, bad + 1); goto done; }
        int blank = 1;
        for (size_t i = 0; i < ll; i++)
            if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') blank = 0;
        if (blank) { p = next; continue; }
        cJSON *obj = cJSON_ParseWithLength(p, ll);
        const cJSON *pr = obj ? cJSON_GetObjectItemCaseSensitive(obj, "prompt") : NULL;
        if (!obj || !cJSON_IsObject(obj)) {
            cJSON_Delete(obj);
            eb_fail(e, "%s:%d: not a JSON object", path, line_no);
            goto done;
        }
        if (!cJSON_IsString(pr)) {
            cJSON_Delete(obj);
            eb_fail(e, "%s:%d: missing string field \"prompt\"", path, line_no);
            goto done;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            struct prompt_item *ni = realloc(items, (size_t)cap * sizeof *ni);
            if (!ni) { cJSON_Delete(obj); eb_fail(e, "%s: out of memory", path); goto done; }
            items = ni;
        }
        struct prompt_item *it = &items[n];
        memset(it, 0, sizeof *it);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(obj, "id");
        it->id = id ? cJSON_Duplicate(id, 1) : NULL;
        n++;
        int erc = session_encode(ss, tpl, 0, pr->valuestring, strlen(pr->valuestring), &it->ids,
                                 &it->n, e);
        cJSON_Delete(obj);
        if (erc) {
            char where[300];
            snprintf(where, sizeof where, "%.280s:%d", path, line_no);
            eb_wrap(e, where);
            goto done;
        }
        p = next;
    }
    if (n == 0) { eb_fail(e, "%s: no prompts", path); goto done; }
    rc = 0;
done:
    free(buf);
    if (rc) {
        for (int i = 0; i < n; i++) { cJSON_Delete(items[i].id); free(items[i].ids); }
        free(items);
        items = NULL;
        n = 0;
    }
    *out = items;
    *n_out = n;
    return rc;
}

static int write_results(const char *out_path, const struct tokenizer *tok,
                         const struct prompt_item *items, const struct gen_result *res, int n,
                         struct eb_err *e)
{
    FILE *f = out_path ? fopen(out_path, "w") : stdout;
    if (!f) return eb_fail(e, "%s: %s", out_path, strerror(errno));
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char *text = NULL;
        size_t tl = 0;
        if (tokenizer_decode(tok, res[i].tokens, res[i].n_tokens, &text, &tl, e)) { rc = -1; break; }
        cJSON *o = cJSON_CreateObject();
        if (items[i].id) cJSON_AddItemToObject(o, "id", cJSON_Duplicate(items[i].id, 1));
        else cJSON_AddNumberToObject(o, "id", i);
        cJSON_AddStringToObject(o, "text", text);
        cJSON_AddNumberToObject(o, "prompt_tokens", items[i].n);
        cJSON_AddNumberToObject(o, "gen_tokens", res[i].n_tokens);
        cJSON_AddStringToObject(o, "finish", res[i].finish == GEN_FINISH_EOS ? "eos" : "length");
        char *line = cJSON_PrintUnformatted(o);
        if (!line) rc = eb_fail(e, "out of memory");
        else fprintf(f, "%s\n", line);
        free(line);
        cJSON_Delete(o);
        free(text);
    }
    if (out_path) {
        if (fclose(f) != 0 && rc == 0) rc = eb_fail(e, "%s: write error", out_path);
    } else {
        fflush(stdout);
    }
    return rc;
}

/* The policy of a.policy with the model's defaults (no dataset here;
 * explicit parameters win), checked against the budget; its glue comes
 * with the weights. */
static int open_policy(const struct gen_cli *a, const struct session *ss,
                       struct session_policy *sp, struct eb_err *e)
{
    const struct policy_entry *entry;
    struct policy_params params;
    if (session_policy_resolve(a->policy, a->model, NULL, (int)a->budget, a->no_policy_defaults,
                               &entry, &params, e))
        return -1;
    struct policy_request rq = {entry, &params, (int)a->budget, a->steer_vector, 1};
    if (session_policy_open(ss, &rq, sp, e)) return -1;
    if (sp->pol->info.notice) fprintf(stderr, "evictbench: note: %s\n", sp->pol->info.notice);
    return 0;
}

/* --out is checked before anything is generated: it must be creatable (or
 * an existing regular file we may write).  A file created here is removed
 * again; write_results creates it for real. */
static int check_out_path(const char *path, struct eb_err *e)
{
    struct stat sb;
    int existed = stat(path, &sb) == 0;
    if (existed && !S_ISREG(sb.st_mode)) return eb_fail(e, "--out %s: not a regular file", path);
    FILE *f = fopen(path, "a");
    if (!f) return eb_fail(e, "--out %s: cannot write: %s", path, strerror(errno));
    fclose(f);
    if (!existed) remove(path);
    return 0;
}

static struct gen_request *make_gen_requests(const struct gen_cli *a,
                                             const struct prompt_item *items, int n)
{
    struct gen_request *reqs = calloc((size_t)n, sizeof *reqs);
    if (!reqs) return NULL;
    for (int i = 0; i < n; i++) {
        reqs[i].prompt = items[i].ids;
        reqs[i].n_prompt = items[i].n;
        reqs[i].max_new = (int)a->max_new;
        if (a->sampling_flag && a->temperature > 0) {
            struct sampler_params p = {0, (float)a->temperature, (int)a->top_k, (float)a->top_p,
                                       a->seed + (unsigned long long)i};
            reqs[i].sampling = p;
        } else {
            reqs[i].sampling = sampler_params_greedy();
        }
    }
    return reqs;
}

/* The one prompt of --prompt, or every prompt of a JSONL file, encoded. */
static int read_prompts(const struct gen_cli *a, const struct session *ss,
                        enum chat_template tpl, struct prompt_item **items, int *n,
                        struct eb_err *e)
{
    if (!a->prompt) return load_prompts(a->prompts_path, ss, tpl, items, n, e);
    if (!(*items = calloc(1, sizeof **items))) return eb_fail(e, "out of memory");
    *n = 1;
    return session_encode(ss, tpl, 0, a->prompt, strlen(a->prompt), &(*items)[0].ids,
                          &(*items)[0].n, e);
}

/* The streamed text's last bytes (an incomplete UTF-8 sequence) and a newline. */
static void finish_stream(struct stream_ctx *sc)
{
    char tail[64];
    size_t tn = utf8_stream_finish(&sc->us, tail, sizeof tail);
    fwrite(tail, 1, tn, stdout);
    putchar('\n');
    fflush(stdout);
}

/* Everything one generate command holds; gen_state_free releases it. */
struct gen_state {
    struct session s;
    struct session_policy sp;
    struct prompt_item *items;
    int n;
    struct gen_request *reqs;
    struct gen_result *res;
};

static void gen_state_free(struct gen_state *g)
{
    if (g->res) gen_results_free(g->res, g->n);
    free(g->res);
    free(g->reqs);
    for (int i = 0; g->items && i < g->n; i++) {
        cJSON_Delete(g->items[i].id);
        free(g->items[i].ids);
    }
    free(g->items);
    session_policy_close(&g->sp);
    session_close(&g->s);
}

/* Everything that can fail before the weights load: model file, tokenizer,
 * policy and budget, --out, prompts, requests and whether the batch fits. */
static int gen_prepare(const struct gen_cli *a, enum chat_template tpl, struct gen_state *g,
                       struct session_gen_opts *so, struct eb_err *e)
{
    struct session_opts o = {a->device, (int)a->threads, (size_t)a->mem_limit_mb * 1024 * 1024};
    session_init(&g->s, &o);
    if (a->stats) session_count_calls(&g->s);
    if (session_open(&g->s, a->model, a->load.weights, 1, e)) return -1;
    if (a->policy && open_policy(a, &g->s, &g->sp, e)) return eb_wrap(e, "generate");
    if (a->out_path && check_out_path(a->out_path, e)) return eb_wrap(e, "generate");
    if (read_prompts(a, &g->s, tpl, &g->items, &g->n, e)) return eb_wrap(e, "generate");
    g->reqs = make_gen_requests(a, g->items, g->n);
    g->res = calloc((size_t)g->n, sizeof *g->res);
    if (!g->reqs || !g->res) return eb_fail(e, "generate: out of memory");
    so->max_live = (int)a->batch;
    so->ignore_eos = a->ignore_eos;
    so->kv_type = device_kv_type(a->device, a->kv_type);
    so->policy = a->policy ? &g->sp : NULL;
    struct gen_hooks hooks;
    struct gen_options opt;
    session_gen_options(&g->s, so, &hooks, &opt);
    return generate_check(session_config(&g->s), model_weight_bytes_opts(g->s.mf, &a->load), 0,
                          g->reqs, g->n, &opt, e);
}

/* Load the weights, generate (streaming a single prompt), write the results. */
static int gen_run(const struct gen_cli *a, struct gen_state *g, struct session_gen_opts *so,
                   struct eb_err *e)
{
    if (session_load(&g->s, e)) return eb_wrap(e, "generate");
    const struct model *m = g->s.m;
    struct stream_ctx sc = {g->s.tok, m->cfg.eos_ids, m->cfg.n_eos, {{0}, 0}};
    struct gen_hooks hooks = {0};
    if (a->prompt) {
        hooks.ctx = &sc;
        hooks.on_step = stream_step;
        so->hooks = &hooks;
    }
    /* --stats: the policy's phases timed at the device's pace (it waits for
     * the backend at each boundary; off otherwise, so runs stay asynchronous). */
    if (a->stats && so->policy) {
        if (session_policy_glue(so->policy, m, e)) return eb_wrap(e, "generate");
        if (so->policy->glue) policy_glue_time_phases(so->policy->glue, 1);
    }
    struct gen_stats st;
    if (session_generate(&g->s, g->reqs, g->n, so, g->res, &st, e)) {
        if (a->prompt) fflush(stdout);
        return eb_wrap(e, "generate");
    }
    if (a->prompt) finish_stream(&sc);
    /* JSONL for a file of prompts, and for a single prompt when --out asks for it. */
    if ((!a->prompt || a->out_path) && write_results(a->out_path, g->s.tok, g->items, g->res, g->n, e))
        return eb_wrap(e, "generate");
    if (a->stats) {
        struct gen_print_ctx pc = {a->device, kv_type_name(device_kv_type(a->device, a->kv_type)),
                                   a->budget, g->sp.glue, g->sp.pol, m->cfg.n_layer};
        gen_print_stats(&st, g->res, g->n, &pc);
    }
    return 0;
}

int cmd_generate(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { print_help(); return 0; }
    struct gen_cli a;
    if (parse_args(argc, argv, &a)) return 2;
    struct eb_err e = {0};
    enum chat_template tpl;
    if (model_chat_template(a.model, a.chat, &tpl, &e)) return cli_errorf("generate: %s", e.msg);
    if (a.prompt && a.prompt[0] == '\0') return cli_error("generate: the prompt is empty");
    struct gen_state g;
    memset(&g, 0, sizeof g);
    struct session_gen_opts so = {0};
    int rc = gen_prepare(&a, tpl, &g, &so, &e) || gen_run(&a, &g, &so, &e) ? cli_error(e.msg) : 0;
    gen_state_free(&g);
    return rc;
}
