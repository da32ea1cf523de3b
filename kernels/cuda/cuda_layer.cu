/* cuda_layer.cu - the layer-granular KV table and ops of struct backend
 * (kernels/backend.h, "layer-granular"): one KV append and one attention
 * call per layer for the whole batch.
 *
 * The table lives on the device: per slot its cache pointers per layer, its
 * lengths per (layer, kv head), its pad flags [n_layer][n_kv][cap] and its
 * query rings.  kv_table_bind writes one slot (on a cache change only);
 * kv_table_step writes the pass's active slots and the flash launches' block
 * maps once per forward pass; then every layer runs from device state:
 *   - kv_append: one kernel writes every new K/V row of every sequence and
 *     kv head in the cache's type, flags pads and fills the query rings; a
 *     second bumps the lengths (it must run after every row read them);
 *   - attention_layer: one kernel builds the flash descriptors of the layer
 *     from the table (lengths, pointers, pad masks: nothing crosses the bus),
 *     then the flash kernel and its combine run once for the decode rows and
 *     once for prefill chunks (cuda_attention.cu).  With probabilities, or a
 *     shape the flash kernel does not take, the general kernel runs per
 *     sequence, still on the table's device lengths and masks.
 * The host keeps a mirror of the lengths (no copy back): it sizes the
 * split-K plan and checks room, as the CPU backend checks it. */
#include "kernels/cuda/cuda_flash.h"
#include "kernels/cuda/cuda_split_rope.h"
extern "C" {
#include "kernels/cuda/cuda_layer_plan.h"
}

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A slot's constants on the device (written by bind). */
struct slot_meta {
    int cap, q_window;
    unsigned char *pad; /* device [n_layer][n_kv][cap] */
};

struct kv_table {
    int max_seqs, n_layer, n_kv, n_head, hd;
    /* device, fixed size (one allocation) */
    char *dev;
    void **d_k, **d_v;     /* [max_seqs][n_layer] */
    float **d_ring;        /* [max_seqs][n_layer] */
    int *d_len;            /* [max_seqs][n_layer][n_kv] */
    slot_meta *d_slot;     /* [max_seqs] */
    flash_seq *d_desc;     /* [max_seqs]: the layer's descriptors, decode entries first */
    /* device, per step: steps, entries, then the block maps (grows) */
    char *d_stepbuf;
    size_t d_stepbuf_cap;
    const kv_step_seq *d_step;
    const layer_entry *d_entry;
    const int *d_zmap[2], *d_rowmap[2]; /* [0] decode, [1] prefill */
    /* host mirrors */
    slot_meta *h_slot;
    int *h_bound, *h_type, *h_aligned, *h_cap;
    size_t *h_pad_bytes;
    int *h_len;            /* [max_seqs][n_layer][n_kv] */
    void **h_k, **h_v;     /* [max_seqs][n_layer] */
    kv_step_seq *h_step;   /* [max_seqs] */
    int n_step;
    struct layer_plan plan;
    char *h_buf;           /* host image of the step buffer */
    size_t h_buf_cap;
};

static size_t round_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

/* ---- kernels ---- */

/* The step's sequence holding stacked row r (rows ascend with the step). */
__device__ static inline int seq_of_row(const kv_step_seq *steps, int n_seq, int r)
{
    int lo = 0, hi = n_seq - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (steps[mid].row0 <= r) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* grid (T rows, n_kv): row r's K and V of kv head h to slot len + i of its
 * sequence's cache; its pad flag; row r's query into the ring (h = 0). */
template <typename T>
__global__ static void k_layer_append(const kv_table t, int n_seq, int layer, const float *k,
                                      const float *v, const float *q)
{
    const int r = blockIdx.x, h = blockIdx.y, hd = t.hd;
    const kv_step_seq st = t.d_step[seq_of_row(t.d_step, n_seq, r)];
    const int i = r - st.row0;
    if (i < 0 || i >= st.n_new) return; /* a row of no sequence */
    const slot_meta sm = t.d_slot[st.slot];
    const size_t ls = (size_t)st.slot * t.n_layer + layer;
    const int pos = t.d_len[ls * t.n_kv + h] + i;
    if (pos >= sm.cap) return; /* the host checked room */
    T *kc = (T *)t.d_k[ls] + ((size_t)h * sm.cap + pos) * hd;
    T *vc = (T *)t.d_v[ls] + ((size_t)h * sm.cap + pos) * hd;
    const float *kr = k + ((size_t)r * t.n_kv + h) * hd, *vr = v + ((size_t)r * t.n_kv + h) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        kv_put(&kc[d], kr[d]);
        kv_put(&vc[d], vr[d]);
    }
    if (threadIdx.x == 0) sm.pad[((size_t)layer * t.n_kv + h) * sm.cap + pos] = i < st.n_pad;
    float *ring = t.d_ring[ls];
    if (h != 0 || !q || !ring || i < st.n_new - sm.q_window) return; /* only the last w stay */
    const int qdim = t.n_head * hd;
    float *dst = ring + (size_t)((st.q_next + i) % sm.q_window) * qdim;
    for (int d = threadIdx.x; d < qdim; d += blockDim.x) dst[d] = q[(size_t)r * qdim + d];
}

