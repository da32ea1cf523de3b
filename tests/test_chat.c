/* test_chat.c - chat templates: the rendered prompt and its token ids must
 * equal what transformers' apply_chat_template gives with the models' own
 * Jinja templates (tests/fixtures/tok/chat.jsonl, tools/golden/gen_tokens.py). */
#include "test.h"
#include "tok_fixture.h"

static void test_parse(void)
{
    enum chat_template tpl;
    struct eb_err e = {0};
    CHECK(chat_template_parse("raw", &tpl, &e) == 0 && tpl == CHAT_RAW);
    CHECK(chat_template_parse("r1", &tpl, &e) == 0 && tpl == CHAT_R1);
    CHECK(chat_template_parse("chatml", &tpl, &e) == 0 && tpl == CHAT_CHATML);
    CHECK(chat_template_parse("qwen3", &tpl, &e) == 0 && tpl == CHAT_QWEN3);
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

static void test_r1(void) { check_template("r1-qwen", CHAT_R1); }
static void test_chatml(void) { check_template("smollm2", CHAT_CHATML); }

int main(void)
{
    RUN(test_parse);
    RUN(test_render);
    RUN(test_r1);
    RUN(test_chatml);
    return test_summary("chat");
}
