/* cmd_grade.c - `evictbench grade FILE.jsonl [--dataset gsm8k|math]`.
 *
 * Reads lines {"model_output": ..., "reference": ..., "dataset": optional}
 * (the shape of ../shared/specs/grading_cases.jsonl), checks every line
 * before grading any, then writes one {"pred": ..., "correct": ...} line per
 * input to stdout and "accuracy: X/N = P%" to stderr.  A line's own `dataset`
 * (e.g. "gsm8k_test", "math500") overrides --dataset. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "model/unicode.h"
#include "util/err.h"
#include "harness/cli/cli.h"
#include "harness/cli/cmd_grade.h"
#include "harness/grade/grade.h"

struct record {
    char *model_output;
    char *reference;
    int dataset;  /* -1: the --dataset default */
};

struct records {
    struct record *items;
    size_t n, cap;
};

static void print_help(void)
{
    printf("usage: evictbench grade FILE.jsonl [--dataset gsm8k|math]\n\n"
           "Grades the completions in FILE (\"-\" reads stdin): one JSON object per line with\n"
           "string fields \"model_output\" and \"reference\" (a number is accepted as reference)\n"
           "and an optional \"dataset\" (names starting with gsm8k use the GSM8K reference rule:\n"
           "the answer after the last ####).  --dataset sets the rule for lines without one\n"
           "(default math).  Writes {\"pred\": ..., \"correct\": true|false} per line to stdout\n"
           "and \"accuracy: X/N = P%%\" to stderr.  A malformed line stops everything before\n"
           "any output, naming FILE:LINE.\n");
}

static void records_free(struct records *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->items[i].model_output);
        free(r->items[i].reference);
    }
    free(r->items);
    memset(r, 0, sizeof *r);
}

static int records_push(struct records *r, struct record rec, struct eb_err *e)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        struct record *items = realloc(r->items, cap * sizeof *items);
        if (!items) return eb_fail(e, "out of memory reading records");
        r->items = items;
        r->cap = cap;
    }
    r->items[r->n++] = rec;
    return 0;
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strchr(" \t\r\n", s[i])) return 0;
    return 1;
}

/* The reference as text: strings as they are, numbers as a plain literal. */
static char *reference_text(const cJSON *v)
{
    if (cJSON_IsString(v)) return strdup(v->valuestring);
    char buf[64];
    double d = v->valuedouble;
    if (d == (double)(long long)d && d > -1e15 && d < 1e15) snprintf(buf, sizeof buf, "%lld", (long long)d);
    else snprintf(buf, sizeof buf, "%.17g", d);
    return strdup(buf);
}

/* One line into a record; a message (without the FILE:LINE prefix) on failure. */
static int parse_line(const char *line, struct record *rec, struct eb_err *e)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(line, &end, 1);
    if (!j) return eb_fail(e, "not valid JSON (near byte %ld)", end ? (long)(end - line) : 0L);
    int rc = -1;
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(j, "model_output");
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(j, "reference");
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(j, "dataset");
    if (!cJSON_IsObject(j)) eb_fail(e, "expected a JSON object");
    else if (!mo) eb_fail(e, "missing field \"model_output\"");
    else if (!cJSON_IsString(mo)) eb_fail(e, "\"model_output\" must be a string");
    else if (!ref) eb_fail(e, "missing field \"reference\"");
    else if (!cJSON_IsString(ref) && !cJSON_IsNumber(ref))
        eb_fail(e, "\"reference\" must be a string or a number");
    else if (ds && !cJSON_IsString(ds) && !cJSON_IsNull(ds)) eb_fail(e, "\"dataset\" must be a string");
    else {
        rec->model_output = strdup(mo->valuestring);
        rec->reference = reference_text(ref);
        rec->dataset = cJSON_IsString(ds) ? (int)grade_dataset_from_name(ds->valuestring) : -1;
        if (rec->model_output && rec->reference) rc = 0;
        else {
            free(rec->model_output);
            free(rec->reference);
            eb_fail(e, "out of memory");
        }
    }
    cJSON_Delete(j);
    return rc;
}

static int read_records(FILE *f, const char *name, struct records *out, struct eb_err *e)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    int rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (is_blank(line, (size_t)len)) continue;
        struct record rec = {0};
        size_t bad = utf8_validate((const unsigned char *)line, (size_t)len);
        if (strlen(line) != (size_t)len) {
            rc = eb_fail(e, "contains a NUL byte");
        } else if (bad != (size_t)len) {
            /* graders compare text; undecodable bytes would compare as garbage */
            rc = eb_fail(e, "not valid UTF-8 (byte %zu)", bad + 1);
        } else if ((rc = parse_line(line, &rec, e)) == 0 && (rc = records_push(out, rec, e))) {
            free(rec.model_output);
            free(rec.reference);
        }
        if (rc) {
            char where[512];
            snprintf(where, sizeof where, "%s:%ld", name, lineno);
            eb_wrap(e, where);
            break;
        }
    }
    if (!rc && ferror(f)) rc = eb_fail(e, "%s: read error", name);
    free(line);
    return rc;
}

int cmd_grade(int argc, char **argv)
{
    const char *path = NULL, *dataset = "math";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { print_help(); return 0; }
        if (!strcmp(argv[i], "--dataset")) {
            if (!(dataset = cli_value(argc, argv, &i))) return 2;
            if (strcmp(dataset, "gsm8k") && strcmp(dataset, "math")) {
                cli_errorf("grade: --dataset must be gsm8k or math, got '%s'", dataset);
                return 2;
            }
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_errorf("grade: unknown option '%s' (see evictbench grade --help)", argv[i]);
            return 2;
        } else if (!path) {
            path = argv[i];
        } else {
            cli_errorf("grade: unexpected argument '%s'", argv[i]);
            return 2;
        }
    }
    if (!path) {
        cli_error("grade: missing FILE.jsonl (see evictbench grade --help)");
        return 2;
    }
    enum grade_dataset def = grade_dataset_from_name(dataset);

    FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!f) return cli_errorf("grade: %s: cannot open: %s", path, strerror(errno));
    struct records recs = {0};
    struct eb_err e = {0};
    int rc = read_records(f, path, &recs, &e);
    if (f != stdin) fclose(f);
    if (rc) {
        records_free(&recs);
        return cli_error(e.msg);
    }

    size_t correct = 0;
    for (size_t i = 0; i < recs.n; i++) {
        const struct record *r = &recs.items[i];
        char *pred = NULL;
        int verdict = grade_answer(r->model_output, r->reference,
                                   r->dataset < 0 ? def : (enum grade_dataset)r->dataset, &pred);
        cJSON *o = verdict < 0 ? NULL : cJSON_CreateObject();
        char *json = NULL;
        if (o && cJSON_AddStringToObject(o, "pred", pred) && cJSON_AddBoolToObject(o, "correct", verdict))
            json = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        free(pred);
        if (!json) {
            records_free(&recs);
            return cli_errorf("grade: %s: out of memory grading record %zu", path, i + 1);
        }
        puts(json);
        cJSON_free(json);
        correct += verdict == 1;
    }
    fprintf(stderr, "accuracy: %zu/%zu = %.2f%%\n", correct, recs.n,
            recs.n ? 100.0 * (double)correct / (double)recs.n : 0.0);
    records_free(&recs);
    if (fflush(stdout) || ferror(stdout)) return cli_error("grade: error writing to stdout");
    return 0;
}
