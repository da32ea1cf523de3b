/* unicode.h - the little Unicode the tokenizer needs: UTF-8 decoding, the
 * categories of the pre-tokenizer regexes (\p{L}, \p{N}, \s) and NFC. */
#ifndef EB_UNICODE_H
#define EB_UNICODE_H

#include <stddef.h>

/* Decode one UTF-8 character at s[0..len).  Returns its length (1..4) and
 * stores the code point, or returns 0 for an invalid or truncated sequence
 * (overlong forms, surrogates and code points past U+10FFFF are invalid). */
int utf8_decode(const unsigned char *s, size_t len, unsigned int *cp);
/* Encode cp into out (4 bytes room); returns the length. */
int utf8_encode(unsigned int cp, unsigned char *out);
/* Offset of the first invalid byte, or len if the whole buffer is valid UTF-8. */
size_t utf8_validate(const unsigned char *s, size_t len);

int unicode_is_letter(unsigned int cp);   /* general category L* */
int unicode_is_number(unsigned int cp);   /* general category N* */
int unicode_is_space(unsigned int cp);    /* White_Space property (regex \s) */
int unicode_ccc(unsigned int cp);         /* canonical combining class */

/* NFC-normalize UTF-8 text (must be valid).  *out is malloc'd; returns 0, or
 * -1 on allocation failure.  Text already in NFC comes back unchanged. */
int unicode_nfc(const char *s, size_t len, char **out, size_t *out_len);

#endif
