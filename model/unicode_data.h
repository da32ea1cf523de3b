/* unicode_data.h - generated Unicode tables (see tools/golden/gen_unicode.py).
 * All tables are sorted by code point so they can be binary-searched. */
#ifndef EB_UNICODE_DATA_H
#define EB_UNICODE_DATA_H

struct unicode_range { unsigned int lo, hi; };
struct unicode_ccc_range { unsigned int lo, hi; unsigned char ccc; };
/* Full canonical decomposition of cp: unicode_decomp_pool[off .. off+len). */
struct unicode_decomp { unsigned int cp; unsigned short off; unsigned char len; };
/* first + second compose canonically to composite (sorted by first, second). */
struct unicode_comp { unsigned int first, second, composite; };

extern const char unicode_data_version[];
extern const struct unicode_range unicode_letters[];
extern const int unicode_letters_count;
extern const struct unicode_range unicode_numbers[];
extern const int unicode_numbers_count;
extern const struct unicode_ccc_range unicode_ccc_runs[];
extern const int unicode_ccc_runs_count;
extern const unsigned int unicode_decomp_pool[];
extern const struct unicode_decomp unicode_decomps[];
extern const int unicode_decomps_count;
extern const struct unicode_comp unicode_comps[];
extern const int unicode_comps_count;

#endif
