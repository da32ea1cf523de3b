/* cuda_split.c - see cuda_split.h. */
#include "kernels/cuda/cuda_split.h"

static int div_up(long a, long b)
{
    return (int)((a + b - 1) / b);
}

struct flash_split flash_split_plan(int n_sm, int n_kv, int n_z, int max_vis, int keys_min)
{
    struct flash_split s;
    int vis = max_vis > 0 ? max_vis : 1;
    long blocks = (long)(n_kv > 0 ? n_kv : 1) * (n_z > 0 ? n_z : 1);
    if (keys_min < 1) keys_min = 1;
    int n_split = div_up(2L * (n_sm > 0 ? n_sm : 1), blocks);
    int most = div_up(vis, keys_min);
    if (n_split > most) n_split = most;
    if (n_split > FLASH_MAX_SPLITS) n_split = FLASH_MAX_SPLITS;
    if (n_split < 1) n_split = 1;
    s.keys_per_split = div_up(div_up(vis, n_split), keys_min) * keys_min;
    s.n_split = div_up(vis, s.keys_per_split);
    return s;
}
