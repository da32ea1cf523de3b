#include "model_tokenizer.h"

#include <stdio.h>

int model_file_tokenizer(const struct model_file *mf, struct tokenizer **out, struct eb_err *e)
{
    const struct gguf_file *g = model_file_gguf(mf);
    if (g) {
        if (tokenizer_from_gguf(g, out, e)) return eb_wrap(e, model_file_path(mf));
        return 0;
    }
    const char *dir = model_file_dir(mf);
    if (!dir) return eb_fail(e, "%s: no tokenizer source", model_file_path(mf));
    char path[4096];
    if (snprintf(path, sizeof path, "%s/tokenizer.json", dir) >= (int)sizeof path)
        return eb_fail(e, "%s: path too long", dir);
    return tokenizer_from_json(path, out, e);
}
