/* mapped.h - a read-only file mapping's pages that will not be read again. */
#ifndef EB_MAPPED_H
#define EB_MAPPED_H

#include <stddef.h>

/* Drop the whole pages of [p, p + n) that lie inside the mapping [base,
 * base + size) from this process's memory.  Only for a private, read-only
 * mapping of a file: a page touched again is read back from the file, so
 * nothing is lost; the point is that a tensor copied (or repacked) at load
 * does not stay resident twice.  Best effort: errors are ignored. */
void mapped_drop_pages(const void *base, size_t size, const void *p, size_t n);

#endif
