/* gpu_check.c - the model-level checks of tools/devcheck.sh, on a GPU.
 *
 *   gpu_check fixtures [DEVICE]      (DEVICE -1: a CPU backend stands in, to test this tool)
 *       Every tiny fixture model (tests/fixtures/models/tiny-*, safetensors
 *       and GGUF) on the CUDA backend and on the CPU backend: the logits of
 *       every position of the golden prompts, in one piece, in chunks of 3
 *       (decode-sized attention over a growing cache) and as one ragged batch
 *       of all prompts, against the CPU (relative error <= 1e-4: both f32)
 *       and against transformers' golden logits (<= 1e-4, as
 *       tests/test_forward.c), all in exact mode (f32 weights); then the
 *       quantized fixtures (tiny-llama-q, tiny-kquant) held as bf16 on the GPU
 *       against the CPU's exact mode (logits NMSE <= 1e-3, see
 *       check_quant_fixture).  Exit 1 on any mismatch.
 *   gpu_check logits --model PATH --ids 1,2,3 --out FILE [--device cpu|cuda[:N]]
 *       Writes the f32 logits of every position of one prompt ([n][vocab],
 *       little-endian) for tools/devcheck/hf_check.py to compare.
 *   gpu_check decode --model PATH [--batch B] [--prompt-len L] [--new N] [--device cuda[:N]]
 *       FullKV generation through model/generate.c on the GPU, independent of
 *       the harness: reserves the run's device pool from generate()'s own
 *       memory estimate (so every cache and buffer comes from it), runs B
 *       sequences of L prompt tokens and N new tokens (EOS ignored), checks
 *       the backend's status, and prints one JSON line with prefill and
 *       decode tokens/s, peak KV bytes, the pool's size and peak use, and the
 *       backend calls of a decode step (fewest, most: the model runs on the
 *       counting wrapper, kernels/backend_count.c; no CUPTI).
 *   gpu_check compare --model DIR [--policy P] [--budget N] [--new N] ...
 *       A whole decode on the GPU against the CPU backend (decode_compare.c).
 *   gpu_check graph --model PATH [--batch B] [--prompt-len L] [--steps N] ...
 *       Decode steps replayed as CUDA graphs against the same steps launched
 *       op by op (graph_check.c).
 *
 * Built only by the CUDA build (`make devcheck-tools`): it links the CUDA
 * backend.  The relative error of a position is max|ours - ref| / max|ref|. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/backend_cuda.h"
#include "model/generate.h"
#include "model/model.h"
#include "model/modelfile.h"
#include "tools/devcheck/decode_compare.h"
#include "tools/devcheck/gpu_check.h"
#include "tools/devcheck/graph_check.h"

static const char *TINY[] = {"tiny-llama", "tiny-llama3", "tiny-llama-tied", "tiny-qwen2",
                             "tiny-qwen3"};
static int n_ok, n_bad;

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) {
        s[n] = '\0';
        if (len) *len = (size_t)n;
    }
    fclose(f);
    return s;
}

static double rel_err(const float *a, const float *ref, int n)
{
    double diff = 0, mag = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - ref[i]);
        if (!(d <= diff)) diff = isnan(d) ? INFINITY : d;
        if (fabs(ref[i]) > mag) mag = fabs(ref[i]);
    }
    return diff / (mag > 0 ? mag : 1);
}

static double worst_rel(const float *ours, const float *ref, int n_pos, int vocab)
{
    double worst = 0;
    for (int p = 0; p < n_pos; p++) {
        double r = rel_err(ours + (size_t)p * vocab, ref + (size_t)p * vocab, vocab);
        if (!(r <= worst)) worst = r;
    }
    return worst;
}

static void verdict(const char *what, double err, double tol)
{
    int ok = err <= tol;
    printf("  %-4s %-52s rel err %.3g (tol %.0e)\n", ok ? "ok" : "FAIL", what, err, tol);
    ok ? n_ok++ : n_bad++;
}

int backend_failed(struct backend *be, struct eb_err *e)
{
    return strcmp(be->name, "cuda") == 0 && backend_cuda_status(be, e) != 0;
}

int open_model(const char *path, struct backend *be, enum model_weights weights,
               struct model **m, struct eb_err *e)
{
    struct model_file *mf;
    if (model_file_open(path, &mf, e)) return -1;
    struct model_load_opts o = {.weights = weights};
    int rc = model_load_opts(mf, be, &o, m, e);
    model_file_close(mf);
    return rc;
}

/* All logits of one prompt fed in chunks of `chunk` tokens into a fresh cache. */
static int run_chunked(struct model *m, const int *ids, int n, int chunk, float *out,
                       struct eb_err *e)
{
    struct forward *f = NULL;
    struct kvcache *c = NULL;
    int V = m->cfg.n_vocab, rc = -1;
    if (forward_create(m, chunk, chunk, &f, e) || model_kvcache_create(m, n, &c, e)) goto out;
    for (int done = 0; done < n; done += chunk) {
        int len = n - done < chunk ? n - done : chunk;
        struct fwd_seq s = {.id = 0, .cache = c, .tokens = ids + done, .n_tokens = len,
                            .logits = FWD_LOGITS_ALL};
        struct fwd_batch b = {&s, 1, 0};
        if (model_forward(f, &b, NULL, e) || backend_failed(m->be, e)) goto out;
        memcpy(out + (size_t)done * V, forward_logits(f), (size_t)len * V * sizeof *out);
    }
    rc = 0;
out:
    if (c) kvcache_free(c);
    if (f) forward_free(f);
    return rc;
}