/* RoPE fused with the append (layer_in_args.tab): grid (rows x heads of the
 * joined q/k/v product), a block per head of a row.  The head is made ready
 * as k_split_rope makes it and written to q, k or v; then, as
 * k_layer_append would, a K or V head goes to slot len + i of its cache (a
 * K head also sets the pad flag) and a query head to its place in the ring.
 * Shared: the head's hd floats.  (Not named k_layer*: its 32-byte stack
 * frame is cosf/sinf's range reduction for large angles, as in k_rope, not
 * an accumulator that check_stack.sh guards.) */
template <typename T>
__global__ static void k_rope_append(const kv_table t, int n_seq, int layer, const split_args a)
{
    extern __shared__ float head[];
    __shared__ float red[32];
    const int H = a.n_head + 2 * a.n_kv, r = blockIdx.x / H, hd = a.hd;
    int idx;
    const int kind = split_head(a, r, blockIdx.x % H, head, red, &idx);
    float *dst = split_dst(a, kind, r, idx);
    for (int j = threadIdx.x; j < hd; j += blockDim.x) dst[j] = head[j];
    const kv_step_seq st = t.d_step[seq_of_row(t.d_step, n_seq, r)];
    const int i = r - st.row0;
    if (i < 0 || i >= st.n_new) return; /* a row of no sequence */
    const slot_meta sm = t.d_slot[st.slot];
    const size_t ls = (size_t)st.slot * t.n_layer + layer;
    if (kind == SPLIT_Q) {
        float *ring = t.d_ring[ls];
        if (!ring || i < st.n_new - sm.q_window) return; /* only the last w stay */
        float *qr = ring + (size_t)((st.q_next + i) % sm.q_window) * t.n_head * hd +
                    (size_t)idx * hd;
        for (int j = threadIdx.x; j < hd; j += blockDim.x) qr[j] = head[j];
        return;
    }
    const int pos = t.d_len[ls * t.n_kv + idx] + i;
    if (pos >= sm.cap) return; /* the host checked room */
    T *c = (T *)(kind == SPLIT_K ? t.d_k[ls] : t.d_v[ls]) + ((size_t)idx * sm.cap + pos) * hd;
    for (int j = threadIdx.x; j < hd; j += blockDim.x) kv_put(&c[j], head[j]);
    if (kind == SPLIT_K && threadIdx.x == 0)
        sm.pad[((size_t)layer * t.n_kv + idx) * sm.cap + pos] = i < st.n_pad;
}

/* grid n_seq, n_kv threads (<= 64): the lengths grow by n_new. */
__global__ static void k_layer_bump(const kv_table t, int layer)
{
    const kv_step_seq st = t.d_step[blockIdx.x];
    if ((int)threadIdx.x < t.n_kv)
        t.d_len[((size_t)st.slot * t.n_layer + layer) * t.n_kv + threadIdx.x] += st.n_new;
}

