/* bench_qmatmul.c - the CPU backend's quantized matmul alone, in CPU time:
 * y[m][n] = x[m][k] . W^T for random weights of one type, the best of REPS
 * calls, as multiply-adds per CPU-second and per cycle at a stated clock.
 *
 * CPU time (CLOCK_PROCESS_CPUTIME_ID), not wall time, because the kernels are
 * compared on a machine shared with other jobs: with one thread it counts
 * the kernel's own work, whatever else runs.  With more threads it also
 * counts time threads spend waiting for each other, so the wall time is
 * printed too.
 *
 * Usage: bench_qmatmul TYPE N K M [REPS [THREADS [GHZ]]]
 *   TYPE  GGUF type number: 2 Q4_0, 3 Q4_1, 6 Q5_0, 8 Q8_0, 12 Q4_K, 14 Q6_K
 *   e.g. bench_qmatmul 12 8960 1536 512   (the 1.5B's gate/up at prefill 512)
 * EVICTBENCH_CPU_SIMD=avx2 times the AVX2 kernels where wider ones exist. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/backend.h"
#include "kernels/quant.h"

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int parse_int(const char *s, const char *what, int min, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > 1 << 24) {
        fprintf(stderr, "bench_qmatmul: %s: expected an integer >= %d, got '%s'\n", what, min, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Random quant bytes with every f16 field (the first 2 or 4 bytes of a
 * block, where the scales of these types sit) set to a small finite value. */
static uint8_t *random_weights(int type, int n, int k, size_t *row_bytes)
{
    *row_bytes = quant_row_bytes(type, k);
    size_t bytes = *row_bytes * (size_t)n;
    uint8_t *w = malloc(bytes ? bytes : 1);
    if (!w) return NULL;
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < bytes; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        w[i] = (uint8_t)s;
    }
    size_t bb = quant_block_bytes(type);
    uint16_t h = quant_f32_to_f16(0.01f);
    uint8_t f16[2] = {(uint8_t)(h & 0xFF), (uint8_t)(h >> 8)};
    for (size_t b = 0; bb && b < bytes / bb; b++) {
        uint8_t *blk = w + b * bb;
        memcpy(blk + (type == 14 ? bb - 2 : 0), f16, 2); /* d: Q6_K keeps it last */
        if (type == 3 || type == 7 || type == 12) memcpy(blk + 2, f16, 2); /* m / dmin */
    }
    return w;
}

int main(int argc, char **argv)
{
    int type, n, k, m, reps = 3, threads = 1;
    double ghz = 2.6;
    if (argc < 5 || argc > 8) {
        fprintf(stderr, "usage: bench_qmatmul TYPE N K M [REPS [THREADS [GHZ]]]\n");
        return 2;
    }
    if (parse_int(argv[1], "TYPE", 0, &type) || parse_int(argv[2], "N", 1, &n) ||
        parse_int(argv[3], "K", 1, &k) || parse_int(argv[4], "M", 1, &m) ||
        (argc > 5 && parse_int(argv[5], "REPS", 1, &reps)) ||
        (argc > 6 && parse_int(argv[6], "THREADS", 1, &threads)))
        return 2;
    if (argc > 7 && (ghz = atof(argv[7])) <= 0) {
        fprintf(stderr, "bench_qmatmul: GHZ: expected a positive number, got '%s'\n", argv[7]);
        return 2;
    }
    if (!quant_type_supported(type) || quant_row_bytes(type, k) == 0) {
        fprintf(stderr, "bench_qmatmul: type %d with K = %d: not a supported type and row length\n",
                type, k);
        return 2;
    }
    struct backend *be = backend_cpu_create(threads);
    size_t rb;
    uint8_t *w = random_weights(type, n, k, &rb);
    float *x = malloc(sizeof(float) * (size_t)m * k), *y = malloc(sizeof(float) * (size_t)m * n);
    struct weight *wt = be && w ? be->weight_create(be, (enum weight_type)type, n, k, w, 0, 0) : NULL;
    if (!be || !w || !x || !y || !wt) {
        fprintf(stderr, "bench_qmatmul: out of memory or weight_create failed\n");
        return 1;
    }
    for (size_t i = 0; i < (size_t)m * k; i++) x[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    be->matmul(be, y, x, wt, NULL, m); /* warm: scratch, page faults */
    double best_cpu = 1e30, best_wall = 1e30;
    for (int r = 0; r < reps; r++) {
        double c0 = seconds(CLOCK_PROCESS_CPUTIME_ID), w0 = seconds(CLOCK_MONOTONIC);
        be->matmul(be, y, x, wt, NULL, m);
        double c = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0, wl = seconds(CLOCK_MONOTONIC) - w0;
        if (c < best_cpu) best_cpu = c;
        if (wl < best_wall) best_wall = wl;
    }
    double macs = (double)m * n * k;
    printf("%s n %d k %d m %d threads %d: cpu %.3f ms wall %.3f ms  %.1f GMAC/cpu-s  "
           "%.1f MAC/cycle at %.2f GHz\n",
           quant_type_name(type), n, k, m, threads, best_cpu * 1e3, best_wall * 1e3,
           macs / best_cpu * 1e-9, macs / best_cpu / (ghz * 1e9), ghz);
    be->weight_free(be, wt);
    be->destroy(be);
    free(w);
    free(x);
    free(y);
    return 0;
}
