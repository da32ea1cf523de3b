/* tok_fixture.h - shared by the tests that read a tokenizer:
 * load a committed reference tokenizer (tests/fixtures/tok/NAME.tokenizer.json.xz,
 * decompressed with the xz tool into a temporary directory next to its
 * tokenizer_config.json), its view for a policy, and read JSONL fixtures. */
#ifndef EB_TOK_FIXTURE_H
#define EB_TOK_FIXTURE_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/exp/model_view.h"   /* token_text_of, sent_tokens_from_tokenizer */
#include "model/tokenizer.h"

/* The policies' view of tok (policy_model.text; NULL for NULL), as the
 * harness builds it: one per tokenizer, kept for the process (the last few
 * tokenizers a test loads). */
static inline const struct token_text *tok_fixture_text(const struct tokenizer *tok)
{
    static struct token_text views[8];
    static int n;
    if (!tok) return NULL;
    for (int i = 0; i < n; i++)
        if (views[i].self == tok) return &views[i];
    if (n == 8) n = 0;
    views[n] = token_text_of(tok);
    return &views[n++];
}

/* Returns NULL with why filled (missing xz or fixture) or the load error. */
static inline struct tokenizer *tok_fixture_load(const char *name, char *why, size_t why_cap)
{
    char xz[256], cfg[256], dir[] = "/tmp/eb_tok_XXXXXX", cmd[2048], json[512];
    snprintf(xz, sizeof xz, "tests/fixtures/tok/%s.tokenizer.json.xz", name);
    snprintf(cfg, sizeof cfg, "tests/fixtures/tok/%s.tokenizer_config.json", name);
    if (access(xz, R_OK) != 0) { snprintf(why, why_cap, "%s missing", xz); return NULL; }
    if (system("command -v xz >/dev/null 2>&1") != 0) {
        snprintf(why, why_cap, "the xz tool is not installed (needed to unpack %s)", xz);
        return NULL;
    }
    if (!mkdtemp(dir)) { snprintf(why, why_cap, "mkdtemp failed"); return NULL; }
    snprintf(json, sizeof json, "%s/tokenizer.json", dir);
    snprintf(cmd, sizeof cmd, "xz -dc '%s' > '%s' && cp '%s' '%s/tokenizer_config.json'", xz, json,
             cfg, dir);
    struct tokenizer *t = NULL;
    if (system(cmd) != 0) {
        snprintf(why, why_cap, "unpacking %s failed", xz);
    } else {
        struct eb_err e = {0};
        if (tokenizer_from_json(json, &t, &e) != 0) snprintf(why, why_cap, "load failed: %.400s", e.msg);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "  (could not remove %s)\n", dir);
    return t;
}

/* All lines of a JSONL file parsed; *n set.  NULL if the file is unreadable. */
static inline cJSON **tok_fixture_jsonl(const char *path, int *n)
{
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    cJSON **rows = NULL;
    int cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) > 0) {
        cJSON *j = cJSON_ParseWithLength(line, (size_t)len);
        if (!j) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            rows = realloc(rows, (size_t)cap * sizeof *rows);
        }
        rows[(*n)++] = j;
    }
    free(line);
    fclose(f);
    return rows;
}

static inline void tok_fixture_free_rows(cJSON **rows, int n)
{
    for (int i = 0; i < n; i++) cJSON_Delete(rows[i]);
    free(rows);
}

/* Compare ids with a JSON array of numbers. */
static inline int tok_fixture_ids_equal(const int *ids, int n, const cJSON *arr)
{
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != n) return 0;
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, arr) {
        if (!cJSON_IsNumber(v) || v->valueint != ids[i]) return 0;
        i++;
    }
    return 1;
}

static inline void tok_fixture_print_ids(const char *label, const int *ids, int n)
{
    fprintf(stderr, "    %s:", label);
    for (int i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "%s\n", n > 40 ? " ..." : "");
}

#endif
