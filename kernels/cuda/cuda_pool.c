/* cuda_pool.c - host-side bookkeeping and sizing of the CUDA device pool
 * (see cuda_pool.h).  Plain C: no CUDA call, so the CPU build tests it. */
#include "kernels/cuda/cuda_pool.h"

#include "kernels/backend.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const size_t MIB = (size_t)1 << 20;

int dev_arena_init(struct dev_arena *a, size_t size, size_t align, struct eb_err *e)
{
    memset(a, 0, sizeof *a);
    if (align == 0 || (align & (align - 1)) != 0)
        return eb_fail(e, "device pool: alignment %zu is not a power of two", align);
    if (size < align) return eb_fail(e, "device pool: %zu bytes is smaller than one block", size);
    a->segs = eb_malloc(16 * sizeof *a->segs, e);
    if (!a->segs) return -1;
    a->cap_segs = 16;
    a->size = size / align * align;
    a->align = align;
    a->segs[0] = (struct dev_seg){0, a->size, 0};
    a->n_segs = 1;
    return 0;
}

void dev_arena_release(struct dev_arena *a)
{
    free(a->segs);
    memset(a, 0, sizeof *a);
}

/* Room for one more segment. */
static int reserve_seg(struct dev_arena *a)
{
    if (a->n_segs < a->cap_segs) return 0;
    struct dev_seg *s = realloc(a->segs, (size_t)a->cap_segs * 2 * sizeof *s);
    if (!s) return -1;
    a->segs = s;
    a->cap_segs *= 2;
    return 0;
}

int dev_arena_alloc(struct dev_arena *a, size_t bytes, size_t *off)
{
    if (!a->segs) return -1;
    if (bytes > a->size) return -1;
    size_t want = bytes == 0 ? a->align : (bytes + a->align - 1) / a->align * a->align;
    for (int i = 0; i < a->n_segs; i++) {
        struct dev_seg *s = &a->segs[i];
        if (s->used || s->size < want) continue;
        if (s->size > want) { /* split: the tail stays free */
            if (reserve_seg(a)) return -1;
            s = &a->segs[i];
            memmove(s + 2, s + 1, (size_t)(a->n_segs - i - 1) * sizeof *s);
            s[1] = (struct dev_seg){s->off + want, s->size - want, 0};
            s->size = want;
            a->n_segs++;
        }
        s->used = 1;
        a->used += want;
        if (a->used > a->peak) a->peak = a->used;
        *off = s->off;
        return 0;
    }
    return -1;
}

/* Drops segment i (merged into a neighbour). */
static void remove_seg(struct dev_arena *a, int i)
{
    memmove(&a->segs[i], &a->segs[i + 1], (size_t)(a->n_segs - i - 1) * sizeof *a->segs);
    a->n_segs--;
}

int dev_arena_free(struct dev_arena *a, size_t off)
{
    int lo = 0, hi = a->n_segs - 1, i = -1;
    while (lo <= hi) { /* segments are in offset order */
        int mid = lo + (hi - lo) / 2;
        if (a->segs[mid].off == off) { i = mid; break; }
        if (a->segs[mid].off < off) lo = mid + 1;
        else hi = mid - 1;
    }
    if (i < 0 || !a->segs[i].used) return -1;
    a->segs[i].used = 0;
    a->used -= a->segs[i].size;
    if (i + 1 < a->n_segs && !a->segs[i + 1].used) { /* merge the free one after */
        a->segs[i].size += a->segs[i + 1].size;
        remove_seg(a, i + 1);
    }
    if (i > 0 && !a->segs[i - 1].used) { /* and into the free one before */
        a->segs[i - 1].size += a->segs[i].size;
        remove_seg(a, i);
    }
    return 0;
}

size_t kv_pool_headroom(size_t total_bytes)
{
    size_t h = total_bytes / 32;
    return h > 512 * MIB ? h : 512 * MIB;
}

/* a * b + c, or SIZE_MAX on overflow. */
static size_t mul_add(size_t a, size_t b, size_t c)
{
    if (b && a > (SIZE_MAX - c) / b) return SIZE_MAX;
    return a * b + c;
}