/* Every prompt in one ragged batch; logits of sequence i at out + offset of i. */
static int run_batch(struct model *m, int **ids, const int *n, int ns, float *out,
                     struct eb_err *e)
{
    struct kvcache *c[8] = {0};
    struct fwd_seq seqs[8];
    struct forward *f = NULL;
    int total = 0, rc = -1, V = m->cfg.n_vocab;
    for (int i = 0; i < ns; i++) {
        total += n[i];
        if (model_kvcache_create(m, n[i], &c[i], e)) goto out;
        seqs[i] = (struct fwd_seq){.id = i, .cache = c[i], .tokens = ids[i], .n_tokens = n[i],
                                   .logits = FWD_LOGITS_ALL};
    }
    if (forward_create(m, total, total, &f, e)) goto out;
    struct fwd_batch b = {seqs, ns, 0};
    if (model_forward(f, &b, NULL, e) || backend_failed(m->be, e)) goto out;
    size_t off = 0;
    for (int i = 0; i < ns; i++) {
        memcpy(out + off, forward_logits(f) + (size_t)seqs[i].logit_row0 * V,
               (size_t)n[i] * V * sizeof *out);
        off += (size_t)n[i] * V;
    }
    rc = 0;
out:
    for (int i = 0; i < ns; i++)
        if (c[i]) kvcache_free(c[i]);
    if (f) forward_free(f);
    return rc;
}

