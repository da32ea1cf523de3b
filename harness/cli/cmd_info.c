/* cmd_info.c - `evictbench info MODEL`: what a model file holds. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "model/modelfile.h"
#include "model/quant.h"
#include "harness/cli/cli.h"
#include "harness/cli/commands.h"
#include "model/model.h"

static void print_help(void)
{
    printf("usage: evictbench info MODEL [--tensors]\n\n"
           "MODEL is a registry name (e.g. smollm2-135m), a .gguf file or a Hugging Face\n"
           "directory (config.json + safetensors).  Prints architecture, dimensions,\n"
           "tensor types and counts, file size and whether embeddings are tied, and how\n"
           "the CPU runtime holds the weight matrices (types in memory, resident bytes).\n"
           "  --tensors   also each weight matrix: file type -> type in memory\n");
}

static void print_matrix(void *ctx, const char *name, const struct weight *w)
{
    (void)ctx;
    const char *how = w->interleave             ? "8 rows interleaved (AVX2)"
                      : w->bytes || w->view_of ? "copied"
                                               : "read in place";
    printf("  %-28s %-5s -> %-5s %s%s\n", name, quant_type_name((int)w->type),
           quant_type_name((int)w->held), w->view_of ? "joined, " : "", how);
}

/* Bytes one batch-1 decode token reads: every matrix once, the embedding
 * table one row unless it is also the LM head (tied). */
struct token_read {
    int tied;
    size_t bytes;
};

static void add_token_read(void *ctx, const char *name, const struct weight *w)
{
    struct token_read *t = ctx;
    if (w->view_of) return; /* its bytes are the joined weight's */
    size_t row = quant_row_bytes((int)w->held, w->cols);
    int embd = strcmp(name, "token_embd.weight") == 0;
    t->bytes += row * (embd && !t->tied ? 1 : (size_t)w->rows);
}

static void count_interleaved(void *ctx, const char *name, const struct weight *w)
{
    (void)name;
    int *counts = ctx;
    counts[0]++;
    if (w->interleave) counts[1]++;
}

/* The architecture and file lines of `info`. */
static void print_config(const struct model_file *mf)
{
    const struct model_config *c = model_file_config(mf);
    printf("path            %s\n", model_file_path(mf));
    printf("format          %s\n", model_file_format(mf) == MODEL_FORMAT_GGUF ? "gguf" : "safetensors");
    printf("architecture    %s\n", model_arch_name(c->arch));
    printf("layers          %d\n", c->n_layer);
    printf("embedding dim   %d\n", c->n_embd);
    printf("ffn dim         %d\n", c->n_ff);
    printf("heads           %d\n", c->n_head);
    printf("kv heads        %d\n", c->n_head_kv);
    printf("head dim        %d\n", c->head_dim);
    printf("vocab           %d\n", c->n_vocab);
    printf("context length  %d\n", c->n_ctx_train);
    printf("rope theta      %g\n", c->rope_theta);
    printf("rope scaling    %s\n", c->rope_scaling.type == ROPE_SCALING_LLAMA3 ? "llama3"
                                   : c->rope_scaling.type == ROPE_SCALING_LINEAR ? "linear" : "none");
    printf("rope pairing    %s\n", c->qk_permuted ? "adjacent (GGUF-permuted Q/K)" : "half-split (HF layout)");
    printf("rms eps         %g\n", (double)c->rms_eps);
    printf("qkv bias        %s\n", c->has_qkv_bias ? "yes" : "no");
    printf("q/k norm        %s\n", c->has_qk_norm ? "yes" : "no");
    printf("tied embeddings %s\n", c->tied_embeddings ? "yes" : "no");
    printf("file size       %zu bytes (%.1f MiB)\n", model_file_bytes(mf),
           model_file_bytes(mf) / (1024.0 * 1024.0));
}

int cmd_info(int argc, char **argv)
{
    const char *model = NULL;
    int tensors = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { print_help(); return 0; }
        if (!strcmp(argv[i], "--tensors")) { tensors = 1; continue; }
        if (!strcmp(argv[i], "--model")) {
            if (!(model = cli_value(argc, argv, &i))) return 2;
        } else if (argv[i][0] == '-') {
            return cli_errorf("info: unknown option '%s' (see evictbench info --help)", argv[i]);
        } else if (!model) {
            model = argv[i];
        } else {
            return cli_errorf("info: unexpected argument '%s'", argv[i]);
        }
    }
    if (!model) return cli_error("info: missing MODEL (see evictbench info --help)");

    /* A FIFO or device would block the read (or never end): only regular
     * files and directories (safetensors) are models. */
    struct stat sb;
    if (stat(model, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
        return cli_errorf("info: %s: not a regular file or directory", model);
    struct eb_err e = {0};
    struct model_file *mf = NULL;
    if (model_file_open(model, &mf, &e)) return cli_error(e.msg);

    print_config(mf);

    int counts[EB_TYPE_COUNT_] = {0};
    int n = model_file_tensor_count(mf);
    for (int i = 0; i < n; i++) {
        int t = model_file_tensor_at(mf, i)->type;
        if (t >= 0 && t < EB_TYPE_COUNT_) counts[t]++;
    }
    printf("tensors         %d:", n);
    for (int t = 0; t < EB_TYPE_COUNT_; t++)
        if (counts[t]) printf(" %s x%d", quant_type_name(t), counts[t]);
    printf("\n");

    /* Loading natively reads nothing yet: the matrices point into the file. */
    struct backend *be = backend_cpu_create(1);
    struct model *m = NULL;
    struct model_load_opts native = {.weights = MODEL_WEIGHTS_NATIVE};
    if (!be || model_load_opts(mf, be, &native, &m, &e)) {
        if (be) be->destroy(be);
        model_file_close(mf);
        return cli_error(be ? e.msg : "info: cannot create the CPU backend");
    }
    char types[64];
    model_weight_types(m, types, sizeof types);
    printf("in memory       %s (every type has integer kernels; f32 with --weights f32)\n", types);
    int inter[2] = {0, 0};
    model_each_weight(m, count_interleaved, inter);
    printf("layout          %d of %d matrices repacked 8 rows side by side for the AVX2 kernels\n"
           "                (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K; the rest read in place)\n",
           inter[1], inter[0]);
    struct model_load_opts exact = {.weights = MODEL_WEIGHTS_F32};
    printf("weight bytes    %zu resident (%.1f MiB; %zu with --weights f32)\n", m->weight_bytes,
           m->weight_bytes / (1024.0 * 1024.0), model_weight_bytes_opts(mf, &exact));
    struct token_read tr = {.tied = m->cfg.tied_embeddings, .bytes = 0};
    model_each_weight(m, add_token_read, &tr);
    printf("read a token    %zu bytes at batch 1 (every matrix once; the embedding table\n"
           "                one row unless tied)\n", tr.bytes);
    if (tensors) model_each_weight(m, print_matrix, NULL);
    model_free(m);
    be->destroy(be);
    model_file_close(mf);
    return 0;
}