int kv_pool_plan(size_t free_bytes, size_t total_bytes, const struct kv_pool_need *need,
                 struct kv_pool_plan *out, struct eb_err *e)
{
    memset(out, 0, sizeof *out);
    if (need->batch < 1 || need->kv_bytes_per_seq == 0)
        return eb_fail(e, "device pool: need a batch >= 1 and a non-empty KV cache (batch %d, "
                       "%zu bytes per sequence)", need->batch, need->kv_bytes_per_seq);
    if (free_bytes > total_bytes)
        return eb_fail(e, "device pool: %zu bytes free of %zu total", free_bytes, total_bytes);
    out->headroom = kv_pool_headroom(total_bytes);
    size_t usable = free_bytes > out->headroom ? free_bytes - out->headroom : 0;
    size_t fit = usable > need->act_bytes
                     ? (usable - need->act_bytes) / need->kv_bytes_per_seq : 0;
    out->max_batch = fit > INT32_MAX ? INT32_MAX : (int)fit;
    size_t want = kv_pool_bytes(need);
    if (want == SIZE_MAX || want > usable)
        return eb_fail_nomem(e, "device pool: out of memory: batch %d needs %.2f GiB (%.2f GiB "
                             "KV per sequence, %.2f GiB activations) but %.2f GiB of %.2f GiB "
                             "are free after %.2f GiB headroom; at most %d sequences fit",
                             need->batch,
                             ((double)need->batch * need->kv_bytes_per_seq + need->act_bytes) /
                                 1073741824.0,
                             need->kv_bytes_per_seq / 1073741824.0,
                             need->act_bytes / 1073741824.0, usable / 1073741824.0,
                             total_bytes / 1073741824.0, out->headroom / 1073741824.0,
                             out->max_batch);
    out->pool_bytes = want > usable ? usable : want;
    return 0;
}

size_t kv_pool_bytes(const struct kv_pool_need *need)
{
    if (need->batch < 1) return SIZE_MAX;
    /* Every allocation is rounded up to the arena's alignment: allow one
     * 2 MiB slack per sequence plus one for the activations. */
    size_t want = mul_add((size_t)need->batch, need->kv_bytes_per_seq, need->act_bytes);
    want = mul_add((size_t)need->batch + 1, 2 * MIB, want);
    if (want > SIZE_MAX - 2 * MIB) return SIZE_MAX;
    return (want + 2 * MIB - 1) / (2 * MIB) * (2 * MIB);
}

int kv_pool_decide(size_t pool_bytes, size_t pool_used, const struct kv_pool_need *need,
                   enum kv_pool_action *act, struct eb_err *e)
{
    *act = KV_POOL_KEEP;
    if (need->batch < 1 || need->kv_bytes_per_seq == 0)
        return eb_fail(e, "device pool: need a batch >= 1 and a non-empty KV cache (batch %d, "
                       "%zu bytes per sequence)", need->batch, need->kv_bytes_per_seq);
    if (pool_used > pool_bytes)
        return eb_fail(e, "device pool: %zu bytes in use of %zu", pool_used, pool_bytes);
    if (pool_bytes == 0) {
        *act = KV_POOL_RESERVE;
        return 0;
    }
    size_t want = kv_pool_bytes(need);
    if (want != SIZE_MAX && want <= pool_bytes - pool_used) return 0;
    if (pool_used == 0) {
        *act = KV_POOL_REPLAN;
        return 0;
    }
    /* Releasing the pool now would pull memory from under live allocations
     * (a policy's device scratch kept between batches of a point). */
    return eb_fail_nomem(e, "device pool: out of memory: batch %d needs %.2f GiB but the pool "
                         "reserved for an earlier batch has %.2f GiB of %.2f GiB free, and it "
                         "cannot be re-planned while %.2f GiB of it are in use",
                         need->batch, want == SIZE_MAX ? INFINITY : want / 1073741824.0,
                         (pool_bytes - pool_used) / 1073741824.0, pool_bytes / 1073741824.0,
                         pool_used / 1073741824.0);
}

size_t cuda_matrix_bytes(int type, size_t n_elements, int exact)
{
    /* cuda_weight.cu: exact mode and F32 tensors are f32; F16/BF16 stay
     * 16-bit; quantized types are dequantized to bf16. */
    if (exact || type == WEIGHT_F32) return n_elements * 4;
    return n_elements * 2;
}

int cuda_weights_fit(size_t weight_bytes, size_t free_bytes, size_t total_bytes,
                     struct eb_err *e)
{
    size_t headroom = kv_pool_headroom(total_bytes);
    if (free_bytes > headroom && weight_bytes <= free_bytes - headroom) return 0;
    return eb_fail_nomem(e, "device: out of memory: the weights need %.2f GiB but %.2f GiB of "
                         "%.2f GiB are free and %.2f GiB must stay free for cuBLAS, the CUDA "
                         "context and the backend's staging", weight_bytes / 1073741824.0,
                         free_bytes / 1073741824.0, total_bytes / 1073741824.0,
                         headroom / 1073741824.0);
}

int cuda_device_parse(const char *spec, int *device, struct eb_err *e)
{
    if (!spec) return eb_fail(e, "device: no name given");
    if (!strcmp(spec, "cuda")) {
        *device = 0;
        return 0;
    }
    if (strncmp(spec, "cuda:", 5) == 0 && spec[5] >= '0' && spec[5] <= '9') {
        char *end;
        errno = 0;
        long d = strtol(spec + 5, &end, 10);
        if (!errno && !*end && d <= 1024) {
            *device = (int)d;
            return 0;
        }
    }
    return eb_fail(e, "device: '%s' is not cuda or cuda:N", spec);
}
