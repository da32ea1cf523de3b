/* beacon_fps.c - BeaconKV's geometry on query rows (beaconkv.h): farthest
 * point sampling with cosine distance, and the RoPE rotation of one head
 * vector (forward, or back to pre-RoPE). */
#include "beaconkv.h"

#include <math.h>
#include <stdlib.h>

#include "../kernels/backend.h"

int beacon_fps(const float *x, int n, int dim, int m, int *out, struct eb_err *e)
{
    if (n < 0 || m < 0 || m > n || dim < 1) return eb_fail(e, "fps: %d of %d points", m, n);
    if (m == 0) return 0;
    double *u = malloc((size_t)n * dim * sizeof *u), *mind = malloc((size_t)n * sizeof *mind);
    unsigned char *taken = calloc((size_t)n, 1);
    if (!u || !mind || !taken) {
        free(u);
        free(mind);
        free(taken);
        return eb_fail(e, "fps: out of memory for %d points", n);
    }
    for (int i = 0; i < n; i++) {
        double ss = 0.0;
        for (int c = 0; c < dim; c++) ss += (double)x[(size_t)i * dim + c] * x[(size_t)i * dim + c];
        double inv = ss > 0 ? 1.0 / sqrt(ss) : 0.0;
        for (int c = 0; c < dim; c++) u[(size_t)i * dim + c] = x[(size_t)i * dim + c] * inv;
        mind[i] = INFINITY;
    }
    int cur = 0; /* the seed point: the oldest query */
    for (int t = 0; t < m; t++) {
        out[t] = cur;
        taken[cur] = 1;
        const double *a = u + (size_t)cur * dim;
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (taken[i]) continue;
            double dot = 0.0;
            const double *b = u + (size_t)i * dim;
            for (int c = 0; c < dim; c++) dot += a[c] * b[c];
            double dist = 1.0 - dot;
            if (dist < mind[i]) mind[i] = dist;
            if (best < 0 || mind[i] > mind[best]) best = i;
        }
        cur = best;
    }
    free(u);
    free(mind);
    free(taken);
    return 0;
}

void beacon_rotate(float *x, int head_dim, int pos, const float *inv_freq, int pairing,
                   int inverse)
{
    int half = head_dim / 2;
    float p = (float)pos;
    for (int i = 0; i < half; i++) {
        float angle = p * inv_freq[i];
        float c = cosf(angle), s = inverse ? -sinf(angle) : sinf(angle);
        int a = pairing == ROPE_PAIR_HALF ? i : 2 * i, b = pairing == ROPE_PAIR_HALF ? i + half : 2 * i + 1;
        float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}
