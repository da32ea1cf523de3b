/* test_grade.c - answer extraction, normalisation and equivalence.
 *
 * The case files hold the reference grader's own output (Qwen2.5-Math
 * parser.py + grader.py): tests/fixtures/grading_cases.jsonl is a copy of
 * ../shared/specs/grading_cases.jsonl; grade_extra.jsonl (our cases, one or
 * more per normalisation step and rule) and grade_pairs.jsonl (dataset answers
 * against variants) come from tools/golden/gen_grading.py.  For every case we check the normalised
 * prediction, the normalised reference and the verdict.  The unit tests below
 * pin single steps and the reference quirks we reproduce on purpose:
 *   - percentage leniency (1000 vs 10 is right), the last-number fallback,
 *     \fbox ignored, unit words removed as regexes (dollars/eggs are not units),
 *   - \pi is a free symbol (\pi vs 3.14159 is wrong), 2\frac{1}{2} is a product,
 *     "x,y" vs "x,z" is right (the symbolic parse reads only "x").
 * Behaviour we do not reproduce is listed in harness/grade/grade.c; the test
 * test_not_reproduced pins what we answer there. */
#include "test.h"

#include <cjson/cJSON.h>

#include "harness/grade/grade.h"

#define SHARED_CASES "../shared/specs/grading_cases.jsonl"

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) { free(buf); buf = NULL; }
            buf = b;
        }
    }
    fclose(f);
    if (buf) buf[n < cap ? n : cap - 1] = '\0';
    if (len) *len = n;
    return buf;
}

static const char *str_field(const cJSON *j, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Runs every case of a JSONL file; returns the number of cases (-1 if absent). */
static int run_case_file(const char *path)
{
    char *text = read_file(path, NULL);
    if (!text) return -1;
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        CHECK_MSG(j != NULL, "%s: bad JSON line %d", path, n + 1);
        if (!j) continue;
        n++;
        const char *label = str_field(j, "label"), *out = str_field(j, "model_output");
        const char *ref = str_field(j, "reference"), *ds = str_field(j, "dataset");
        const char *want_pred = str_field(j, "extracted_normalized");
        const char *want_ref = str_field(j, "reference_normalized");
        const cJSON *expected = cJSON_GetObjectItemCaseSensitive(j, "expected");
        CHECK_MSG(out && ref && cJSON_IsBool(expected), "%s: case %d lacks fields", path, n);
        if (!out || !ref || !cJSON_IsBool(expected)) { cJSON_Delete(j); continue; }
        enum grade_dataset d = grade_dataset_from_name(ds);
        char *pred = NULL, *nref = grade_reference(ref, d);
        int verdict = grade_answer(out, ref, d, &pred);
        CHECK_MSG(verdict == cJSON_IsTrue(expected), "%s [%s]: verdict %d, expected %d (pred \"%s\")",
                  path, label ? label : "?", verdict, cJSON_IsTrue(expected), pred ? pred : "(null)");
        if (want_pred)
            CHECK_MSG(pred && !strcmp(pred, want_pred), "%s [%s]: pred \"%s\", expected \"%s\"", path,
                      label ? label : "?", pred ? pred : "(null)", want_pred);
        if (want_ref)
            CHECK_MSG(nref && !strcmp(nref, want_ref), "%s [%s]: ref \"%s\", expected \"%s\"", path,
                      label ? label : "?", nref ? nref : "(null)", want_ref);
        free(pred);
        free(nref);
        cJSON_Delete(j);
    }
    free(text);
    return n;
}

static void test_spec_cases(void)
{
    int n = run_case_file(FIXTURE("grading_cases.jsonl"));
    CHECK_MSG(n == 40, "expected the 40 spec cases, got %d", n);
}

