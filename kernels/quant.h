/* quant.h - ggml tensor types: block sizes and dequantization to f32.
 * Block layouts follow ggml-common.h (kernels/quant_blocks.h pins them).
 * Types are ggml's ids (enum weight_type in kernels/backend.h names those
 * that have kernels); ids up to QUANT_TYPE_COUNT are described. */
#ifndef EB_QUANT_H
#define EB_QUANT_H

#include <stddef.h>
#include <stdint.h>

enum { QUANT_TYPE_COUNT = 40 };

/* "F32", "Q4_K", ...; "?" for an unknown id. */
const char *quant_type_name(int type);

/* 1 if this reader can dequantize the type (the list in issue 2), else 0. */
int quant_type_supported(int type);

/* Elements per block (1 for F32/F16/BF16, 32 or 256 for quants); 0 if unknown. */
int quant_block_elems(int type);

/* Bytes per block; 0 if unknown. */
size_t quant_block_bytes(int type);

/* Bytes of a row of n elements; 0 if the type is unknown or n is not a
 * multiple of the block size. */
size_t quant_row_bytes(int type, int64_t n);

/* Dequantize n elements (n a multiple of the block size) from src to dst.
 * Returns 0, or -1 for an unsupported type or bad n. */
int quant_dequantize(int type, const void *src, float *dst, int64_t n);

/* IEEE half / bfloat16 conversion (exact, handles subnormals/inf/nan). */
float quant_f16_to_f32(uint16_t h);
uint16_t quant_f32_to_f16(float f);
float quant_bf16_to_f32(uint16_t h);
/* f32 -> bfloat16, rounded to nearest even (NaN stays a quiet NaN). */
uint16_t quant_f32_to_bf16(float f);

#endif
