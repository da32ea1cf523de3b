/* beacon_buffer.c - BeaconKV's per-sequence bookkeeping (beaconkv_priv.h):
 * a buffer of past pre-RoPE decode queries per (layer, unit), thinned by
 * continual FPS when it fills, and the observation rows a select draws from
 * it (the beacons, rotated to the current position, and the recent queries). */
#include <stdlib.h>
#include <string.h>

#include "beaconkv_priv.h"

void beacon_seq_free(void *p)
{
    struct beacon_seq *q = p;
    if (!q) return;
    free(q->buf);
    free(q->count);
    free(q);
}

int beaconkv_begin(void *self, int seq, const struct seq_view *sv, struct eb_err *e)
{
    struct beaconkv *s = self;
    struct beacon_seq *q = seq_table_fresh(&s->seqs, seq, sizeof *q, beacon_seq_free, e);
    if (!q) return -1;
    q->n_prompt = sv->n_prompt;
    q->last_pos = -1;
    size_t units = (size_t)s->m.n_layer * s->n_units;
    q->buf = malloc(units * s->upper * s->unit_dim * sizeof *q->buf);
    q->count = calloc(units, sizeof *q->count);
    if (!q->buf || !q->count) return eb_fail(e, "out of memory for the query buffers");
    return 0;
}

void beaconkv_end(void *self, int seq)
{
    struct beaconkv *s = self;
    seq_table_drop(&s->seqs, seq, beacon_seq_free);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Continual FPS: keep buf_lower diverse entries, in their original order. */
static int thin(struct beaconkv *s, float *buf, int *count, struct eb_err *e)
{
    if (beacon_fps(buf, *count, s->unit_dim, s->lower, s->sel, e)) return -1;
    qsort(s->sel, (size_t)s->lower, sizeof *s->sel, cmp_int);
    for (int i = 0; i < s->lower; i++) /* sel ascends, so sel[i] >= i: no overlap issue */
        memmove(buf + (size_t)i * s->unit_dim, buf + (size_t)s->sel[i] * s->unit_dim,
                (size_t)s->unit_dim * sizeof *buf);
    *count = s->lower;
    return 0;
}

/* Append the newest query of every layer (position next_pos - 1), pre-RoPE. */
int beacon_record_query(struct beaconkv *s, struct beacon_seq *q, const struct cache_view *cv,
                        struct eb_err *e)
{
    int d = cv->head_dim, pos = cv->next_pos - 1, H = cv->n_head;
    if (pos <= q->last_pos || !cv->q || cv->n_q < 1) return 0;
    if (!cv->rope_inv_freq)
        return eb_fail(e, "needs the model's RoPE frequencies to recover pre-RoPE queries");
    q->last_pos = pos;
    for (int l = 0; l < cv->n_layer; l++) {
        cv->be->download(cv->be, s->w.qh, cv->q[l] + (size_t)(cv->n_q - 1) * H * d, (size_t)H * d);
        for (int g = 0; g < H; g++) beacon_rotate(s->w.qh + (size_t)g * d, d, pos, cv->rope_inv_freq, cv->rope_pairing, 1);
        for (int u = 0; u < s->n_units; u++) {
            int unit = l * s->n_units + u;
            float *buf = q->buf + (size_t)unit * s->upper * s->unit_dim;
            /* group scope: the unit's G heads are contiguous in the row */
            memcpy(buf + (size_t)q->count[unit]++ * s->unit_dim, s->w.qh + (size_t)u * s->unit_dim,
                   (size_t)s->unit_dim * sizeof *buf);
            if (q->count[unit] >= s->upper && thin(s, buf, &q->count[unit], e)) return -1;
        }
    }
    return 0;
}

/* Observation rows of kv head h into s->w.rows ([n][head_dim]); returns n. */
int beacon_observation(struct beaconkv *s, struct beacon_seq *q, const struct cache_view *cv,
                       int l, int h, int rows, struct eb_err *e)
{
    int d = cv->head_dim, n = 0, G = s->group;
    int units = s->per_head ? G : 1;
    for (int uu = 0; uu < units; uu++) {
        int u = s->per_head ? h * G + uu : h, unit = l * s->n_units + u;
        const float *buf = q->buf + (size_t)unit * s->upper * s->unit_dim;
        int cnt = q->count[unit], nb = s->beacons < cnt ? s->beacons : cnt;
        if (beacon_fps(buf, cnt, s->unit_dim, nb, s->sel, e)) return -1;
        for (int b = 0; b < nb; b++) {
            const float *src = buf + (size_t)s->sel[b] * s->unit_dim;
            int heads = s->per_head ? 1 : G;
            for (int g = 0; g < heads; g++) {
                float *dst = s->w.rows + (size_t)n++ * d;
                memcpy(dst, src + (size_t)g * d, (size_t)d * sizeof *dst);
                beacon_rotate(dst, d, cv->next_pos - 1, cv->rope_inv_freq, cv->rope_pairing, 0);
            }
        }
    }
    return n + group_query_rows(s->w.rows + (size_t)n * d, s->w.qh, rows, cv->n_head, d, h, G);
}
