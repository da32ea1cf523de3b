/* cuda_selftest_sample.cu - the device sampler (cuda_sample.cu) against the
 * CPU sampler (model/sampler.c); part of cuda_selftest.
 *
 * Same uniform draw, same logits: the device must pick the CPU's token.
 * cuda_sample.cu says why an exact match can fail only at a boundary (z is
 * summed in another order, CUDA's double exp is within 1 ulp of glibc's): a
 * mismatch counts as agreement only when the CPU itself picks the device's
 * token for a draw within 1e-9 of u, and at most 0.1% of the rows may need
 * that.  A row the device leaves to the host (-1) is accepted only where the
 * case says it must or may happen (a nucleus wider than the 1,024 sorted
 * candidates; NaN logits).  Then the distribution, checked against the
 * definition rather than the CPU code: 40,000 device draws from one row
 * against the exact probabilities of its kept set (every frequency within
 * 5 sigma + 1e-4, and the chi-square statistic below its 99.99% point). */
#include "kernels/cuda/backend_cuda.h"

extern "C" {
#include "model/sampler.h"
}

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "kernels/cuda/cuda_selftest_sample.h"

static struct backend *gpu;
static int *n_ok, *n_bad;
static uint64_t srng[4];

static void verdict(const char *what, bool ok, const char *detail)
{
    const char *err = backend_cuda_error(gpu);
    ok = ok && !err;
    printf("  %-4s %-28s %s%s\n", ok ? "ok" : "FAIL", what, detail, err ? err : "");
    ok ? (*n_ok)++ : (*n_bad)++;
}

static double unif(void) { return sampler_rng_uniform(srng); }

/* The CPU sampler's token for row parameters p and draw u. */
static int cpu_pick(const struct sample_row &p, const float *row, int vocab, double u)
{
    struct sampler s;
    struct sampler_params sp = {p.greedy, p.temperature, p.top_k, p.top_p, 0};
    struct eb_err e;
    if (sampler_init(&s, &sp, p.n_valid, &e)) return -2;
    int t = sampler_sample_u(&s, row, vocab, u);
    sampler_free(&s);
    return t;
}

enum shape { PEAKED, TIES, FLAT, SIGNED_ZEROS };

static void fill_row(float *row, int vocab, enum shape shape)
{
    for (int j = 0; j < vocab; j++) {
        double u = unif();
        switch (shape) {
        case PEAKED: row[j] = (float)(u * 6.0 - 3.0); break;
        case TIES: row[j] = (float)((int)(u * 12) / 2.0); break; /* 12 levels: ties everywhere */
        case FLAT: row[j] = (float)(u * 0.01); break;
        case SIGNED_ZEROS: row[j] = u < 0.5 ? -0.0f : 0.0f; break; /* equal in C */
        }
    }
    if (shape == PEAKED)
        for (int k = 0; k < 8; k++) row[(int)(unif() * vocab)] += 8.0f + (float)k;
}

struct sample_case {
    const char *name;
    int rows, vocab, n_valid;
    int greedy;
    float temperature;
    int top_k;
    float top_p;
    enum shape shape;
    int host; /* 0: no row may go to the host, 1: rows may, 2: every row must */
    int nan_rows;
};

