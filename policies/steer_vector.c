/* steer_vector.c - the steering vector file (format in steering.h): the
 * hash of the model identity it is checked against, writing it, and reading
 * it back with every header and data check. */
#include "steering.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t steering_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a 64 */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

void steer_vector_free(struct steer_vector *sv)
{
    if (!sv) return;
    free(sv->v);
    sv->v = NULL;
}

/* Header values are single-line free text: newlines would break the format. */
static void one_line(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src && src[i] && i + 1 < cap; i++) dst[i] = (src[i] == '\n' || src[i] == '\r') ? ' ' : src[i];
    dst[i] = '\0';
}

int steer_vector_save(const char *path, const struct steer_vector *sv, struct eb_err *e)
{
    if (sv->dim < 1 || !sv->v) return eb_fail(e, "%s: empty steering vector", path);
    FILE *f = fopen(path, "wb");
    if (!f) return eb_fail(e, "%s: %s", path, strerror(errno));
    char model[128], ident[256], data[64], kw[32], think[16], decoding[96], created[32];
    one_line(model, sizeof model, sv->model);
    one_line(ident, sizeof ident, sv->model_identity);
    one_line(data, sizeof data, sv->dataset);
    one_line(kw, sizeof kw, sv->keywords);
    one_line(think, sizeof think, sv->think);
    one_line(decoding, sizeof decoding, sv->decoding[0] ? sv->decoding : "greedy");
    one_line(created, sizeof created, sv->created);
    fprintf(f, "%s %d\n", STEER_MAGIC, STEER_VERSION);
    fprintf(f, "model: %s\nmodel_identity: %s\nmodel_hash: %016" PRIx64 "\n", model, ident,
            steering_hash(ident));
    fprintf(f, "layer: %d\ndim: %d\n", sv->layer, sv->dim);
    fprintf(f, "n_reflection: %d\nn_transition: %d\nn_execution: %d\n", sv->n_reflection,
            sv->n_transition, sv->n_execution);
    fprintf(f, "n_correct: %d\nn_incorrect: %d\n", sv->n_correct, sv->n_incorrect);
    fprintf(f, "dataset: %s\nmax_new: %d\nkeywords: %s\nthink: %s\ndecoding: %s\ncreated: %s\n\n",
            data, sv->max_new, kw, think, decoding, created);
    for (int i = 0; i < sv->dim; i++) {
        uint32_t bits;
        memcpy(&bits, &sv->v[i], sizeof bits);
        unsigned char le[4] = {bits & 0xff, (bits >> 8) & 0xff, (bits >> 16) & 0xff, bits >> 24};
        fwrite(le, 1, 4, f);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return eb_fail(e, "%s: write error", path);
    return 0;
}

static int parse_int(const char *path, const char *key, const char *v, int lo, int hi, int *out,
                     struct eb_err *e)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return eb_fail(e, "%s: header %s: expected an integer in [%d, %d], got '%s'", path, key,
                       lo, hi, v);
    *out = (int)x;
    return 0;
}

