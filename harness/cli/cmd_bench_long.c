/* cmd_bench_long.c - `evictbench bench --contexts` and `bench --max-batch`:
 * what eviction buys in decode speed and in batch size (harness/exp/bench_long.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cli/cli.h"
#include "harness/cli/cmd_generate.h"
#include "harness/exp/bench_long.h"
#include "harness/exp/device.h"
#include "harness/exp/session.h"
#include "harness/store/store.h"

static void print_help(void)
{
    printf("usage: evictbench bench --contexts LIST [options]\n"
           "       evictbench bench --max-batch [--max-kv-bytes N] [options]\n\n"
           "--contexts: decode tokens/s at each context length (e.g. 1024,2048,4096,8192,16384)\n"
           "for every batch size, KV type and policy; each cache is filled to the context by\n"
           "repeating the K/V of a real --fill-len-token prefill of GSM8K text (fill\n"
           "'repeat:gsm8k:N'), then decoded --new steps; a policy's first selection scores\n"
           "the whole filled cache.  --max-batch: for each policy, the largest batch whose K+V\n"
           "after --fill-len prompt + --gen-len generated tokens fits in --max-kv-bytes (on a\n"
           "GPU without it: whose memory plan fits the free device memory), and the decode\n"
           "rate, every policy hook counted, at batches 1, 2, 4, ... (or --batches, or only\n"
           "the largest with --largest-only) up to it (the next batch: an oom row); then the\n"
           "throughput at the largest batch against FullKV's best.\n"
           "Rows go to the bench table of --db.\n\n"
           "  --model M            default qwen2.5-coder-1.5b\n"
           "  --batches LIST       --contexts: default 1,8; --max-batch: the batches measured\n"
           "                       below the largest (default 1, 2, 4, ...)\n"
           "  --kv-types LIST      f32,f16 (default; --max-batch uses the first)\n"
           "  --policies LIST      default rkv,snapkv-decode,streamingllm (FullKV always runs)\n"
           "  --budgets LIST       default 1024\n"
           "  --new N              decode steps per point (default 32)\n"
           "  --fill-len N         tokens of the real prefill (default 256)\n"
           "  --gen-len N          --max-batch: tokens generated per sequence (default 8192)\n"
           "  --max-kv-bytes N     --max-batch: the K+V bytes allowed for the whole batch\n"
           "                       (required on the CPU; on a GPU the memory plan decides)\n"
           "  --largest-only       --max-batch: measure only each policy's largest batch\n"
           "  --batch-limit N      --max-batch: measure at most N sequences (the largest that\n"
           "                       fits is still reported), to bound the run's time\n"
           "  --threads N, --device D, --db FILE (default results/results.db), --no-db\n");
}

struct long_cli {
    const char *model, *policies, *budgets, *db, *device;
    int contexts_mode, max_batch_mode, no_db, batches_set, largest_only;
    long threads, n_new, fill_len, gen_len, kv_cap, batch_limit;
    char contexts[256], batches[64], kv_types[32];
};

/* "1,2" -> ints in [lo, hi]; the count or -1 with a message. */
static int int_list(const char *opt, const char *list, int lo, int hi, int *out, int max)
{
    int n = 0;
    for (const char *p = list;;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < lo || v > hi || n == max || (*end && *end != ','))
            return cli_errorf("bench: %s wants up to %d integers in [%d, %d] separated by commas, "
                              "got '%s'", opt, max, lo, hi, list), -1;
        out[n++] = (int)v;
        if (!*end) return n;
        p = end + 1;
    }
}

static int parse_value(struct long_cli *a, const char *o, const char *v)
{
    if (!strcmp(o, "--model")) a->model = v;
    else if (!strcmp(o, "--policies")) a->policies = v;
    else if (!strcmp(o, "--budgets")) a->budgets = v;
    else if (!strcmp(o, "--db")) a->db = v;
    else if (!strcmp(o, "--device")) a->device = v;
    else if (!strcmp(o, "--contexts")) snprintf(a->contexts, sizeof a->contexts, "%s", v);
    else if (!strcmp(o, "--batches")) {
        snprintf(a->batches, sizeof a->batches, "%s", v);
        a->batches_set = 1;
    }
    else if (!strcmp(o, "--kv-types")) snprintf(a->kv_types, sizeof a->kv_types, "%s", v);
    else if (!strcmp(o, "--threads")) return cli_int(o, v, 1, 1024, &a->threads) ? 2 : 0;
    else if (!strcmp(o, "--new")) return cli_int(o, v, 1, 4096, &a->n_new) ? 2 : 0;
    else if (!strcmp(o, "--fill-len")) return cli_int(o, v, 8, 1 << 16, &a->fill_len) ? 2 : 0;
    else if (!strcmp(o, "--gen-len")) return cli_int(o, v, 1, 1 << 24, &a->gen_len) ? 2 : 0;
    else if (!strcmp(o, "--batch-limit"))
        return cli_int(o, v, 1, 1 << 20, &a->batch_limit) ? 2 : 0;
    else if (!strcmp(o, "--max-kv-bytes"))
        return cli_int(o, v, 1, 1L << 50, &a->kv_cap) ? 2 : 0;
    else return cli_errorf("bench: unknown option '%s' (see evictbench bench --contexts --help)",
                           o), 2;
    return 0;
}

