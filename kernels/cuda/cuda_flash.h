/* cuda_flash.h - the flash attention kernels' descriptors, shared by the
 * per-sequence attention (cuda_attention.cu, descriptors built on the host)
 * and the layer ops (cuda_layer.cu, descriptors built on the device from
 * the KV table).  Internal to the CUDA backend. */
#ifndef EB_CUDA_FLASH_H
#define EB_CUDA_FLASH_H

#include "kernels/cuda/cuda_internal.h"
extern "C" {
#include "kernels/cuda/cuda_split.h"
}

enum {
    FLASH_WARPS = 4,
    FLASH_TILE = 32,       /* keys per warp step: one per lane */
    FLASH_MAX_GROUP = 8,   /* query heads per kv head held in registers */
    FLASH_MAX_KV = 64,     /* kv lengths held in the descriptor */
    FLASH_DECODE_MAX_NEW = 4
};

/* One sequence of a launch (device memory). */
struct flash_seq {
    float *out;                 /* [n_new][n_head][HD] */
    const float *q;             /* [n_new][n_head][HD] */
    const void *k, *v;          /* [n_kv][cap][HD] of T */
    const unsigned char *mask;  /* device [n_kv][cap] or NULL */
    int cap, n_new;
    int z0;                     /* its first block along grid z */
    int row0;                   /* its first row of partials (rows: queries of the launch) */
    int kv_len[FLASH_MAX_KV];
};

struct flash_params {
    const flash_seq *seqs;      /* device [n_seq] */
    const int *zmap;            /* device: the sequence of each block along z */
    float *part;                /* [rows][n_head][n_split][HD + 2] when n_split > 1 */
    int n_head, group, n_split, keys_per_split;
    /* > 0 (decode only): each query splits its own visible keys, in
     * multiples of this, over the n_split blocks (keys_per_split unused), so
     * the grid does not follow the lengths: a step graph replays it as the
     * caches grow */
    int dyn_keys_min;
    float scale;
};

/* A launch over descriptors already in device memory. */
struct flash_launch {
    const flash_seq *seqs;      /* device [n_seq] */
    const int *zmap;            /* device [n_z]: the sequence of each block along z */
    const int *rowmap;          /* device [rows]: the sequence of each query row */
    int n_z, rows;              /* blocks along z (queries / Q, per sequence), query rows */
    int n_head, n_kv;
    int max_vis;                /* longest visible cache of the launch (sizes the split) */
    bool fixed_grid;            /* decode: max_vis is the caches' capacity and each query
                                   splits its own keys (flash_params.dyn_keys_min) */
    float scale;
};

/* The flash kernel (decode: one query per block, split-K; else 4 queries per
 * block) and its combine over L, caches of type t and head size hd (64, 128
 * or 256).  0, or -1 with the failure recorded. */
int flash_run_typed(struct backend *be, enum kv_type t, int hd, bool decode,
                    const struct flash_launch *L);

/* The split partials of a decode launch L (keys_min as flash_run's for one
 * query a block) allocated now, so that recording it allocates nothing. */
bool flash_reserve_decode(struct backend *be, const struct flash_launch *L, int hd);

/* The general kernel for one sequence whose lengths (d_len, [n_kv]) and pad
 * mask (d_mask, [n_kv][cap] or NULL) are already in device memory;
 * a->kv_len and a->slot_mask are not read.  Writes a->probs when given. */
int general_run_typed(struct backend *be, const struct attn_args *a, const int *d_len,
                      const unsigned char *d_mask);

/* flash-kernel conditions on a shape: head size, GQA group, kv heads. */
static inline bool flash_shape_ok(int n_head, int n_kv, int hd)
{
    return (hd == 64 || hd == 128 || hd == 256) && n_kv > 0 && n_head % n_kv == 0 &&
           n_head / n_kv <= FLASH_MAX_GROUP && n_kv <= FLASH_MAX_KV;
}

#endif
