/* mapped.c - see mapped.h. */
#include "util/mapped.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

void mapped_drop_pages(const void *base, size_t size, const void *p, size_t n)
{
    uintptr_t lo = (uintptr_t)base, hi = lo + size, a = (uintptr_t)p, b = a + n;
    if (a < lo || b > hi || b < a) return;
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0) return;
    uintptr_t page = (uintptr_t)ps;
    a = (a + page - 1) / page * page; /* whole pages inside the range only */
    b = b / page * page;
    if (b > a) (void)madvise((void *)a, b - a, MADV_DONTNEED);
}