static void check_fixture(struct backend *cpu, struct backend *gpu, const char *name,
                          const char *file)
{
    char path[512], what[160];
    struct eb_err e = {0};
    snprintf(path, sizeof path, "tests/fixtures/models/%s/golden.json", name);
    char *txt = read_file(path, NULL);
    cJSON *json = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    snprintf(path, sizeof path, "tests/fixtures/models/%s/logits.bin", name);
    size_t ref_bytes = 0;
    float *ref = (float *)read_file(path, &ref_bytes);
    snprintf(path, sizeof path, "tests/fixtures/models/%s%s", name, file);
    struct model *mc = NULL, *mg = NULL;
    if (!json || !ref || open_model(path, cpu, MODEL_WEIGHTS_F32, &mc, &e) ||
        open_model(path, gpu, MODEL_WEIGHTS_F32, &mg, &e)) {
        printf("  FAIL %-52s cannot load: %s\n", path, e.msg[0] ? e.msg : "fixtures missing");
        n_bad++;
        goto out;
    }
    const cJSON *prompts = cJSON_GetObjectItem(json, "prompts");
    int V = mc->cfg.n_vocab, ns = cJSON_GetArraySize(prompts);
    int *ids[8], n[8];
    size_t total = 0;
    if (ns > 8) ns = 8;
    for (int i = 0; i < ns; i++) {
        const cJSON *p = cJSON_GetArrayItem(prompts, i);
        n[i] = cJSON_GetArraySize(p);
        ids[i] = malloc((size_t)n[i] * sizeof(int));
        for (int t = 0; t < n[i]; t++) ids[i][t] = cJSON_GetArrayItem(p, t)->valueint;
        total += (size_t)n[i] * V;
    }
    if (total * sizeof(float) > ref_bytes) {
        printf("  FAIL %-52s logits.bin is short\n", path);
        n_bad++;
    } else {
        float *oc = malloc(total * sizeof(float)), *og = malloc(total * sizeof(float));
        size_t off = 0;
        for (int i = 0; i < ns; i++) {
            int chunks[2] = {n[i], 3};
            for (int c = 0; c < 2; c++) {
                snprintf(what, sizeof what, "%s%s prompt %d chunk %d", name, file[0] ? " gguf" : "",
                         i, chunks[c]);
                if (run_chunked(mc, ids[i], n[i], chunks[c], oc + off, &e) ||
                    run_chunked(mg, ids[i], n[i], chunks[c], og + off, &e)) {
                    printf("  FAIL %-52s %s\n", what, e.msg);
                    n_bad++;
                    continue;
                }
                verdict(what, worst_rel(og + off, oc + off, n[i], V), 1e-4);
                snprintf(what + strlen(what), sizeof what - strlen(what), " vs transformers");
                verdict(what, worst_rel(og + off, ref + off, n[i], V), 1e-4);
            }
            off += (size_t)n[i] * V;
        }
        snprintf(what, sizeof what, "%s%s ragged batch of %d", name, file[0] ? " gguf" : "", ns);
        if (run_batch(mg, ids, n, ns, og, &e)) {
            printf("  FAIL %-52s %s\n", what, e.msg);
            n_bad++;
        } else {
            double worst = 0;
            off = 0;
            for (int i = 0; i < ns; i++) {
                double r = worst_rel(og + off, ref + off, n[i], V);
                if (!(r <= worst)) worst = r;
                off += (size_t)n[i] * V;
            }
            verdict(what, worst, 1e-4);
        }
        free(oc);
        free(og);
    }
    for (int i = 0; i < ns; i++) free(ids[i]);
out:
    if (mc) model_free(mc);
    if (mg) model_free(mg);
    cJSON_Delete(json);
    free(ref);
}

/* device < 0: a second CPU backend stands in for the GPU, which checks the
 * checker itself on a machine without one. */
/* sum (a - b)^2 / sum b^2 over n values. */
static double nmse(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? num / den : (num > 0 ? INFINITY : 0);
}

/* A quantized fixture: the GPU holds it as bf16 (dequantized at upload) and
 * rounds activations to bf16 at each matmul; the reference is the CPU's exact
 * mode on the same file.  Bound: logits NMSE <= 1e-3.  Each rounding is at
 * most 2^-9 relative with random sign, so one matmul adds an NMSE of about
 * 2 (2^-9)^2 ~ 8e-6; the fixtures' 2 layers x 7 matmuls + the head give
 * ~1.2e-4: the bound leaves 8x room and still catches any layout or scale
 * error (those give NMSE of order 1).  With a CPU standing in for the GPU
 * (checking this tool) the native path rounds activations to 8 bits instead,
 * and tests/test_qmodel.c's bound for that, 5e-3, applies. */