/* The committed copy must be the shared file; if they ever differ, both run. */
static void test_shared_cases_match_copy(void)
{
    size_t la = 0, lb = 0;
    char *shared = read_file(SHARED_CASES, &la);
    if (!shared) SKIP("%s not present (fresh clone)", SHARED_CASES);
    char *copy = read_file(FIXTURE("grading_cases.jsonl"), &lb);
    int same = copy && la == lb && !memcmp(shared, copy, la);
    if (!same) {
        fprintf(stderr, "  note: %s differs from the fixture copy; running it too\n", SHARED_CASES);
        CHECK(run_case_file(SHARED_CASES) > 0);
    }
    CHECK(copy != NULL);
    free(shared);
    free(copy);
}

static void test_extra_cases(void)
{
    int n = run_case_file(FIXTURE("grade_extra.jsonl"));
    CHECK_MSG(n >= 60, "expected at least 60 extra cases, got %d", n);
}

/* Reference answers of math500/math_train against neighbours, decimals, a/b
 * forms and "final answer is $x = ...$" sentences (tools/golden/gen_grading_pairs.py). */
static void test_answer_pairs(void)
{
    int n = run_case_file(FIXTURE("grade_pairs.jsonl"));
    CHECK_MSG(n >= 300, "expected 300 answer pairs, got %d", n);
}

static void check_norm(const char *in, const char *want)
{
    char *got = grade_normalize(in);
    CHECK_MSG(got && !strcmp(got, want), "normalize(\"%s\") = \"%s\", want \"%s\"", in,
              got ? got : "(null)", want);
    free(got);
}

/* Each strip_string step on its own. */
static void test_normalize_steps(void)
{
    check_norm("  42\n ", "42");                                     /* 1 */
    check_norm("7...", "7");                                         /* 2 */
    check_norm("1\\!000", "1000");                                   /* 3 */
    check_norm("\\begin{array}{cc}1&2\\end{array}", "\\begin{pmatrix}1&2\\end{pmatrix}"); /* 4 */
    check_norm("\\begin{bmatrix}1\\end{bmatrix}", "\\begin{pmatrix}1\\end{pmatrix}");
    check_norm("\\tfrac{1}{2}", "\\frac{1}{2}");                     /* 5 */
    check_norm("x\\geq2", "x\\ge2");                                 /* 6 */
    check_norm("\\left(1,2\\right)", "(1,2)");                       /* 7 */
    check_norm("\\{1\\}", "{1}");
    check_norm("5 \\text{ cm}", "5");                                /* 8 */
    check_norm("\\text{A} or \\text{B}", "AorB");                    /* 8 empty: kept, 13 unwraps */
    check_norm("12 inches", "12");                                   /* 9 */
    check_norm("a", "a");                                            /* 9: would be empty */
    check_norm("a a", "");                                           /* 9: "a ." matches, then " a" */
    check_norm("30^{\\circ}", "30");                                 /* 10 */
    check_norm("\\$5", "5");                                         /* 11 */
    check_norm("\\(x\\)", "x");
    check_norm("twenty one", "21");                                  /* 12 */
    check_norm("007", "7");
    check_norm("five point two", "5.2");
    check_norm("point", "0");                                        /* 12: word2number quirk */
    check_norm("\\text{odd}", "odd");                                /* 13 */
    check_norm("x\\in(0,1)", "(0,1)");                               /* 14 */
    check_norm("\\emptyset", "{}");                                  /* 15 */
    check_norm("(-\\infty,\\infty)", "\\mathbb{R}");
    check_norm("50\\%", "50");                                       /* 16 */
    check_norm("{.5}", "{0.5}");                                     /* 17 */
    check_norm("infinity", "\\infty");                               /* 19 */
    check_norm("-inf", "-\\infty");
    check_norm("band", "b");                                         /* 20 */
    check_norm("\\mathbf{v}", "{v}");
    check_norm("5\\mbox{m}", "5");                                   /* 21 */
    check_norm("2+3j", "2+3i");                                      /* 23 */
    check_norm("2+3j+i", "2+3j+i");
    check_norm("12.000", "12");                                      /* 24 */
    check_norm("1.00x", "1x");
    check_norm("2.50", "2.50");
    check_norm(".25", "0.25");                                       /* 25 */
    check_norm("", "");
    check_norm("k=3", "3");                                          /* 26 */
    check_norm("abc=3", "abc=3");
    check_norm("\\sqrt3x", "\\sqrt{3x}");                            /* 27 */
    check_norm("1 2 3", "123");                                      /* 28 */
    check_norm("\\frac12", "\\frac{1}{2}");                          /* 29 */
    check_norm("\\frac1{72}", "\\frac{1}{72}");
    check_norm("\\frac1", "\\frac1");                                /* 29: too short, unchanged */
    check_norm("3/4", "\\frac{3}{4}");                               /* 30 */
    check_norm("-3/4", "\\frac{-3}{4}");
    check_norm("03/4", "03/4");
    check_norm("\\sqrt{2}/2", "\\frac{\\sqrt{2}}{2}");
}

