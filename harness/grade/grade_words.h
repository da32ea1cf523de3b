/* grade_words.h - English number phrases to digits (internal to the grader). */
#ifndef EB_GRADE_WORDS_H
#define EB_GRADE_WORDS_H

#include <stddef.h>

/* The reference's convert_word_number on the whole string s: 1 and the digits
 * in *result (malloc'd) when it converts ("twenty one" -> "21", "025" -> "25"),
 * 0 when s is left as it is, -1 when out of memory. */
int grade_word_number(const char *s, char **result);

#endif
