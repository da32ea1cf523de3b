/* cuda_selftest_sample.h - the device sampler's part of cuda_selftest
 * (cuda_selftest_sample.cu). */
#ifndef EB_CUDA_SELFTEST_SAMPLE_H
#define EB_CUDA_SELFTEST_SAMPLE_H

struct backend;

/* Runs the sampling cases on the CUDA backend be, one line each, adding to
 * the counts. */
void selftest_sample(struct backend *be, int *passed, int *failed);

#endif