static void check_extract(const char *out, const char *want)
{
    char *got = grade_extract_answer(out, GRADE_MATH);
    CHECK_MSG(got && !strcmp(got, want), "extract(\"%s\") = \"%s\", want \"%s\"", out,
              got ? got : "(null)", want);
    free(got);
}

static void test_extract(void)
{
    check_extract("\\boxed{\\frac{1}{\\sqrt{2}}} and more", "\\frac{1}{\\sqrt{2}}");
    check_extract("\\boxed{1} then \\boxed{2}", "2");
    check_extract("so \\boxed 5$.", "5");
    check_extract("\\boxed{12", "12");
    check_extract("\\boxed", "");
    check_extract("\\fbox{7} then 9", "9");
    check_extract("The answer is 3.", "3");
    check_extract("the final answer is 8", "8");
    check_extract("final answer is $4$. I hope it is right", "4");
    check_extract("\xe7\xad\x94\xe6\xa1\x88\xe6\x98\xaf 6\n\nmore", "6");
    check_extract("costs 1,250 and -3.5 later", "-3.5");
    check_extract("1.2.3", "0.3");  /* findall: "1.2", ".3"; step 25 adds the 0 */
    check_extract("nothing here", "");
    check_extract("", "");
}

static void test_dataset_rules(void)
{
    CHECK(grade_dataset_from_name("gsm8k") == GRADE_GSM8K);
    CHECK(grade_dataset_from_name("gsm8k_test") == GRADE_GSM8K);
    CHECK(grade_dataset_from_name("math500") == GRADE_MATH);
    CHECK(grade_dataset_from_name(NULL) == GRADE_MATH);
    char *r = grade_reference("48/2 = 24\n#### 1,024", GRADE_GSM8K);
    CHECK_STR(r, "1,024");
    free(r);
    r = grade_reference("a #### b #### 7", GRADE_GSM8K);
    CHECK_STR(r, "7");
    free(r);
    CHECK(grade_answer("She pays $1,024 in all.", "#### 1,024", GRADE_GSM8K, NULL) == 1);
    CHECK(grade_answer("\\boxed{1024}", "1024", GRADE_GSM8K, NULL) == 1);
    CHECK(grade_answer("\\boxed{1025}", "#### 1024", GRADE_GSM8K, NULL) == 0);
}

