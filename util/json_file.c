/* json_file.c - a small JSON file read and parsed whole (json_file.h). */
#include "json_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EB_JSON_MAX (64L * 1024 * 1024)

cJSON *eb_json_load(const char *path, struct eb_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        eb_fail(e, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        eb_fail(e, "%s: cannot read", path);
        return NULL;
    }
    if (size > EB_JSON_MAX) {
        fclose(f);
        eb_fail(e, "%s: %ld bytes is too large for a JSON file", path, size);
        return NULL;
    }
    buf = eb_malloc((size_t)size + 1, e);
    if (!buf) {
        fclose(f);
        eb_wrap(e, path);
        return NULL;
    }
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    if (got != (size_t)size) {
        free(buf);
        eb_fail(e, "%s: short read", path);
        return NULL;
    }
    buf[size] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(buf, &end, 1);
    if (!root) {
        size_t at = end && end >= buf && end <= buf + size ? (size_t)(end - buf) : 0;
        eb_fail(e, "%s: malformed JSON near byte %zu", path, at);
    }
    free(buf);
    return root;
}
