/* bf16.h - rounding to bfloat16, as a bf16 tensor stores a value: the f32
 * value's top 16 bits, rounded to nearest, ties to even. */
#ifndef EB_BF16_H
#define EB_BF16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* x rounded through f32 to bf16, as a double (NaN passes through). */
static inline double bf16_round(double x)
{
    float f = (float)x;
    if (isnan(f)) return x;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even on the kept 16 bits */
    u &= 0xffff0000u;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* lambda * imp - (1 - lambda) * red as torch computes it on bf16 tensors
 * (imp and red already bf16): each product in f32 with the scalar rounded
 * to f32, rounded to bf16, and so is their difference. */
static inline double bf16_mix(double lambda, double imp, double red)
{
    float fl = (float)lambda, fr = (float)(1.0 - lambda);
    float a = (float)bf16_round((float)imp * fl), b = (float)bf16_round((float)red * fr);
    return bf16_round(a - b);
}

#endif
