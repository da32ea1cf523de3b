/* test_kvcache.c - append, positions, compaction and byte accounting of the KV cache. */
#include "test.h"

#include "kernels/backend.h"
#include "model/kvcache.h"

enum { L = 2, KV = 3, HD = 4, CAP = 16 };

static struct backend *be;

/* Value that identifies (which, layer, head, position, channel) uniquely. */
static float tag(int which, int layer, int head, int pos, int ch)
{
    return (float)(which * 100000 + layer * 10000 + head * 1000 + pos * 10 + ch);
}

/* Append n tokens at the cache's next positions to every layer. */
static int append_tokens(struct kvcache *c, int n)
{
    struct eb_err e;
    float hk[CAP * KV * HD], hv[CAP * KV * HD];
    float *dk = be->alloc(be, (size_t)n * KV * HD), *dv = be->alloc(be, (size_t)n * KV * HD);
    int rc = 0;
    for (int l = 0; l < L && rc == 0; l++) {
        for (int t = 0; t < n; t++)
            for (int h = 0; h < KV; h++)
                for (int ch = 0; ch < HD; ch++) {
                    hk[(t * KV + h) * HD + ch] = tag(0, l, h, c->next_pos + t, ch);
                    hv[(t * KV + h) * HD + ch] = tag(1, l, h, c->next_pos + t, ch);
                }
        be->upload(be, dk, hk, (size_t)n * KV * HD);
        be->upload(be, dv, hv, (size_t)n * KV * HD);
        rc = kvcache_append(c, l, dk, dv, n, &e);
    }
    if (rc == 0) kvcache_advance(c, n);
    be->free(be, dk);
    be->free(be, dv);
    return rc;
}

/* Every valid slot of (layer, head) holds the K/V of the position it records,
 * and no position twice (any order: a policy may order its cache by score). */
static int slots_consistent(const struct kvcache *c, int l, int h)
{
    int n = kvcache_len(c, l, h);
    float k[CAP * HD], v[CAP * HD];
    if (n == 0) return 1;
    be->download(be, k, kvcache_k(c, l, h), (size_t)n * HD);
    be->download(be, v, kvcache_v(c, l, h), (size_t)n * HD);
    const int *pos = kvcache_positions(c, l, h);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++)
            if (pos[j] == pos[i]) return 0;
        for (int ch = 0; ch < HD; ch++)
            if (k[i * HD + ch] != tag(0, l, h, pos[i], ch) || v[i * HD + ch] != tag(1, l, h, pos[i], ch))
                return 0;
    }
    return 1;
}

static void test_append(void)
{
    struct kvcache *c;
    struct eb_err e;
    CHECK(kvcache_create(be, L, KV, HD, CAP, KV_F32, &c, &e) == 0);
    CHECK(append_tokens(c, 5) == 0);
    CHECK(append_tokens(c, 1) == 0);
    CHECK(c->next_pos == 6);
    size_t slot = 2 * HD * sizeof(float);
    CHECK(c->bytes == 6 * L * KV * slot);
    CHECK(c->peak_bytes == c->bytes);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < KV; h++) {
            CHECK(kvcache_len(c, l, h) == 6);
            CHECK(slots_consistent(c, l, h));
            CHECK(kvcache_positions(c, l, h)[5] == 5);
        }
    CHECK(kvcache_free_slots(c) == CAP - 6);
    /* Overflow is an error, and nothing is appended. */
    CHECK(append_tokens(c, CAP) == -1);
    CHECK(kvcache_len(c, 0, 0) == 6);
    kvcache_free(c);
}

