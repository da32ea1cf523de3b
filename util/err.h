/* err.h - the one error convention of evictbench.
 *
 * Functions that can fail return 0 on success and -1 on failure, and fill a
 * caller-owned `struct eb_err` with one line "<subject>: <what is wrong>"
 * (subject is usually the file name).  The CLI prints
 * "evictbench: <msg>" and exits non-zero.  No function prints errors itself.
 *
 * The kind tells a caller what it may do about a failure: the runner records
 * an allocation failure inside generate() as an 'oom' result, as the papers
 * do, and anything else as an 'error'.  eb_fail sets EB_ERR_OTHER,
 * eb_fail_nomem (and the checked allocators) EB_ERR_NOMEM; eb_wrap keeps the
 * kind. */
#ifndef EB_ERR_H
#define EB_ERR_H

#include <stddef.h>

enum eb_err_kind { EB_ERR_OTHER = 0, EB_ERR_NOMEM = 1 };

struct eb_err {
    char msg[512];
    enum eb_err_kind kind;
};

/* Format the message; always returns -1 so callers can `return eb_fail(...)`. */
int eb_fail(struct eb_err *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The same for a failed allocation (host or backend memory). */
int eb_fail_nomem(struct eb_err *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefix an existing message with "<subject>: " (keeps the tail). */
int eb_wrap(struct eb_err *e, const char *subject);

/* Checked allocation helpers: on failure they set e and return NULL. */
void *eb_malloc(size_t n, struct eb_err *e);
void *eb_calloc(size_t count, size_t size, struct eb_err *e);

#endif
