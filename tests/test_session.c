/* test_session.c - one session behind every command (harness/exp/session.h).
 *
 * Teacher forcing checked against free-running generation: the replayed
 * trace is the FullKV greedy trace, and the first step where the policy's
 * argmax disagrees is exactly where greedy generation under the policy
 * leaves that trace.  Then the same prompt and policy give the same tokens
 * through the session directly, through the runner (exp/run, generate and
 * fidelity modes) and, on SmolLM2 when present, through `generate`'s CLI
 * code; bench's policy table runs on a session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "harness/cli/cmd_generate.h"
#include "harness/exp/bench_policies.h"
#include "harness/exp/config.h"
#include "harness/exp/runner.h"
#include "harness/exp/session.h"
#include "harness/exp/sweep.h"
#include "test.h"
#include "test_util.h"

#define TINY "tests/fixtures/models/tiny-llama"
#define SMOL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define SPEC "h2o"
enum { BUDGET = 12, MAX_NEW = 40, N_PROMPT = 17 };

static int prompt[N_PROMPT];

static void make_prompt(int n_vocab)
{
    unsigned x = 12345u;
    for (int i = 0; i < N_PROMPT; i++) {
        x = x * 1664525u + 1013904223u;
        prompt[i] = 3 + (int)((x >> 8) % (unsigned)(n_vocab - 3));
    }
}

static int open_spec(struct session *s, const char *spec, int budget, struct session_policy *sp)
{
    const struct policy_entry *entry;
    struct policy_params params;
    struct eb_err e = {0};
    struct policy_request rq = {NULL, &params, budget, NULL, 0};
    if (session_policy_resolve(spec, s->model_name, NULL, budget, 1, &entry, &params, &e) ||
        (rq.entry = entry, session_policy_open(s, &rq, sp, &e))) {
        fprintf(stderr, "  %s: %s\n", spec, e.msg);
        return -1;
    }
    return 0;
}

/* Greedy tokens of the prompt under spec (NULL: FullKV); teacher: replay. */
static int run(struct session *s, const char *spec, int ignore_eos, struct session_teacher *t,
               struct gen_result *res)
{
    struct session_policy sp = {0};
    if (spec && open_spec(s, spec, BUDGET, &sp)) return -1;
    struct gen_request req = {prompt, N_PROMPT, MAX_NEW, sampler_params_greedy()};
    struct session_gen_opts so = {.ignore_eos = ignore_eos, .policy = spec ? &sp : NULL,
                                  .teacher = t};
    struct eb_err e = {0};
    int rc = session_generate(s, &req, 1, &so, res, NULL, &e);
    if (rc) fprintf(stderr, "  generate %s: %s\n", spec ? spec : "fullkv", e.msg);
    session_policy_close(&sp);
    return rc;
}

static void test_teacher_forcing(void)
{
    struct session s;
    struct session_opts o = {NULL, 1, 0};
    session_init(&s, &o);
    struct eb_err e = {0};
    CHECK_MSG(session_model(&s, TINY, MODEL_WEIGHTS_F32, &e) == 0, "%s", e.msg);
    if (!s.m) return;
    make_prompt(s.m->cfg.n_vocab);
    struct gen_result full, pol, rep, rep0;
    double kl = -1, agree = -1, kl0 = -1, agree0 = -1;
    int64_t div = -2, div0 = -2;
    struct session_teacher t = {&kl, &agree, &div}, t0 = {&kl0, &agree0, &div0};
    CHECK(run(&s, NULL, 1, NULL, &full) == 0);
    CHECK(run(&s, SPEC, 1, NULL, &pol) == 0);
    CHECK(run(&s, SPEC, 1, &t, &rep) == 0);
    CHECK(run(&s, NULL, 1, &t0, &rep0) == 0);
    /* the replay is the FullKV trace, under the policy or not */
    CHECK(same_ints(rep.tokens, rep.n_tokens, full.tokens, full.n_tokens));
    CHECK(same_ints(rep0.tokens, rep0.n_tokens, full.tokens, full.n_tokens));
    /* FullKV against itself: nothing differs */
    CHECK(kl0 < 1e-9 && agree0 == 1.0 && div0 == -1);
    /* the policy leaves the trace within MAX_NEW tokens (else this proves nothing) */
    int first = -1;
    for (int i = 0; i < full.n_tokens && first < 0; i++)
        if (pol.tokens[i] != full.tokens[i]) first = i;
    CHECK_MSG(first >= 0, "%s at budget %d never diverged", SPEC, BUDGET);
    CHECK_MSG(div == first, "teacher forcing: first divergence %lld, free-running: %d",
              (long long)div, first);
    CHECK(kl > 0 && agree > 0 && agree < 1);
    gen_results_free(&full, 1);
    gen_results_free(&pol, 1);
    gen_results_free(&rep, 1);
    gen_results_free(&rep0, 1);
    session_close(&s);
}

