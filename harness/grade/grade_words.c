/* grade_words.c - English number phrases to digits, as the reference's
 * convert_word_number step does it (the word2number 1.1 rules).
 *
 * Those rules are lenient in ways that matter for grading: words that are not
 * number words are ignored ("five apples" -> 5), a pure digit string loses its
 * leading zeros ("025" -> 25), '-' counts as a space ("twenty-one" -> 21), and a
 * lone "point" is 0.  We reproduce them, including the Python str() of the
 * result (an int, or a float when a valid decimal part follows "point"). */
#include "harness/grade/grade_words.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/grade/grade_text.h"

static const struct { const char *word; long long value; } number_words[] = {
    {"zero", 0}, {"one", 1}, {"two", 2}, {"three", 3}, {"four", 4}, {"five", 5},
    {"six", 6}, {"seven", 7}, {"eight", 8}, {"nine", 9}, {"ten", 10}, {"eleven", 11},
    {"twelve", 12}, {"thirteen", 13}, {"fourteen", 14}, {"fifteen", 15}, {"sixteen", 16},
    {"seventeen", 17}, {"eighteen", 18}, {"nineteen", 19}, {"twenty", 20}, {"thirty", 30},
    {"forty", 40}, {"fifty", 50}, {"sixty", 60}, {"seventy", 70}, {"eighty", 80},
    {"ninety", 90}, {"hundred", 100}, {"thousand", 1000}, {"million", 1000000},
    {"billion", 1000000000}, {"point", -1},
};
#define N_NUMBER_WORDS (sizeof number_words / sizeof number_words[0])
#define MAX_WORDS 64

static int word_index(const char *w, size_t n)
{
    for (size_t i = 0; i < N_NUMBER_WORDS; i++)
        if (strlen(number_words[i].word) == n && !memcmp(number_words[i].word, w, n)) return (int)i;
    return -1;
}

/* number_formation(): the value of a group of 1..4 (or more) number words;
 * -1 for an empty group (the reference raises IndexError there). */
static long long formation(const int *w, int n)
{
    long long v[4];
    if (n <= 0) return -1;
    for (int i = 0; i < n && i < 4; i++) v[i] = number_words[w[i]].value;
    if (n == 4) return v[0] * v[1] + v[2] + v[3];
    if (n == 3) return v[0] * v[1] + v[2];
    if (n == 2) return (v[0] == 100 || v[1] == 100) ? v[0] * v[1] : v[0] + v[1];
    return v[0];
}

static int find_word(const int *w, int n, const char *word)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(number_words[w[i]].word, word)) return i;
    return -1;
}

static int count_word(const int *w, int n, const char *word)
{
    int c = 0;
    for (int i = 0; i < n; i++) c += !strcmp(number_words[w[i]].word, word);
    return c;
}

/* Python repr() of a finite positive double: shortest round-trip digits,
 * fixed notation with at least one decimal for 1e-4 <= x < 1e16. */