static void test_compact(void)
{
    struct kvcache *c;
    struct eb_err e;
    CHECK(kvcache_create(be, L, KV, HD, CAP, KV_F32, &c, &e) == 0);
    CHECK(append_tokens(c, 10) == 0);
    size_t slot = 2 * HD * sizeof(float);
    size_t before = c->bytes;

    /* Unsorted keep-set: the slots land in keep order (R-KV's released code
     * leaves its cache in top-k score order). */
    int keep[] = {9, 0, 4, 2};
    CHECK(kvcache_compact(c, 1, 2, keep, 4, &e) == (int64_t)(6 * slot));
    CHECK(kvcache_len(c, 1, 2) == 4);
    const int *pos = kvcache_positions(c, 1, 2);
    CHECK(pos[0] == 9 && pos[1] == 0 && pos[2] == 4 && pos[3] == 2);
    CHECK(slots_consistent(c, 1, 2));
    CHECK(c->bytes == before - 6 * slot);
    CHECK(c->peak_bytes == before);
    /* Other heads untouched. */
    CHECK(kvcache_len(c, 1, 1) == 10 && slots_consistent(c, 1, 1));
    CHECK(kvcache_len(c, 0, 2) == 10 && slots_consistent(c, 0, 2));

    /* New tokens continue at the original next position, per-head lengths differ. */
    CHECK(append_tokens(c, 2) == 0);
    CHECK(kvcache_len(c, 1, 2) == 6);
    CHECK(kvcache_positions(c, 1, 2)[4] == 10 && kvcache_positions(c, 1, 2)[5] == 11);
    CHECK(slots_consistent(c, 1, 2));
    CHECK(kvcache_len(c, 0, 0) == 12);

    /* Keep everything: nothing freed, nothing moved. */
    int all[12];
    for (int i = 0; i < 12; i++) all[i] = i;
    CHECK(kvcache_compact(c, 0, 0, all, 12, &e) == 0);
    CHECK(slots_consistent(c, 0, 0));
    for (int i = 0; i < 12; i++) CHECK(kvcache_positions(c, 0, 0)[i] == i);
    /* Keep everything, reversed: nothing freed, every slot moved. */
    for (int i = 0; i < 12; i++) all[i] = 11 - i;
    CHECK(kvcache_compact(c, 0, 0, all, 12, &e) == 0);
    CHECK(slots_consistent(c, 0, 0));
    for (int i = 0; i < 12; i++) CHECK(kvcache_positions(c, 0, 0)[i] == 11 - i);
    /* A permutation of a permutation: contents follow the positions. */
    int perm[] = {3, 0, 11, 5, 1};
    CHECK(kvcache_compact(c, 0, 0, perm, 5, &e) == (int64_t)(7 * slot));
    CHECK(slots_consistent(c, 0, 0));
    int want_pos[] = {8, 11, 0, 6, 10};
    for (int i = 0; i < 5; i++) CHECK(kvcache_positions(c, 0, 0)[i] == want_pos[i]);

    /* Keep nothing. */
    CHECK(kvcache_compact(c, 0, 1, NULL, 0, &e) == (int64_t)(12 * slot));
    CHECK(kvcache_len(c, 0, 1) == 0);
    kvcache_free(c);
}

static void test_compact_bad(void)
{
    struct kvcache *c;
    struct eb_err e;
    CHECK(kvcache_create(be, L, KV, HD, CAP, KV_F32, &c, &e) == 0);
    CHECK(append_tokens(c, 6) == 0);
    int dup[] = {1, 3, 1};
    CHECK(kvcache_compact(c, 0, 0, dup, 3, &e) == -1);
    CHECK(strstr(e.msg, "duplicate") != NULL);
    int out_of_range[] = {0, 6};
    CHECK(kvcache_compact(c, 0, 0, out_of_range, 2, &e) == -1);
    CHECK(strstr(e.msg, "out of range") != NULL);
    int neg[] = {-1};
    CHECK(kvcache_compact(c, 0, 0, neg, 1, &e) == -1);
    CHECK(kvcache_compact(c, L, 0, dup, 1, &e) == -1);
    CHECK(kvcache_compact(c, 0, KV, dup, 1, &e) == -1);
    int too_many[7] = {0, 1, 2, 3, 4, 5, 5};
    CHECK(kvcache_compact(c, 0, 0, too_many, 7, &e) == -1);
    /* A failed compaction changes nothing. */
    CHECK(kvcache_len(c, 0, 0) == 6 && slots_consistent(c, 0, 0));
    kvcache_free(c);
    struct kvcache *bad;
    CHECK(kvcache_create(be, 0, KV, HD, CAP, KV_F32, &bad, &e) == -1 && bad == NULL);
    CHECK(kvcache_create(be, L, KV, HD, 0, KV_F32, &bad, &e) == -1 && bad == NULL);
}

/* kvcache_compact_batch of one cache: keep-sets by position (ascending, the
 * in-place path) and by score (any order, staged) move rows and mirrors as
 * kvcache_compact does, and keep-sets that are not distinct indices in
 * range are refused whichever order they come in, changing nothing. */
