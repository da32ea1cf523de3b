/* model_shape.c - a model of a real model's shape whose weights are only
 * backend allocations, no data: for a backend that computes nothing (the
 * tally-only backend, kernels/backend_tally.c), to plan a 7B-shaped batch's
 * memory (tests/test_memplan.c) or to time the host's own work per decode
 * step at that shape (tools/bench_host.c) without 15 GB of weights. */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

int model_shape_config(const char *name, struct model_config *out)
{
    struct model_config c;
    memset(&c, 0, sizeof c);
    c.rope_dims = c.head_dim = 128;
    c.n_ctx_train = 131072;
    c.bos_id = -1;
    c.n_eos = 1;
    if (strcmp(name, "qwen7b") == 0) { /* DeepSeek-R1-Distill-Qwen-7B's config.json */
        c.arch = ARCH_QWEN2, c.n_layer = 28, c.n_embd = 3584, c.n_ff = 18944;
        c.n_head = 28, c.n_head_kv = 4, c.n_vocab = 152064, c.rms_eps = 1e-6f;
        c.rope_theta = 10000.0, c.has_qkv_bias = 1, c.eos_ids[0] = 151643;
    } else if (strcmp(name, "llama8b") == 0) { /* DeepSeek-R1-Distill-Llama-8B's */
        c.arch = ARCH_LLAMA, c.n_layer = 32, c.n_embd = 4096, c.n_ff = 14336;
        c.n_head = 32, c.n_head_kv = 8, c.n_vocab = 128256, c.rms_eps = 1e-5f;
        c.rope_theta = 500000.0, c.eos_ids[0] = 128001;
        c.rope_scaling.type = ROPE_SCALING_LLAMA3;
        c.rope_scaling.factor = 8.0f, c.rope_scaling.low_freq_factor = 1.0f;
        c.rope_scaling.high_freq_factor = 4.0f, c.rope_scaling.original_ctx = 8192;
    } else {
        return -1;
    }
    *out = c;
    return 0;
}

struct model *model_shape_create(struct backend *be, const struct model_config *c)
{
    struct model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->cfg = *c;
    m->be = be;
    m->pairing = ROPE_PAIR_HALF;
    m->inv_freq = calloc((size_t)c->head_dim / 2, sizeof *m->inv_freq);
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->inv_freq || !m->layers) {
        model_free(m);
        return NULL;
    }
    model_rope_inv_freq(c, NULL, m->inv_freq);
    int qd = c->n_head * c->head_dim, kvd = c->n_head_kv * c->head_dim;
    m->tok_embd = be->weight_create(be, WEIGHT_BF16, c->n_vocab, c->n_embd, NULL, 0, 0);
    m->output = be->weight_create(be, WEIGHT_BF16, c->n_vocab, c->n_embd, NULL, 0, 0);
    m->output_norm = be->alloc(be, (size_t)c->n_embd);
    for (int l = 0; l < c->n_layer; l++) {
        struct model_layer_weights *w = &m->layers[l];
        w->attn_norm = be->alloc(be, (size_t)c->n_embd);
        w->ffn_norm = be->alloc(be, (size_t)c->n_embd);
        w->wq = be->weight_create(be, WEIGHT_BF16, qd, c->n_embd, NULL, 0, 0);
        w->wk = be->weight_create(be, WEIGHT_BF16, kvd, c->n_embd, NULL, 0, 0);
        w->wv = be->weight_create(be, WEIGHT_BF16, kvd, c->n_embd, NULL, 0, 0);
        w->wo = be->weight_create(be, WEIGHT_BF16, c->n_embd, qd, NULL, 0, 0);
        w->w_gate = be->weight_create(be, WEIGHT_BF16, c->n_ff, c->n_embd, NULL, 0, 0);
        w->w_up = be->weight_create(be, WEIGHT_BF16, c->n_ff, c->n_embd, NULL, 0, 0);
        w->w_down = be->weight_create(be, WEIGHT_BF16, c->n_embd, c->n_ff, NULL, 0, 0);
        if (c->has_qkv_bias) { /* one buffer, as model.c loads them */
            w->bqkv = be->alloc(be, (size_t)qd + 2 * (size_t)kvd);
            w->bq = w->bqkv;
            w->bk = w->bqkv ? w->bqkv + qd : NULL;
            w->bv = w->bqkv ? w->bqkv + qd + kvd : NULL;
        }
    }
    return m;
}
