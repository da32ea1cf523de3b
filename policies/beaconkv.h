/* beaconkv.h - BeaconKV's building blocks (policies/beacon_fps.c), exposed for
 * tests/test_beaconkv.c and tools/golden/vase_ref.py. */
#ifndef EB_BEACONKV_H
#define EB_BEACONKV_H

#include "../util/err.h"

/* Farthest point sampling with cosine distance 1 - cos(a, b): m of the n
 * rows of x[n][dim], starting from row 0, each next the row whose smallest
 * distance to the chosen ones is largest (ties: lower index).  out[m] in
 * selection order.  A zero row has distance 1 to everything. */
int beacon_fps(const float *x, int n, int dim, int m, int *out, struct eb_err *e);

/* RoPE of one head vector at pos (angle = (float)pos * inv_freq[i], pairing
 * as enum rope_pairing); inverse != 0 rotates back. */
void beacon_rotate(float *x, int head_dim, int pos, const float *inv_freq, int pairing,
                   int inverse);

#endif