/* "12 7 99": the runner's text of a model without a tokenizer. */
static void ids_text(const struct gen_result *g, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < g->n_tokens && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? " %d" : "%d", g->tokens[i]);
}

/* One point of a config run by the runner on the prompt; its first sample. */
static int runner_point(const char *json, struct run_output *out)
{
    struct exp_config c;
    struct sweep sw;
    struct runner *r = NULL;
    struct eb_err e = {0};
    struct runner_item it = {"p0", "42", prompt, N_PROMPT};
    struct runner_opts ro = {.threads = 1, .items = &it, .n_items = 1};
    int rc = -1;
    memset(&sw, 0, sizeof sw);
    if (exp_config_parse(json, strlen(json), "t.json", &c, &e)) goto fail;
    if (sweep_expand(&c, NULL, &sw, &e) || sw.n != 1 ||
        runner_create(&ro, &r, &e) || runner_run_point(r, &c, &sw.pts[0], out, &e))
        goto done;
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "  %s\n", e.msg);
    return -1;
done:
    if (rc) fprintf(stderr, "  runner: %s\n", e.msg);
    runner_free(r);
    sweep_free(&sw);
    exp_config_free(&c);
    return rc;
}

static void test_runner_same_tokens(void)
{
    struct session s;
    struct session_opts o = {NULL, 1, 0};
    session_init(&s, &o);
    struct eb_err e = {0};
    CHECK_MSG(session_model(&s, TINY, MODEL_WEIGHTS_F32, &e) == 0, "%s", e.msg);
    if (!s.m) return;
    make_prompt(s.m->cfg.n_vocab);
    struct gen_result pol, rep;
    double kl = 0, agree = 0;
    int64_t div = 0;
    struct session_teacher t = {&kl, &agree, &div};
    CHECK(run(&s, SPEC, 0, NULL, &pol) == 0);
    CHECK(run(&s, SPEC, 0, &t, &rep) == 0);
    char want[4096], cfg[512];
    ids_text(&pol, want, sizeof want);
    snprintf(cfg, sizeof cfg, "{\"models\": \"" TINY "\", \"datasets\": \"synthetic:1\", "
             "\"policies\": {\"name\": \"" SPEC "\", \"budget\": %d}, \"max_new_tokens\": %d}",
             BUDGET, MAX_NEW);
    struct run_output out;
    CHECK(runner_point(cfg, &out) == 0);
    if (out.n_samples == 1)
        CHECK_MSG(!strcmp(out.samples[0].text, want), "runner %s\n  session %s",
                  out.samples[0].text, want);
    else CHECK(out.n_samples == 1);
    run_output_free(&out);
    /* fidelity mode: the runner's numbers are the session's teacher forcing */
    snprintf(cfg, sizeof cfg, "{\"models\": \"" TINY "\", \"datasets\": \"synthetic:1\", "
             "\"mode\": \"fidelity\", \"policies\": {\"name\": \"" SPEC "\", \"budget\": %d}, "
             "\"max_new_tokens\": %d}", BUDGET, MAX_NEW);
    CHECK(runner_point(cfg, &out) == 0);
    if (out.n_samples == 1) {
        const struct sample_record *x = &out.samples[0];
        CHECK(x->kl_mean == kl && x->top1_agree == agree);
        CHECK(x->first_divergence == (div >= 0 ? div : STORE_NONE));
    } else {
        CHECK(out.n_samples == 1);
    }
    run_output_free(&out);
    /* bench's policy table runs on the same session */
    FILE *f = tmpfile();
    CHECK(f && bench_policies_for(&s, "fullkv," SPEC, "12", 16, 24, KV_F32, f, &e) == 0);
    if (f) {
        char buf[4096];
        rewind(f);
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        CHECK_MSG(strstr(buf, "\nfullkv ") && strstr(buf, "\n" SPEC " "), "%s", buf);
        fclose(f);
    }
    gen_results_free(&pol, 1);
    gen_results_free(&rep, 1);
    session_close(&s);
}