static void test_case(const struct sample_case &c)
{
    size_t n = (size_t)c.rows * c.vocab;
    std::vector<float> h(n);
    for (int r = 0; r < c.rows; r++) fill_row(h.data() + (size_t)r * c.vocab, c.vocab, c.shape);
    for (int r = 0; r < c.nan_rows; r++) h[(size_t)r * c.vocab + c.vocab / 3] = NAN;
    std::vector<struct sample_row> rows(c.rows);
    for (int r = 0; r < c.rows; r++)
        rows[r] = {c.greedy, c.temperature, c.top_k, c.top_p, c.n_valid, unif()};
    float *d = gpu->alloc(gpu, n);
    if (!d) {
        verdict(c.name, false, "no device memory for the logits");
        return;
    }
    gpu->upload(gpu, d, h.data(), n);
    std::vector<int> tok(c.rows, -3);
    int rc = backend_cuda_sample(gpu, tok.data(), d, c.rows, c.vocab, rows.data());
    gpu->free(gpu, d);
    int exact = 0, boundary = 0, host = 0, wrong = 0, host_nan = 0;
    for (int r = 0; r < c.rows; r++) {
        const float *row = h.data() + (size_t)r * c.vocab;
        int want = cpu_pick(rows[r], row, c.vocab, rows[r].u);
        if (tok[r] == -1) {
            host++;
            host_nan += r < c.nan_rows;
        } else if (tok[r] == want) {
            exact++;
        } else {
            double lo = rows[r].u - 1e-9, hi = rows[r].u + 1e-9;
            if ((lo >= 0 && cpu_pick(rows[r], row, c.vocab, lo) == tok[r]) ||
                (hi < 1 && cpu_pick(rows[r], row, c.vocab, hi) == tok[r]))
                boundary++;
            else
                wrong++;
        }
    }
    int nan_host_ok = c.greedy ? host_nan == 0 : host_nan == c.nan_rows;
    bool host_ok = c.host == 2 ? host == c.rows : c.host == 1 ? true : host == host_nan;
    bool ok = rc == 0 && wrong == 0 && boundary * 1000 <= c.rows && host_ok && nan_host_ok;
    char detail[160];
    snprintf(detail, sizeof detail, "%d rows: %d exact, %d at a boundary, %d to the host, %d wrong ",
             c.rows, exact, boundary, host, wrong);
    verdict(c.name, ok, detail);
}

/* Exact probabilities of the kept set by the definition (full sort). */
static std::vector<double> kept_probs(const float *row, int vocab, float temp, int top_k,
                                      float top_p, std::vector<int> &ids)
{
    ids.resize(vocab);
    for (int i = 0; i < vocab; i++) ids[i] = i;
    std::sort(ids.begin(), ids.end(), [&](int a, int b) {
        return row[a] != row[b] ? row[a] > row[b] : a < b;
    });
    int limit = top_k > 0 && top_k < vocab ? top_k : vocab;
    double top = row[ids[0]], z = 0;
    std::vector<double> w(limit);
    for (int i = 0; i < limit; i++) z += (w[i] = exp(((double)row[ids[i]] - top) / temp));
    int kept = limit;
    double cum = 0;
    for (int i = 0; i < limit; i++)
        if ((cum += w[i] / z) >= top_p) {
            kept = i + 1;
            break;
        }
    double mass = 0;
    for (int i = 0; i < kept; i++) mass += w[i];
    std::vector<double> p(kept);
    for (int i = 0; i < kept; i++) p[i] = w[i] / mass;
    ids.resize(kept);
    return p;
}

static void test_distribution(int vocab, float temp, int top_k, float top_p)
{
    const int per_call = 4000, calls = 10, total = per_call * calls;
    std::vector<float> row(vocab);
    for (auto &x : row) x = (float)(unif() * 4.0);
    std::vector<int> ids;
    std::vector<double> p = kept_probs(row.data(), vocab, temp, top_k, top_p, ids);
    std::vector<float> h((size_t)per_call * vocab);
    for (int r = 0; r < per_call; r++) memcpy(&h[(size_t)r * vocab], row.data(), vocab * sizeof(float));
    float *d = gpu->alloc(gpu, h.size());
    if (!d) {
        verdict("sample distribution", false, "no device memory");
        return;
    }
    gpu->upload(gpu, d, h.data(), h.size());
    std::vector<long> count(vocab, 0);
    std::vector<struct sample_row> rows(per_call);
    std::vector<int> tok(per_call);
    int rc = 0, outside = 0;
    for (int k = 0; k < calls && rc == 0; k++) {
        for (auto &q : rows) q = {0, temp, top_k, top_p, vocab, unif()};
        rc = backend_cuda_sample(gpu, tok.data(), d, per_call, vocab, rows.data());
        for (int t : tok) {
            if (t < 0 || t >= vocab) outside++;
            else count[t]++;
        }
    }
    gpu->free(gpu, d);
    double chi2 = 0, worst_sigma = 0;
    long in_kept = 0;
    for (size_t i = 0; i < p.size(); i++) {
        double f = (double)count[ids[i]] / total, sd = sqrt(p[i] * (1 - p[i]) / total);
        double dev = fabs(f - p[i]);
        if (dev > 5 * sd + 1e-4) outside++;
        if (sd > 0 && dev / sd > worst_sigma) worst_sigma = dev / sd;
        double want = p[i] * total;
        chi2 += (count[ids[i]] - want) * (count[ids[i]] - want) / want;
        in_kept += count[ids[i]];
    }
    /* chi-square 99.99% point (Wilson-Hilferty), dof = kept - 1 */
    double dof = (double)p.size() - 1, zq = 3.719;
    double limit = dof * pow(1 - 2 / (9 * dof) + zq * sqrt(2 / (9 * dof)), 3);
    bool ok = rc == 0 && outside == 0 && in_kept == total && chi2 <= limit;
    char what[64], detail[160];
    snprintf(what, sizeof what, "sample distribution k%d p%.2f", top_k, top_p);
    snprintf(detail, sizeof detail, "%zu kept, chi2 %.0f (limit %.0f), worst %.1f sigma, %ld of %d "
             "outside the kept set ", p.size(), chi2, limit, worst_sigma, total - in_kept, total);
    verdict(what, ok, detail);
}

