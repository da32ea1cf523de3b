#!/usr/bin/env python3
"""Quantized model fixtures for tests/test_qmodel.c, written with the gguf
Python package (the reference GGUF writer and quantizer).

The test loads each file twice, with weights kept quantized and in exact
(f32) mode, and bounds the difference: both see the same weights, so what
separates them is only the 8-bit rounding of activations in the integer
kernels.

  tests/fixtures/models/tiny-llama-q/model.gguf
      tiny-llama's f32 weights (tools/golden/gen_models.py) quantized by the
      gguf package, a different type per matrix: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
      F16, BF16 (dimensions 64/128 allow only the 32-element formats).
  tests/fixtures/models/tiny-llama-q8/model.gguf
      tiny-llama's weights with every matrix in Q8_0, so that the CPU
      backend's fused layer blocks serve every layer (tests/test_graph.c:
      step graphs record only steps that ran fused).
  tests/fixtures/models/tiny-kquant/model.gguf
      a random llama (hidden 256, ffn 256, 1 layer, vocab 256) whose matrices
      are random Q4_K / Q5_K / Q6_K blocks with finite f16 scales (the package
      cannot quantize to k-quants; random blocks exercise every bit of them).

Usage (from the repository root): python3 tools/golden/gen_quant_models.py
"""
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "models")

# per-layer matrix -> type, tiny-llama-q (cycled by layer so each type meets each shape)
SMALL_TYPES = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.F16, T.BF16]
MATRICES = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]


def arch_metadata(w, n_embd, n_ff, n_layer, n_head, n_kv, head_dim, ctx, vocab):
    w.add_context_length(ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(head_dim)
    w.add_vocab_size(vocab)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)


def add_typed(w, name, a, qtype):
    if qtype == T.F32:
        w.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))
    elif qtype == T.F16:
        w.add_tensor(name, np.ascontiguousarray(a, dtype=np.float16))
    else:
        w.add_tensor(name, gguf.quants.quantize(np.ascontiguousarray(a, dtype=np.float32), qtype),
                     raw_dtype=qtype)


def tiny_llama_q(name="tiny-llama-q", types=None):
    src = gguf.GGUFReader(os.path.join(OUT, "tiny-llama", "model.gguf"))
    tensors = {t.name: np.array(t.data, dtype=np.float32).reshape(list(reversed(t.shape.tolist())))
               for t in src.tensors}
    cfg = {"n_embd": 64, "n_ff": 128, "n_layer": 2, "n_head": 4, "n_kv": 2, "head_dim": 16,
           "ctx": 128, "vocab": 256}
    types = types or SMALL_TYPES
    os.makedirs(os.path.join(OUT, name), exist_ok=True)
    w = gguf.GGUFWriter(os.path.join(OUT, name, "model.gguf"), "llama")
    arch_metadata(w, **cfg)
    k = 0
    for name, a in tensors.items():
        if a.ndim == 1:
            add_typed(w, name, a, T.F32)
        elif name == "token_embd.weight":
            add_typed(w, name, a, T.Q8_0)
        elif name == "output.weight":
            add_typed(w, name, a, T.Q4_1)
        else:
            add_typed(w, name, a, types[k % len(types)])
            k += 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def put_f16(blocks, offset, values):
    blocks[:, offset:offset + 2] = values.astype(np.float16).view(np.uint8).reshape(-1, 2)


def random_kquant(rng, rows, cols, qtype):
    """rows x cols of random blocks of qtype with sane f16 scales (about 0.1 per weight)."""
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    nb = rows * cols // block_elems
    b = rng.integers(0, 256, size=(nb, block_bytes), dtype=np.uint8)
    if qtype in (T.Q4_K, T.Q5_K):
        scale = 1e-4 if qtype == T.Q4_K else 5e-5
        put_f16(b, 0, rng.uniform(0.5, 1.5, nb) * scale)   # d
        put_f16(b, 2, rng.uniform(0.5, 1.5, nb) * 1e-3)    # dmin
    elif qtype == T.Q6_K:
        put_f16(b, 208, rng.uniform(0.5, 1.5, nb) * 2.5e-5)
    return b.reshape(rows, -1)


def tiny_kquant():
    rng = np.random.default_rng(12)
    n_embd, n_ff, n_layer, vocab = 256, 256, 1, 256
    os.makedirs(os.path.join(OUT, "tiny-kquant"), exist_ok=True)
    w = gguf.GGUFWriter(os.path.join(OUT, "tiny-kquant", "model.gguf"), "llama")
    arch_metadata(w, n_embd, n_ff, n_layer, 4, 2, 64, 256, vocab)
    kv = 2 * 64
    shapes = {"attn_q": (n_embd, n_embd), "attn_k": (kv, n_embd), "attn_v": (kv, n_embd),
              "attn_output": (n_embd, n_embd), "ffn_gate": (n_ff, n_embd), "ffn_up": (n_ff, n_embd),
              "ffn_down": (n_embd, n_ff)}
    ktypes = [T.Q4_K, T.Q5_K, T.Q6_K]
    w.add_tensor("token_embd.weight", random_kquant(rng, vocab, n_embd, T.Q6_K), raw_dtype=T.Q6_K)
    w.add_tensor("output_norm.weight", rng.uniform(0.8, 1.2, n_embd).astype(np.float32))
    w.add_tensor("output.weight", random_kquant(rng, vocab, n_embd, T.Q5_K), raw_dtype=T.Q5_K)
    k = 0
    for l in range(n_layer):
        w.add_tensor(f"blk.{l}.attn_norm.weight", rng.uniform(0.8, 1.2, n_embd).astype(np.float32))
        w.add_tensor(f"blk.{l}.ffn_norm.weight", rng.uniform(0.8, 1.2, n_embd).astype(np.float32))
        for m in MATRICES:
            qt = ktypes[k % 3]
            k += 1
            rows, cols = shapes[m]
            w.add_tensor(f"blk.{l}.{m}.weight", random_kquant(rng, rows, cols, qt), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    tiny_llama_q()
    tiny_llama_q("tiny-llama-q8", [T.Q8_0])
    tiny_kquant()
    for d in ("tiny-llama-q", "tiny-llama-q8", "tiny-kquant"):
        p = os.path.join(OUT, d, "model.gguf")
        print(p, os.path.getsize(p), "bytes")
