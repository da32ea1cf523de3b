/* cuda_split.h - how the flash attention kernels split a long cache across
 * blocks (split-K, flash-decoding).  Plain C, so the plan is tested on the
 * CPU (tests/test_cuda_split.c) and the self-test can aim its lengths at
 * every split count a device will use. */
#ifndef EB_CUDA_SPLIT_H
#define EB_CUDA_SPLIT_H

enum { FLASH_MAX_SPLITS = 64 };

struct flash_split {
    int n_split;        /* blocks along the keys, 1..FLASH_MAX_SPLITS */
    int keys_per_split; /* a multiple of keys_min; n_split * keys_per_split >= max_vis */
};

/* The split of a launch of n_kv x n_z blocks over caches of at most max_vis
 * visible keys on n_sm multiprocessors: enough blocks for two waves, but no
 * split under keys_min keys (one round of tiles for the block's warps), at
 * most FLASH_MAX_SPLITS, and no split left empty by the longest head. */
struct flash_split flash_split_plan(int n_sm, int n_kv, int n_z, int max_vis, int keys_min);

#endif