static void py_float_repr(double x, char *out, size_t outsz)
{
    char tmp[64];
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
        if (strtod(tmp, NULL) == x) break;
    }
    snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
    char digits[32];
    size_t nd = 0;
    const char *p = tmp;
    for (; *p && *p != 'e'; p++)
        if (isdigit((unsigned char)*p) && nd < sizeof digits - 1) digits[nd++] = *p;
    digits[nd] = '\0';
    int exp10 = *p == 'e' ? atoi(p + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = '\0';
    if (x != 0 && (exp10 < -4 || exp10 >= 16)) {
        snprintf(out, outsz, "%c%s%se%c%02d", digits[0], nd > 1 ? "." : "", digits + 1,
                 exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
        return;
    }
    struct gbuf b = {0};
    if (exp10 < 0) {
        gbuf_puts(&b, "0.");
        for (int i = -1; i > exp10; i--) gbuf_putc(&b, '0');
        gbuf_puts(&b, digits);
    } else {
        for (int i = 0; i <= exp10; i++) gbuf_putc(&b, (size_t)i < nd ? digits[i] : '0');
        gbuf_putc(&b, '.');
        gbuf_puts(&b, (size_t)exp10 + 1 < nd ? digits + exp10 + 1 : "0");
    }
    char *s = gbuf_take(&b);
    snprintf(out, outsz, "%s", s ? s : "0.0");
    free(s);
}

/* The integer that words w[0..nw) (nw > 1) spell, with the positions of
 * "billion", "million" and "thousand" (-1: absent); -1 when they do not
 * form a number. */
static long long words_total(const int *w, int nw, int bi, int mi, int ti)
{
    long long total = 0, m;
    if (bi > -1) {
        if ((m = formation(w, bi)) < 0) return -1;
        total += m * 1000000000LL;
    }
    if (mi > -1) {
        m = bi > -1 ? formation(w + bi + 1, mi - bi - 1) : formation(w, mi);
        if (m < 0) return -1;
        total += m * 1000000LL;
    }
    if (ti > -1) {
        if (mi > -1) m = formation(w + mi + 1, ti - mi - 1);
        else if (bi > -1) m = formation(w + bi + 1, ti - bi - 1);
        else m = formation(w, ti);
        if (m < 0) return -1;
        total += m * 1000;
    }
    long long hundreds = 0;
    if (ti > -1 && ti != nw - 1) hundreds = formation(w + ti + 1, nw - ti - 1);
    else if (mi > -1 && mi != nw - 1) hundreds = formation(w + mi + 1, nw - mi - 1);
    else if (bi > -1 && bi != nw - 1) hundreds = formation(w + bi + 1, nw - bi - 1);
    else if (ti == -1 && mi == -1 && bi == -1) hundreds = formation(w, nw);
    if (hundreds < 0) return -1;
    total += hundreds;
    return total;
}

int grade_word_number(const char *s, char **result)
{
    char out[96];
    size_t outsz = sizeof out;
    *result = NULL;
    size_t n = strlen(s);
    /* '-' -> ' ', lower case */
    char *t = gt_strdup(s);
    if (!t) return -1;
    for (size_t i = 0; i < n; i++) t[i] = t[i] == '-' ? ' ' : (char)tolower((unsigned char)t[i]);

    int all_digits = n > 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)t[i])) all_digits = 0;
    if (all_digits) { /* int(s): drop leading zeros */
        size_t i = 0;
        while (i + 1 < n && t[i] == '0') i++;
        *result = gt_strdup(t + i);
        free(t);
        return *result ? 1 : -1;
    }

    int w[MAX_WORDS], nw = 0;
    for (size_t i = 0; i < n;) {
        while (i < n && gt_is_space_cp(gt_u8cp(t + i))) i += gt_u8len(t + i);
        size_t a = i;
        while (i < n && !gt_is_space_cp(gt_u8cp(t + i))) i += gt_u8len(t + i);
        if (i > a) {
            int k = word_index(t + a, i - a);
            if (k >= 0) {
                if (nw == MAX_WORDS) { free(t); return 0; }
                w[nw++] = k;
            }
        }
    }
    free(t);
    if (nw == 0) return 0;
    if (count_word(w, nw, "thousand") > 1 || count_word(w, nw, "million") > 1 ||
        count_word(w, nw, "billion") > 1 || count_word(w, nw, "point") > 1)
        return 0;

    int *dec = NULL, ndec = 0, point = find_word(w, nw, "point");
    if (point >= 0) {
        dec = w + point + 1;
        ndec = nw - point - 1;
        nw = point;
    }
    int bi = find_word(w, nw, "billion"), mi = find_word(w, nw, "million"),
        ti = find_word(w, nw, "thousand");
    if ((ti > -1 && (ti < mi || ti < bi)) || (mi > -1 && mi < bi)) return 0;

    long long total = nw == 1 ? number_words[w[0]].value : nw > 1 ? words_total(w, nw, bi, mi, ti) : 0;
    if (total < 0) return 0;

    /* get_decimal_sum: digits after "point", or int 0 if any is not a digit word */
    int is_float = 0;
    char frac[MAX_WORDS + 3] = "0.";
    if (ndec > 0) {
        is_float = 1;
        for (int i = 0; i < ndec; i++) {
            long long v = number_words[dec[i]].value;
            if (dec[i] > 9) { is_float = 0; break; } /* not zero..nine */
            frac[2 + i] = (char)('0' + v);
            frac[3 + i] = '\0';
        }
    }
    if (is_float) py_float_repr((double)total + strtod(frac, NULL), out, outsz);
    else snprintf(out, outsz, "%lld", total);
    *result = gt_strdup(out);
    return *result ? 1 : -1;
}