/* grid n_entries, 64 threads: the layer's flash descriptors from the table. */
__global__ static void k_layer_desc(const kv_table t, int layer, float *out, const float *q)
{
    const layer_entry en = t.d_entry[blockIdx.x];
    const kv_step_seq st = t.d_step[en.seq];
    const slot_meta sm = t.d_slot[st.slot];
    const size_t ls = (size_t)st.slot * t.n_layer + layer;
    flash_seq *d = &t.d_desc[blockIdx.x];
    for (int h = threadIdx.x; h < t.n_kv; h += blockDim.x) d->kv_len[h] = t.d_len[ls * t.n_kv + h];
    if (threadIdx.x != 0) return;
    const size_t qdim = (size_t)t.n_head * t.hd;
    d->out = out + (size_t)st.row0 * qdim;
    d->q = q + (size_t)st.row0 * qdim;
    d->k = t.d_k[ls];
    d->v = t.d_v[ls];
    d->mask = sm.pad + (size_t)layer * t.n_kv * sm.cap;
    d->cap = sm.cap;
    d->n_new = st.n_new;
    d->z0 = en.z0;
    d->row0 = en.prow0;
}

/* ---- the table ---- */

static struct kv_table *cuda_kv_table_create(struct backend *be, int max_seqs, int n_layer,
                                             int n_kv, int n_head, int head_dim)
{
    if (failed(be)) return NULL;
    if (max_seqs < 1 || n_layer < 1 || n_kv < 1 || n_kv > FLASH_MAX_KV || n_head < n_kv ||
        n_head % n_kv || head_dim < 1) {
        cuda_fail(be, "kv table", "bad shape");
        return NULL;
    }
    struct kv_table *t = (struct kv_table *)calloc(1, sizeof *t);
    size_t sl = (size_t)max_seqs * n_layer, lens = sl * n_kv;
    if (t) {
        t->h_slot = (slot_meta *)calloc((size_t)max_seqs, sizeof *t->h_slot);
        t->h_bound = (int *)calloc((size_t)max_seqs * 4, sizeof(int));
        t->h_pad_bytes = (size_t *)calloc((size_t)max_seqs, sizeof(size_t));
        t->h_len = (int *)calloc(lens, sizeof(int));
        t->h_k = (void **)calloc(sl * 2, sizeof(void *));
        t->h_step = (kv_step_seq *)calloc((size_t)max_seqs, sizeof(kv_step_seq));
    }
    if (!t || !t->h_slot || !t->h_bound || !t->h_pad_bytes || !t->h_len || !t->h_k ||
        !t->h_step) {
        cuda_fault_record(&impl_of(be)->fault, CUDA_FAULT_OOM, "cuda: kv table", "out of host memory");
        be->kv_table_free(be, t);
        return NULL;
    }
    t->h_type = t->h_bound + max_seqs;
    t->h_aligned = t->h_type + max_seqs;
    t->h_cap = t->h_aligned + max_seqs;
    t->h_v = t->h_k + sl;
    t->max_seqs = max_seqs, t->n_layer = n_layer, t->n_kv = n_kv, t->n_head = n_head;
    t->hd = head_dim;
    size_t o_k = 0, o_v = round_up(o_k + sl * sizeof(void *), 256);
    size_t o_ring = round_up(o_v + sl * sizeof(void *), 256);
    size_t o_len = round_up(o_ring + sl * sizeof(float *), 256);
    size_t o_slot = round_up(o_len + lens * sizeof(int), 256);
    size_t o_desc = round_up(o_slot + (size_t)max_seqs * sizeof(slot_meta), 256);
    size_t total = o_desc + (size_t)max_seqs * sizeof(flash_seq);
    if (!cuda_ok(be, cudaMalloc((void **)&t->dev, total), "kv table") ||
        !cuda_ok(be, cudaMemset(t->dev, 0, total), "kv table")) {
        be->kv_table_free(be, t);
        return NULL;
    }
    t->d_k = (void **)(t->dev + o_k);
    t->d_v = (void **)(t->dev + o_v);
    t->d_ring = (float **)(t->dev + o_ring);
    t->d_len = (int *)(t->dev + o_len);
    t->d_slot = (slot_meta *)(t->dev + o_slot);
    t->d_desc = (flash_seq *)(t->dev + o_desc);
    return t;
}

static void cuda_kv_table_free(struct backend *be, struct kv_table *t)
{
    if (!t) return;
    cuda_ok(be, cudaDeviceSynchronize(), "kv table free"); /* queued work may read it */
    if (impl_of(be)->step_table == t) impl_of(be)->step_table = NULL;
    if (t->h_slot)
        for (int s = 0; s < t->max_seqs; s++) cudaFree(t->h_slot[s].pad);
    cudaFree(t->dev);
    cudaFree(t->d_stepbuf);
    free(t->h_slot);
    free(t->h_bound);
    free(t->h_pad_bytes);
    free(t->h_len);
    free(t->h_k);
    free(t->h_step);
    free(t->h_buf);
    free(t);
}

