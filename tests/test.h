/* test.h - a tiny test harness.  Each tests/test_*.c is its own program:
 *
 *     #include "test.h"
 *     static void test_parse(void) { CHECK(1 + 1 == 2); CHECK_NEAR(x, y, 1e-6); }
 *     int main(void) { RUN(test_parse); return test_summary("gguf"); }
 *
 * test_summary prints "<suite>: N passed, N failed" and returns the exit code.
 * SKIP("why") records a skipped test with its reason (printed, not failed). */
#ifndef EB_TEST_H
#define EB_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_passed_, test_failed_, test_skipped_, test_cur_failed_, test_cur_skipped_;
static const char *test_cur_name_;

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "  FAIL %s:%d in %s: %s\n", __FILE__, __LINE__, test_cur_name_, #cond); \
    test_cur_failed_ = 1; } } while (0)

#define CHECK_MSG(cond, ...) do { if (!(cond)) { \
    fprintf(stderr, "  FAIL %s:%d in %s: %s: ", __FILE__, __LINE__, test_cur_name_, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); test_cur_failed_ = 1; } } while (0)

#define CHECK_NEAR(a, b, tol) do { double a_ = (a), b_ = (b); \
    if (!(fabs(a_ - b_) <= (tol))) { \
    fprintf(stderr, "  FAIL %s:%d in %s: %s=%g vs %s=%g (tol %g)\n", __FILE__, __LINE__, \
            test_cur_name_, #a, a_, #b, b_, (double)(tol)); test_cur_failed_ = 1; } } while (0)

#define CHECK_STR(a, b) do { const char *a_ = (a), *b_ = (b); \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) { \
    fprintf(stderr, "  FAIL %s:%d in %s: \"%s\" != \"%s\"\n", __FILE__, __LINE__, \
            test_cur_name_, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); test_cur_failed_ = 1; } } while (0)

#define SKIP(...) do { fprintf(stderr, "  SKIP %s: ", test_cur_name_); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); test_cur_skipped_ = 1; return; } while (0)

#define RUN(fn) do { test_cur_name_ = #fn; test_cur_failed_ = 0; test_cur_skipped_ = 0; fn(); \
    if (test_cur_failed_) test_failed_++; else if (test_cur_skipped_) test_skipped_++; \
    else test_passed_++; } while (0)

static inline int test_summary(const char *suite)
{
    printf("%s: %d passed, %d failed, %d skipped\n", suite, test_passed_, test_failed_,
           test_skipped_);
    return test_failed_ ? 1 : 0;
}

/* Directory of committed fixtures; tests run from the repository root. */
#define FIXTURE(name) ("tests/fixtures/" name)

#endif