static int compact_batch(struct kvcache *c, const int *keep, const int *n_keep, struct eb_err *e)
{
    int stride = CAP;
    size_t units_n = kvcache_batch_units_floats(L, KV, 1);
    struct gather_unit *units = (struct gather_unit *)be->alloc(be, units_n);
    struct gather_unit host[L * KV];
    int *keep_dev = (int *)be->alloc(be, (size_t)L * KV * stride);
    float *scratch = be->alloc(be, (size_t)L * KV * CAP * HD);
    be->upload(be, (float *)keep_dev, (const float *)keep, (size_t)L * KV * stride);
    struct kv_compact_seq seq = {c, n_keep, keep, keep_dev, stride};
    int64_t freed = 0;
    int rc = kvcache_compact_batch(be, &seq, 1, units, host, scratch, (size_t)CAP * HD, &freed, e);
    be->free(be, (float *)units), be->free(be, (float *)keep_dev), be->free(be, scratch);
    return rc;
}

static void test_compact_batch(void)
{
    struct kvcache *c;
    struct eb_err e;
    CHECK(kvcache_create(be, L, KV, HD, CAP, KV_F32, &c, &e) == 0);
    CHECK(append_tokens(c, 10) == 0);
    int keep[L * KV][CAP], n_keep[L * KV];
    static const int by_pos[] = {1, 2, 5, 9}, by_score[] = {9, 0, 4, 2}, all[] = {0, 1, 2, 3};
    for (int h = 0; h < L * KV; h++) {
        const int *src = h == 1 ? by_score : h == 4 ? all : by_pos;
        n_keep[h] = h == 5 ? -1 : 4; /* head 5: not compacted */
        memcpy(keep[h], src, 4 * sizeof *src);
    }
    /* refused, nothing changed: ascending past len; a duplicate out of order */
    keep[3][3] = 10;
    CHECK(compact_batch(c, &keep[0][0], n_keep, &e) == -1 && strstr(e.msg, "malformed"));
    keep[3][3] = 9;
    keep[1][2] = 9;
    CHECK(compact_batch(c, &keep[0][0], n_keep, &e) == -1 && strstr(e.msg, "malformed"));
    keep[1][2] = 4;
    for (int h = 0; h < L * KV; h++) CHECK(kvcache_len(c, h / KV, h % KV) == 10);
    CHECK(compact_batch(c, &keep[0][0], n_keep, &e) == 0);
    for (int h = 0; h < L * KV; h++) {
        int l = h / KV, kh = h % KV;
        const int *pos = kvcache_positions(c, l, kh);
        CHECK(kvcache_len(c, l, kh) == (h == 5 ? 10 : 4) && slots_consistent(c, l, kh));
        if (h != 5)
            for (int i = 0; i < 4; i++) CHECK(pos[i] == keep[h][i]);
    }
    kvcache_free(c);
}

static void test_qring(void)
{
    struct kvcache *c;
    struct eb_err e;
    enum { QD = 3, W = 4 };
    CHECK(kvcache_create(be, L, KV, HD, CAP, KV_F32, &c, &e) == 0);
    CHECK(kvcache_qring_enable(c, W, QD, &e) == 0);
    float hq[7 * QD], out[W * QD];
    float *dq = be->alloc(be, 7 * QD), *dst = be->alloc(be, W * QD);
    int next = 0;
    int steps[] = {3, 1, 2, 7};
    for (int s = 0; s < 4; s++) {
        int n = steps[s];
        for (int l = 0; l < L; l++) {
            for (int t = 0; t < n; t++)
                for (int j = 0; j < QD; j++) hq[t * QD + j] = (float)(l * 1000 + (next + t) * 10 + j);
            be->upload(be, dq, hq, (size_t)n * QD);
            kvcache_qring_push(c, l, dq, n);
        }
        kvcache_qring_advance(c, n);
        next += n;
        int held = next < W ? next : W;
        for (int l = 0; l < L; l++) {
            CHECK(kvcache_qring_gather(c, l, dst) == held);
            be->download(be, out, dst, (size_t)held * QD);
            for (int i = 0; i < held; i++)
                for (int j = 0; j < QD; j++)
                    CHECK(out[i * QD + j] == (float)(l * 1000 + (next - held + i) * 10 + j));
        }
    }
    be->free(be, dq);
    be->free(be, dst);
    kvcache_free(c);
}

int main(void)
{
    be = backend_cpu_create(1);
    RUN(test_append);
    RUN(test_compact_batch);
    RUN(test_compact);
    RUN(test_compact_bad);
    RUN(test_qring);
    be->destroy(be);
    return test_summary("kvcache");
}