/* 0: parsed; 1: --help printed; 2: bad usage (message printed). */
static int parse_args(int argc, char **argv, struct long_cli *a)
{
    *a = (struct long_cli){.model = "qwen2.5-coder-1.5b", .policies = "rkv,snapkv-decode,streamingllm",
                           .budgets = "1024", .db = "results/results.db", .n_new = 32,
                           .fill_len = 256, .gen_len = 8192, .batches = "1,8",
                           .kv_types = "f32,f16"};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) { print_help(); return 1; }
        if (!strcmp(o, "--max-batch")) { a->max_batch_mode = 1; continue; }
        if (!strcmp(o, "--no-db")) { a->no_db = 1; continue; }
        if (!strcmp(o, "--largest-only")) { a->largest_only = 1; continue; }
        if (!(v = cli_value(argc, argv, &i))) return 2;
        if (!strcmp(o, "--contexts")) a->contexts_mode = 1;
        int rc = parse_value(a, o, v);
        if (rc) return rc;
    }
    if (a->contexts_mode == a->max_batch_mode)
        return cli_errorf("bench: give either --contexts LIST or --max-batch"), 2;
    int on_gpu = a->device && strncmp(a->device, "cuda", 4) == 0;
    if (a->max_batch_mode && a->kv_cap <= 0 && !on_gpu)
        return cli_errorf("bench: --max-batch on the CPU needs --max-kv-bytes N (a GPU plans "
                          "the largest batch from its free memory)"), 2;
    return 0;
}

static int fill_opts(const struct long_cli *a, struct bench_long_opts *o)
{
    char kv[32], *save = NULL;
    o->n_contexts = a->contexts_mode ? int_list("--contexts", a->contexts, 1, 1 << 24, o->contexts,
                                                BENCH_MAX_LIST) : 0;
    o->n_batches = int_list("--batches", a->batches, 1, 4096, o->batches, BENCH_MAX_LIST);
    if (o->n_contexts < 0 || o->n_batches < 0) return -1;
    if (a->max_batch_mode && !a->batches_set) o->n_batches = 0; /* 1, 2, 4, ... */
    snprintf(kv, sizeof kv, "%s", a->kv_types);
    o->n_kv = 0;
    for (char *t = strtok_r(kv, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k;
        if (o->n_kv == 4 || device_kv_type_parse(t, &k) || k == DEVICE_KV_AUTO)
            return cli_errorf("bench: --kv-types wants up to 4 of f32, f16, bf16, not '%s'",
                              a->kv_types), -1;
        o->kv_types[o->n_kv++] = (enum kv_type)k;
    }
    if (o->n_kv == 0) return cli_errorf("bench: --kv-types is empty"), -1;
    o->model = a->model;
    o->device = a->device ? a->device : "cpu";
    o->threads = (int)a->threads;
    o->n_new = (int)a->n_new;
    o->src_len = (int)a->fill_len;
    o->gen_len = (int)a->gen_len;
    o->kv_cap = a->kv_cap > 0 ? (size_t)a->kv_cap : 0;
    o->largest_only = a->largest_only;
    o->batch_limit = (int)a->batch_limit;
    o->out = stdout;
    return 0;
}

int cmd_bench_long(int argc, char **argv)
{
    struct long_cli a;
    int prc = parse_args(argc, argv, &a);
    if (prc) return prc == 1 ? 0 : 2;
    struct bench_long_opts o;
    memset(&o, 0, sizeof o);
    if (fill_opts(&a, &o)) return 2;

    struct eb_err e = {0};
    struct session s;
    struct session_opts so = {a.device, (int)a.threads, 0};
    session_init(&s, &so);
    struct store *db = NULL;
    int rc = 0;
    if (device_ready(a.device, &e) || session_model(&s, a.model, MODEL_WEIGHTS_NATIVE, &e) ||
        bench_policy_list(&s, a.policies, a.budgets, o.pols, BENCH_MAX_LIST, &o.n_pols, &e) ||
        (!a.no_db && store_open(a.db, &db, &e)))
        rc = cli_error(e.msg);
    o.db = db;
    if (!rc && a.contexts_mode && bench_contexts(&s, &o, &e)) rc = cli_error(e.msg);
    if (!rc && a.max_batch_mode && bench_max_batch(&s, &o, &e)) rc = cli_error(e.msg);
    if (db) store_close(db);
    session_close(&s);
    return rc;
}