/* Host bytes of `n` (the image of a device upload). */
static char *host_buf(struct backend *be, struct kv_table *t, size_t n)
{
    if (n <= t->h_buf_cap) return t->h_buf;
    char *p = (char *)realloc(t->h_buf, n * 2);
    if (!p) {
        cuda_fault_record(&impl_of(be)->fault, CUDA_FAULT_OOM, "cuda: kv table", "out of host memory");
        return NULL;
    }
    t->h_buf = p;
    t->h_buf_cap = n * 2;
    return p;
}

/* bytes of host memory to device memory `dst` that lives on, without a wait:
 * through the staging ring, then a device copy queued behind it. */
static bool put(struct backend *be, void *dst, const void *host, size_t bytes, const char *what)
{
    if (!bytes) return true;
    const void *d = stage(be, host, bytes);
    return d && cuda_ok(be, cudaMemcpyAsync(dst, d, bytes, cudaMemcpyDeviceToDevice, 0), what);
}

static bool desc_ok(const struct kv_table *t, const struct kv_seq_desc *d)
{
    if (!d || !d->k || !d->v || !d->len || d->cap < 1 || !kv_type_known(d->kv_type)) return false;
    if (d->q_ring && d->q_window < 1) return false;
    for (int l = 0; l < t->n_layer; l++) {
        if (!d->k[l] || !d->v[l] || (d->q_ring && !d->q_ring[l])) return false;
        for (int h = 0; h < t->n_kv; h++) {
            int len = d->len[(size_t)l * t->n_kv + h];
            if (len < 0 || len > d->cap) return false;
        }
    }
    return true;
}

/* The slot's pad flags hold [n_layer][n_kv][cap]: reallocated when the cap grew. */
static bool pad_room(struct backend *be, struct kv_table *t, int slot, size_t bytes)
{
    if (t->h_pad_bytes[slot] >= bytes) return true;
    if (t->h_slot[slot].pad) {
        if (!cuda_ok(be, cudaDeviceSynchronize(), "kv table pads")) return false;
        cudaFree(t->h_slot[slot].pad);
    }
    t->h_slot[slot].pad = NULL;
    t->h_pad_bytes[slot] = 0;
    if (!cuda_ok(be, cudaMalloc((void **)&t->h_slot[slot].pad, bytes), "kv table pads")) return false;
    t->h_pad_bytes[slot] = bytes;
    return true;
}

/* A failed bind's result: KV_TABLE_NOMEM when the recorded fault is an
 * out-of-memory (the pads' cudaMalloc, the staging ring, host memory), so
 * model/forward.c reports it as one without asking the device. */
static int bind_failed(struct backend *be)
{
    return impl_of(be)->fault.kind == CUDA_FAULT_OOM ? KV_TABLE_NOMEM : -1;
}