static void check_quant_fixture(struct backend *cpu, struct backend *gpu, const char *name,
                                double tol)
{
    char path[512], what[160];
    struct eb_err e = {0};
    struct model *mc = NULL, *mg = NULL;
    snprintf(path, sizeof path, "tests/fixtures/models/%s/model.gguf", name);
    if (open_model(path, cpu, MODEL_WEIGHTS_F32, &mc, &e) ||
        open_model(path, gpu, MODEL_WEIGHTS_NATIVE, &mg, &e)) {
        printf("  FAIL %-52s cannot load: %s\n", path, e.msg);
        n_bad++;
        if (mc) model_free(mc);
        return;
    }
    enum { N = 40 };
    int ids[N], V = mc->cfg.n_vocab;
    for (int i = 0; i < N; i++) ids[i] = (i * 37 + 11) % V;
    float *oc = malloc((size_t)N * V * sizeof *oc), *og = malloc((size_t)N * V * sizeof *og);
    int chunks[2] = {N, 1};
    if (oc && og && run_chunked(mc, ids, N, N, oc, &e) == 0) {
        for (int c = 0; c < 2; c++) {
            snprintf(what, sizeof what, "%s gguf native, chunk %d", name, chunks[c]);
            if (run_chunked(mg, ids, N, chunks[c], og, &e)) {
                printf("  FAIL %-52s %s\n", what, e.msg);
                n_bad++;
                continue;
            }
            double err = nmse(og, oc, (size_t)N * V);
            int ok = err <= tol;
            printf("  %-4s %-52s logits NMSE %.3g (tol %.0e)\n", ok ? "ok" : "FAIL", what, err,
                   tol);
            ok ? n_ok++ : n_bad++;
        }
    } else {
        printf("  FAIL %-52s CPU reference: %s\n", path, e.msg);
        n_bad++;
    }
    free(oc);
    free(og);
    model_free(mc);
    model_free(mg);
}

static int cmd_fixtures(int device)
{
    struct eb_err e = {0};
    struct backend *cpu = backend_cpu_create(0);
    struct backend *gpu = device < 0 ? backend_cpu_create(1) : backend_cuda_create(device, &e);
    if (!cpu || !gpu) {
        fprintf(stderr, "gpu_check: %s\n", gpu ? "cannot create the cpu backend" : e.msg);
        return 1;
    }
    for (size_t i = 0; i < sizeof TINY / sizeof TINY[0]; i++) {
        check_fixture(cpu, gpu, TINY[i], "");
        check_fixture(cpu, gpu, TINY[i], "/model.gguf");
    }
    check_quant_fixture(cpu, gpu, "tiny-llama-q", device < 0 ? 5e-3 : 1e-3);
    check_quant_fixture(cpu, gpu, "tiny-kquant", device < 0 ? 5e-3 : 1e-3);
    printf("gpu_check fixtures: %d passed, %d failed\n", n_ok, n_bad);
    gpu->destroy(gpu);
    cpu->destroy(cpu);
    return n_bad || n_ok == 0 ? 1 : 0;
}

static int parse_ids(const char *s, int **ids, int *n)
{
    int cap = 16;
    *n = 0;
    *ids = malloc((size_t)cap * sizeof **ids);
    while (*ids && *s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 1 << 30 || (*end && *end != ',')) return -1;
        if (*n == cap && !(*ids = realloc(*ids, (size_t)(cap *= 2) * sizeof **ids))) return -1;
        (*ids)[(*n)++] = (int)v;
        s = *end ? end + 1 : end;
    }
    return *ids && *n > 0 ? 0 : -1;
}

