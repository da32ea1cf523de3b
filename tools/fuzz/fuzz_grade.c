// fuzz-sources: harness/grade/grade.c harness/grade/grade_equal.c harness/grade/grade_expr.c harness/grade/grade_expr_eval.c harness/grade/grade_extract.c harness/grade/grade_normalize.c harness/grade/grade_text.c harness/grade/grade_words.c
/* fuzz_grade.c - libFuzzer entry for the answer graders (harness/grade/):
 * extraction, normalisation, the LaTeX expression evaluator and equality.
 * The input is split at its first NUL byte into a model output and a
 * reference (no NUL: both are the input), graded under both rules; a model
 * output must always equal itself under math_equal.
 * Built by tools/fuzz/build.sh; seeds live in tests/fuzz_corpus/grade/. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness/grade/grade.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    const char *output = buf;
    size_t n = strlen(buf);
    const char *reference = n < size ? buf + n + 1 : buf;
    for (int ds = GRADE_MATH; ds <= GRADE_GSM8K; ds++) {
        char *pred = NULL;
        int r = grade_answer(output, reference, (enum grade_dataset)ds, &pred);
        if (r < -1 || r > 1) abort();
        free(pred);
    }
    double v;
    (void)grade_expr_value(output, &v);
    (void)grade_symbolic_equal(output, reference);
    free(buf);
    return 0;
}