static int cuda_kv_table_bind(struct backend *be, struct kv_table *t, int slot,
                              const struct kv_seq_desc *d)
{
    if (failed(be)) return bind_failed(be);
    if (!t || slot < 0 || slot >= t->max_seqs || !desc_ok(t, d))
        return refuse(be, "kv table bind", "bad arguments");
    const int L = t->n_layer, nkv = t->n_kv;
    const size_t sl = (size_t)slot * L, pad_bytes = (size_t)L * nkv * d->cap;
    if (!pad_room(be, t, slot, pad_bytes)) return bind_failed(be);
    slot_meta *m = &t->h_slot[slot];
    m->cap = d->cap;
    m->q_window = d->q_ring ? d->q_window : 1;
    bool aligned = true;
    for (int l = 0; l < L; l++) {
        t->h_k[sl + l] = d->k[l];
        t->h_v[sl + l] = d->v[l];
        aligned = aligned && ((uintptr_t)d->k[l] & 15) == 0 && ((uintptr_t)d->v[l] & 15) == 0;
    }
    memcpy(t->h_len + sl * nkv, d->len, (size_t)L * nkv * sizeof(int));
    t->h_bound[slot] = 1;
    t->h_type[slot] = d->kv_type;
    t->h_cap[slot] = d->cap;
    t->h_aligned[slot] = aligned;
    size_t ptrs = (size_t)L * sizeof(void *), lens = (size_t)L * nkv * sizeof(int);
    size_t pads = d->pad ? pad_bytes : 0;
    if (!stage_reserve(be, 3 * ptrs + lens + sizeof *m + pads, 6)) return bind_failed(be);
    float **no_ring = NULL;
    if (!d->q_ring && !(no_ring = (float **)calloc((size_t)L, sizeof(float *)))) {
        cuda_fault_record(&impl_of(be)->fault, CUDA_FAULT_OOM, "cuda: kv table", "out of host memory");
        return bind_failed(be);
    }
    bool ok = put(be, t->d_k + sl, d->k, ptrs, "kv table bind") &&
              put(be, t->d_v + sl, d->v, ptrs, "kv table bind") &&
              put(be, t->d_ring + sl, d->q_ring ? (const void *)d->q_ring : no_ring, ptrs,
                  "kv table bind") &&
              put(be, t->d_len + sl * nkv, d->len, lens, "kv table bind") &&
              put(be, t->d_slot + slot, m, sizeof *m, "kv table bind") &&
              (d->pad ? put(be, m->pad, d->pad, pad_bytes, "kv table pads")
                      : cuda_ok(be, cudaMemsetAsync(m->pad, 0, pad_bytes, 0), "kv table pads"));
    free(no_ring);
    return ok ? 0 : bind_failed(be);
}

static int cuda_kv_table_step(struct backend *be, struct kv_table *t, int n_seq,
                              const struct kv_step_seq *seqs)
{
    if (failed(be)) return -1;
    if (!t) return refuse(be, "kv table step", "no table");
    struct layer_mirror mirror = {t->max_seqs, t->n_layer * t->n_kv, t->h_bound, t->h_type,
                                  t->h_cap, t->h_len};
    const char *why = layer_step_problem(&mirror, seqs, n_seq);
    if (why) return refuse(be, "kv table step", why);
    struct layer_plan *p = &t->plan;
    layer_plan_make(p, seqs, n_seq, FLASH_DECODE_MAX_NEW, FLASH_WARPS);
    char *buf = host_buf(be, t, p->bytes);
    if (!buf) return -1;
    layer_plan_write(p, buf, seqs, n_seq, FLASH_DECODE_MAX_NEW, FLASH_WARPS);
    if (!grow(be, (void **)&t->d_stepbuf, &t->d_stepbuf_cap, p->bytes, 1, "kv table step") ||
        !put(be, t->d_stepbuf, buf, p->bytes, "kv table step"))
        return -1;
    memcpy(t->h_step, seqs, (size_t)n_seq * sizeof *seqs);
    t->n_step = n_seq;
    impl_of(be)->step_table = t;
    t->d_step = (const kv_step_seq *)t->d_stepbuf;
    t->d_entry = (const layer_entry *)(t->d_stepbuf + p->o_entry);
    for (int pass = 0; pass < 2; pass++) {
        t->d_zmap[pass] = (const int *)(t->d_stepbuf + p->o_maps[pass]);
        t->d_rowmap[pass] = t->d_zmap[pass] + p->n_z[pass];
    }
    return 0;
}

static int step_rows(const struct kv_table *t)
{
    const kv_step_seq *last = &t->h_step[t->n_step - 1];
    return last->row0 + last->n_new;
}

/* Room for the step's rows at `layer` in every active slot (as the CPU
 * refuses an append without it), then the host mirror of the lengths grows;
 * the device's grow with the append's k_layer_bump. */
static int append_reserve(struct backend *be, struct kv_table *t, int layer, const char *what)
{
    const int L = t->n_layer, nkv = t->n_kv;
    for (int j = 0; j < t->n_step; j++) {
        const kv_step_seq *s = &t->h_step[j];
        int *len = t->h_len + ((size_t)s->slot * L + layer) * nkv;
        for (int h = 0; h < nkv; h++)
            if (len[h] > t->h_cap[s->slot] - s->n_new) return refuse(be, what, "no room in the cache");
        for (int h = 0; h < nkv; h++) len[h] += s->n_new;
    }
    return 0;
}