static int cmd_logits(int argc, char **argv)
{
    const char *model = NULL, *ids_s = NULL, *out = NULL, *device = "cuda";
    for (int i = 0; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--ids")) ids_s = argv[i + 1];
        else if (!strcmp(argv[i], "--out")) out = argv[i + 1];
        else if (!strcmp(argv[i], "--device")) device = argv[i + 1];
        else return fprintf(stderr, "gpu_check: logits: unknown option %s\n", argv[i]), 2;
    }
    int *ids = NULL, n = 0, dev = 0;
    struct eb_err e = {0};
    if (!model || !ids_s || !out || parse_ids(ids_s, &ids, &n)) {
        fprintf(stderr, "gpu_check: logits needs --model, --ids a,b,c and --out\n");
        return 2;
    }
    struct backend *be = !strcmp(device, "cpu") ? backend_cpu_create(0)
                         : cuda_device_parse(device, &dev, &e) ? NULL
                                                               : backend_cuda_create(dev, &e);
    struct model *m = NULL;
    float *logits = NULL;
    FILE *f = NULL;
    int rc = 1;
    if (!be) {
        fprintf(stderr, "gpu_check: %s\n", e.msg[0] ? e.msg : "no backend");
        goto done;
    }
    if (open_model(model, be, MODEL_WEIGHTS_NATIVE, &m, &e)) {
        fprintf(stderr, "gpu_check: %s: %s\n", model, e.msg);
        goto done;
    }
    logits = malloc((size_t)n * m->cfg.n_vocab * sizeof *logits);
    if (!logits || run_chunked(m, ids, n, n, logits, &e)) {
        fprintf(stderr, "gpu_check: forward: %s\n", logits ? e.msg : "out of memory");
        goto done;
    }
    f = fopen(out, "wb");
    if (!f || fwrite(logits, sizeof *logits, (size_t)n * m->cfg.n_vocab, f) !=
                  (size_t)n * m->cfg.n_vocab) {
        fprintf(stderr, "gpu_check: cannot write %s\n", out);
        goto done;
    }
    printf("gpu_check: %d positions x %d logits of %s on %s -> %s\n", n, m->cfg.n_vocab, model,
           be->name, out);
    rc = 0;
done:
    if (f && fclose(f) != 0) rc = 1;
    free(logits);
    free(ids);
    if (m) model_free(m);
    if (be) be->destroy(be);
    return rc;
}