static void test_equal(void)
{
    CHECK(grade_math_equal("10", "10"));
    CHECK(grade_math_equal("0.1", "10"));            /* ref/100 */
    CHECK(grade_math_equal("10\\%", "0.1"));         /* trailing \% means /100 */
    CHECK(!grade_math_equal("10", "20"));
    CHECK(grade_math_equal("1,000", "1000"));
    CHECK(grade_math_equal("1e3", "1000"));
    CHECK(!grade_math_equal("0.333", "\\frac{1}{3}"));
    CHECK(grade_math_equal("0.33333", "\\frac{1}{3}"));
    CHECK(grade_math_equal("(1,2)", "[1,2]"));       /* bracket kinds ignored */
    CHECK(!grade_math_equal("(1,2)", "(2,1)"));
    CHECK(grade_math_equal("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
                           "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}"));
    CHECK(!grade_math_equal("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
                            "\\begin{pmatrix}1&2\\\\3&5\\end{pmatrix}"));
    CHECK(grade_math_equal("x=y", "x=y"));
    CHECK(!grade_math_equal("x=y", "x=z"));
    CHECK(grade_math_equal("x=10", "10"));
    CHECK(grade_math_equal("10", "x=10"));
    CHECK(grade_math_equal("(B)", "B"));             /* multiple choice */
    CHECK(!grade_math_equal("", "5"));
    CHECK(!grade_math_equal(NULL, "5"));
    CHECK(grade_math_equal("\\frac{x}{2}+\\frac{1}{2}", "\\frac{x+1}{2}"));
    CHECK(!grade_math_equal("x^2+1", "(x+1)^2"));
}

static void test_expr_values(void)
{
    double v = 0;
    CHECK(grade_expr_value("\\frac{\\sqrt{3}}{2}", &v) == 0);
    CHECK_NEAR(v, sqrt(3) / 2, 1e-12);
    CHECK(grade_expr_value("2\\cdot 3+4", &v) == 0);
    CHECK_NEAR(v, 10, 1e-12);
    CHECK(grade_expr_value("1/2\\cdot4", &v) == 0);
    CHECK_NEAR(v, 2, 1e-12);
    CHECK(grade_expr_value("2^{10}-2^3", &v) == 0);
    CHECK_NEAR(v, 1016, 1e-9);
    CHECK(grade_expr_value("-2^2", &v) == 0);        /* -(2^2) */
    CHECK_NEAR(v, -4, 1e-12);
    CHECK(grade_expr_value("2\\frac{1}{2}", &v) == 0); /* a product, as parse_latex reads it */
    CHECK_NEAR(v, 1, 1e-12);
    CHECK(grade_expr_value("\\sqrt[3]{27}+\\binom{5}{2}+4!", &v) == 0);
    CHECK_NEAR(v, 3 + 10 + 24, 1e-9);
    CHECK(grade_expr_value("\\log_{2}8+|-2|", &v) == 0);
    CHECK_NEAR(v, 5, 1e-12);
    CHECK(grade_expr_value("1,000", &v) == 0);       /* thousands group */
    CHECK_NEAR(v, 1000, 0);
    CHECK(grade_expr_value("\\frac{1}{2},7", &v) == 0); /* rest after ',' ignored */
    CHECK_NEAR(v, 0.5, 0);
    CHECK(grade_expr_value(".5", &v) == 0);          /* float literal fallback */
    CHECK_NEAR(v, 0.5, 0);
    CHECK(grade_expr_value("\\pi", &v) == -1);       /* a free symbol */
    CHECK(grade_expr_value("x+1", &v) == -1);
    CHECK(grade_expr_value("3.", &v) == 0);          /* not LaTeX, but a float literal */
    CHECK_NEAR(v, 3, 0);
    CHECK(grade_expr_value("3.x", &v) == -1);        /* lexical error */
    CHECK(grade_expr_value("1 & 2", &v) == -1);
    CHECK(grade_expr_value("", &v) == -1);
    CHECK(grade_expr_value(NULL, &v) == -1);
}

