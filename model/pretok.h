/* pretok.h - the pre-tokenizers, as hand-written scanners equivalent to the
 * split regexes of Hugging Face tokenizers (no regex engine).
 *
 *   PRETOK_QWEN2   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
 *                  | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   PRETOK_LLAMA3  the same with \p{N}{1,3}
 *   PRETOK_GPT2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   PRETOK_SMOLLM  every \p{N} character isolated first, then PRETOK_GPT2 on
 *                  each stretch between digits. */
#ifndef EB_PRETOK_H
#define EB_PRETOK_H

#include <stddef.h>

enum pretok_kind { PRETOK_QWEN2, PRETOK_LLAMA3, PRETOK_GPT2, PRETOK_SMOLLM };

/* Iterates the pre-tokens of s[0..len), which must be valid UTF-8. */
struct pretok_iter {
    enum pretok_kind kind;
    const unsigned char *s;
    size_t len;
    size_t pos;
    size_t limit; /* end of the current digit-free stretch (SMOLLM only) */
};

void pretok_begin(struct pretok_iter *it, enum pretok_kind kind, const char *s, size_t len);
/* Next pre-token as [*start, *end); returns 0 when the text is exhausted. */
int pretok_next(struct pretok_iter *it, size_t *start, size_t *end);

#endif
