/* test_qmatmul.c - typed weights on the CPU backend: the dot kernels on
 * quantized blocks (scalar and AVX2) and the backend's matmul / embed_weight,
 * against an independent reference: the row dequantized by kernels/quant.c
 * (itself pinned to the gguf Python package by test_quant) times x in double.
 *
 * Tolerances:
 *  - against the dequantized-activation product sum(w * xhat), where xhat is
 *    the 8-bit activation the kernel really used: only f32 rounding separates
 *    them, so 2e-6 of sum|w * xhat| (a few ulps per block sum);
 *  - against the f32 product sum(w * x): rounding x to 8 bits per block moves
 *    each value by at most d/2 (d = max|x| / 127 of its block), so the error
 *    is at most sum over blocks of d/2 * sum|w| in that block: a proof, not a
 *    guess, plus the same f32 rounding;
 *  - scalar vs AVX2 on the same activations: both sum exact integers per
 *    block, so they differ only in the order of float additions: 2e-6.
 * The sgemm panels of large batches dequantize with SIMD code that must equal
 * kernels/quant.c bit for bit.
 * Random blocks are random bytes with finite random f16 scales. */
#include "test.h"

#include <stdint.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_qdot.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint32_t rnd_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static float rnd_f(void) /* [-1, 1) */
{
    return (float)((double)rnd_u32() / 2147483648.0 - 1.0);
}

static void put_f16(uint8_t *p, float v)
{
    uint16_t h = quant_f32_to_f16(v);
    p[0] = (uint8_t)(h & 0xFF);
    p[1] = (uint8_t)(h >> 8);
}

static const enum weight_type all_types[] = {
    WEIGHT_F32, WEIGHT_F16, WEIGHT_BF16, WEIGHT_Q4_0, WEIGHT_Q4_1, WEIGHT_Q5_0,
    WEIGHT_Q5_1, WEIGHT_Q8_0, WEIGHT_Q4_K, WEIGHT_Q5_K, WEIGHT_Q6_K,
};
#define N_TYPES ((int)(sizeof all_types / sizeof all_types[0]))

