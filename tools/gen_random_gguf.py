#!/usr/bin/env python3
"""A random-weight GGUF shaped like a 7B llama quantized Q4_K_M, for memory
and speed checks of the quantized CPU runtime (never commit its output).

Shape: Llama-2-7B (hidden 4096, ffn 11008, 32 layers, 32 heads, vocab 32000).
Types as llama.cpp's Q4_K_M mix: Q4_K everywhere except Q6_K for the output,
and for attn_v / ffn_down in every other layer.  Blocks are random bytes with
finite f16 scales chosen so weights are about 0.02 in size (k-quant blocks
hold f16 d / dmin fields that random bytes could make inf or nan).

The file is written tensor by tensor, so Python never holds more than one
tensor (the largest, 11008 x 4096 Q6_K, is 37 MB).

Usage: python3 tools/gen_random_gguf.py /tmp/random-7b-q4_k_m.gguf [--layers N]
"""
import argparse

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

N_EMBD, N_FF, N_HEAD, VOCAB, CTX = 4096, 11008, 32, 32000, 4096


def random_blocks(rng, rows, cols, qtype):
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    nb = rows * cols // block_elems
    b = rng.integers(0, 256, size=(nb, block_bytes), dtype=np.uint8)
    def put(offset, values):
        b[:, offset:offset + 2] = values.astype(np.float16).view(np.uint8).reshape(-1, 2)
    if qtype == T.Q4_K:
        put(0, rng.uniform(0.5, 1.5, nb) * 2e-5)   # d: 63 * 15 * d ~ 0.02
        put(2, rng.uniform(0.5, 1.5, nb) * 2e-4)   # dmin
    elif qtype == T.Q6_K:
        put(208, rng.uniform(0.5, 1.5, nb) * 5e-6)
    return b.reshape(rows, -1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--layers", type=int, default=32)
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    n_layer = args.layers

    plan = [("token_embd.weight", VOCAB, N_EMBD, T.Q4_K)]
    for l in range(n_layer):
        hi = T.Q6_K if l % 2 == 0 else T.Q4_K
        plan += [(f"blk.{l}.attn_norm.weight", 0, N_EMBD, T.F32),
                 (f"blk.{l}.attn_q.weight", N_EMBD, N_EMBD, T.Q4_K),
                 (f"blk.{l}.attn_k.weight", N_EMBD, N_EMBD, T.Q4_K),
                 (f"blk.{l}.attn_v.weight", N_EMBD, N_EMBD, hi),
                 (f"blk.{l}.attn_output.weight", N_EMBD, N_EMBD, T.Q4_K),
                 (f"blk.{l}.ffn_norm.weight", 0, N_EMBD, T.F32),
                 (f"blk.{l}.ffn_gate.weight", N_FF, N_EMBD, T.Q4_K),
                 (f"blk.{l}.ffn_up.weight", N_FF, N_EMBD, T.Q4_K),
                 (f"blk.{l}.ffn_down.weight", N_EMBD, N_FF, hi)]
    plan += [("output_norm.weight", 0, N_EMBD, T.F32), ("output.weight", VOCAB, N_EMBD, T.Q6_K)]

    w = gguf.GGUFWriter(args.path, "llama")
    w.add_context_length(CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_vocab_size(VOCAB)
    w.add_file_type(15)  # MOSTLY_Q4_K_M
    for name, rows, cols, qt in plan:
        if qt == T.F32:
            w.add_tensor_info(name, [cols], np.dtype(np.float32), cols * 4)
        else:
            be, bb = GGML_QUANT_SIZES[qt]
            w.add_tensor_info(name, [rows, cols * bb // be], np.dtype(np.uint8),
                              rows * cols // be * bb, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, rows, cols, qt in plan:
        if qt == T.F32:
            w.write_tensor_data(rng.uniform(0.8, 1.2, cols).astype(np.float32))
        else:
            w.write_tensor_data(random_blocks(rng, rows, cols, qt))
    w.close()


if __name__ == "__main__":
    main()