void selftest_sample(struct backend *be, int *passed, int *failed)
{
    gpu = be;
    n_ok = passed;
    n_bad = failed;
    sampler_rng_seed(srng, 2026);
    const struct sample_case cases[] = {
        /* the papers' settings: temperature 0.6, top-p 0.95, Qwen's vocabulary */
        {"sample t0.6 p0.95 152k", 64, 152064, 151665, 0, 0.6f, 0, 0.95f, PEAKED, 0, 0},
        {"sample t1 k50 128k", 16, 128256, 128256, 0, 1.0f, 50, 1.0f, PEAKED, 0, 0},
        /* top-k above the sorted cap: z over the top-k set by a second select */
        {"sample t0.7 k2000 p0.9", 32, 32000, 32000, 0, 0.7f, 2000, 0.9f, PEAKED, 1, 0},
        /* ties at the cut and the pick: the order is (logit, id) */
        {"sample ties t1 p0.3", 64, 5000, 5000, 0, 1.0f, 0, 0.3f, TIES, 0, 0},
        {"sample ties t1 p0.9", 16, 5000, 5000, 0, 1.0f, 0, 0.9f, TIES, 1, 0},
        {"sample ties t1 k7", 64, 5000, 4000, 0, 1.0f, 7, 1.0f, TIES, 0, 0},
        {"sample signed zeros p0.5", 8, 1500, 1500, 0, 1.0f, 0, 0.5f, SIGNED_ZEROS, 0, 0},
        {"sample one candidate", 4, 1000, 1, 0, 1.0f, 0, 0.9f, PEAKED, 0, 0},
        {"sample tiny vocab", 16, 5, 5, 0, 2.0f, 0, 1.0f, PEAKED, 0, 0},
        /* a nucleus of nearly the whole flat vocabulary: every row to the host */
        {"sample flat p1 50k", 8, 50000, 50000, 0, 1.0f, 0, 1.0f, FLAT, 2, 0},
        /* NaN: sampled rows go to the host, greedy rows ignore NaN as the CPU does */
        {"sample NaN rows", 8, 1000, 1000, 0, 0.8f, 0, 0.9f, PEAKED, 0, 3},
        {"greedy NaN rows", 8, 1000, 1000, 1, 0.0f, 0, 1.0f, PEAKED, 0, 3},
        {"greedy ties", 16, 5000, 4999, 1, 0.0f, 0, 1.0f, TIES, 0, 0},
    };
    for (const auto &c : cases) test_case(c);
    test_distribution(1000, 1.0f, 0, 0.9f);
    test_distribution(1000, 0.7f, 100, 0.95f);
    /* bad rows are refused before any launch */
    struct sample_row bad = {0, 0.0f, 0, 1.0f, 10, 0.5};
    float *d = gpu->alloc(gpu, 10);
    int t = 0;
    int rc1 = backend_cuda_sample(gpu, &t, d, 1, 10, &bad);
    bad.temperature = 1.0f;
    bad.u = 1.0;
    int rc2 = backend_cuda_sample(gpu, &t, d, 1, 10, &bad);
    gpu->free(gpu, d);
    verdict("sample bad rows", rc1 == -1 && rc2 == -1, "refused ");
}