/* rows x cols of random weights in type t (caller frees). */
static uint8_t *random_weights(enum weight_type t, int rows, int cols)
{
    size_t rb = quant_row_bytes((int)t, cols);
    uint8_t *w = malloc(rb * (size_t)rows);
    if (!w) return NULL;
    if (t == WEIGHT_F32) {
        float *f = (float *)w;
        for (size_t i = 0; i < (size_t)rows * cols; i++) f[i] = rnd_f() * 0.1f;
        return w;
    }
    if (t == WEIGHT_F16 || t == WEIGHT_BF16) {
        for (size_t i = 0; i < (size_t)rows * cols; i++) {
            float v = rnd_f() * 0.1f;
            uint32_t u;
            memcpy(&u, &v, 4);
            uint16_t h = t == WEIGHT_F16 ? quant_f32_to_f16(v) : (uint16_t)(u >> 16);
            w[2 * i] = (uint8_t)(h & 0xFF);
            w[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return w;
    }
    for (size_t i = 0; i < rb * (size_t)rows; i++) w[i] = (uint8_t)rnd_u32();
    size_t bb = quant_block_bytes((int)t), nb = rb * (size_t)rows / bb;
    for (size_t b = 0; b < nb; b++) {
        uint8_t *p = w + b * bb;
        switch (t) {
        case WEIGHT_Q4_1:
        case WEIGHT_Q5_1:
        case WEIGHT_Q4_K:
        case WEIGHT_Q5_K:
            put_f16(p, 0.01f + 0.02f * (rnd_f() + 1.0f));
            put_f16(p + 2, 0.01f * (rnd_f() + 1.0f));
            break;
        case WEIGHT_Q6_K: put_f16(p + 208, 0.001f + 0.002f * (rnd_f() + 1.0f)); break;
        default: put_f16(p, 0.01f + 0.02f * (rnd_f() + 1.0f)); break;
        }
    }
    return w;
}

/* The activation values a kernel really multiplies (xhat), from a prepared row. */
static void act_values(enum qact_kind kind, const void *act, const float *x, int k, double *out,
                       double *half_step)
{
    for (int i = 0; i < k; i++) {
        if (kind == QACT_F32) {
            out[i] = x[i];
            half_step[i] = 0.0;
        } else if (kind == QACT_Q8_32) {
            const block_q8_32 *b = (const block_q8_32 *)act + i / QK;
            out[i] = (double)b->d * b->qs[i % QK];
            half_step[i] = b->d * 0.5;
        } else {
            const block_q8_256 *b = (const block_q8_256 *)act + i / QK_K;
            out[i] = (double)b->d * b->qs[i % QK_K];
            half_step[i] = b->d * 0.5;
        }
    }
}

/* One weight row, both kernels, against the references. */
static void check_dot(enum weight_type t, int k)
{
    uint8_t *w = random_weights(t, 1, k);
    float *x = malloc((size_t)k * sizeof *x), *wf = malloc((size_t)k * sizeof *wf);
    double *xh = malloc((size_t)k * sizeof *xh), *hs = malloc((size_t)k * sizeof *hs);
    enum qact_kind kind = (enum qact_kind)qact_kind_of(t);
    void *act = malloc(qact_row_bytes(kind, k) + 64);
    if (!w || !x || !wf || !xh || !hs || !act) { CHECK(0); goto done; }
    for (int i = 0; i < k; i++) x[i] = rnd_f() * (i % 7 == 0 ? 3.0f : 1.0f);
    qact_quantize_row(kind, x, act, k);
    act_values(kind, act, x, k, xh, hs);
    CHECK(quant_dequantize((int)t, w, wf, k) == 0);
    double ref_hat = 0, mag_hat = 0, ref = 0, mag = 0, act_bound = 0;
    for (int i = 0; i < k; i++) {
        ref_hat += (double)wf[i] * xh[i];
        mag_hat += fabs((double)wf[i] * xh[i]);
        ref += (double)wf[i] * x[i];
        mag += fabs((double)wf[i] * x[i]);
        act_bound += fabs((double)wf[i]) * hs[i];
    }
    CHECK(mag > 0);
    qdot_fn kernels[2] = {qdot_scalar(t), qdot_avx2(t)};
    int have_avx2 = cpu_simd_level() == CPU_SIMD_AVX2;
    float got[2] = {0, 0};
    for (int s = 0; s < 2; s++) {
        if (!kernels[s]) { CHECK_MSG(s == 1, "no scalar kernel for %s", quant_type_name(t)); continue; }
        if (s == 1 && !have_avx2) continue;
        got[s] = kernels[s](k, w, act);
        CHECK_MSG(fabs(got[s] - ref_hat) <= 2e-6 * mag_hat + 1e-7,
                  "%s k=%d %s: %.9g vs xhat reference %.9g", quant_type_name(t), k,
                  s ? "avx2" : "scalar", got[s], ref_hat);
        CHECK_MSG(fabs(got[s] - ref) <= act_bound + 2e-6 * mag + 1e-7,
                  "%s k=%d %s: %.9g vs f32 reference %.9g (bound %g)", quant_type_name(t), k,
                  s ? "avx2" : "scalar", got[s], ref, act_bound);
    }
    if (have_avx2 && kernels[1])
        CHECK_MSG(fabs(got[0] - got[1]) <= 2e-6 * mag_hat + 1e-7, "%s: scalar %.9g avx2 %.9g",
                  quant_type_name(t), got[0], got[1]);
done:
    free(w); free(x); free(wf); free(xh); free(hs); free(act);
}

static void test_dot_kernels(void)
{
    if (cpu_simd_level() != CPU_SIMD_AVX2)
        fprintf(stderr, "  note: no AVX2 here (or EVICTBENCH_CPU_SIMD=scalar): scalar kernels only\n");
    for (int i = 0; i < N_TYPES; i++) {
        int kb = quant_block_elems((int)all_types[i]);
        int ks[] = {256, 512, 2048, kb == 1 ? 37 : 256 * 3};
        for (int j = 0; j < 4; j++)
            for (int rep = 0; rep < 4; rep++) check_dot(all_types[i], ks[j]);
    }
}

/* The multi-row kernels against the 1-row kernel of the same level, bit for
 * bit (they promise the same float operations in the same order), on
 * QDOT_ROWS activation rows of different magnitudes, one of them all zero,
 * laid out with a padded stride.  Every type the decode path relies on must
 * have one where AVX2 runs, so this cannot pass by finding no kernel. */
static void check_dot_rows(enum weight_type t, int k, enum cpu_simd level)
{
    qdot_rows_fn dots = qdot_rows_for(t, level);
    qdot_fn dot = qdot_for(t, level);
    enum qact_kind kind = (enum qact_kind)qact_kind_of(t);
    size_t stride = qact_row_bytes(kind, k) + 64; /* padding the kernel must skip */
    uint8_t *w = random_weights(t, 1, k);
    uint8_t *act = malloc(stride * QDOT_ROWS);
    float *x = malloc((size_t)k * sizeof *x);
    if (!w || !act || !x || !dots || !dot) { CHECK(0); goto done; }
    memset(act, 0xA5, stride * QDOT_ROWS);
    for (int r = 0; r < QDOT_ROWS; r++) {
        float scale = r == 1 ? 0.0f : (float)(r + 1) * (r == 2 ? 40.0f : 1.0f);
        for (int i = 0; i < k; i++) x[i] = rnd_f() * scale * (i % 5 == 0 ? 3.0f : 1.0f);
        qact_quantize_row(kind, x, act + (size_t)r * stride, k);
    }
    float got[QDOT_ROWS];
    dots(k, w, act, stride, got);
    int nonzero = 0;
    for (int r = 0; r < QDOT_ROWS; r++) {
        float want = dot(k, w, act + (size_t)r * stride);
        nonzero += want != 0.0f;
        CHECK_MSG(memcmp(&got[r], &want, sizeof want) == 0, "%s k=%d rows kernel row %d: %.9g, 1-row %.9g",
                  quant_type_name(t), k, r, got[r], want);
    }
    CHECK_MSG(nonzero >= QDOT_ROWS - 1, "%s k=%d: rows vanished", quant_type_name(t), k);
done:
    free(w); free(act); free(x);
}

static void test_dot_rows_kernels(void)
{
    static const enum weight_type needed[] = {WEIGHT_Q4_0, WEIGHT_Q4_1, WEIGHT_Q5_0, WEIGHT_Q5_1,
                                              WEIGHT_Q8_0, WEIGHT_Q4_K, WEIGHT_Q5_K, WEIGHT_Q6_K};
    /* scalar has no multi-row kernels: the matmul falls back to 1-row dots */
    for (int i = 0; i < N_TYPES; i++) CHECK(qdot_rows_for(all_types[i], CPU_SIMD_SCALAR) == NULL);
    if (cpu_simd_level() != CPU_SIMD_AVX2) {
        fprintf(stderr, "  note: no AVX2 here: multi-row kernels not run\n");
        return;
    }
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
        CHECK_MSG(qdot_rows_avx2(needed[i]) != NULL, "no multi-row kernel for %s",
                  quant_type_name(needed[i]));
        int ks[] = {256, 512, 2048, 256 * 3};
        for (int j = 0; j < 4; j++)
            for (int rep = 0; rep < 3; rep++) check_dot_rows(needed[i], ks[j], CPU_SIMD_AVX2);
    }
    /* f32-activation types keep their 1-row kernels */
    CHECK(qdot_rows_avx2(WEIGHT_F32) == NULL && qdot_rows_avx2(WEIGHT_F16) == NULL &&
          qdot_rows_avx2(WEIGHT_BF16) == NULL);
}

/* Zero blocks, extreme quants: activations of 0 and one hot value. */
static void test_dot_edge_values(void)
{
    for (int i = 0; i < N_TYPES; i++) {
        enum weight_type t = all_types[i];
        enum qact_kind kind = (enum qact_kind)qact_kind_of(t);
        int k = 512;
        uint8_t *w = random_weights(t, 1, k);
        float x[512] = {0}, wf[512];
        unsigned char act[sizeof(block_q8_256) * 2 + sizeof(float) * 512];
        qact_quantize_row(kind, x, act, k);
        for (int s = 0; s < 2; s++) {
            qdot_fn f = s ? qdot_avx2(t) : qdot_scalar(t);
            if (f && (s == 0 || cpu_simd_level() == CPU_SIMD_AVX2))
                CHECK_MSG(f(k, w, act) == 0.0f, "%s: zero x", quant_type_name(t));
        }
        x[300] = -5.0f;
        qact_quantize_row(kind, x, act, k);
        quant_dequantize((int)t, w, wf, k);
        for (int s = 0; s < 2; s++) {
            qdot_fn f = s ? qdot_avx2(t) : qdot_scalar(t);
            if (f && (s == 0 || cpu_simd_level() == CPU_SIMD_AVX2))
                CHECK_NEAR(f(k, w, act), -5.0 * wf[300], 1e-5 * fabs(5.0 * wf[300]) + 1e-7);
        }
        free(w);
    }
}

/* Backend matmul over several batch sizes (integer path and sgemm panels),
 * with and without bias, against the dequantized f32 product. */
static void check_matmul(struct backend *be, enum weight_type t, int n, int k, int m, int bias)
{
    uint8_t *w = random_weights(t, n, k);
    float *wf = malloc((size_t)n * k * sizeof *wf), *x = malloc((size_t)m * k * sizeof *x);
    float *b = malloc((size_t)n * sizeof *b), *y = malloc((size_t)m * n * sizeof *y);
    if (!w || !wf || !x || !b || !y) { CHECK(0); goto done; }
    for (size_t i = 0; i < (size_t)m * k; i++) x[i] = rnd_f();
    for (int i = 0; i < n; i++) b[i] = rnd_f();
    CHECK(quant_dequantize((int)t, w, wf, (int64_t)n * k) == 0);
    struct weight *wt = be->weight_create(be, t, n, k, w, 1, 0);
    CHECK(wt != NULL);
    if (!wt) goto done;
    if (wt->interleave) /* K-quants on AVX2, rows a multiple of 8: repacked */
        CHECK(x8_kernels_for(t) && n % 8 == 0 && wt->held == t && wt->data != w &&
              wt->bytes == (size_t)n / 8 * (k / x8_kernels_for(t)->block_elems) *
                               x8_kernels_for(t)->block_bytes);
    else
        CHECK(wt->held == t && wt->data == w && wt->bytes == 0); /* borrowed in place */
    be->matmul(be, y, x, wt, bias ? b : NULL, m);
    int bad = 0;
    for (int i = 0; i < m && !bad; i++)
        for (int r = 0; r < n; r++) {
            double ref = bias ? b[r] : 0, mag = fabs(ref), bound = 0;
            int blk = quant_block_elems((int)t) == 1 ? 0 : quant_block_elems((int)t);
            for (int b0 = 0; b0 < k; b0 += blk ? blk : k) {
                int len = blk ? blk : k;
                double amax = 0, wsum = 0;
                for (int j = b0; j < b0 + len; j++) {
                    double p = (double)wf[(size_t)r * k + j] * x[(size_t)i * k + j];
                    ref += p;
                    mag += fabs(p);
                    if (fabs(x[(size_t)i * k + j]) > amax) amax = fabs(x[(size_t)i * k + j]);
                    wsum += fabs(wf[(size_t)r * k + j]);
                }
                if (blk) bound += amax / 127.0 / 2.0 * wsum;
            }
            double got = y[(size_t)i * n + r];
            if (!(fabs(got - ref) <= bound + 1e-5 * mag + 1e-6)) {
                CHECK_MSG(0, "%s n=%d k=%d m=%d: y[%d][%d] = %.9g, reference %.9g (bound %g)",
                          quant_type_name(t), n, k, m, i, r, got, ref, bound);
                bad = 1;
                break;
            }
        }
    be->weight_free(be, wt);
done:
    free(w); free(wf); free(x); free(b); free(y);
}

static void run_matmuls(struct backend *be)
{
    int ms[] = {1, 3, 16, 40};
    for (int i = 0; i < N_TYPES; i++)
        for (int j = 0; j < 4; j++) {
            check_matmul(be, all_types[i], 37, 512, ms[j], j % 2);
            check_matmul(be, all_types[i], 40, 512, ms[j], j % 2); /* whole 8-row groups */
        }
}

static void test_matmul_default(void)
{
    struct backend *be = backend_cpu_create(2);
    run_matmuls(be);
    be->destroy(be);
}

static void test_matmul_scalar_forced(void)
{
    setenv("EVICTBENCH_CPU_SIMD", "scalar", 1);
    CHECK(cpu_simd_level() == CPU_SIMD_SCALAR);
    struct backend *be = backend_cpu_create(2);
    unsetenv("EVICTBENCH_CPU_SIMD");
    run_matmuls(be);
    be->destroy(be);
}

/* Small batches (below the sgemm-panel size, 33) run the integer kernels
 * tile by tile: a batch of 7 (one multi-row group of QDOT_ROWS = 4, then 3
 * single rows) and one of 32 must equal batches of one exactly (the same
 * float operations on the same quantized rows). */
static void test_matmul_batch_matches_single(void)
{
    struct backend *be = backend_cpu_create(2);
    enum { N = 72, K = 768, BIG = 40 }; /* 72: whole 8-row groups, a partial tile */
    int exact_ms[] = {7, 32};
    for (int i = 0; i < N_TYPES; i++) {
        enum weight_type t = all_types[i];
        if (t == WEIGHT_F32) continue; /* OpenBLAS sums in shape-dependent order */
        uint8_t *w = random_weights(t, N, K);
        float *x = malloc((size_t)BIG * K * sizeof *x), *y = malloc((size_t)BIG * N * sizeof *y);
        float y1[N];
        struct weight *wt = w ? be->weight_create(be, t, N, K, w, 0, 0) : NULL;
        CHECK(wt && wt->data != w &&
              wt->bytes == (wt->interleave ? N / 8 * (K / x8_kernels_for(t)->block_elems) *
                                                 x8_kernels_for(t)->block_bytes
                                           : quant_row_bytes((int)t, K) * N));
        if (!x || !y || !wt) { CHECK(0); goto next; }
        for (size_t j = 0; j < (size_t)BIG * K; j++) x[j] = rnd_f();
        for (int e = 0; e < 2; e++) {
            int m = exact_ms[e];
            be->matmul(be, y, x, wt, NULL, m);
            for (int r = 0; r < m; r++) {
                be->matmul(be, y1, x + (size_t)r * K, wt, NULL, 1);
                CHECK_MSG(memcmp(y1, y + (size_t)r * N, sizeof y1) == 0, "%s m=%d row %d",
                          quant_type_name(t), m, r);
            }
        }
        /* BIG rows take the sgemm panels (types without 8-row interleaved
         * kernels): the same values, summed in another order */
        be->matmul(be, y, x, wt, NULL, BIG);
        for (int r = 0; r < BIG; r++) {
            be->matmul(be, y1, x + (size_t)r * K, wt, NULL, 1);
            double err = 0, mag = 0;
            for (int c = 0; c < N; c++) {
                err = fmax(err, fabs(y1[c] - y[(size_t)r * N + c]));
                mag = fmax(mag, fabs(y1[c]));
            }
            CHECK_MSG(err <= 1e-5 * mag, "%s panel row %d: %g of %g", quant_type_name(t), r, err, mag);
        }
    next:
        if (wt) be->weight_free(be, wt);
        free(w); free(x); free(y);
    }
    be->destroy(be);
}

/* as_f32: held as f32, equal to the dequantized rows; embed_weight returns
 * dequantized rows whatever is held. */
static void test_f32_mode_and_embed(void)
{
    struct backend *be = backend_cpu_create(1);
    int n = 16, k = 512; /* Q4_K: two interleaved groups of 8 */
    for (int i = 0; i < N_TYPES; i++) {
        enum weight_type t = all_types[i];
        uint8_t *w = random_weights(t, n, k);
        float *wf = malloc((size_t)n * k * sizeof *wf), rows[3 * 512];
        quant_dequantize((int)t, w, wf, (int64_t)n * k);
        struct weight *q = be->weight_create(be, t, n, k, w, 1, 0);
        struct weight *f = be->weight_create(be, t, n, k, w, 1, 1);
        CHECK(q && f && f->held == WEIGHT_F32 && f->bytes == (size_t)n * k * 4);
        CHECK(memcmp(f->data, wf, (size_t)n * k * 4) == 0);
        int ids[3] = {8, 0, 13};
        be->embed_weight(be, rows, q, ids, 3);
        for (int j = 0; j < 3; j++)
            CHECK(memcmp(rows + j * k, wf + (size_t)ids[j] * k, (size_t)k * 4) == 0);
        be->embed_weight(be, rows, f, ids, 3);
        CHECK(memcmp(rows + k, wf, (size_t)k * 4) == 0);
        be->weight_free(be, q);
        be->weight_free(be, f);
        free(w); free(wf);
    }
    be->destroy(be);
}

/* The AVX2 dequantizers of the sgemm panels equal kernels/quant.c bit for bit. */
static void test_simd_dequantize(void)
{
    if (cpu_simd_level() != CPU_SIMD_AVX2) SKIP("no AVX2 on this CPU");
    int k = 1024;
    float *a = malloc((size_t)k * sizeof *a), *b = malloc((size_t)k * sizeof *b);
    for (int i = 0; i < N_TYPES; i++) {
        enum weight_type t = all_types[i];
        qdeq_fn f = qdeq_avx2(t);
        if (!f) continue;
        for (int rep = 0; rep < 8; rep++) {
            uint8_t *w = random_weights(t, 1, k);
            CHECK(quant_dequantize((int)t, w, a, k) == 0);
            f(w, b, k);
            CHECK_MSG(memcmp(a, b, (size_t)k * sizeof *a) == 0, "%s", quant_type_name(t));
            free(w);
        }
    }
    free(a);
    free(b);
}

/* The wide set (AVX-512VL: four rows at once; VNNI for Q4_K / Q6_K) against
 * the AVX2 set: the same integers and float operations, so the same bits.
 * g holds two groups (the second gb bytes on); one[i] and two[i] are the AVX2
 * 1-row results of activation row i on each.  Where the set has dots_pair
 * (16 weight rows at once), its two halves must equal them too. */
static void check_x8_wide(enum weight_type t, const uint8_t *g, size_t gb, const uint8_t *act,
                          size_t act_bytes, int k, float one[QDOT_ROWS][8],
                          float two[QDOT_ROWS][8])
{
    const struct x8_kernels *wide = x8_kernels_avx512vl(t);
    if (!wide) return;
    float w1[QDOT_ROWS][8], wn[QDOT_ROWS][8];
    for (int i = 0; i < QDOT_ROWS; i++) wide->dot(k, g, act + i * act_bytes, w1[i]);
    wide->dots(k, g, act, act_bytes, wn);
    CHECK_MSG(memcmp(one, w1, sizeof w1) == 0, "%s wide 1-row", quant_type_name((int)t));
    CHECK_MSG(memcmp(one, wn, sizeof wn) == 0, "%s wide 4-row", quant_type_name((int)t));
    if (!wide->dots_pair) return;
    float p[QDOT_ROWS][16];
    wide->dots_pair(k, g, gb, act, act_bytes, p);
    for (int i = 0; i < QDOT_ROWS; i++) {
        CHECK_MSG(memcmp(p[i], one[i], sizeof one[i]) == 0, "%s wide pair, group 0, row %d",
                  quant_type_name((int)t), i);
        CHECK_MSG(memcmp(p[i] + 8, two[i], sizeof two[i]) == 0, "%s wide pair, group 1, row %d",
                  quant_type_name((int)t), i);
    }
}

/* K-quants interleaved 8 rows at a time (cpu_q4k_x8.c, cpu_q6k_x8.c): the
 * layout gives every row's blocks back bit for bit, the 8-row kernel equals
 * the row kernels up to f32 order (same tolerance as scalar vs AVX2), its
 * multi-row form equals it exactly, and so does the wide set (its 16-row
 * form on two groups too): also with every activation at +-127 (the integer
 * sums at their bounds). */
static void check_x8(enum weight_type t)
{
    enum { K = 1024 };
    const struct x8_kernels *x8 = x8_kernels_avx2(t);
    if (!x8) return; /* not x86-64 */
    int NB = K / x8->block_elems;
    enum qact_kind kind = (enum qact_kind)qact_kind_of(t);
    size_t rb = quant_row_bytes((int)t, K), bb = quant_block_bytes((int)t);
    size_t gb = NB * x8->block_bytes; /* one group */
    uint8_t *w = random_weights(t, 16, K), *g = malloc(2 * gb);
    float x[QDOT_ROWS][K], wf[K];
    size_t act_bytes = qact_row_bytes(kind, K);
    uint8_t *act = malloc(QDOT_ROWS * act_bytes);
    if (!w || !g || !act) { CHECK(0); goto done; }
    x8->pack(w, rb, NB, g);
    x8->pack(w + 8 * rb, rb, NB, g + gb);
    for (int r = 0; r < 16; r++)
        for (int b = 0; b < NB; b++) {
            uint8_t blk[256];
            x8->block(g + r / 8 * gb, b, r % 8, blk);
            CHECK_MSG(memcmp(blk, w + r * rb + b * bb, bb) == 0, "%s row %d block %d",
                      quant_type_name((int)t), r, b);
        }
    if (cpu_simd_level() != CPU_SIMD_AVX2) goto done; /* layout checked; no kernels here */
    for (int i = 0; i < QDOT_ROWS; i++) {
        for (int j = 0; j < K; j++) x[i][j] = rnd_f() * (j % 5 == 0 ? 4.0f : 1.0f);
        qact_quantize_row(kind, x[i], act + i * act_bytes, K);
    }
    float one[QDOT_ROWS][8], two[QDOT_ROWS][8], many[QDOT_ROWS][8];
    for (int i = 0; i < QDOT_ROWS; i++) {
        x8->dot(K, g, act + i * act_bytes, one[i]);
        x8->dot(K, g + gb, act + i * act_bytes, two[i]);
    }
    x8->dots(K, g, act, act_bytes, many);
    CHECK_MSG(memcmp(one, many, sizeof one) == 0, "%s", quant_type_name((int)t));
    check_x8_wide(t, g, gb, act, act_bytes, K, one, two);
    {
        float xs[K], o1[QDOT_ROWS][8], o2[QDOT_ROWS][8];
        uint8_t *sat = malloc(QDOT_ROWS * act_bytes);
        if (!sat) { CHECK(0); goto done; }
        /* random signs, then every activation +127, then every one -127 */
        for (int pass = 0; pass < 3; pass++) {
            for (int i = 0; i < QDOT_ROWS; i++) {
                for (int j = 0; j < K; j++)
                    xs[j] = pass == 1 ? 1.0f : pass == 2 ? -1.0f : rnd_u32() & 1 ? 1.0f : -1.0f;
                qact_quantize_row(kind, xs, sat + i * act_bytes, K);
                x8->dot(K, g, sat + i * act_bytes, o1[i]);
                x8->dot(K, g + gb, sat + i * act_bytes, o2[i]);
            }
            check_x8_wide(t, g, gb, sat, act_bytes, K, o1, o2);
        }
        free(sat);
    }
    double xh[K], hs[K];
    for (int i = 0; i < QDOT_ROWS; i++) {
        act_values(kind, act + i * act_bytes, x[i], K, xh, hs);
        for (int r = 0; r < 8; r++) {
            CHECK(quant_dequantize((int)t, w + r * rb, wf, K) == 0);
            double mag = 0;
            for (int j = 0; j < K; j++) mag += fabs((double)wf[j] * xh[j]);
            float row = qdot_scalar(t)(K, w + r * rb, act + i * act_bytes);
            CHECK_MSG(fabs(one[i][r] - row) <= 2e-6 * mag + 1e-7, "%s act %d row %d: %.9g vs %.9g",
                      quant_type_name((int)t), i, r, one[i][r], row);
        }
    }
done:
    free(w); free(g); free(act);
}

static void test_x8_kernels(void)
{
    CHECK(x8_kernels_for(WEIGHT_Q5_K) == NULL && x8_kernels_for(WEIGHT_F16) == NULL);
    enum weight_type x8_types[] = {WEIGHT_Q4_0, WEIGHT_Q4_1, WEIGHT_Q5_0, WEIGHT_Q5_1,
                                   WEIGHT_Q8_0, WEIGHT_Q4_K, WEIGHT_Q6_K};
    for (int i = 0; i < 7; i++) check_x8(x8_types[i]);
    if (cpu_simd_level() != CPU_SIMD_AVX2) SKIP("no AVX2 on this CPU (layouts checked)");
}

/* The AVX2 activation quantizer gives the scalar one's bytes: random rows,
 * rows with all-zero blocks, values on rounding ties (x * inv = n + 0.5)
 * and tiny and huge magnitudes. */
static void test_qact_simd(void)
{
    if (cpu_simd_level() != CPU_SIMD_AVX2) SKIP("no AVX2 on this CPU");
    enum { K = 1024 };
    static float x[K];
    static uint8_t a[K * 2], b[K * 2];
    for (int pass = 0; pass < 6; pass++) {
        for (int j = 0; j < K; j++) {
            float v = rnd_f();
            if (pass == 1) v = j < 512 ? 0.0f : v;
            if (pass == 2) v = (float)((int)(rnd_u32() % 255) - 127) * 0.5f; /* ties */
            if (pass == 3) v *= 1e-30f;
            if (pass == 4) v *= 1e30f;
            if (pass == 5) v = j % 32 == 0 ? 127.0f : (float)(j % 7) - 3.5f;
            x[j] = v;
        }
        for (int kind = QACT_Q8_32; kind <= QACT_Q8_256; kind++) {
            size_t n = qact_row_bytes((enum qact_kind)kind, K);
            memset(a, 0, sizeof a);
            memset(b, 0, sizeof b);
            qact_quantize_row_at((enum qact_kind)kind, x, a, K, CPU_SIMD_SCALAR);
            qact_quantize_row_at((enum qact_kind)kind, x, b, K, CPU_SIMD_AVX2);
            CHECK_MSG(memcmp(a, b, n) == 0, "pass %d kind %d", pass, kind);
        }
    }
}

static void test_weight_create_rejects(void)
{
    struct backend *be = backend_cpu_create(1);
    uint8_t buf[1024] = {0};
    CHECK(be->weight_create(be, (enum weight_type)10 /* Q2_K */, 1, 256, buf, 1, 0) == NULL);
    CHECK(be->weight_create(be, (enum weight_type)99, 1, 256, buf, 1, 0) == NULL);
    CHECK(be->weight_create(be, WEIGHT_Q4_0, 1, 33, buf, 1, 0) == NULL); /* not whole blocks */
    CHECK(be->weight_create(be, WEIGHT_Q4_K, 2, 128, buf, 1, 0) == NULL);
    CHECK(be->weight_create(be, WEIGHT_Q8_0, 0, 32, buf, 1, 0) == NULL);
    be->destroy(be);
}

int main(void)
{
    RUN(test_dot_kernels);
    RUN(test_dot_edge_values);
    RUN(test_dot_rows_kernels);
    RUN(test_x8_kernels);
    RUN(test_matmul_default);
    RUN(test_matmul_scalar_forced);
    RUN(test_matmul_batch_matches_single);
    RUN(test_f32_mode_and_embed);
    RUN(test_simd_dequantize);
    RUN(test_qact_simd);
    RUN(test_weight_create_rejects);
    return test_summary("qmatmul");
}
