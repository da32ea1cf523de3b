/* tokenizer.h - byte-level BPE, exactly as Hugging Face tokenizers does it.
 *
 * Built from GGUF metadata (tokenizer.ggml.*) or from a tokenizer.json.
 * Pre-tokenizers: "qwen2"/"deepseek-r1-qwen" (digits one by one), "llama-bpe"
 * (Llama 3: digits in runs of <= 3, ignore_merges), "smollm" (SmolLM2: digits
 * isolated, then the GPT-2 split), "gpt2".  An unknown pre-tokenizer is an error.
 * Text outside added tokens is NFC-normalized for qwen2/deepseek-r1-qwen (their
 * tokenizer.json says so; from a tokenizer.json, whatever its normalizer says). */
#ifndef EB_TOKENIZER_H
#define EB_TOKENIZER_H

#include <stddef.h>

#include "../util/err.h"

struct gguf_file;
struct tokenizer;

int tokenizer_from_gguf(const struct gguf_file *g, struct tokenizer **out, struct eb_err *e);
int tokenizer_from_json(const char *path, struct tokenizer **out, struct eb_err *e);
/* The same from JSON text in memory (name labels errors); BOS/EOS stay -1
 * since they live in tokenizer_config.json, which tokenizer_from_json reads
 * from beside path when present. */
int tokenizer_from_json_text(const char *json, size_t len, const char *name,
                             struct tokenizer **out, struct eb_err *e);
void tokenizer_free(struct tokenizer *t);

int tokenizer_n_vocab(const struct tokenizer *t);
const char *tokenizer_pre_name(const struct tokenizer *t);
int tokenizer_bos(const struct tokenizer *t); /* -1 if none */
int tokenizer_eos(const struct tokenizer *t); /* -1 if none */

/* Encode len bytes of UTF-8 text.  parse_special: match added/special tokens
 * (control and user-defined, e.g. "<|im_start|>", "<think>") atomically before
 * BPE, leftmost then longest; with 0 no added token is matched and such text is
 * plain text.  Never adds BOS.  *ids is malloc'd (caller frees, also when
 * *n_ids is 0).  Invalid UTF-8 is an error.  A byte whose own token the
 * vocabulary lacks (SmolLM2 has none for some control bytes) is dropped, as
 * Hugging Face does. */
int tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, int parse_special,
                     int **ids, int *n_ids, struct eb_err *e);

/* Raw bytes of one token (byte-level mapping undone; specials as their text). */
const char *tokenizer_token_bytes(const struct tokenizer *t, int id, size_t *len);
/* Token id of an exact token string (vocab form, e.g. "<|im_end|>"), or -1. */
int tokenizer_find(const struct tokenizer *t, const char *token_text);

/* Decode a whole sequence to a malloc'd NUL-terminated string. */
int tokenizer_decode(const struct tokenizer *t, const int *ids, int n, char **out, size_t *out_len,
                     struct eb_err *e);

/* Streaming decode: feed token by token; only complete UTF-8 characters are
 * emitted, so a character split across tokens is never corrupted. */
struct utf8_stream {
    unsigned char pending[8];
    int n_pending;
};
/* Appends the complete characters among the pending and new bytes to out and
 * returns how many bytes it wrote; bytes that can never form a character become
 * U+FFFD (3 bytes each), so cap = 3 * len + 16 always suffices (output that
 * does not fit is cut, never written past cap). */
size_t utf8_stream_feed(struct utf8_stream *s, const char *bytes, size_t len, char *out, size_t cap);
/* Flush whatever is pending at end of stream (an unfinished character becomes
 * one U+FFFD); cap >= 3. */
size_t utf8_stream_finish(struct utf8_stream *s, char *out, size_t cap);

/* Chat templates. */
enum chat_template { CHAT_RAW = 0, CHAT_R1 = 1, CHAT_CHATML = 2, CHAT_QWEN3 = 3, CHAT_QWEN25 = 4 };
/* "raw" | "r1" | "chatml" | "qwen3" | "qwen2.5" -> template; -1 (with e set) if unknown. */
int chat_template_parse(const char *name, enum chat_template *out, struct eb_err *e);
/* Render one user message with the generation prompt, as text to encode with
 * parse_special=1:  r1: "<｜begin▁of▁sentence｜><｜User｜>U<｜Assistant｜><think>\n"
 * chatml: "<|im_start|>system\n...<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
 * (SmolLM2's: the system line exactly as its own template writes it when absent, see chat.c)
 * qwen3:  "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n" (ChatML with no system
 * message, as Qwen3's template writes one user turn in thinking mode).
 * qwen2.5: chatml with Qwen2.5's default system line "You are Qwen, created by
 * Alibaba Cloud. You are a helpful assistant." (its template's, when absent).
 * raw: U as it is.
 * Returns a malloc'd string. */
char *chat_render(enum chat_template tpl, const char *user_text, struct eb_err *e);
/* chat_render, then tokenizer_encode with parse_special=1: special tokens in
 * the rendered text, the user's included (raw: "<|im_start|>" is one token),
 * are matched for every template.  *ids is malloc'd; 0 or -1 (e set). */
int chat_encode(const struct tokenizer *tok, enum chat_template tpl, const char *user_text,
                int **ids, int *n, struct eb_err *e);

#endif
