/* pretok.c - pre-tokenizer scanners.  Each alternative of the regex is tried
 * in order at the current position, exactly as a backtracking regex engine
 * picks the first alternative that matches (leftmost-first, not longest). */
#include "pretok.h"

#include "unicode.h"

/* Code point at s[i] (text is valid UTF-8) and its byte length in *n. */
static unsigned int cp_at(const unsigned char *s, size_t len, size_t i, size_t *n)
{
    unsigned int cp = 0;
    int k = utf8_decode(s + i, len - i, &cp);
    if (k == 0) { *n = 1; return 0xFFFD; } /* unreachable for validated text */
    *n = (size_t)k;
    return cp;
}

static int is_crlf(unsigned int cp) { return cp == '\r' || cp == '\n'; }

static int is_other(unsigned int cp) /* [^\s\p{L}\p{N}] */
{
    return !unicode_is_space(cp) && !unicode_is_letter(cp) && !unicode_is_number(cp);
}

/* The seven English contractions after an apostrophe at s[i]; 0 if none.
 * fold: match case-insensitively as (?i:...) does (U+017F LONG S folds to s). */
static size_t contraction(const unsigned char *s, size_t lim, size_t i, int fold)
{
    if (s[i] != '\'' || i + 1 >= lim) return 0;
    size_t n1;
    unsigned int c1 = cp_at(s, lim, i + 1, &n1);
    if (fold) {
        if (c1 < 0x80) c1 = (unsigned int)(c1 | 0x20) ;
        else if (c1 == 0x17F) c1 = 's';
        if (c1 < 'a' || c1 > 'z') return 0;
    }
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 1 + n1;
    if (c1 != 'r' && c1 != 'v' && c1 != 'l') return 0;
    if (i + 1 + n1 >= lim) return 0;
    unsigned int c2 = s[i + 1 + n1];
    if (fold && c2 < 0x80) c2 |= 0x20;
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
        return 1 + n1 + 1;
    return 0;
}

/* End of the run of characters satisfying pred starting at j. */
static size_t run_end(const unsigned char *s, size_t lim, size_t j, int (*pred)(unsigned int))
{
    while (j < lim) {
        size_t n;
        unsigned int cp = cp_at(s, lim, j, &n);
        if (!pred(cp)) break;
        j += n;
    }
    return j;
}

/* \s*[\r\n]+ | \s+(?!\S) | \s+  at i (s[i] is whitespace).  crlf_rule:
 * whether the \s*[\r\n]+ alternative exists (Qwen2 / Llama 3, not GPT-2). */
static size_t whitespace(const unsigned char *s, size_t lim, size_t i, int crlf_rule)
{
    size_t e = i, last_start = i, last_nl = (size_t)-1;
    while (e < lim) {
        size_t n;
        unsigned int cp = cp_at(s, lim, e, &n);
        if (!unicode_is_space(cp)) break;
        if (is_crlf(cp)) last_nl = e;
        last_start = e;
        e += n;
    }
    if (crlf_rule && last_nl != (size_t)-1) return last_nl + 1;
    if (e == lim) return e;                /* (?!\S) holds at the end */
    if (last_start > i) return last_start; /* give the last space to the next word */
    return e;                              /* a lone space before a non-space: \s+ */
}

static size_t scan_qwen_llama(const unsigned char *s, size_t lim, size_t i, int max_digits)
{
    size_t n1, k;
    unsigned int c = cp_at(s, lim, i, &n1);

    if ((k = contraction(s, lim, i, 1)) != 0) return i + k;

    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    size_t j = i;
    if (!unicode_is_letter(c) && !is_crlf(c) && !unicode_is_number(c)) j = i + n1;
    if (j < lim) {
        size_t n;
        if (unicode_is_letter(cp_at(s, lim, j, &n))) return run_end(s, lim, j, unicode_is_letter);
    }

    /* \p{N} or \p{N}{1,3} */
    if (unicode_is_number(c)) {
        size_t e = i + n1;
        for (int d = 1; d < max_digits && e < lim; d++) {
            size_t n;
            if (!unicode_is_number(cp_at(s, lim, e, &n))) break;
            e += n;
        }
        return e;
    }

    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    j = (c == ' ') ? i + 1 : i;
    size_t e = run_end(s, lim, j, is_other);
    if (e > j) {
        while (e < lim && (s[e] == '\r' || s[e] == '\n')) e++;
        return e;
    }

    return whitespace(s, lim, i, 1);
}

static size_t scan_gpt2(const unsigned char *s, size_t lim, size_t i)
{
    size_t n1, k;
    unsigned int c = cp_at(s, lim, i, &n1);

    if ((k = contraction(s, lim, i, 0)) != 0) return i + k;

    /*  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+  */
    size_t j = (c == ' ') ? i + 1 : i;
    if (j < lim) {
        size_t n;
        unsigned int d = cp_at(s, lim, j, &n);
        if (unicode_is_letter(d)) return run_end(s, lim, j, unicode_is_letter);
        if (unicode_is_number(d)) return run_end(s, lim, j, unicode_is_number);
        if (is_other(d)) return run_end(s, lim, j, is_other);
    }
    return whitespace(s, lim, i, 0);
}

void pretok_begin(struct pretok_iter *it, enum pretok_kind kind, const char *s, size_t len)
{
    it->kind = kind;
    it->s = (const unsigned char *)s;
    it->len = len;
    it->pos = 0;
    it->limit = 0;
}

int pretok_next(struct pretok_iter *it, size_t *start, size_t *end)
{
    size_t i = it->pos;
    if (i >= it->len) return 0;
    size_t e;
    switch (it->kind) {
    case PRETOK_QWEN2: e = scan_qwen_llama(it->s, it->len, i, 1); break;
    case PRETOK_LLAMA3: e = scan_qwen_llama(it->s, it->len, i, 3); break;
    case PRETOK_GPT2: e = scan_gpt2(it->s, it->len, i); break;
    default: { /* PRETOK_SMOLLM */
        size_t n;
        if (unicode_is_number(cp_at(it->s, it->len, i, &n))) { e = i + n; break; }
        if (it->limit <= i) { /* find the end of this digit-free stretch */
            size_t j = i;
            while (j < it->len && !unicode_is_number(cp_at(it->s, it->len, j, &n))) j += n;
            it->limit = j;
        }
        e = scan_gpt2(it->s, it->limit, i);
        break;
    }
    }
    *start = i;
    *end = e;
    it->pos = e;
    return 1;
}