static int read_header(FILE *f, const char *path, struct steer_vector *sv, struct eb_err *e)
{
    char line[512];
    if (!fgets(line, sizeof line, f)) return eb_fail(e, "%s: empty file", path);
    size_t ml = strlen(STEER_MAGIC);
    if (strncmp(line, STEER_MAGIC, ml) != 0 || line[ml] != ' ')
        return eb_fail(e, "%s: not a steering vector file (no '%s' line)", path, STEER_MAGIC);
    line[strcspn(line, "\r\n")] = '\0';
    if (parse_int(path, "version", line + ml + 1, 0, 1 << 20, &sv->version, e)) return -1;
    if (sv->version != STEER_VERSION)
        return eb_fail(e, "%s: format version %d, this build reads version %d", path, sv->version,
                       STEER_VERSION);
    int have_hash = 0, have_layer = 0, have_dim = 0;
    for (int n = 0;; n++) {
        if (n > 1000) return eb_fail(e, "%s: header has no end", path);
        if (!fgets(line, sizeof line, f)) return eb_fail(e, "%s: header has no end", path);
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n')
            return eb_fail(e, "%s: header line %d too long", path, n + 2);
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (len == 0) break;
        char *colon = strstr(line, ": ");
        if (!colon) return eb_fail(e, "%s: header line %d is not 'key: value'", path, n + 2);
        *colon = '\0';
        const char *k = line, *v = colon + 2;
        int rc = 0;
        if (!strcmp(k, "model")) one_line(sv->model, sizeof sv->model, v);
        else if (!strcmp(k, "model_identity"))
            one_line(sv->model_identity, sizeof sv->model_identity, v);
        else if (!strcmp(k, "dataset")) one_line(sv->dataset, sizeof sv->dataset, v);
        else if (!strcmp(k, "keywords")) one_line(sv->keywords, sizeof sv->keywords, v);
        else if (!strcmp(k, "think")) one_line(sv->think, sizeof sv->think, v);
        else if (!strcmp(k, "created")) one_line(sv->created, sizeof sv->created, v);
        else if (!strcmp(k, "decoding")) one_line(sv->decoding, sizeof sv->decoding, v);
        else if (!strcmp(k, "model_hash")) {
            char *end;
            errno = 0;
            sv->model_hash = strtoull(v, &end, 16);
            if (errno || end == v || *end || strlen(v) != 16)
                return eb_fail(e, "%s: header model_hash: expected 16 hex digits, got '%s'",
                               path, v);
            have_hash = 1;
        } else if (!strcmp(k, "layer")) {
            rc = parse_int(path, k, v, 0, 100000, &sv->layer, e);
            have_layer = 1;
        } else if (!strcmp(k, "dim")) {
            rc = parse_int(path, k, v, 1, 1 << 20, &sv->dim, e);
            have_dim = 1;
        } else if (!strcmp(k, "n_reflection")) rc = parse_int(path, k, v, 0, 1 << 30, &sv->n_reflection, e);
        else if (!strcmp(k, "n_transition")) rc = parse_int(path, k, v, 0, 1 << 30, &sv->n_transition, e);
        else if (!strcmp(k, "n_execution")) rc = parse_int(path, k, v, 0, 1 << 30, &sv->n_execution, e);
        else if (!strcmp(k, "n_correct")) rc = parse_int(path, k, v, 0, 1 << 30, &sv->n_correct, e);
        else if (!strcmp(k, "n_incorrect")) rc = parse_int(path, k, v, 0, 1 << 30, &sv->n_incorrect, e);
        else if (!strcmp(k, "max_new")) rc = parse_int(path, k, v, 0, 1 << 30, &sv->max_new, e);
        if (rc) return -1;
    }
    if (!have_hash || !have_layer || !have_dim)
        return eb_fail(e, "%s: header lacks %s", path,
                       !have_hash ? "model_hash" : !have_layer ? "layer" : "dim");
    return 0;
}

int steer_vector_load(const char *path, const char *expect_identity, int expect_dim,
                      struct steer_vector *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return eb_fail(e, "%s: %s", path, strerror(errno));
    int rc = -1;
    if (read_header(f, path, out, e)) goto done;
    if (expect_identity && steering_hash(expect_identity) != out->model_hash) {
        eb_fail(e, "%s: made for model '%s' [%s], but the model is [%s]; calibrate a vector "
                   "for this model", path, out->model, out->model_identity, expect_identity);
        goto done;
    }
    if (expect_dim > 0 && expect_dim != out->dim) {
        eb_fail(e, "%s: vector of dim %d, but the model's hidden size is %d", path, out->dim,
                expect_dim);
        goto done;
    }
    out->v = eb_malloc((size_t)out->dim * sizeof *out->v, e);
    if (!out->v) goto done;
    for (int i = 0; i < out->dim; i++) {
        unsigned char le[4];
        if (fread(le, 1, 4, f) != 4) {
            eb_fail(e, "%s: truncated: %d of %d floats", path, i, out->dim);
            goto done;
        }
        uint32_t bits = le[0] | (uint32_t)le[1] << 8 | (uint32_t)le[2] << 16 | (uint32_t)le[3] << 24;
        memcpy(&out->v[i], &bits, sizeof bits);
        if (!isfinite(out->v[i])) {
            eb_fail(e, "%s: value %d is not finite", path, i);
            goto done;
        }
    }
    if (fgetc(f) != EOF) {
        eb_fail(e, "%s: data longer than dim = %d floats", path, out->dim);
        goto done;
    }
    rc = 0;
done:
    fclose(f);
    if (rc) steer_vector_free(out);
    return rc;
}
