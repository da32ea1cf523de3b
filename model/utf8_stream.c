/* utf8_stream.c - streaming decode: hold back an incomplete UTF-8 character
 * until the token that completes it arrives, so printing token by token never
 * shows half a character.  Bytes that can never form a character are shown
 * as U+FFFD. */
#include <string.h>

#include "tokenizer.h"
#include "unicode.h"

static const unsigned char REPLACEMENT[3] = { 0xEF, 0xBF, 0xBD };

/* Expected length of a sequence from its lead byte; 0 if b cannot lead. */
static int lead_len(unsigned char b)
{
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

/* Could s[0..n) (n < full length) still grow into a valid character? */
static int valid_prefix(const unsigned char *s, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
    }
    if (n >= 2) { /* the second byte rules out overlongs, surrogates, > U+10FFFF */
        unsigned char a = s[0], b = s[1];
        if (a == 0xE0 && b < 0xA0) return 0;
        if (a == 0xED && b > 0x9F) return 0;
        if (a == 0xF0 && b < 0x90) return 0;
        if (a == 0xF4 && b > 0x8F) return 0;
    }
    return 1;
}

static size_t put(char *out, size_t cap, size_t o, const unsigned char *p, size_t n)
{
    if (o + n > cap) return o; /* never write past cap (caller sized it too small) */
    memcpy(out + o, p, n);
    return o + n;
}

size_t utf8_stream_feed(struct utf8_stream *s, const char *bytes, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    size_t np = (size_t)s->n_pending;
    size_t i = 0;
    /* First complete (or give up on) the pending character. */
    while (np > 0) {
        unsigned char buf[4];
        memcpy(buf, s->pending, np);
        int need = lead_len(buf[0]);
        size_t take = 0;
        while (np + take < (size_t)need && i + take < len) {
            buf[np + take] = (unsigned char)bytes[i + take];
            take++;
        }
        if (!valid_prefix(buf, np + take)) {
            /* The pending lead byte starts no character: replace it, retry the rest. */
            o = put(out, cap, o, REPLACEMENT, 3);
            memmove(s->pending, s->pending + 1, np - 1);
            np--;
            continue;
        }
        if (np + take < (size_t)need) { /* still incomplete: keep waiting */
            memcpy(s->pending, buf, np + take);
            s->n_pending = (int)(np + take);
            return o;
        }
        o = put(out, cap, o, buf, (size_t)need);
        i += take;
        np = 0;
    }
    s->n_pending = 0;
    while (i < len) {
        const unsigned char *p = (const unsigned char *)bytes + i;
        int need = lead_len(p[0]);
        if (need == 0) { o = put(out, cap, o, REPLACEMENT, 3); i++; continue; }
        if (i + (size_t)need > len) {
            if (valid_prefix(p, len - i)) {
                memcpy(s->pending, p, len - i);
                s->n_pending = (int)(len - i);
                return o;
            }
            o = put(out, cap, o, REPLACEMENT, 3);
            i++;
            continue;
        }
        unsigned int cp;
        if (utf8_decode(p, (size_t)need, &cp) == need) {
            o = put(out, cap, o, p, (size_t)need);
            i += (size_t)need;
        } else {
            o = put(out, cap, o, REPLACEMENT, 3);
            i++;
        }
    }
    return o;
}

size_t utf8_stream_finish(struct utf8_stream *s, char *out, size_t cap)
{
    size_t o = 0;
    /* Whatever is still pending is an unfinished character: one U+FFFD. */
    if (s->n_pending > 0) o = put(out, cap, o, REPLACEMENT, 3);
    s->n_pending = 0;
    return o;
}
