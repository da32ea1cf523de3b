/* grade_text.h - string helpers shared by the grade_*.c files (internal).
 *
 * The reference grader is Python; its string operations work on code points
 * and its regular expressions use Unicode classes.  These helpers give the C
 * side the same notions on UTF-8 text: a growable buffer, replace-all, Python's
 * str.strip() whitespace, the regex \w / \W classes, and float() syntax. */
#ifndef EB_GRADE_TEXT_H
#define EB_GRADE_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* Growable NUL-terminated buffer; an allocation failure sets oom and later
 * appends do nothing, so callers check once at the end (gbuf_take). */
struct gbuf {
    char *p;
    size_t n, cap;
    int oom;
};

void gbuf_putn(struct gbuf *b, const char *s, size_t n);
void gbuf_puts(struct gbuf *b, const char *s);
void gbuf_putc(struct gbuf *b, char c);
/* The built string (malloc'd, "" when empty) or NULL after an allocation failure. */
char *gbuf_take(struct gbuf *b);

char *gt_strdup(const char *s);
char *gt_strndup(const char *s, size_t n);

/* Python's s.replace(from, to): every non-overlapping occurrence, left to right. */
char *gt_replace(const char *s, const char *from, const char *to);

/* Replace *s by next (freeing the old one); -1 when next is NULL (out of memory). */
int gt_step(char **s, char *next);

/* Byte length of the UTF-8 sequence at s (1 for a stray byte; 0 at the NUL). */
size_t gt_u8len(const char *s);
/* Decode the code point at s (stray bytes decode as themselves). */
uint32_t gt_u8cp(const char *s);
/* Number of code points in s[0..n). */
size_t gt_u8count(const char *s, size_t n);
/* Offset of the last code point of s[0..n) (0 when n == 0). */
size_t gt_u8last(const char *s, size_t n);

/* Python regex \w for a code point: letters, digits, '_' and (approximating the
 * Unicode database) every non-ASCII code point except common symbols and
 * punctuation (°, ×, ÷, ·, dashes, quotes, math operators, arrows, ...). */
int gt_is_word_cp(uint32_t cp);
int gt_is_word_at(const char *s);

/* Python str.isspace() for a code point (ASCII set, \x1c-\x1f, NBSP, U+2000.., U+3000). */
int gt_is_space_cp(uint32_t cp);
/* Python s.strip() / s.strip(chars) (chars: ASCII set); malloc'd. */
char *gt_strip(const char *s);
char *gt_strip_chars(const char *s, const char *chars, int left, int right);

/* Python float(s): optional surrounding whitespace, sign, digits with single '_'
 * between digits, fraction, exponent, or inf/infinity/nan.  0 on success. */
int gt_parse_float(const char *s, double *out);

/* Python math.isclose(a, b, rel_tol=rel) with abs_tol 0. */
int gt_isclose(double a, double b, double rel);

/* ASCII case-insensitive equality (the reference lower()s both sides). */
int gt_eq_nocase(const char *a, const char *b);

/* Count of occurrences of byte c. */
size_t gt_count_char(const char *s, char c);

#endif
