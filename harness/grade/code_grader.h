/* code_grader.h - grade a model's program against stdin/stdout test cases
 * (LiveCodeBench code generation, pass@1 = every test passes).
 *
 * The last fenced code block of the model output is written to a temporary
 * file and run with `python3 -I` once per test case, in a child process of
 * its own process group, with stdin from the case's input and under limits:
 * RLIMIT_CPU, RLIMIT_AS (memory), RLIMIT_FSIZE, no core files, a wall-clock
 * deadline after which the whole group is killed.  Network: the child enters
 * a new, empty network namespace (unshare(CLONE_NEWNET), or with a user
 * namespace when unprivileged); where the kernel refuses both, it runs with
 * the host network and `net_isolated` in the result says so.  The child is
 * always reaped: no zombies are left behind.
 *
 * Output comparison: both texts are split into lines, each line trimmed of
 * surrounding whitespace, trailing empty lines dropped, then compared
 * exactly. */
#ifndef EB_CODE_GRADER_H
#define EB_CODE_GRADER_H

#include <stddef.h>

#include "util/err.h"

struct code_limits {
    double cpu_s;         /* CPU seconds per test case */
    double wall_s;        /* wall-clock seconds per test case */
    size_t mem_bytes;     /* address-space limit of the interpreter */
    size_t max_output;    /* stdout bytes kept; more is a wrong answer */
    const char *python;   /* interpreter path; NULL: "python3" found on PATH */
};

enum code_verdict {
    CODE_PASS,            /* every test case passed */
    CODE_NO_CODE,         /* no fenced code block in the output */
    CODE_WRONG_ANSWER,
    CODE_RUNTIME_ERROR,   /* non-zero exit or killed by a signal */
    CODE_TIME_LIMIT,      /* CPU or wall-clock limit */
    CODE_MEMORY_LIMIT,    /* MemoryError under the address-space limit */
    CODE_OUTPUT_LIMIT,    /* more than max_output bytes on stdout */
};

struct code_result {
    enum code_verdict verdict;
    int passed;           /* 1 when verdict == CODE_PASS */
    int n_tests;
    int n_passed;         /* tests passed before the first failure */
    int failed_test;      /* index of the first failing test, -1 if none */
    int net_isolated;     /* 1 when the children ran without a network */
    char detail[256];     /* e.g. the tail of stderr for a runtime error */
};

/* CPU 6 s, wall 10 s, 1 GiB, 16 MiB of output, python3 from PATH. */
void code_limits_default(struct code_limits *l);

const char *code_verdict_name(enum code_verdict v);

/* The body of the last fenced block tagged python/py/python3 or untagged
 * (blocks in other languages are skipped).  *code is malloc'ed, or NULL when
 * there is none (still returns 0). */
int code_extract_last_block(const char *text, char **code, struct eb_err *e);

/* 1 when the two outputs match under the comparison above. */
int code_outputs_match(const char *got, size_t got_len, const char *want);

/* Grade `model_output` against `tests_json`, a JSON array of
 * {"input": "...", "output": "..."}.  Stops at the first failing case.
 * Returns -1 only when grading itself cannot happen (bad tests JSON, no
 * python3, fork or temp file failure); the model's failures are verdicts. */
int code_grade(const char *model_output, const char *tests_json,
               const struct code_limits *lim, struct code_result *res, struct eb_err *e);

/* Python's str.strip() whitespace (code_extract.c). */
int code_is_space(char c);

#endif
