/* bench_membw.c - how fast this host streams memory into the cores: THREADS
 * threads read one buffer of MIB MiB (2 MiB pages where the kernel gives
 * them, as the CPU backend's weights get), each its own contiguous share,
 * REPS passes; prints the median and best GB/s.
 *
 * Decode at batch 1 reads every weight once a token, so its tokens/s times
 * the bytes it reads is a bandwidth too; bench_peer.sh runs this beside each
 * round of llama-bench and ours, so the table says how close each runtime
 * came to what the host gave in the same minutes (a shared VM's bandwidth
 * moves between minutes and between processes).
 *
 * Usage: bench_membw [MIB [THREADS [REPS]]]   (default 1024, all CPUs, 6) */
#include <errno.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int parse_int(const char *s, const char *what, int min, int max, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max) {
        fprintf(stderr, "bench_membw: %s: expected an integer in [%d, %d], got '%s'\n", what,
                min, max, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* The sum of n bytes' 64-bit words (n a multiple of 128), so the loads
 * cannot be dropped; vector loads where the CPU has AVX2, since one core's
 * scalar loads may not keep enough lines in flight. */
#if defined(__x86_64__)
__attribute__((target("avx2"))) static uint64_t read_avx2(const unsigned char *p, size_t n)
{
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i < n; i += 128) {
        a = _mm256_add_epi64(a, _mm256_load_si256((const __m256i *)(p + i)));
        b = _mm256_add_epi64(b, _mm256_load_si256((const __m256i *)(p + i + 32)));
        c = _mm256_add_epi64(c, _mm256_load_si256((const __m256i *)(p + i + 64)));
        d = _mm256_add_epi64(d, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    __m256i s = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
    uint64_t w[4];
    _mm256_storeu_si256((__m256i *)w, s);
    return w[0] + w[1] + w[2] + w[3];
}
#endif

static uint64_t read_words(const unsigned char *p, size_t n)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) return read_avx2(p, n);
#endif
    uint64_t s[8] = {0};
    for (size_t i = 0; i < n; i += 64)
        for (int k = 0; k < 8; k++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * k, 8);
            s[k] += w;
        }
    return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int mib = 1024, threads = omp_get_num_procs(), reps = 6;
    if (argc > 4 || (argc > 1 && parse_int(argv[1], "MIB", 16, 1 << 20, &mib)) ||
        (argc > 2 && parse_int(argv[2], "THREADS", 1, 4096, &threads)) ||
        (argc > 3 && parse_int(argv[3], "REPS", 1, 1000, &reps))) {
        fprintf(stderr, "usage: bench_membw [MIB [THREADS [REPS]]]\n");
        return 2;
    }
    size_t bytes = (size_t)mib << 20, huge = (size_t)2 << 20;
    unsigned char *buf = aligned_alloc(huge, bytes); /* MIB >= 16: a whole number of 2 MiB */
    double *gbs = malloc((size_t)reps * sizeof *gbs);
    if (!buf || !gbs) {
        fprintf(stderr, "bench_membw: out of memory for %d MiB\n", mib);
        return 1;
    }
#ifdef MADV_HUGEPAGE
    madvise(buf, bytes, MADV_HUGEPAGE); /* a hint: 4 KiB pages where refused */
#endif
    /* each thread faults in its own share, as it will read it (first touch) */
    size_t share = bytes / (size_t)threads / 128 * 128;
#pragma omp parallel num_threads(threads)
    {
        size_t t = (size_t)omp_get_thread_num();
        memset(buf + t * share, (int)(t + 1), share);
    }
    uint64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        uint64_t sum = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
        sum += read_words(buf + (size_t)omp_get_thread_num() * share, share);
        double dt = now_s() - t0;
        sink += sum;
        gbs[r] = (double)share * threads / dt / 1e9;
    }
    qsort(gbs, (size_t)reps, sizeof *gbs, cmp_double);
    /* the median of an even count: the mean of the middle two */
    double median = (gbs[(reps - 1) / 2] + gbs[reps / 2]) / 2;
    /* the sums are printed (as nothing) so the compiler cannot drop the reads */
    printf("memory read: %d MiB, %d threads, %d passes: median %.1f GB/s, best %.1f GB/s%s\n",
           mib, threads, reps, median, gbs[reps - 1], sink == 1 ? " " : "");
    free(gbs);
    free(buf);
    return 0;
}
