/* chat.c - the chat templates, rendered for one user message with the
 * generation prompt, as text to encode with parse_special=1.
 *
 * r1:     DeepSeek-R1-Distill's updated template: BOS, <｜User｜>, the message,
 *         <｜Assistant｜><think>\n.  BOS is part of the text because encode
 *         never adds one (adding one too would give two).
 * chatml: SmolLM2-135M-Instruct's own template, which inserts this default
 *         system message when the conversation has none.
 * qwen3:  ChatML without a system message: Qwen3's template adds none, and in
 *         thinking mode (its default) the generation prompt is the bare
 *         assistant header; the model opens <think> itself.
 * qwen2.5: Qwen2.5(-Coder)-Instruct's template (tokenizer.chat_template in
 *         their GGUF files), which inserts this default system message when
 *         the conversation has none; no thinking mode.
 * raw:    the message as it is, special tokens written in it included.
 *
 * chat_encode renders and encodes in one step, so that every caller parses
 * the special tokens of the rendered text the same way. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

static const char R1_PREFIX[] = "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"
                                "<\xEF\xBD\x9CUser\xEF\xBD\x9C>";
static const char R1_SUFFIX[] = "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C><think>\n";
static const char CHATML_PREFIX[] =
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n<|im_start|>user\n";
static const char CHATML_SUFFIX[] = "<|im_end|>\n<|im_start|>assistant\n";
static const char QWEN3_PREFIX[] = "<|im_start|>user\n";
static const char QWEN25_PREFIX[] =
    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    "<|im_end|>\n<|im_start|>user\n";

int chat_template_parse(const char *name, enum chat_template *out, struct eb_err *e)
{
    if (name && strcmp(name, "raw") == 0) { *out = CHAT_RAW; return 0; }
    if (name && strcmp(name, "r1") == 0) { *out = CHAT_R1; return 0; }
    if (name && strcmp(name, "chatml") == 0) { *out = CHAT_CHATML; return 0; }
    if (name && strcmp(name, "qwen3") == 0) { *out = CHAT_QWEN3; return 0; }
    if (name && strcmp(name, "qwen2.5") == 0) { *out = CHAT_QWEN25; return 0; }
    return eb_fail(e, "unknown chat template \"%.64s\" (known: raw, r1, chatml, qwen3, qwen2.5)",
                   name ? name : "");
}

char *chat_render(enum chat_template tpl, const char *user_text, struct eb_err *e)
{
    const char *pre, *post;
    switch (tpl) {
    case CHAT_RAW: pre = ""; post = ""; break;
    case CHAT_R1: pre = R1_PREFIX; post = R1_SUFFIX; break;
    case CHAT_CHATML: pre = CHATML_PREFIX; post = CHATML_SUFFIX; break;
    case CHAT_QWEN3: pre = QWEN3_PREFIX; post = CHATML_SUFFIX; break;
    case CHAT_QWEN25: pre = QWEN25_PREFIX; post = CHATML_SUFFIX; break;
    default: eb_fail(e, "chat template %d out of range", (int)tpl); return NULL;
    }
    if (!user_text) user_text = "";
    size_t a = strlen(pre), b = strlen(user_text), c = strlen(post);
    char *out = eb_malloc(a + b + c + 1, e);
    if (!out) return NULL;
    memcpy(out, pre, a);
    memcpy(out + a, user_text, b);
    memcpy(out + a + b, post, c + 1);
    return out;
}

int chat_encode(const struct tokenizer *tok, enum chat_template tpl, const char *user_text,
                int **ids, int *n, struct eb_err *e)
{
    char *rendered = chat_render(tpl, user_text, e);
    if (!rendered) return -1;
    int rc = tokenizer_encode(tok, rendered, strlen(rendered), 1, ids, n, e);
    free(rendered);
    return rc;
}
