/* steerer.c - steering inside a policy (steering.h): the vector opened for
 * the model and put on the backend, a sequence's token stream, and the steer
 * hook's body that adds alpha * V to the rows where steering fires. */
#include "steering.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int steerer_open(struct steerer *s, const struct policy_model *t, int layer, enum think_mode mode,
                 const struct sent_tokens *tok, const char *policy, struct eb_err *e)
{
    int n_layer = t->n_layer;
    memset(s, 0, sizeof *s);
    s->dev_alpha = NAN;
    s->mode = mode;
    s->tok = tok;
    char guess[512];
    const char *path = t->steer_vector;
    if (!path && t->model_name) {
        const char *base = strrchr(t->model_name, '/');
        base = base ? base + 1 : t->model_name;
        snprintf(guess, sizeof guess, "vectors/%s.bin", base);
        FILE *f = fopen(guess, "rb");
        if (f) {
            fclose(f);
            path = guess;
        }
    }
    if (!path)
        return eb_fail(e, "policy %s needs a steering vector: give one (made by `evictbench "
                          "calibrate`) or put it at vectors/%s.bin",
                       policy, t->model_name ? t->model_name : "<model>");
    if (steer_vector_load(path, t->model_identity, t->n_embd, &s->vec, e)) return -1;
    /* A vector is a direction in one layer's residual stream; added at another
     * layer it is a different intervention, so that must be asked for by
     * recalibrating, not happen through a default. */
    if (layer > 0 && layer != s->vec.layer) {
        int vl = s->vec.layer;
        steer_vector_free(&s->vec);
        return eb_fail(e, "policy %s: layer=%d, but %s was calibrated at layer %d (use layer=0 "
                          "for the vector's own, or calibrate one at layer %d)",
                       policy, layer, path, vl, layer);
    }
    s->layer = layer > 0 ? layer : s->vec.layer;
    if (s->layer < 1 || s->layer >= n_layer) {
        int l = s->layer;
        steer_vector_free(&s->vec);
        return eb_fail(e, "policy %s: steering layer %d outside [1, %d) (the input of layer 0 "
                          "is the embedding)", policy, l, n_layer);
    }
    s->host = eb_malloc((size_t)s->vec.dim * sizeof *s->host, e);
    if (!s->host) {
        steer_vector_free(&s->vec);
        return -1;
    }
    return 0;
}

void steerer_close(struct steerer *s)
{
    if (!s) return;
    if (s->dev && s->be) s->be->free(s->be, s->dev);
    free(s->host);
    steer_vector_free(&s->vec);
    memset(s, 0, sizeof *s);
}

int steer_seq_push(struct steer_seq *q, int token, struct eb_err *e)
{
    if (q->n_toks == q->cap) {
        int cap = q->cap ? q->cap * 2 : 256;
        int *t = realloc(q->toks, (size_t)cap * sizeof *t);
        if (!t) return eb_fail(e, "steering: out of memory for %d tokens", cap);
        q->toks = t;
        q->cap = cap;
    }
    q->toks[q->n_toks++] = token;
    return 0;
}

int steer_seq_begin(struct steer_seq *q, enum think_mode mode, int pairs,
                    const struct seq_view *sv, struct eb_err *e)
{
    steer_seq_free(q);
    if (sv->n_prompt > 0 && !sv->prompt)
        return eb_fail(e, "steering: the runtime passed no prompt tokens");
    steer_track_begin(&q->tr, mode, pairs, sv->n_prompt);
    for (int i = 0; i < sv->n_prompt; i++)
        if (steer_seq_push(q, sv->prompt[i], e)) return -1;
    return 0;
}

void steer_seq_free(struct steer_seq *q)
{
    free(q->toks);
    memset(q, 0, sizeof *q);
}

int steerer_apply(struct steerer *s, struct steer_seq *q, int layer, struct backend *be,
                  float *hidden, int n_rows, int dim, double alpha, struct eb_err *e)
{
    if (layer != s->layer - 1) return 0;
    if (dim != s->vec.dim)
        return eb_fail(e, "steering: hidden size %d, vector dim %d", dim, s->vec.dim);
    if (q->fed + n_rows > q->n_toks)
        return eb_fail(e, "steering: %d rows but only %d tokens known", q->fed + n_rows,
                       q->n_toks);
    for (int r = 0; r < n_rows; r++) {
        int id = q->toks[q->fed + r];
        if (!steer_track_token(&q->tr, s->tok, id)) continue;
        if (!s->dev || s->be != be) {
            if (s->dev && s->be) s->be->free(s->be, s->dev);
            s->be = be;
            s->dev = be->alloc(be, (size_t)dim);
            if (!s->dev) return eb_fail(e, "steering: out of backend memory");
            s->dev_alpha = NAN;
        }
        if (!(alpha == s->dev_alpha)) {
            for (int d = 0; d < dim; d++) s->host[d] = (float)(alpha * s->vec.v[d]);
            be->upload(be, s->dev, s->host, (size_t)dim);
            s->dev_alpha = alpha;
        }
        be->add(be, hidden + (size_t)r * dim, s->dev, (size_t)dim);
        q->n_steered++;
    }
    q->fed += n_rows;
    return 0;
}

