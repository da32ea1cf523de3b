/* prompt.c - the named prompt templates and batching names of configs (see config.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/exp/config.h"
#define BOXED "Please reason step by step, and put your final answer within \\boxed{}."
#define SEAL_PREFIX "Answer the following questions. You should think step-by-step and put " \
                    "your final answer within \\boxed{}.\nQuestion: "

static const struct prompt_template TEMPLATES[] = {
    {"r1-boxed", "r1", 0, "{problem}\n" BOXED,
     "R1 chat template, problem then the DeepSeek-R1 boxed instruction (default)"},
    {"chatml-boxed", "chatml", 0, "{problem}\n" BOXED,
     "ChatML (SmolLM2-style) template with the same user text"},
    {"qwen3-boxed", "qwen3", 0, "{problem}\n" BOXED,
     "Qwen3 template (ChatML, no system message, thinking mode) with the same user text"},
    {"qwen2.5-boxed", "qwen2.5", 0, "{problem}\n" BOXED,
     "Qwen2.5-Instruct template (ChatML, its default system line) with the same user text"},
    {"seal", "r1", 0, SEAL_PREFIX "{problem}",
     "R1 chat template with the SEAL / SkipKV user message"},
    {"chatml-seal", "chatml", 0, SEAL_PREFIX "{problem}",
     "ChatML (SmolLM2-style) template with the SEAL / SkipKV user message (the prompt "
     "`evictbench calibrate` uses for such models)"},
    {"rkv", "raw", 1,
     "You are given a math problem.\n\nProblem: {problem}\n\n You need to solve the problem step "
     "by step. First, you need to provide the chain-of-thought, then provide the final answer.\n\n"
     " Provide the final answer in the format: Final answer:  \\boxed{}",
     "R-KV run_math.py raw prompt, no chat template, BOS added"},
};

const struct prompt_template *prompt_templates(int *n)
{
    *n = (int)(sizeof TEMPLATES / sizeof TEMPLATES[0]);
    return TEMPLATES;
}

const struct prompt_template *prompt_template_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof TEMPLATES / sizeof TEMPLATES[0]; i++)
        if (!strcmp(TEMPLATES[i].name, name)) return &TEMPLATES[i];
    return NULL;
}

char *prompt_user_text(const struct prompt_template *t, const char *problem)
{
    const char *hole = strstr(t->user, "{problem}");
    size_t a = hole ? (size_t)(hole - t->user) : strlen(t->user);
    size_t b = strlen(problem);
    const char *rest = hole ? hole + strlen("{problem}") : "";
    size_t c = strlen(rest);
    char *out = malloc(a + b + c + 1);
    if (!out) return NULL;
    memcpy(out, t->user, a);
    memcpy(out + a, problem, b);
    memcpy(out + a + b, rest, c + 1);
    return out;
}

char *prompt_template_key(const struct prompt_template *t)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "chat", t->chat);
    cJSON_AddBoolToObject(o, "bos", t->add_bos);
    cJSON_AddStringToObject(o, "user", t->user);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static const char *const BATCHING_NAMES[] = {"padded", "grouped", "ragged", "continuous"};

const char *batching_name(enum exp_batching b)
{
    return (unsigned)b < 4 ? BATCHING_NAMES[b] : "?";
}

int batching_parse(const char *s, enum exp_batching *out)
{
    for (int i = 0; s && i < 4; i++)
        if (!strcmp(s, BATCHING_NAMES[i])) { *out = (enum exp_batching)i; return 0; }
    return -1;
}