static int cmd_decode(int argc, char **argv)
{
    const char *model = NULL, *device = "cuda";
    int batch = 1, plen = 512, n_new = 128, dev = 0;
    for (int i = 0; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--device")) device = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prompt-len")) plen = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--new")) n_new = atoi(argv[i + 1]);
        else return fprintf(stderr, "gpu_check: decode: unknown option %s\n", argv[i]), 2;
    }
    struct eb_err e = {0};
    if (!model || batch < 1 || plen < 1 || n_new < 1) {
        fprintf(stderr, "gpu_check: decode needs --model and positive sizes\n");
        return 2;
    }
    struct backend *inner = cuda_device_parse(device, &dev, &e) ? NULL : backend_cuda_create(dev, &e);
    /* the model runs on the counting wrapper; the CUDA entry points get inner */
    struct backend *be = inner ? backend_count_create(inner) : NULL;
    if (inner && !be) inner->destroy(inner);
    struct model *m = NULL;
    int *ids = malloc((size_t)batch * plen * sizeof *ids), rc = 1;
    struct gen_request *req = calloc((size_t)batch, sizeof *req);
    struct gen_result *res = calloc((size_t)batch, sizeof *res);
    if (!be || !ids || !req || !res || open_model(model, be, MODEL_WEIGHTS_NATIVE, &m, &e)) {
        fprintf(stderr, "gpu_check: %s\n", e.msg[0] ? e.msg : "out of memory");
        goto done;
    }
    unsigned x = 2166136261u;
    for (int b = 0; b < batch; b++) {
        for (int t = 0; t < plen; t++) { /* ordinary-text-like ids, as evictbench bench */
            x = x * 1664525u + 1013904223u;
            ids[(size_t)b * plen + t] = 32 + (int)((x >> 8) % 1000u);
        }
        req[b] = (struct gen_request){ids + (size_t)b * plen, plen, n_new, sampler_params_greedy()};
    }
    struct gen_options opt = {0};
    opt.ignore_eos = 1;
    size_t free_b, total_b;
    if (backend_cuda_mem_info(inner, &free_b, &total_b, &e)) goto fail;
    opt.mem_limit = total_b;
    size_t est = generate_estimate_bytes(&m->cfg, 0, req, batch, &opt);
    struct kv_pool_need need = {est / (size_t)batch + 1, 0, batch};
    struct kv_pool_plan plan;
    if (backend_cuda_reserve_pool(inner, &need, &plan, &e)) goto fail;
    opt.mem_limit = m->weight_bytes + plan.pool_bytes;
    struct gen_stats st;
    int grc = generate(m, req, batch, &opt, res, &st, &e);
    struct eb_err ce = {0};
    if (backend_cuda_status(inner, &ce)) { /* the device's record is the cause */
        if (!grc) gen_results_free(res, batch);
        e = ce;
        goto fail;
    }
    if (grc) goto fail;
    gen_results_free(res, batch);
    size_t used, peak;
    backend_cuda_pool_usage(inner, &used, &peak);
    /* host: its own work per decode step (waits on the device excluded) */
    double steps = st.decode_steps > 0 ? (double)st.decode_steps : 1.0;
    printf("{\"engine\": \"gpu_check\", \"batch\": %d, \"prompt_len\": %d, \"new\": %d, "
           "\"prefill_tok_s\": %.1f, \"decode_tok_s\": %.1f, \"peak_kv_bytes\": %zu, "
           "\"weight_bytes\": %zu, \"pool_bytes\": %zu, \"pool_peak_bytes\": %zu, "
           "\"calls_min\": %ld, \"calls_max\": %ld, \"host_ms_step\": %.4f, "
           "\"device_ms_step\": %.4f, \"fused_in_step\": %.1f, \"fused_out_step\": %.1f, "
           "\"n_layer\": %d, \"graph_steps\": %ld, \"graph_captures\": %ld}\n",
           batch, plen, n_new, st.prefill_s > 0 ? st.prefill_tokens / st.prefill_s : 0.0,
           st.decode_s > 0 ? st.decode_tokens / st.decode_s : 0.0, st.peak_kv_bytes,
           m->weight_bytes, plan.pool_bytes, peak, st.decode_calls_min, st.decode_calls_max,
           1e3 * (st.decode_forward_s - st.decode_wait_s) / steps,
           1e3 * st.decode_device_s / steps, st.decode_fused_in / steps,
           st.decode_fused_out / steps, m->cfg.n_layer, st.decode_graph_steps,
           st.decode_graph_captures);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "gpu_check: decode: %s%s\n", e.kind == EB_ERR_NOMEM ? "oom: " : "", e.msg);
done:
    free(ids);
    free(req);
    free(res);
    if (m) model_free(m);
    if (be) be->destroy(be);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "fixtures")) return cmd_fixtures(argc > 2 ? atoi(argv[2]) : 0);
    if (argc >= 2 && !strcmp(argv[1], "logits")) return cmd_logits(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "decode")) return cmd_decode(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "compare")) return cmd_compare(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "graph")) return cmd_graph(argc - 2, argv + 2);
    fprintf(stderr, "usage: gpu_check fixtures [DEVICE] | gpu_check logits --model PATH "
                    "--ids 1,2,3 --out FILE [--device cpu|cuda[:N]] | gpu_check decode --model PATH "
                    "[--batch B] [--prompt-len L] [--new N] [--device cuda[:N]] | gpu_check compare "
                    "--model DIR [--policy P] [--budget N] [--new N] [--prompt-len N] "
                    "[--kv-type T] [--device cuda[:N]] | gpu_check graph --model PATH [--batch B] "
                    "[--prompt-len L] [--steps N] [--device cpu|cuda[:N]]\n");
    return 2;
}
