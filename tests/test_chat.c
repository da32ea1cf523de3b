/* test_chat.c - chat templates: the rendered prompt and its token ids must
 * equal what transformers' apply_chat_template gives with the models' own
 * Jinja templates (tests/fixtures/tok/chat.jsonl, tools/golden/gen_tokens.py;
 * qwen2.5: tests/fixtures/tok/qwen25_chat.jsonl, tools/golden/gen_qwen25_chat.py,
 * the GGUF's own template through jinja2 and its vocabulary through the
 * `tokenizers` library). */
#include "test.h"
#include "tok_fixture.h"

#include "model/modelfile.h"
#include "model/model_tokenizer.h"

static void test_parse(void)
{
    enum chat_template tpl;
    struct eb_err e = {0};
    CHECK(chat_template_parse("raw", &tpl, &e) == 0 && tpl == CHAT_RAW);
    CHECK(chat_template_parse("r1", &tpl, &e) == 0 && tpl == CHAT_R1);
    CHECK(chat_template_parse("chatml", &tpl, &e) == 0 && tpl == CHAT_CHATML);
    CHECK(chat_template_parse("qwen3", &tpl, &e) == 0 && tpl == CHAT_QWEN3);
    CHECK(chat_template_parse("qwen2.5", &tpl, &e) == 0 && tpl == CHAT_QWEN25);
    CHECK(chat_template_parse("llama3", &tpl, &e) == -1);
    CHECK(strstr(e.msg, "unknown chat template \"llama3\"") != NULL);
    CHECK(chat_template_parse(NULL, &tpl, &e) == -1);
}

