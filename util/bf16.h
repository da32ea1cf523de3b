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

#endif
