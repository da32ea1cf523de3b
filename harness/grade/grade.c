/* grade.c - grading a completion against a reference answer.
 *
 * This is the Qwen2.5-Math evaluation (parser.py + grader.py at a45202b, the
 * code R-KV and SEAL report with) in C; ../shared/specs/grading.md describes
 * it.  The pipeline, as the reference's run_execute + math_equal:
 *
 *   extract (grade_extract.c) -> strip_string (grade_normalize.c) -> strip_string
 *   again -> math_equal (grade_equal.c) against strip_string(reference)
 *
 * Reproduced on purpose, because published numbers include them: the
 * last-number fallback when there is no box (a truncated chain of thought can
 * still score); percentage leniency (1000 matches 10); unit words removed as
 * regular expressions (standalone a, c, d, h, m, s, t vanish); comma lists are
 * ordered; bracket kinds of intervals are ignored; \fbox is not an answer; \pi
 * is a free symbol for the symbolic check (\pi vs 3.14159 is wrong); a mixed
 * number 2\frac{1}{2} reads as the product 1; comma lists without brackets
 * compare their first items in the symbolic check ("x,y" vs "x,z" is right).
 *
 * Not reproduced (the verdict can differ from the reference's):
 *  - sympy's full algebra.  grade_expr.c evaluates the LaTeX subset answers use
 *    (numbers, letters, \frac, \sqrt[n], ^, !, \binom, |.|, \lfloor, trig, log,
 *    exp, implicit multiplication) and tests identities at sample points.
 *    Input beyond that subset (\int, \sum, limits, matrices inside the symbolic
 *    check, set notation, inequalities) counts as unparseable: equal only to
 *    the identical string, where sympy might still prove equality.  Python
 *    syntax that parse_expr would read (x**2, tuples) is not read, except
 *    plain float literals such as ".5".
 *  - complex values: where the reference would compare complex numbers, a
 *    square root or log of a negative number makes our side unequal.
 *  - Unicode: Python's \w, \d, str.strip() and lower() are approximated (ASCII
 *    digits and case; the common non-ASCII symbols are non-word characters).
 *  - the 3 s per-pair timeout: our checks are bounded instead (nesting deeper
 *    than 64 levels counts as not equal, as Python's recursion limit would).
 *  - the grader's latex2sympy fallback parser is not reproduced.
 *
 * GSM8K: references may carry the whole solution; the answer is the text after
 * the last "####" (the reference splits on "####").  Everything else is shared
 * with the MATH-style sets.  Stop strings (</s>, <|im_end|>, <|endoftext|>) cut
 * the completion first, as the reference's generation settings do. */
#include <stdlib.h>
#include <string.h>

#include "harness/grade/grade.h"
#include "harness/grade/grade_text.h"

enum grade_dataset grade_dataset_from_name(const char *name)
{
    return name && !strncmp(name, "gsm8k", 5) ? GRADE_GSM8K : GRADE_MATH;
}

/* The completion up to the first stop string. */
static char *cut_at_stop(const char *text)
{
    static const char *const stops[] = {"</s>", "<|im_end|>", "<|endoftext|>"};
    size_t n = strlen(text);
    for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++) {
        const char *p = strstr(text, stops[i]);
        if (p && (size_t)(p - text) < n) n = (size_t)(p - text);
    }
    return gt_strndup(text, n);
}

int grade_answer(const char *model_output, const char *reference, enum grade_dataset ds,
                 char **pred_out)
{
    if (pred_out) *pred_out = NULL;
    if (!model_output || !reference) return -1;
    char *text = cut_at_stop(model_output);
    char *extracted = text ? grade_extract_answer(text, ds) : NULL;
    char *pred = extracted ? grade_normalize(extracted) : NULL;
    char *ref = grade_reference(reference, ds);
    int verdict = -1;
    if (pred && ref) verdict = grade_math_equal(pred, ref);
    free(text);
    free(extracted);
    free(ref);
    if (verdict >= 0 && pred_out) *pred_out = pred;
    else free(pred);
    return verdict;
}
