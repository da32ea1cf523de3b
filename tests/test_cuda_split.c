/* test_cuda_split.c - the flash kernels' split-K plan (kernels/cuda/cuda_split.c,
 * plain C): every split holds whole rounds of tiles, together they cover the
 * longest head with no empty split, at most 64, and the lengths the CUDA
 * self-test uses reach every split count from 1 to 64. */
#include "test.h"

#include "kernels/cuda/cuda_split.h"

static void test_invariants(void)
{
    const int sms[] = {1, 80, 108, 132, 144};
    const int keys_min[] = {128, 256};
    int bad = 0;
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 2; b++)
            for (int n_kv = 1; n_kv <= 8; n_kv *= 2)
                for (int n_z = 1; n_z <= 512; n_z *= 4)
                    for (int vis = 0; vis <= 40000; vis += vis < 600 ? 1 : 97) {
                        struct flash_split s = flash_split_plan(sms[a], n_kv, n_z, vis, keys_min[b]);
                        int v = vis > 0 ? vis : 1;
                        bad += s.n_split < 1 || s.n_split > FLASH_MAX_SPLITS;
                        bad += s.keys_per_split % keys_min[b] != 0;
                        bad += (long)s.n_split * s.keys_per_split < v;
                        bad += (long)(s.n_split - 1) * s.keys_per_split >= v; /* none empty */
                        /* no more blocks than two waves need */
                        bad += s.n_split > 1 && (long)(s.n_split - 1) * n_kv * n_z >= 2L * sms[a];
                    }
    CHECK_MSG(bad == 0, "%d plans break an invariant", bad);
}

/* The self-test's decode lengths on an H200 (132 SMs, 4 kv heads, one
 * query): split count s for s * 128 - (s % 3) * 37 keys. */
static void test_every_count_reachable(void)
{
    int seen[FLASH_MAX_SPLITS + 1] = {0};
    for (int s = 1; s <= FLASH_MAX_SPLITS; s++) {
        int vis = s * 128 - (s % 3) * 37;
        struct flash_split p = flash_split_plan(132, 4, 1, vis, 128);
        CHECK_MSG(p.n_split == s, "%d keys: %d splits, want %d", vis, p.n_split, s);
        seen[p.n_split] = 1;
    }
    int n = 0;
    for (int s = 1; s <= FLASH_MAX_SPLITS; s++) n += seen[s];
    CHECK(n == FLASH_MAX_SPLITS);
    /* longer than 64 rounds: splits grow instead */
    struct flash_split big = flash_split_plan(132, 4, 1, 32768 + 5, 128);
    CHECK(big.n_split <= FLASH_MAX_SPLITS && big.keys_per_split > 128);
    /* batch 64: the blocks already fill the device, one split */
    CHECK(flash_split_plan(132, 4, 64, 32768, 128).n_split == 2);
    CHECK(flash_split_plan(132, 4, 128, 32768, 128).n_split == 1);
}

int main(void)
{
    RUN(test_invariants);
    RUN(test_every_count_reachable);
    return test_summary("cuda_split");
}
