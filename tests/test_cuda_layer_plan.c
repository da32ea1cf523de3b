/* test_cuda_layer_plan.c - the host side of the CUDA layer ops, on the CPU
 * (kernels/cuda/cuda_layer_plan.c): a step's image (decode rows one block
 * per query, prefill chunks one block per 4 queries; every block and every
 * query row maps to the entry that owns it, within its launch) and the
 * refusals of a malformed step. */
#include "test.h"

#include "kernels/cuda/cuda_layer_plan.h"

#include <stdlib.h>

enum { DEC_MAX = 4, QP = 4 };

/* Every block z of launch `pass` covers queries [(z - z0) * q, +q) of its
 * entry, every row r is query r - prow0 of its entry, and both cover the
 * entry's n_new exactly. */
static int plan_consistent(const struct layer_plan *p, const char *buf,
                           const struct kv_step_seq *s, int n_seq)
{
    const struct layer_entry *ent = (const struct layer_entry *)(buf + p->o_entry);
    int e0 = 0, bad = 0, seen = 0;
    for (int pass = 0; pass < 2; pass++) {
        int q = pass ? QP : 1;
        const int *zm = (const int *)(buf + p->o_maps[pass]), *rm = zm + p->n_z[pass];
        for (int x = 0; x < p->n_entry[pass]; x++) {
            const struct layer_entry *en = &ent[e0 + x];
            int n_new = s[en->seq].n_new;
            bad += pass == 0 ? n_new > DEC_MAX : n_new <= DEC_MAX;
            for (int c = 0; c < (n_new + q - 1) / q; c++) bad += zm[en->z0 + c] != x;
            for (int c = 0; c < n_new; c++) bad += rm[en->prow0 + c] != x;
            seen++;
        }
        e0 += p->n_entry[pass];
    }
    const struct kv_step_seq *copy = (const struct kv_step_seq *)buf;
    for (int j = 0; j < n_seq; j++) bad += memcmp(&copy[j], &s[j], sizeof *s) != 0;
    return bad == 0 && seen == n_seq;
}

static void test_mixed_step(void)
{
    struct kv_step_seq s[] = {{5, 1, 1, 0, 0},  {0, 3, 7, 2, 1}, {3, 10, 4, 0, 0},
                              {7, 15, 5, 1, 0}, {1, 20, 300, 0, 0}, {6, 321, 1, 0, 3}};
    int n = 6;
    struct layer_plan p;
    layer_plan_make(&p, s, n, DEC_MAX, QP);
    CHECK(p.n_entry[0] == 3 && p.n_entry[1] == 3);
    CHECK(p.n_z[0] == 1 + 4 + 1 && p.n_rows[0] == 6);           /* a block per decode query */
    CHECK(p.n_z[1] == 2 + 2 + 75 && p.n_rows[1] == 7 + 5 + 300); /* 4 queries a block */
    char *buf = calloc(1, p.bytes);
    layer_plan_write(&p, buf, s, n, DEC_MAX, QP);
    CHECK(plan_consistent(&p, buf, s, n));
    const struct layer_entry *ent = (const struct layer_entry *)(buf + p.o_entry);
    CHECK(ent[0].seq == 0 && ent[1].seq == 2 && ent[2].seq == 5); /* decode first, in order */
    CHECK(ent[3].seq == 1 && ent[3].z0 == 0 && ent[4].z0 == 2 && ent[5].prow0 == 12);
    free(buf);
}

static void test_random_steps(void)
{
    unsigned x = 12345;
    int bad = 0;
    for (int it = 0; it < 500; it++) {
        struct kv_step_seq s[64];
        int n = 1 + (int)((x = x * 1103515245u + 12345u) >> 16) % 64, row = 0;
        for (int j = 0; j < n; j++) {
            x = x * 1103515245u + 12345u;
            int n_new = (x >> 16) % 3 ? 1 + (int)((x >> 8) % 5) : 1 + (int)((x >> 4) % 700);
            s[j] = (struct kv_step_seq){j, row + (int)(x % 2), n_new, 0, 0};
            row = s[j].row0 + n_new;
        }
        struct layer_plan p;
        layer_plan_make(&p, s, n, DEC_MAX, QP);
        char *buf = calloc(1, p.bytes);
        layer_plan_write(&p, buf, s, n, DEC_MAX, QP);
        bad += !plan_consistent(&p, buf, s, n);
        free(buf);
    }
    CHECK_MSG(bad == 0, "%d of 500 random steps inconsistent", bad);
}

static void test_refusals(void)
{
    int bound[4] = {1, 1, 0, 1}, type[4] = {2, 2, 2, 1}, cap[4] = {10, 10, 10, 10};
    int len[4 * 2] = {8, 9, 0, 0, 0, 0, 0, 0}; /* slot 0 has room for 1 in its fullest head */
    struct layer_mirror m = {4, 2, bound, type, cap, len};
    struct kv_step_seq ok[] = {{0, 0, 1, 0, 0}, {1, 1, 5, 2, 3}};
    CHECK(layer_step_problem(&m, ok, 2) == NULL);
    struct kv_step_seq s[2];
    memcpy(s, ok, sizeof s);
    s[0].n_new = 2;
    CHECK_STR(layer_step_problem(&m, s, 1), "no room in the cache");
    memcpy(s, ok, sizeof s);
    s[1].slot = 2;
    CHECK_STR(layer_step_problem(&m, s, 2), "an unbound slot");
    s[1].slot = 3;
    CHECK_STR(layer_step_problem(&m, s, 2), "slots of different cache types");
    s[1].slot = 0;
    CHECK_STR(layer_step_problem(&m, s, 2), "a slot twice");
    memcpy(s, ok, sizeof s);
    s[1].row0 = 0;
    CHECK_STR(layer_step_problem(&m, s, 2), "rows not ascending");
    memcpy(s, ok, sizeof s);
    s[1].n_pad = 6;
    CHECK_STR(layer_step_problem(&m, s, 2), "bad token counts");
    CHECK_STR(layer_step_problem(&m, ok, 5), "bad arguments");
    CHECK_STR(layer_step_problem(&m, ok, 0), "bad arguments");
}

int main(void)
{
    RUN(test_mixed_step);
    RUN(test_random_steps);
    RUN(test_refusals);
    return test_summary("cuda_layer_plan");
}