static int cuda_kv_append(struct backend *be, struct kv_table *t, int layer, const float *k,
                          const float *v, const float *q)
{
    if (failed(be)) return -1;
    if (!t || !t->n_step || layer < 0 || layer >= t->n_layer || !k || !v)
        return refuse(be, "kv append", "bad arguments (or no kv_table_step)");
    if (append_reserve(be, t, layer, "kv append")) return -1;
    if (graph_mode(be) == STEP_REPLAY) return 0; /* the mirror grew; the graph appends */
    dim3 grid((unsigned)step_rows(t), (unsigned)t->n_kv);
    switch (t->h_type[t->h_step[0].slot]) {
    case KV_BF16: k_layer_append<__nv_bfloat16><<<grid, 128>>>(*t, t->n_step, layer, k, v, q); break;
    case KV_F16: k_layer_append<__half><<<grid, 128>>>(*t, t->n_step, layer, k, v, q); break;
    default: k_layer_append<float><<<grid, 128>>>(*t, t->n_step, layer, k, v, q);
    }
    if (!launched(be, "kv append")) return -1;
    k_layer_bump<<<t->n_step, 64>>>(*t, layer);
    return launched(be, "kv lengths") ? 0 : -1;
}

int cuda_rope_append(struct backend *be, struct kv_table *t, int layer, const split_args *s,
                     int rows, unsigned threads)
{
    if (failed(be)) return -1;
    if (!t || !t->n_step || layer < 0 || layer >= t->n_layer || s->n_kv != t->n_kv ||
        s->n_head != t->n_head || s->hd != t->hd || rows != step_rows(t))
        return refuse(be, "rope + kv append", "bad arguments (or no kv_table_step)");
    if (append_reserve(be, t, layer, "rope + kv append")) return -1;
    if (graph_mode(be) == STEP_REPLAY) return 0;
    unsigned blocks = (unsigned)rows * (unsigned)(s->n_head + 2 * s->n_kv);
    size_t shared = (size_t)s->hd * sizeof(float);
    switch (t->h_type[t->h_step[0].slot]) {
    case KV_BF16:
        k_rope_append<__nv_bfloat16><<<blocks, threads, shared>>>(*t, t->n_step, layer, *s);
        break;
    case KV_F16: k_rope_append<__half><<<blocks, threads, shared>>>(*t, t->n_step, layer, *s); break;
    default: k_rope_append<float><<<blocks, threads, shared>>>(*t, t->n_step, layer, *s);
    }
    if (!launched(be, "qkv split + rope + kv append")) return -1;
    k_layer_bump<<<t->n_step, 64>>>(*t, layer);
    return launched(be, "kv lengths") ? 0 : -1;
}

/* The longest visible cache of launch `pass` at `layer` (host mirror). */
static int launch_max_vis(const struct kv_table *t, int pass, int layer)
{
    int best = 0;
    for (int j = 0; j < t->n_step; j++) {
        const kv_step_seq *s = &t->h_step[j];
        if ((s->n_new <= FLASH_DECODE_MAX_NEW) != (pass == 0)) continue;
        const int *len = t->h_len + ((size_t)s->slot * t->n_layer + layer) * t->n_kv;
        for (int h = 0; h < t->n_kv; h++) best = len[h] > best ? len[h] : best;
    }
    return best;
}

/* The largest capacity among the step's caches: a bound on every visible
 * length while the bindings last. */
static int launch_max_cap(const struct kv_table *t)
{
    int best = 0;
    for (int j = 0; j < t->n_step; j++) {
        int cap = t->h_cap[t->h_step[j].slot];
        best = cap > best ? cap : best;
    }
    return best;
}

/* Every sequence through the general kernel (probabilities, or a shape the
 * flash kernel does not take), on the table's device lengths and pads. */