/* SmolLM2: `generate --prompts` (its CLI code), the runner and the session
 * give the same text for the same rendered prompt and policy. */
static void test_generate_cli_same_text(void)
{
    if (access(SMOL, R_OK) != 0) SKIP("%s absent (make deps downloads it)", SMOL);
    const char *text = "What is 6 times 7?";
    char in[] = "/tmp/eb_session_XXXXXX";
    int fd = mkstemp(in);
    CHECK(fd >= 0);
    if (fd < 0) return;
    dprintf(fd, "{\"id\": 0, \"prompt\": \"%s\"}\n", text);
    close(fd);
    char out_path[64];
    snprintf(out_path, sizeof out_path, "%s.out", in);
    char *argv[] = {"generate", "--model", SMOL, "--chat", "chatml", "--prompts", in,
                    "--policy", "h2o", "--budget", "24", "--max-new", "20", "--threads", "1",
                    "--out", out_path, NULL};
    CHECK(cmd_generate(17, argv) == 0);
    cJSON *line = read_json(out_path);
    const cJSON *gen = line ? cJSON_GetObjectItemCaseSensitive(line, "text") : NULL;
    CHECK(cJSON_IsString(gen));

    struct session s;
    struct session_opts o = {NULL, 1, 0};
    session_init(&s, &o);
    struct eb_err e = {0};
    int *ids = NULL, n = 0;
    CHECK(session_model(&s, SMOL, MODEL_WEIGHTS_F32, &e) == 0 &&
          session_encode(&s, CHAT_CHATML, 0, text, strlen(text), &ids, &n, &e) == 0);
    struct runner_item it = {"p0", "42", ids, n};
    struct runner_opts ro = {.threads = 1, .items = &it, .n_items = 1};
    struct exp_config c;
    struct sweep sw;
    struct runner *r = NULL;
    struct run_output ro_out;
    memset(&ro_out, 0, sizeof ro_out);
    const char *cfg = "{\"models\": \"" SMOL "\", \"datasets\": \"synthetic:1\", \"prompt\": "
                      "\"chatml-boxed\", \"policies\": {\"name\": \"h2o\", \"budget\": 24}, "
                      "\"max_new_tokens\": 20}";
    CHECK(exp_config_parse(cfg, strlen(cfg), "t.json", &c, &e) == 0 &&
          sweep_expand(&c, NULL, &sw, &e) == 0 &&
          runner_create(&ro, &r, &e) == 0 && runner_run_point(r, &c, &sw.pts[0], &ro_out, &e) == 0);
    if (gen && ro_out.n_samples == 1)
        CHECK_MSG(!strcmp(ro_out.samples[0].text, gen->valuestring), "runner '%s'\n  generate '%s'",
                  ro_out.samples[0].text, gen->valuestring);
    run_output_free(&ro_out);
    runner_free(r);
    sweep_free(&sw);
    exp_config_free(&c);
    free(ids);
    session_close(&s);
    cJSON_Delete(line);
    unlink(in);
    unlink(out_path);
}

int main(void)
{
    if (access(TINY "/config.json", R_OK) != 0) {
        fprintf(stderr, "fixture %s missing\n", TINY);
        return 1;
    }
    RUN(test_teacher_forcing);
    RUN(test_runner_same_tokens);
    RUN(test_generate_cli_same_text);
    return test_summary("session");
}
