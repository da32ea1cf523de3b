/* unicode.c - UTF-8, character classes and NFC over the generated tables in
 * unicode_data.c.  NFC follows UAX #15: full canonical decomposition,
 * canonical ordering by combining class, then canonical composition. */
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

#include "unicode_data.h"

int utf8_decode(const unsigned char *s, size_t len, unsigned int *cp)
{
    if (len == 0) return 0;
    unsigned int c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int n;
    unsigned int min;
    if ((c & 0xE0) == 0xC0) { n = 2; c &= 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { n = 3; c &= 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { n = 4; c &= 0x07; min = 0x10000; }
    else return 0;
    if ((size_t)n > len) return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return n;
}

int utf8_encode(unsigned int cp, unsigned char *out)
{
    if (cp < 0x80) { out[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t utf8_validate(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if (s[i] < 0x80) { i++; continue; }
        unsigned int cp;
        int n = utf8_decode(s + i, len - i, &cp);
        if (n == 0) return i;
        i += (size_t)n;
    }
    return len;
}

static int in_ranges(const struct unicode_range *r, int n, unsigned int cp)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid - 1;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return 1;
    }
    return 0;
}

int unicode_is_letter(unsigned int cp)
{
    if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    return in_ranges(unicode_letters, unicode_letters_count, cp);
}

int unicode_is_number(unsigned int cp)
{
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return in_ranges(unicode_numbers, unicode_numbers_count, cp);
}

int unicode_is_space(unsigned int cp)
{
    switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20:
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
        return 1;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

int unicode_ccc(unsigned int cp)
{
    if (cp < 0x300) return 0;
    int lo = 0, hi = unicode_ccc_runs_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < unicode_ccc_runs[mid].lo) hi = mid - 1;
        else if (cp > unicode_ccc_runs[mid].hi) lo = mid + 1;
        else return unicode_ccc_runs[mid].ccc;
    }
    return 0;
}

/* Hangul syllables decompose and compose algorithmically (UAX #15). */
enum {
    HANGUL_S = 0xAC00, HANGUL_L = 0x1100, HANGUL_V = 0x1161, HANGUL_T = 0x11A7,
    HANGUL_LCOUNT = 19, HANGUL_VCOUNT = 21, HANGUL_TCOUNT = 28,
    HANGUL_NCOUNT = HANGUL_VCOUNT * HANGUL_TCOUNT, HANGUL_SCOUNT = HANGUL_LCOUNT * HANGUL_NCOUNT
};

static const struct unicode_decomp *find_decomp(unsigned int cp)
{
    int lo = 0, hi = unicode_decomps_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < unicode_decomps[mid].cp) hi = mid - 1;
        else if (cp > unicode_decomps[mid].cp) lo = mid + 1;
        else return &unicode_decomps[mid];
    }
    return NULL;
}

/* Appends the full decomposition of cp to out (room for 4 needed); returns count. */
static int decompose(unsigned int cp, unsigned int *out)
{
    if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_SCOUNT) {
        unsigned int s = cp - HANGUL_S;
        out[0] = HANGUL_L + s / HANGUL_NCOUNT;
        out[1] = HANGUL_V + (s % HANGUL_NCOUNT) / HANGUL_TCOUNT;
        if (s % HANGUL_TCOUNT == 0) return 2;
        out[2] = HANGUL_T + s % HANGUL_TCOUNT;
        return 3;
    }
    const struct unicode_decomp *d = cp >= 0xC0 ? find_decomp(cp) : NULL;
    if (!d) { out[0] = cp; return 1; }
    memcpy(out, &unicode_decomp_pool[d->off], d->len * sizeof *out);
    return d->len;
}

/* Composite of a + b, or 0 if they do not compose. */
static unsigned int compose(unsigned int a, unsigned int b)
{
    if (a >= HANGUL_L && a < HANGUL_L + HANGUL_LCOUNT && b >= HANGUL_V && b < HANGUL_V + HANGUL_VCOUNT)
        return HANGUL_S + ((a - HANGUL_L) * HANGUL_VCOUNT + (b - HANGUL_V)) * HANGUL_TCOUNT;
    if (a >= HANGUL_S && a < HANGUL_S + HANGUL_SCOUNT && (a - HANGUL_S) % HANGUL_TCOUNT == 0 &&
        b > HANGUL_T && b < HANGUL_T + HANGUL_TCOUNT)
        return a + (b - HANGUL_T);
    int lo = 0, hi = unicode_comps_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const struct unicode_comp *c = &unicode_comps[mid];
        if (a < c->first || (a == c->first && b < c->second)) hi = mid - 1;
        else if (a > c->first || b > c->second) lo = mid + 1;
        else return c->composite;
    }
    return 0;
}

/* Below U+0300 nothing decomposes that could change (Latin-1 composites are
 * already composed and nothing there combines), so such text is NFC as is. */
static int is_trivially_nfc(const unsigned char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (s[i] >= 0xCC) return 0; /* lead bytes of U+0300 and above */
    }
    return 1;
}

int unicode_nfc(const char *s, size_t len, char **out, size_t *out_len)
{
    const unsigned char *u = (const unsigned char *)s;
    if (is_trivially_nfc(u, len)) {
        *out = malloc(len + 1);
        if (!*out) return -1;
        memcpy(*out, s, len);
        (*out)[len] = 0;
        *out_len = len;
        return 0;
    }
    /* A code point decomposes to at most 4; the UTF-8 length of each is >= 1. */
    unsigned int *cps = malloc((len * 4 + 1) * sizeof *cps);
    if (!cps) return -1;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        unsigned int cp;
        int k = utf8_decode(u + i, len - i, &cp);
        if (k == 0) { cp = 0xFFFD; k = 1; } /* callers validate first */
        n += (size_t)decompose(cp, cps + n);
        i += (size_t)k;
    }
    /* Canonical ordering: stable insertion sort of each run of non-starters. */
    for (size_t i = 1; i < n; i++) {
        int c = unicode_ccc(cps[i]);
        if (c == 0) continue;
        size_t j = i;
        unsigned int x = cps[i];
        while (j > 0 && unicode_ccc(cps[j - 1]) > c) { cps[j] = cps[j - 1]; j--; }
        cps[j] = x;
    }
    /* Canonical composition. */
    size_t w = 0, starter = (size_t)-1;
    int last_ccc = -1;
    for (size_t i = 0; i < n; i++) {
        unsigned int cp = cps[i];
        int c = unicode_ccc(cp);
        if (starter != (size_t)-1) {
            /* Blocked if a character between has ccc 0 or >= c. */
            int blocked = (w > starter + 1) && (last_ccc == 0 || last_ccc >= c);
            unsigned int comp = blocked ? 0 : compose(cps[starter], cp);
            if (comp) { cps[starter] = comp; continue; }
        }
        if (c == 0) { starter = w; last_ccc = -1; }
        else last_ccc = c;
        cps[w++] = cp;
    }
    char *buf = malloc(w * 4 + 1);
    if (!buf) { free(cps); return -1; }
    size_t o = 0;
    for (size_t i = 0; i < w; i++) o += (size_t)utf8_encode(cps[i], (unsigned char *)buf + o);
    buf[o] = 0;
    free(cps);
    *out = buf;
    *out_len = o;
    return 0;
}