static void test_render(void)
{
    struct eb_err e = {0};
    char *s = chat_render(CHAT_R1, "U", &e);
    CHECK_STR(s, "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C><\xEF\xBD\x9CUser"
                 "\xEF\xBD\x9C>U<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C><think>\n");
    free(s);
    s = chat_render(CHAT_RAW, "just text", &e);
    CHECK_STR(s, "just text");
    free(s);
    s = chat_render(CHAT_CHATML, "Hi", &e);
    CHECK_STR(s, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
                 "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    free(s);
    s = chat_render(CHAT_QWEN3, "Hi", &e);
    CHECK_STR(s, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    free(s);
    CHECK(chat_render((enum chat_template)7, "x", &e) == NULL);
}

/* Every fixture row of one model: render, compare the text, encode, compare ids. */
static void check_template(const char *model, enum chat_template tpl)
{
    char why[512];
    struct tokenizer *t = tok_fixture_load(model, why, sizeof why);
    if (!t && strstr(why, "load failed")) CHECK_MSG(0, "%s", why);
    if (!t) SKIP("%s", why);
    int n;
    cJSON **rows = tok_fixture_jsonl(FIXTURE("tok/chat.jsonl"), &n);
    CHECK(rows != NULL);
    int seen = 0;
    for (int r = 0; r < n; r++) {
        if (strcmp(cJSON_GetObjectItem(rows[r], "model")->valuestring, model) != 0) continue;
        seen++;
        const char *user = cJSON_GetObjectItem(rows[r], "user")->valuestring;
        const char *want = cJSON_GetObjectItem(rows[r], "rendered")->valuestring;
        const cJSON *want_ids = cJSON_GetObjectItem(rows[r], "ids");
        struct eb_err e = {0};
        char *s = chat_render(tpl, user, &e);
        CHECK_STR(s, want);
        int *ids, nids;
        if (!s || tokenizer_encode(t, s, strlen(s), 1, &ids, &nids, &e) != 0) {
            CHECK_MSG(0, "%s", e.msg);
            free(s);
            continue;
        }
        CHECK_MSG(tok_fixture_ids_equal(ids, nids, want_ids), "ids differ for user \"%s\"", user);
        if (tpl == CHAT_R1) {
            /* Exactly one BOS, at the start; the prompt ends <｜Assistant｜><think>\n. */
            int bos = tokenizer_bos(t), n_bos = 0;
            for (int i = 0; i < nids; i++) n_bos += ids[i] == bos;
            CHECK(bos == 151646 && nids >= 4 && ids[0] == bos && n_bos == 1);
            CHECK(ids[nids - 3] == tokenizer_find(t, "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>"));
            CHECK(ids[nids - 3] == 151645 && ids[nids - 2] == 151648 && ids[nids - 1] == 198);
        } else {
            CHECK(ids[0] == tokenizer_find(t, "<|im_start|>") && ids[nids - 1] == 198);
        }
        free(ids);
        free(s);
    }
    CHECK_MSG(seen >= 5, "%d rows for %s", seen, model);
    tok_fixture_free_rows(rows, n);
    tokenizer_free(t);
}

/* qwen2.5: the text always; the ids with each Qwen2.5-Coder GGUF that is present. */
static void test_qwen25(void)
{
    int n;
    cJSON **rows = tok_fixture_jsonl(FIXTURE("tok/qwen25_chat.jsonl"), &n);
    CHECK(rows != NULL && n >= 5);
    if (!rows) return;
    for (int r = 0; r < n; r++) {
        struct eb_err e = {0};
        char *s = chat_render(CHAT_QWEN25, cJSON_GetObjectItem(rows[r], "user")->valuestring, &e);
        CHECK_STR(s, cJSON_GetObjectItem(rows[r], "rendered")->valuestring);
        free(s);
    }
    static const char *const models[] = {"models/qwen2.5-coder-0.5b-instruct.gguf",
                                         "models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"};
    int checked = 0;
    for (int m = 0; m < 2; m++) {
        if (access(models[m], R_OK) != 0) continue;
        struct eb_err e = {0};
        struct model_file *mf = NULL;
        struct tokenizer *t = NULL;
        if (model_file_open(models[m], &mf, &e) || model_file_tokenizer(mf, &t, &e)) {
            CHECK_MSG(0, "%s: %s", models[m], e.msg);
            model_file_close(mf);
            continue;
        }
        checked++;
        for (int r = 0; r < n; r++) {
            const char *user = cJSON_GetObjectItem(rows[r], "user")->valuestring;
            int *ids = NULL, nids = 0;
            CHECK_MSG(chat_encode(t, CHAT_QWEN25, user, &ids, &nids, &e) == 0, "%s", e.msg);
            CHECK_MSG(tok_fixture_ids_equal(ids, nids, cJSON_GetObjectItem(rows[r], "ids")),
                      "%s: ids differ for user \"%s\"", models[m], user);
            free(ids);
        }
        tokenizer_free(t);
        model_file_close(mf);
    }
    tok_fixture_free_rows(rows, n);
    if (!checked) SKIP("no Qwen2.5-Coder GGUF in models/ (make deps MODELS=qwen2.5-coder-0.5b): ids not checked");
}

/* raw: the text as given, special tokens matched, through chat_encode as
 * generate, run and calibrate encode it (the tokenizer fixture of SmolLM2). */
static void test_raw_parses_special(void)
{
    char why[512];
    struct tokenizer *t = tok_fixture_load("smollm2", why, sizeof why);
    if (!t && strstr(why, "load failed")) CHECK_MSG(0, "%s", why);
    if (!t) SKIP("%s", why);
    struct eb_err e = {0};
    int *ids = NULL, nids = 0;
    CHECK(chat_encode(t, CHAT_RAW, "<|im_start|>user\nHi<|im_end|>", &ids, &nids, &e) == 0);
    int start = tokenizer_find(t, "<|im_start|>"), end = tokenizer_find(t, "<|im_end|>");
    CHECK(start >= 0 && end >= 0);
    CHECK_MSG(nids == 5 && ids[0] == start && ids[4] == end, "%d ids", nids);
    free(ids);
    tokenizer_free(t);
}

static void test_r1(void) { check_template("r1-qwen", CHAT_R1); }
static void test_chatml(void) { check_template("smollm2", CHAT_CHATML); }

int main(void)
{
    RUN(test_parse);
    RUN(test_render);
    RUN(test_r1);
    RUN(test_chatml);
    RUN(test_qwen25);
    RUN(test_raw_parses_special);
    return test_summary("chat");
}
