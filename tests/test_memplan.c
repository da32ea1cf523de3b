/* test_memplan.c - the memory plan is what gets allocated.  For every
 * registered policy at batch 1, 16 and 64, a whole generate runs on a
 * tallying backend (kernels/backend_tally.c, allocations rounded as the CUDA
 * pool rounds them) and generate_plan's device bytes must cover the peak the
 * generate allocated, and exceed it by at most 5%:
 *   - on tiny-qwen2 over the real CPU backend (every op computed);
 *   - on the DeepSeek-R1-Distill-Qwen-7B shape, tally-only (no memory is
 *     touched: the ops do nothing and downloads read zeros), which is where
 *     the batch-32+ out-of-memory came from.
 * The tally-only backend has no batched eviction ops, so the 7B shape
 * plans the per-sequence path; tiny-qwen2 plans the batched one (its
 * scratch, policy_glue_scratch_bytes).  A policy that cannot be opened here
 * is said. */
#include "test.h"
#include "test_util.h"
#include "tok_fixture.h"
#include "policies/steering.h"

#include <unistd.h>

enum { PROMPT = 64, NEW = 160, BUDGET = 128 }; /* a multiple of VaSE's window; several compressions */

static struct tokenizer *tok; /* r1-qwen's, for the policies that read token text */

/* A steering vector for m's shape (SEAL and SkipKV's steering need one):
 * written to path, which the caller removes. */
static int write_vector(const struct model *m, char *path)
{
    struct eb_err e;
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    close(fd);
    struct steer_vector sv;
    memset(&sv, 0, sizeof sv);
    sv.version = STEER_VERSION;
    sv.layer = m->cfg.n_layer / 2;
    sv.dim = m->cfg.n_embd;
    if (steering_model_identity(&m->cfg, sv.model_identity, sizeof sv.model_identity, &e)) return -1;
    sv.v = calloc((size_t)sv.dim, sizeof *sv.v);
    if (!sv.v) return -1;
    for (int i = 0; i < sv.dim; i++) sv.v[i] = 0.01f;
    int rc = steer_vector_save(path, &sv, &e);
    free(sv.v);
    return rc;
}

/* One generate of `batch` copies of a prompt under `spec` (NULL: FullKV):
 * 1 and the reason on stderr when the policy cannot be opened here. */
static int plan_one(struct model *m, const char *spec, const char *vector, int batch,
                    enum kv_type kv_type, const char *label)
{
    struct eb_err e;
    struct session_policy sp = {0};
    struct gen_hooks hooks;
    /* Every prompt in one forward, so every sequence is due for compression
     * at the same step: the batched path's scratch at its largest. */
    struct gen_options opt = {.ignore_eos = 1, .kv_type = kv_type, .prefill_chunk = batch * PROMPT,
                              .mem_limit = (size_t)1 << 50}; /* the plan decides, not RAM */
    int *prompt = malloc(PROMPT * sizeof *prompt);
    struct gen_request *req = calloc((size_t)batch, sizeof *req);
    struct gen_result *res = calloc((size_t)batch, sizeof *res);
    if (!prompt || !req || !res) {
        free(prompt), free(req), free(res);
        CHECK_MSG(0, "out of memory");
        return 0;
    }
    size_t base = backend_tally_read(m->be).live; /* before the policy's own buffers */
    for (int i = 0; i < PROMPT; i++) prompt[i] = 5 + (i * 7) % 50;
    for (int i = 0; i < batch; i++)
        req[i] = (struct gen_request){prompt, PROMPT, NEW, sampler_params_greedy()};
    if (spec) {
        if (open_test_policy_vector(m, tok, spec, BUDGET, vector, &sp, &e) ||
            session_policy_glue(&sp, m, &e)) {
            printf("  %s: %s not planned here: %s\n", label, spec, e.msg);
            session_policy_close(&sp);
            free(prompt), free(req), free(res);
            return 1;
        }
        session_policy_hooks(&sp, NULL, &hooks);
        opt.hooks = &hooks;
    }
    struct gen_mem_plan plan;
    generate_plan(&m->cfg, m->weight_bytes, req, batch, &opt, &plan);
    struct backend_tally_usage before = backend_tally_read(m->be);
    backend_tally_reset_peak(m->be);
    int rc = generate(m, req, batch, &opt, res, NULL, &e);
    CHECK_MSG(rc == 0, "%s %s batch %d: %s", label, spec ? spec : "fullkv", batch, e.msg);
    struct backend_tally_usage after = backend_tally_read(m->be);
    size_t used = after.peak - before.live;
    if (getenv("MEMPLAN_DEBUG"))
        printf("  %s %s b%d: kv %zu fwd %zu probs %zu hooks %zu = %zu; used %zu left %zu\n", label,
               spec ? spec : "fullkv", batch, plan.kv, plan.forward, plan.probs, plan.hooks,
               plan.device, used, after.live - before.live);
    CHECK_MSG(plan.device >= used, "%s %s batch %d: the plan's %zu device bytes miss %zu (%zu "
              "allocated)", label, spec ? spec : "fullkv", batch, plan.device, used - plan.device,
              used);
    /* The plan holds a policy's scratch for its compressions; a tiny
     * model's short context may end before a policy's first one. */
    long compressions = 0;
    if (sp.glue) {
        struct policy_glue_stats ps;
        policy_glue_stats(sp.glue, &ps);
        compressions = ps.compressions;
    }
    int over = (double)plan.device > 1.05 * (double)used;
    if (over && spec && compressions == 0 && plan.hooks > 0)
        printf("  %s %s batch %d: no compression in %d tokens (plan %zu, allocated %zu)\n", label,
               spec, batch, NEW, plan.device, used);
    else
    CHECK_MSG((double)plan.device <= 1.05 * (double)used,
              "%s %s batch %d: the plan's %zu device bytes exceed the %zu allocated by %.1f%%",
              label, spec ? spec : "fullkv", batch, plan.device, used,
              100.0 * ((double)plan.device / (double)used - 1.0));
    if (rc == 0) gen_results_free(res, batch);
    session_policy_close(&sp); /* a policy keeps its scratch until it is closed */
    CHECK_MSG(backend_tally_read(m->be).live == base, "%s %s batch %d: %zu bytes left "
              "allocated", label, spec ? spec : "fullkv", batch,
              backend_tally_read(m->be).live - base);
    free(prompt), free(req), free(res);
    return 0;
}

