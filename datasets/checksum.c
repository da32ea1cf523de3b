/* checksum.c - a dataset file must be the file its checksum names.
 *
 * The expected SHA-256 comes from the data directory's SHA256SUMS (the format
 * of `sha256sum`: "<64 hex>  <file name>" per line) when the directory has one,
 * else from the registry (the official normalised file).  A directory of one's
 * own files therefore needs a SHA256SUMS that lists them; a dataset with no
 * checksum anywhere (livecodebench, not shipped) is not checked. */
#include "dataset.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../util/sha256.h"

#define SUMS_FILE "SHA256SUMS"

/* SHA-256 of a whole file as hex; 0 or -1 (e set). */
static int file_sha256(const char *path, char hex[65], struct eb_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) return eb_fail(e, "%s: cannot open: %s", path, strerror(errno));
    struct sha256 c;
    sha256_init(&c);
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&c, buf, n);
    int err = ferror(f);
    fclose(f);
    if (err) return eb_fail(e, "%s: read error", path);
    uint8_t d[32];
    sha256_final(&c, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return 0;
}

/* Look `file` up in <dir>/SHA256SUMS.  Returns 1 and fills want when listed,
 * 0 when the directory has no such file, -1 (e set) when it has one that does
 * not list `file` or cannot be read. */
static int listed_sha256(const char *dir, const char *file, char want[65], char *sums,
                         size_t sums_cap, struct eb_err *e)
{
    int len = snprintf(sums, sums_cap, "%s/%s", dir, SUMS_FILE);
    if (len < 0 || (size_t)len >= sums_cap) return eb_fail(e, "%s: path too long", dir);
    FILE *f = fopen(sums, "r");
    if (!f) {
        if (errno == ENOENT) return 0;
        return eb_fail(e, "%s: cannot open: %s", sums, strerror(errno));
    }
    char line[1024];
    int found = 0, line_no = 0;
    while (!found && fgets(line, sizeof line, f)) {
        line_no++;
        size_t ll = strcspn(line, "\r\n");
        line[ll] = '\0';
        if (ll == 0) continue;
        /* "<hex>  <name>" or "<hex> *<name>" (binary mode) */
        if (ll < 66 || strspn(line, "0123456789abcdef") != 64 || line[64] != ' ' ||
            (line[65] != ' ' && line[65] != '*')) {
            fclose(f);
            return eb_fail(e, "%s:%d: expected \"<64 lowercase hex digits>  <file name>\"", sums, line_no);
        }
        if (strcmp(line + 66, file) == 0) {
            memcpy(want, line, 64);
            want[64] = '\0';
            found = 1;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (err) return eb_fail(e, "%s: read error", sums);
    if (!found) return eb_fail(e, "%s does not list %s (add its line: sha256sum %s >> %s)", sums,
                               file, file, SUMS_FILE);
    return 1;
}

int dataset_verify_file(const struct dataset_spec *spec, const char *data_dir, const char *path,
                        struct eb_err *e)
{
    char dir[4096], sums[4200], want[65] = "", got[65];
    if (!spec->file) return 0;
    if (dataset_default_data_dir(data_dir, dir, sizeof dir, e)) return -1;
    int listed = listed_sha256(dir, spec->file, want, sums, sizeof sums, e);
    if (listed < 0) return -1;
    const char *source = sums;
    if (!listed) {
        if (!spec->sha256) return 0;
        snprintf(want, sizeof want, "%s", spec->sha256);
        source = "the dataset registry (datasets/registry.c)";
    }
    if (file_sha256(path, got, e)) return -1;
    if (strcmp(got, want) != 0)
        return eb_fail(e, "%s: sha256 %s, but %s says %s: the file was changed or is another "
                          "version (restore datasets/data/ from git, or `make data`)",
                       path, got, source, want);
    return 0;
}
