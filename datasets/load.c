/* load.c - dataset_load: a registry name to its rows, from the built-in
 * synthetic generator (synthetic.c) or a JSON Lines file (jsonl.c) found
 * through the registry (registry.c) and checked against its checksum
 * (checksum.c).  Kept apart from both sources so that neither depends on the
 * other. */
#include "dataset.h"

#include <string.h>

int dataset_load(const char *name, const char *data_dir, int offset, int limit,
                 struct dataset *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    const struct dataset_spec *spec = dataset_find(name, e);
    if (!spec) return -1;
    if (offset < 0) return eb_fail(e, "%s: offset %d is negative", name, offset);
    if (!spec->file) {
        int n;
        uint32_t seed;
        if (synthetic_parse_name(name, &n, &seed, e)) return -1;
        if (offset >= n)
            return eb_fail(e, "%s: offset %d is past the last of its %d rows", name, offset, n);
        int want = n - offset;
        if (limit > 0 && limit < want) want = limit;
        /* problem i depends only on (seed, i): generate the prefix, drop the head */
        struct dataset d;
        if (synthetic_generate(offset + want, seed, &d, e)) return -1;
        for (int i = 0; i < offset; i++) dataset_item_free(&d.items[i]);
        memmove(d.items, d.items + offset, (size_t)want * sizeof *d.items);
        d.n = want;
        *out = d;
        return 0;
    }
    char path[4096];
    if (dataset_file_path(spec, data_dir, path, sizeof path, e)) return -1;
    if (dataset_verify_file(spec, data_dir, path, e)) return -1;
    return dataset_load_file(spec, path, offset, limit, out, e);
}