static void plan_every_policy(struct model *m, const int *batches, int n_batches,
                              enum kv_type kv_type, const char *label)
{
    int n;
    const struct policy_entry *reg = policy_registry(&n);
    int skipped = 0;
    char vector[] = "/tmp/eb_memplan_vec_XXXXXX";
    CHECK(write_vector(m, vector) == 0);
    for (int b = 0; b < n_batches; b++) {
        plan_one(m, NULL, vector, batches[b], kv_type, label);
        for (int i = 0; i < n; i++)
            skipped += plan_one(m, reg[i].name, vector, batches[b], kv_type, label);
    }
    unlink(vector);
    printf("  %s: %d policies x %d batch sizes planned (%d not openable here)\n",
           label, n + 1, n_batches, skipped / n_batches);
}

static void test_tiny_model_every_policy(void)
{
    struct backend *be = backend_tally_create(backend_cpu_create(1));
    CHECK(be != NULL);
    struct model *m = open_model_weights(be, "tests/fixtures/models/tiny-qwen2/model.gguf",
                                         MODEL_WEIGHTS_NATIVE);
    if (!m) {
        be->destroy(be);
        SKIP("tiny-qwen2 fixture missing");
    }
    static const int batches[] = {1, 16, 64};
    plan_every_policy(m, batches, 3, KV_F32, "tiny-qwen2 f32");
    static const int one[] = {16};
    plan_every_policy(m, one, 1, KV_BF16, "tiny-qwen2 bf16");
    model_free(m);
    be->destroy(be);
}

static void test_qwen7b_shape_tally_only(void)
{
    struct backend *be = backend_tally_create(NULL);
    CHECK(be != NULL);
    struct model_config c;
    CHECK(model_shape_config("qwen7b", &c) == 0);
    struct model *m = be ? model_shape_create(be, &c) : NULL;
    CHECK(m != NULL);
    if (!m) return;
    static const int batches[] = {1, 16, 64};
    plan_every_policy(m, batches, 3, KV_BF16, "qwen7b-shape bf16");
    model_free(m);
    be->destroy(be);
}

/* The tally itself: forwarded ops still compute, sizes are the pool's. */
static void test_tally_counts_rounded_blocks(void)
{
    struct backend *be = backend_tally_create(backend_cpu_create(1));
    float *a = be->alloc(be, 3), *b = be->alloc(be, 100);
    struct backend_tally_usage u = backend_tally_read(be);
    CHECK(u.live == 3 * BACKEND_ALLOC_ALIGN && u.allocs == 2); /* 12 -> 256, 400 -> 512 */
    float h[3] = {1, 2, 3}, back[3] = {0};
    be->upload(be, a, h, 3);
    be->download(be, back, a, 3);
    CHECK(back[2] == 3.0f);
    be->free(be, a);
    CHECK(backend_tally_read(be).live == 2 * BACKEND_ALLOC_ALIGN);
    CHECK(backend_tally_read(be).peak == 3 * BACKEND_ALLOC_ALIGN);
    be->free(be, b);
    be->destroy(be);
    struct backend *none = backend_tally_create(NULL);
    float *big = none->alloc(none, (size_t)1 << 34); /* 64 GiB of address space, untouched */
    CHECK(big != NULL);
    CHECK(backend_tally_read(none).live == ((size_t)1 << 36));
    none->free(none, big);
    none->destroy(none);
}

int main(void)
{
    char why[512] = "";
    tok = tok_fixture_load("r1-qwen", why, sizeof why);
    if (!tok) printf("  (no tokenizer: %s; policies that read token text are not planned)\n", why);
    RUN(test_tally_counts_rounded_blocks);
    RUN(test_tiny_model_every_policy);
    RUN(test_qwen7b_shape_tally_only);
    tokenizer_free(tok);
    return test_summary("test_memplan");
}