static void test_symbolic(void)
{
    CHECK(grade_symbolic_equal("2\\sqrt{2}", "\\sqrt{8}"));
    CHECK(grade_symbolic_equal("\\frac{\\pi}{2}", "\\pi/2"));
    CHECK(!grade_symbolic_equal("\\pi", "3.14159"));
    CHECK(grade_symbolic_equal("(x+1)^2", "x^2+2x+1"));
    CHECK(!grade_symbolic_equal("x", "y"));
    CHECK(grade_symbolic_equal("\\sin^2x+\\cos^2x", "1"));
    CHECK(grade_symbolic_equal("x,y", "x,z"));       /* reference quirk */
    CHECK(grade_symbolic_equal("\\mathbb{R}", "\\mathbb{R}"));
    CHECK(grade_symbolic_equal("a&b", "a&b"));       /* neither parses: string equality */
    CHECK(!grade_symbolic_equal("a&b", "a&c"));
    CHECK(!grade_symbolic_equal("x=1", "1"));        /* an equation only matches an equation */
    CHECK(grade_symbolic_equal("x-1=0", "1-x=0"));   /* |lhs - rhs| agree */
}

/* Where the reference's sympy proves equality and our evaluator cannot (the
 * reference says True for each; see harness/grade/grade.c).  Pinned so that a change
 * here is a deliberate one. */
static void test_not_reproduced(void)
{
    CHECK(!grade_math_equal("\\int_0^1x\\,dx", "\\frac{1}{2}"));       /* calculus */
    CHECK(!grade_math_equal("\\sum_{k=1}^{3}k", "6"));
    CHECK(!grade_math_equal("\\frac{d}{dx}x^2", "2x"));
    CHECK(!grade_math_equal("\\sqrt{-4}", "2\\sqrt{-1}"));             /* complex values */
}

static void test_robustness(void)
{
    /* deep nesting, long inputs, stray bytes: no crash, the reference's verdict */
    size_t n = 20000;
    char *deep = malloc(8 * n + 32);
    CHECK(deep != NULL);
    if (!deep) return;
    strcpy(deep, "\\boxed{");
    size_t k = strlen(deep);
    for (size_t i = 0; i < n; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (size_t i = 0; i < n; i++) deep[k++] = ')';
    strcpy(deep + k, "}");
    CHECK(grade_answer(deep, "1", GRADE_MATH, NULL) == 1);  /* outer brackets are stripped */
    strcpy(deep, "\\boxed{");
    k = strlen(deep);
    for (size_t i = 0; i < n; i++) k += (size_t)sprintf(deep + k, "\\sqrt{");
    deep[k++] = '1';
    for (size_t i = 0; i < n; i++) deep[k++] = '}';
    strcpy(deep + k, "}");
    CHECK(grade_answer(deep, "1", GRADE_MATH, NULL) == 0);  /* too deep to evaluate */
    for (size_t i = 0; i < 2 * n; i++) deep[i] = "{}\\frac^_,("[i % 11];
    deep[2 * n] = '\0';
    char *norm = grade_normalize(deep);
    CHECK(norm != NULL);
    CHECK(grade_math_equal(norm, norm) == 1);
    CHECK(grade_math_equal(norm, "1") == 0);
    free(norm);
    free(deep);
    CHECK(grade_answer("\\boxed{\xff\xfe\xc3}", "\xc3", GRADE_MATH, NULL) >= 0);
    CHECK(grade_answer("\\boxed{\\frac", "1", GRADE_MATH, NULL) == 0);
    CHECK(grade_answer("\\boxed{\\sqrt[}", "1", GRADE_MATH, NULL) == 0);
    CHECK(grade_answer("\\boxed{|||}", "1", GRADE_MATH, NULL) == 0);
    CHECK(grade_answer(NULL, "1", GRADE_MATH, NULL) == -1);
    char *pred = (char *)1;
    CHECK(grade_answer("x", NULL, GRADE_MATH, &pred) == -1);
    CHECK(pred == NULL);
}

int main(void)
{
    RUN(test_spec_cases);
    RUN(test_shared_cases_match_copy);
    RUN(test_extra_cases);
    RUN(test_answer_pairs);
    RUN(test_normalize_steps);
    RUN(test_extract);
    RUN(test_dataset_rules);
    RUN(test_equal);
    RUN(test_expr_values);
    RUN(test_symbolic);
    RUN(test_not_reproduced);
    RUN(test_robustness);
    return test_summary("grade");
}
