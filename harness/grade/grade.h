/* grade.h - answer extraction and equivalence for math benchmarks.
 *
 * A C reimplementation of the Qwen2.5-Math evaluation parser and grader (the
 * one R-KV and SEAL report numbers with), as ../shared/specs/grading.md
 * describes it.  The pipeline of grade_answer():
 *
 *   pred = grade_normalize(grade_extract_answer(output))   (normalised twice,
 *                                                          as the reference does)
 *   ref  = grade_reference(reference)                      (normalised once)
 *   correct = grade_math_equal(pred, ref)
 *
 * Every function here is pure: no globals, no printing, no exit.  Strings
 * returned are malloc'd and owned by the caller; NULL means out of memory. */
#ifndef EB_GRADE_H
#define EB_GRADE_H

/* Which reference rule applies.  Extraction and equivalence are the same for
 * both; GSM8K references may be the full solution text ("... #### 72"), of
 * which the part after the last "####" is the answer. */
enum grade_dataset {
    GRADE_MATH = 0,   /* math500, aime24, aime25, math_train_1000, synthetic */
    GRADE_GSM8K = 1,
};

/* "gsm8k..." -> GRADE_GSM8K, anything else (or NULL) -> GRADE_MATH. */
enum grade_dataset grade_dataset_from_name(const char *name);

/* The candidate answer in a model's completion: Minerva "final answer is $..$",
 * else the last "boxed" (nested braces; "\boxed 5" without braces; truncated
 * braces take the rest), else "he answer is", "final answer is", "答案是",
 * else the last number.  Cleaned (newlines, ':' '.' '/') and normalised once.
 * Returns "" when nothing is found. */
char *grade_extract_answer(const char *model_output, enum grade_dataset ds);

/* The reference's strip_string: the 30 normalisation steps in the spec's order. */
char *grade_normalize(const char *s);

/* Reference answer as the grader compares it (after "####" for GSM8K, then
 * normalised). */
char *grade_reference(const char *reference, enum grade_dataset ds);

/* math_equal on already normalised strings: 1 equivalent, 0 not. */
int grade_math_equal(const char *pred, const char *ref);

/* Whole pipeline.  Returns 1 correct, 0 incorrect, -1 out of memory.  When
 * pred_out is not NULL it receives the normalised prediction (malloc'd; NULL on
 * failure). */
int grade_answer(const char *model_output, const char *reference, enum grade_dataset ds,
                 char **pred_out);

/* The small LaTeX arithmetic evaluator that stands in for sympy
 * (grade_expr.c).  grade_expr_value: the value of a constant expression such as
 * "\frac{\sqrt{3}}{2}" or "2\cdot3"; -1 when it does not parse or has free
 * symbols (\pi is a free symbol, as in the reference's LaTeX parser).
 * grade_symbolic_equal: the reference's symbolic_equal - 1 when both parse and
 * agree (constants: rel_tol 1e-4; with free symbols: as functions, at several
 * points), or when neither parses and the strings are identical; else 0. */
int grade_expr_value(const char *s, double *value);
int grade_symbolic_equal(const char *a, const char *b);

#endif
