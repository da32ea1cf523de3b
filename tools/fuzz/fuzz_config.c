// fuzz-sources: harness/exp/config.c harness/exp/config_budget.c harness/exp/config_device.c harness/exp/device_name.c harness/exp/config_resources.c harness/exp/prompt.c datasets/registry.c datasets/dataset.c datasets/synthetic.c datasets/load.c datasets/jsonl.c datasets/checksum.c util/sha256.c model/modelfile.c model/registry.c model/chat.c model/gguf.c model/safetensors.c util/mapped.c model/hfconfig.c util/json_file.c kernels/quant.c kernels/kv_type.c model/tokenizer.c model/tokenizer_json.c model/tokenizer_gguf.c model/bpe.c model/pretok.c model/unicode.c model/unicode_data.c model/utf8_stream.c util/err.c util/repo_file.c
// fuzz-libs: -lcjson
/* fuzz_config.c - libFuzzer entry for the experiment config parser
 * (harness/exp/config.c).  Every input is parsed as a config's text; an
 * accepted config is freed again, a refused one must carry a message.
 * Built by tools/fuzz/build.sh; seeds live in tests/fuzz_corpus/config/. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "harness/exp/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct exp_config c;
    struct eb_err e = {0};
    if (exp_config_parse((const char *)data, size, "fuzz.json", &c, &e) == 0) {
        /* an accepted config has its lists filled */
        if (c.n_models < 1 || c.n_datasets < 1 || c.n_policies < 1 || !c.prompt) abort();
        exp_config_free(&c);
    } else if (!e.msg[0]) {
        abort();    /* every refusal says why */
    }
    return 0;
}
