/* modelfile.h - one description of a model, whichever file format it came from.
 *
 * model_file_open accepts a GGUF file, a Hugging Face directory (config.json +
 * model.safetensors or model.safetensors.index.json + shards), or a registry
 * name from model/models.json (e.g. "smollm2-135m").  Tensors are exposed under
 * canonical GGUF names ("token_embd.weight", "blk.N.attn_q.weight",
 * "blk.N.attn_q_norm.weight" for qwen3, "output.weight", "rope_freqs.weight"),
 * whatever the source. */
#ifndef EB_MODELFILE_H
#define EB_MODELFILE_H

#include <stddef.h>

#include "../util/err.h"
#include "tensor.h"
#include "tokenizer.h"

enum model_arch { ARCH_LLAMA = 0, ARCH_QWEN2 = 1, ARCH_QWEN3 = 2 };
enum model_format { MODEL_FORMAT_GGUF = 0, MODEL_FORMAT_SAFETENSORS = 1 };
enum rope_scaling_type { ROPE_SCALING_NONE = 0, ROPE_SCALING_LLAMA3 = 1, ROPE_SCALING_LINEAR = 2 };

struct model_config {
    enum model_arch arch;
    int n_layer;
    int n_embd;          /* hidden size */
    int n_ff;            /* intermediate size */
    int n_head;
    int n_head_kv;
    int head_dim;
    int n_vocab;         /* rows of the embedding matrix (may exceed the tokenizer's vocab) */
    int n_ctx_train;     /* max_position_embeddings / context_length */
    float rms_eps;
    double rope_theta;
    int rope_dims;       /* rotary dims; = head_dim for every model in scope */
    struct {
        enum rope_scaling_type type;
        float factor, low_freq_factor, high_freq_factor;
        int original_ctx;
    } rope_scaling;      /* from config.json; GGUF llama3 scaling comes as rope_freqs.weight */
    int tied_embeddings; /* 1: no output.weight, the LM head is token_embd.weight */
    int qk_permuted;     /* 1: Q/K rows in GGUF's interleaved-pair layout (llama-arch GGUF),
                            use ROPE_PAIR_ADJACENT; 0: HF half-split layout, ROPE_PAIR_HALF */
    int has_qkv_bias;    /* qwen2 */
    int has_qk_norm;     /* qwen3 */
    int bos_id;          /* -1 if none */
    int eos_ids[8];      /* every id that ends generation */
    int n_eos;
};

struct model_file;

int model_file_open(const char *path_or_name, struct model_file **out, struct eb_err *e);
/* Closing drops one reference; the file is unmapped when the last goes.
 * model_load retains the file while its weights read from the mapping. */
void model_file_close(struct model_file *mf);
struct model_file *model_file_retain(const struct model_file *mf);

const struct model_config *model_file_config(const struct model_file *mf);
enum model_format model_file_format(const struct model_file *mf);
const char *model_file_path(const struct model_file *mf);  /* resolved path */
size_t model_file_bytes(const struct model_file *mf);       /* total bytes of the weight files */

int model_file_tensor_count(const struct model_file *mf);
const struct tensor_ref *model_file_tensor_at(const struct model_file *mf, int idx);
/* By canonical name; NULL if absent. */
const struct tensor_ref *model_file_tensor(const struct model_file *mf, const char *name);

/* For GGUF sources, the open GGUF (tokenizer metadata lives there); else NULL. */
const struct gguf_file *model_file_gguf(const struct model_file *mf);
/* A tensor's bytes [p, p + n) were copied by the backend and will not be read
 * again: drop the file pages that hold them from this process's memory. */
void model_file_drop_pages(const struct model_file *mf, const void *p, size_t n);
/* For HF directories, the directory path (holds tokenizer.json); else NULL. */
const char *model_file_dir(const struct model_file *mf);

const char *model_arch_name(enum model_arch a);

/* Resolve a registry name or a path.  Writes the file/directory path into out.
 * A registry name whose file is absent fails with how to obtain it. */
int model_resolve(const char *path_or_name, char *out, size_t out_len, struct eb_err *e);

/* Default chat template name ("chatml", "r1", ...) of a registry entry, looked
 * up by name or by the base name of its file; writes it into out and returns 0,
 * or returns -1 when the model is not in the registry (not an error). */
int model_registry_chat(const char *path_or_name, char *out, size_t out_len);
/* The registry name of a name or of a path to a registry entry's file (its
 * base name, case aside); -1 when neither. */
int model_registry_name(const char *path_or_name, char *out, size_t out_len);
/* The chat template to use: `name` when given, else the registry's default
 * for the model, else raw.  -1 (with e set) for an unknown template name. */
int model_chat_template(const char *path_or_name, const char *name, enum chat_template *out,
                        struct eb_err *e);

#endif
