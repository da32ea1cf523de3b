/* test_layerfuse.c - the CPU backend's fused layer blocks (cpu_layer.c)
 * against the single ops, bit for bit.
 *
 * The same model file loaded with weights kept quantized, run twice on
 * backends of 1, 2 and 3 threads: with the fused blocks (default) and with
 * EVICTBENCH_CPU_FUSED=0 (every op its own job); the fixtures with
 * EVICTBENCH_CPU_FUSED=all, so that their tiny blocks still run threaded.  Every logit must be equal
 * in memory, for
 *   - decode: one token per forward (rows <= 32: each thread quantizes all
 *     rows itself);
 *   - prefill: 40 tokens in one forward (rows > 32: rows split, barriers);
 *   - a ragged batch of three sequences.
 * The fused run must also start fewer parallel jobs (it ran, and it is what
 * it claims).  Fixtures: tools/golden/gen_quant_models.py; the SmolLM2 and
 * Qwen2.5-1.5B GGUFs when models/ has them (else a SKIP line). */
#include "test.h"

#include "model/model.h"
#include "model/modelfile.h"
#include "test_util.h"
#include "fwd_runs.h"

#define SMOL_PATH "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define QWEN15_PATH "models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

/* fused: the value of EVICTBENCH_CPU_FUSED for the fused run ("all": the
 * threaded path even on tiny fixtures, whose single ops run on one thread). */
static void check_file(const char *path, int threads, const char *fused_mode)
{
    struct model_file *mf;
    struct eb_err e;
    if (model_file_open(path, &mf, &e)) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    struct backend *be = backend_cpu_create(threads);
    struct model *m = NULL;
    struct model_load_opts native = {.weights = MODEL_WEIGHTS_NATIVE};
    CHECK(be && model_load_opts(mf, be, &native, &m, &e) == 0);
    if (!m) goto done;
    size_t n = (size_t)3 * N_TOK * m->cfg.n_vocab;
    float *fused = malloc(n * sizeof *fused), *single = malloc(n * sizeof *single);
    CHECK(fused && single);
    if (fused && single) {
        setenv("EVICTBENCH_CPU_FUSED", "0", 1);
        long jobs_single = run_all(m, single);
        setenv("EVICTBENCH_CPU_FUSED", fused_mode, 1);
        long jobs_fused = run_all(m, fused);
        unsetenv("EVICTBENCH_CPU_FUSED");
        CHECK(jobs_fused > 0 || threads == 1);
        size_t diff = 0;
        for (size_t i = 0; i < n; i++) diff += memcmp(&fused[i], &single[i], sizeof *fused) != 0;
        CHECK_MSG(diff == 0, "%s, %d threads: %zu of %zu logits differ fused vs single ops", path,
                  threads, diff, n);
        if (threads > 1 && strcmp(fused_mode, "all") != 0)
            CHECK_MSG(jobs_fused < jobs_single, "%s: fused %ld jobs, single ops %ld", path,
                      jobs_fused, jobs_single);
        fprintf(stderr, "  note: %s, %d threads: %ld parallel jobs fused, %ld single ops\n", path,
                threads, jobs_fused, jobs_single);
    }
    free(fused);
    free(single);
done:
    model_free(m);
    if (be) be->destroy(be);
    model_file_close(mf);
}

static void test_fixtures(void)
{
    for (int t = 1; t <= 3; t++) {
        check_file("tests/fixtures/models/tiny-llama-q/model.gguf", t, "all");
        check_file("tests/fixtures/models/tiny-kquant/model.gguf", t, "all");
    }
}

static void test_smollm2(void)
{
    if (!file_exists(SMOL_PATH)) SKIP("%s absent (make deps)", SMOL_PATH);
    else check_file(SMOL_PATH, 2, "1");
}

static void test_qwen15(void)
{
    if (!file_exists(QWEN15_PATH)) SKIP("%s absent (make deps)", QWEN15_PATH);
    else check_file(QWEN15_PATH, 2, "1");
}

int main(void)
{
    RUN(test_fixtures);
    RUN(test_smollm2);
    RUN(test_qwen15);
    return test_summary("layerfuse");
}
