/* grade_extract.c - the candidate answer in a model's completion (the
 * reference's extract_answer), and the reference answer (parse_ground_truth).
 *
 * Rules in order, the first that applies wins (spec section 2): Minerva's
 * "final answer is $...$. I hope", the last "boxed" (only that substring is
 * searched: \fbox is not an answer, "unboxed" is), "he answer is", "final
 * answer is", "答案是", else the last number of the text with its commas
 * removed.  Then newlines and the whitespace after them are deleted, one ':'
 * in front and one '.' and one '/' at the end are dropped, and the result is
 * normalised once. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "harness/grade/grade.h"
#include "harness/grade/grade_text.h"

static const char *last_occurrence(const char *s, const char *needle)
{
    const char *last = NULL, *p = s;
    size_t nl = strlen(needle);
    while ((p = strstr(p, needle))) {
        last = p;
        p += nl;
    }
    return last;
}

/* The text after the last "boxed": brace-matched content, or up to the next
 * '$' for "\boxed 5$". */
static char *boxed_content(const char *s)
{
    const char *ans = last_occurrence(s, "boxed") + 5;
    if (*ans != '{') {
        const char *dollar = strchr(ans, '$');
        char *head = gt_strndup(ans, dollar ? (size_t)(dollar - ans) : strlen(ans));
        char *t = head ? gt_strip(head) : NULL;
        free(head);
        return t;
    }
    int depth = 1;
    const char *p = ans + 1;
    for (; *p; p++) {
        if (*p == '{') depth++;
        else if (*p == '}' && --depth == 0) break;
    }
    return gt_strndup(ans + 1, (size_t)(p - ans - 1));  /* unbalanced: up to the end */
}

/* findall(r"-?\d*\.?\d+", s.replace(",", ""))[-1], or "" when there is none. */
static char *last_number(const char *text)
{
    char *s = gt_replace(text, ",", "");
    if (!s) return NULL;
    size_t n = strlen(s), i = 0, best_a = 0, best_z = 0;
    int found = 0;
    while (i < n) {
        size_t j = i + (s[i] == '-');
        size_t d = j;
        while (isdigit((unsigned char)s[d])) d++;
        size_t z = 0;
        if (s[d] == '.' && isdigit((unsigned char)s[d + 1])) {
            z = d + 1;
            while (isdigit((unsigned char)s[z])) z++;
        } else if (d > j) {
            z = d;
        }
        if (z) {
            best_a = i;
            best_z = z;
            found = 1;
            i = z;
        } else {
            i++;
        }
    }
    char *r = found ? gt_strndup(s + best_a, best_z - best_a) : gt_strdup("");
    free(s);
    return r;
}

/* The text after the last `marker`, stripped. */
static char *after_last(const char *s, const char *marker)
{
    return gt_strip(last_occurrence(s, marker) + strlen(marker));
}

static char *raw_candidate(const char *s)
{
    const char *minerva = strstr(s, "final answer is $");
    if (minerva && strstr(s, "$. I hope")) {
        const char *tmp = minerva + strlen("final answer is $");
        const char *end = strstr(tmp, "$. I hope");
        char *head = gt_strndup(tmp, end ? (size_t)(end - tmp) : strlen(tmp));
        char *t = head ? gt_strip(head) : NULL;
        free(head);
        return t;
    }
    if (strstr(s, "boxed")) return boxed_content(s);
    if (strstr(s, "he answer is")) return after_last(s, "he answer is");
    if (strstr(s, "final answer is")) return after_last(s, "final answer is");
    const char *zh = strstr(s, "\xe7\xad\x94\xe6\xa1\x88\xe6\x98\xaf");  /* 答案是 */
    if (zh) {  /* split("答案是")[1].strip().split("\n\n")[0].strip() */
        const char *tmp = zh + 9;
        const char *next = strstr(tmp, "\xe7\xad\x94\xe6\xa1\x88\xe6\x98\xaf");
        char *part = gt_strndup(tmp, next ? (size_t)(next - tmp) : strlen(tmp));
        char *t = part ? gt_strip(part) : NULL;
        free(part);
        if (!t) return NULL;
        char *blank = strstr(t, "\n\n");
        if (blank) *blank = '\0';
        char *r = gt_strip(t);
        free(t);
        return r;
    }
    return last_number(s);
}

/* re.sub(r"\n\s*", "", s); drop one leading ':', one trailing '.', one trailing '/'. */
static char *clean_candidate(const char *s)
{
    struct gbuf b = {0};
    for (const char *p = s; *p;) {
        if (*p == '\n') {
            p++;
            while (*p && gt_is_space_cp(gt_u8cp(p))) p += gt_u8len(p);
            continue;
        }
        gbuf_putc(&b, *p++);
    }
    char *t = gbuf_take(&b);
    if (!t) return NULL;
    size_t n = strlen(t), a = 0;
    if (n > 0 && t[0] == ':') a = 1;
    if (n > a && t[n - 1] == '.') n--;
    if (n > a && t[n - 1] == '/') n--;
    char *r = gt_strndup(t + a, n - a);
    free(t);
    return r;
}

char *grade_extract_answer(const char *model_output, enum grade_dataset ds)
{
    (void)ds;  /* extraction is the same for every dataset we grade */
    if (!model_output) return NULL;
    char *s = gt_replace(model_output, "\xd0\xba\xd0\xb8", "");  /* the reference drops "ки" */
    if (!s) return NULL;
    char *raw = raw_candidate(s);
    free(s);
    if (!raw) return NULL;
    char *clean = clean_candidate(raw);
    free(raw);
    if (!clean) return NULL;
    char *r = grade_normalize(clean);
    free(clean);
    return r;
}

char *grade_reference(const char *reference, enum grade_dataset ds)
{
    if (!reference) return NULL;
    if (ds == GRADE_GSM8K && strstr(reference, "####")) {
        char *tail = gt_strip(last_occurrence(reference, "####") + 4);
        if (!tail) return NULL;
        char *r = grade_normalize(tail);
        free(tail);
        return r;
    }
    return grade_normalize(reference);
}
