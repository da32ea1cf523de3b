/* cuda_layer_plan.c - see cuda_layer_plan.h. */
#include "kernels/cuda/cuda_layer_plan.h"

#include <string.h>

static int in_launch(const struct kv_step_seq *s, int pass, int decode_max_new)
{
    return (s->n_new <= decode_max_new) == (pass == 0);
}

void layer_plan_make(struct layer_plan *p, const struct kv_step_seq *seqs, int n_seq,
                     int decode_max_new, int q_prefill)
{
    memset(p, 0, sizeof *p);
    p->o_entry = (size_t)n_seq * sizeof(struct kv_step_seq);
    size_t at = p->o_entry + (size_t)n_seq * sizeof(struct layer_entry);
    for (int pass = 0; pass < 2; pass++) {
        int q = pass == 0 ? 1 : q_prefill;
        for (int j = 0; j < n_seq; j++) {
            if (!in_launch(&seqs[j], pass, decode_max_new)) continue;
            p->n_entry[pass]++;
            p->n_z[pass] += (seqs[j].n_new + q - 1) / q;
            p->n_rows[pass] += seqs[j].n_new;
        }
        p->o_maps[pass] = at;
        at += ((size_t)p->n_z[pass] + p->n_rows[pass]) * sizeof(int);
    }
    p->bytes = at;
}

void layer_plan_write(const struct layer_plan *p, char *buf, const struct kv_step_seq *seqs,
                      int n_seq, int decode_max_new, int q_prefill)
{
    memcpy(buf, seqs, p->o_entry);
    struct layer_entry *ent = (struct layer_entry *)(buf + p->o_entry);
    int e = 0;
    for (int pass = 0; pass < 2; pass++) {
        int q = pass == 0 ? 1 : q_prefill, z = 0, rows = 0, local = 0;
        int *zm = (int *)(buf + p->o_maps[pass]), *rm = zm + p->n_z[pass];
        for (int j = 0; j < n_seq; j++) {
            if (!in_launch(&seqs[j], pass, decode_max_new)) continue;
            ent[e++] = (struct layer_entry){j, z, rows};
            for (int c = (seqs[j].n_new + q - 1) / q; c > 0; c--) zm[z++] = local;
            for (int c = 0; c < seqs[j].n_new; c++) rm[rows++] = local;
            local++;
        }
    }
}

const char *layer_step_problem(const struct layer_mirror *m, const struct kv_step_seq *s,
                               int n_seq)
{
    if (n_seq < 1 || n_seq > m->max_seqs || !s) return "bad arguments";
    for (int j = 0; j < n_seq; j++) {
        int slot = s[j].slot;
        if (slot < 0 || slot >= m->max_seqs || !m->bound[slot]) return "an unbound slot";
        if (s[j].n_new < 1 || s[j].n_pad < 0 || s[j].n_pad > s[j].n_new || s[j].q_next < 0)
            return "bad token counts";
        if (m->type[slot] != m->type[s[0].slot]) return "slots of different cache types";
        if (j == 0 ? s[j].row0 < 0 : s[j].row0 < s[j - 1].row0 + s[j - 1].n_new)
            return "rows not ascending";
        for (int j2 = 0; j2 < j; j2++)
            if (s[j2].slot == slot) return "a slot twice";
        const int *len = m->len + (size_t)slot * m->n_heads;
        for (int x = 0; x < m->n_heads; x++)
            if (len[x] > m->cap[slot] - s[j].n_new) return "no room in the cache";
    }
    return NULL;
}