static int attention_general_each(struct backend *be, struct kv_table *t,
                                  const struct attn_layer_args *a)
{
    const int L = t->n_layer, nkv = t->n_kv, qdim = t->n_head * t->hd;
    float *probs = a->probs;
    for (int j = 0; j < t->n_step; j++) {
        const kv_step_seq *s = &t->h_step[j];
        const slot_meta *m = &t->h_slot[s->slot];
        const size_t ls = (size_t)s->slot * L + a->layer;
        struct attn_args x = {};
        x.out = a->out + (size_t)s->row0 * qdim;
        x.q = a->q + (size_t)s->row0 * qdim;
        x.k_cache = t->h_k[ls];
        x.v_cache = t->h_v[ls];
        x.kv_type = (enum kv_type)t->h_type[s->slot];
        x.cap = m->cap, x.n_head = t->n_head, x.n_kv = nkv, x.head_dim = t->hd;
        x.n_new = s->n_new, x.scale = a->scale;
        x.kv_len = t->h_len + ls * nkv; /* not read: d_len is the device's */
        x.probs = probs;
        if (probs) probs += (size_t)t->n_head * s->n_new * m->cap;
        if (general_run_typed(be, &x, t->d_len + ls * nkv, m->pad + (size_t)a->layer * nkv * m->cap))
            return -1;
    }
    return 0;
}

static int cuda_attention_layer(struct backend *be, struct kv_table *t,
                                const struct attn_layer_args *a)
{
    if (failed(be)) return -1;
    if (!t || !a || !t->n_step || a->layer < 0 || a->layer >= t->n_layer || !a->out || !a->q)
        return refuse(be, "attention layer", "bad arguments (or no kv_table_step)");
    if (graph_mode(be) == STEP_REPLAY) return 0;
    bool flash = !a->probs && flash_shape_ok(t->n_head, t->n_kv, t->hd) &&
                 t->plan.n_z[0] <= 65535 && t->plan.n_z[1] <= 65535;
    for (int j = 0; j < t->n_step && flash; j++) flash = t->h_aligned[t->h_step[j].slot];
    if (!flash) return attention_general_each(be, t, a);
    const struct layer_plan *p = &t->plan;
    const int n_ent = p->n_entry[0] + p->n_entry[1];
    k_layer_desc<<<n_ent, 64>>>(*t, a->layer, a->out, a->q);
    if (!launched(be, "attention layer descriptors")) return -1;
    const enum kv_type type = (enum kv_type)t->h_type[t->h_step[0].slot];
    for (int pass = 0; pass < 2; pass++) {
        if (!p->n_entry[pass]) continue;
        struct flash_launch fl = {};
        fl.seqs = t->d_desc + (pass ? p->n_entry[0] : 0);
        fl.zmap = t->d_zmap[pass];
        fl.rowmap = t->d_rowmap[pass];
        fl.n_z = p->n_z[pass], fl.rows = p->n_rows[pass];
        fl.n_head = t->n_head, fl.n_kv = t->n_kv;
        /* Recorded for replays: the grid for the capacity, each query
         * splitting its own keys (the lengths grow between replays). */
        fl.fixed_grid = pass == 0 && graph_mode(be) == STEP_CAPTURE;
        fl.max_vis = fl.fixed_grid ? launch_max_cap(t) : launch_max_vis(t, pass, a->layer);
        fl.scale = a->scale;
        if (flash_run_typed(be, type, t->hd, pass == 0, &fl)) return -1;
    }
    return 0;
}

bool cuda_layer_graphable(struct backend *be)
{
    struct kv_table *t = impl_of(be)->step_table;
    if (!t || !t->n_step) return false;
    const struct layer_plan *p = &t->plan;
    if (p->n_entry[1] != 0 || p->n_z[0] > 65535 || !flash_shape_ok(t->n_head, t->n_kv, t->hd))
        return false;
    for (int j = 0; j < t->n_step; j++)
        if (!t->h_aligned[t->h_step[j].slot]) return false;
    struct flash_launch fl = {};
    fl.n_z = p->n_z[0], fl.rows = p->n_rows[0];
    fl.n_head = t->n_head, fl.n_kv = t->n_kv;
    fl.max_vis = launch_max_cap(t);
    return flash_reserve_decode(be, &fl, t->hd);
}

void cuda_layer_ops_install(struct backend *be)
{
    be->kv_table_create = cuda_kv_table_create;
    be->kv_table_free = cuda_kv_table_free;
    be->kv_table_bind = cuda_kv_table_bind;
    be->kv_table_step = cuda_kv_table_step;
    be->kv_append = cuda_kv_append;
    be->attention_layer = cuda_attention_layer;
}
