#!/usr/bin/env python3
"""Write the tiny safetensors fixtures under tests/fixtures/st/.

The files are written by the `safetensors` package itself (its torch writer,
which is the only one that handles BF16), so tests/test_safetensors.c and
tests/test_modelfile.c check our reader against the reference writer.  The
weights are random: these checkpoints test loading (names, shapes, dtypes,
config fields, sharding), not numerics.

    values.safetensors   a handful of tensors with exact known values
                         (F32/F16/BF16, 1-3 dims, a scalar, an empty tensor)
    llama/               llama3-style rope_scaling, untied lm_head, F16 matrices,
                         sharded: index + 2 shards, generation_config.json
    qwen2/               single file, BF16 matrices, q/k/v biases, tied,
                         legacy {"type": "linear"} rope_scaling
    qwen3/               single file, explicit head_dim 8, q/k norms, tied,
                         rope_theta only inside rope_parameters
    tiny_qwen2.gguf      a 1-layer qwen2 GGUF (F32, written by the gguf package):
                         biases, no rope.freq_base (default 10000), eot id and
                         chat end tokens in the vocabulary, no output.weight
    */expected.json      per tensor: HF name, canonical name, shape, dtype,
                         first 4 values and the sum (float64 of the stored values)
                         as one JSON array per row

All configs: 2 layers, hidden 64, 4 heads, 2 kv heads, vocab 256,
intermediate 8 (small on purpose: the whole set stays under 300 KB).

Run from the repository root:  python3 tools/golden/gen_safetensors.py
"""
import json
import os
import shutil

import gguf
import numpy as np
import torch
from safetensors.torch import save_file

OUT = "tests/fixtures/st"
HIDDEN, LAYERS, HEADS, KV_HEADS, VOCAB, FF = 64, 2, 4, 2, 256, 8

LAYER_MAP = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
GLOBAL_MAP = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}


def canonical(name):
    if name in GLOBAL_MAP:
        return GLOBAL_MAP[name]
    parts = name.split(".")
    layer, mid, suffix = parts[2], ".".join(parts[3:-1]), parts[-1]
    return "blk.%s.%s.%s" % (layer, LAYER_MAP[mid], suffix)


def weights(rng, arch, head_dim, tied, mat_dtype, attn_dtype):
    """HF-named tensors of a tiny model; norms and biases F32 as real checkpoints keep them."""
    q_dim, kv_dim = HEADS * head_dim, KV_HEADS * head_dim

    def mat(*shape, dtype=mat_dtype):
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32) * 0.1).to(dtype)

    def norm(n):
        return torch.from_numpy(1.0 + 0.05 * rng.standard_normal(n).astype(np.float32))

    t = {"model.embed_tokens.weight": mat(VOCAB, HIDDEN), "model.norm.weight": norm(HIDDEN)}
    if not tied:
        t["lm_head.weight"] = mat(VOCAB, HIDDEN)
    for i in range(LAYERS):
        p = "model.layers.%d." % i
        t[p + "input_layernorm.weight"] = norm(HIDDEN)
        t[p + "self_attn.q_proj.weight"] = mat(q_dim, HIDDEN, dtype=attn_dtype)
        t[p + "self_attn.k_proj.weight"] = mat(kv_dim, HIDDEN, dtype=attn_dtype)
        t[p + "self_attn.v_proj.weight"] = mat(kv_dim, HIDDEN, dtype=attn_dtype)
        t[p + "self_attn.o_proj.weight"] = mat(HIDDEN, q_dim, dtype=attn_dtype)
        if arch == "qwen2":
            t[p + "self_attn.q_proj.bias"] = mat(q_dim, dtype=torch.float32)
            t[p + "self_attn.k_proj.bias"] = mat(kv_dim, dtype=torch.float32)
            t[p + "self_attn.v_proj.bias"] = mat(kv_dim, dtype=torch.float32)
        if arch == "qwen3":
            t[p + "self_attn.q_norm.weight"] = norm(head_dim)
            t[p + "self_attn.k_norm.weight"] = norm(head_dim)
        t[p + "post_attention_layernorm.weight"] = norm(HIDDEN)
        t[p + "mlp.gate_proj.weight"] = mat(FF, HIDDEN)
        t[p + "mlp.up_proj.weight"] = mat(FF, HIDDEN)
        t[p + "mlp.down_proj.weight"] = mat(HIDDEN, FF)
    return t


DTYPE_NAME = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def expected(tensors):
    """One row per tensor: [hf name, canonical name, shape, dtype, first 4 values, sum]."""
    out = []
    for name, v in sorted(tensors.items()):
        f = v.to(torch.float64).flatten()
        out.append([name, canonical(name), list(v.shape), DTYPE_NAME[v.dtype],
                    [float(x) for x in f[:4]], float(f.sum())])
    return out


def base_config(arch, tied):
    return {
        "architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                           "qwen3": "Qwen3ForCausalLM"}[arch]],
        "model_type": arch,
        "hidden_size": HIDDEN,
        "intermediate_size": FF,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "hidden_act": "silu",
        "vocab_size": VOCAB,
        "tie_word_embeddings": tied,
        "torch_dtype": "bfloat16",
    }


def write_dir(name, config, tensors, shards=1, generation=None):
    d = os.path.join(OUT, name)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if generation is not None:
        with open(os.path.join(d, "generation_config.json"), "w") as f:
            json.dump(generation, f, indent=2)
    if shards == 1:
        save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    else:
        names = sorted(tensors)
        weight_map = {}
        for s in range(shards):
            fname = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
            part = {n: tensors[n] for n in names[s::shards]}
            save_file(part, os.path.join(d, fname), metadata={"format": "pt"})
            weight_map.update({n: fname for n in part})
        total = sum(v.numel() * v.element_size() for v in tensors.values())
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(d, "expected.json"), "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(r) for r in expected(tensors)) + "\n]\n")


def write_values():
    """Exactly representable values, so the C test can spell them out."""
    t = {
        "f32_2x3": torch.tensor([[-1.0, -0.5, 0.0], [0.5, 1.0, 1.5]], dtype=torch.float32),
        "f16_vec": torch.tensor([0.25, -2.0, 65504.0, 1.0 / 1024, -0.0], dtype=torch.float16),
        "bf16_2x2x2": torch.arange(8, dtype=torch.float32).reshape(2, 2, 2).mul(-0.5).to(torch.bfloat16),
        "scalar": torch.tensor(3.25, dtype=torch.float32),
        "empty": torch.zeros((0, 4), dtype=torch.float32),
    }
    save_file(t, os.path.join(OUT, "values.safetensors"),
              metadata={"format": "pt", "note": "evictbench"})


def write_tiny_gguf():
    """qwen2 GGUF: hidden 16, 2 heads, 1 kv head, head_dim 8, ff 8, vocab 40."""
    rng = np.random.default_rng(7)
    hidden, heads, kv, hd, ff, vocab = 16, 2, 1, 8, 8, 40
    w = gguf.GGUFWriter(os.path.join(OUT, "tiny_qwen2.gguf"), "qwen2")
    w.add_context_length(512)
    w.add_embedding_length(hidden)
    w.add_block_count(1)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_layer_norm_rms_eps(1e-6)
    tokens = ["t%d" % i for i in range(vocab)]
    tokens[36], tokens[37], tokens[38], tokens[39] = (
        "<|endoftext|>", "<|im_end|>", "<\uff5cend\u2581of\u2581sentence\uff5c>", "<|eot_id|>")
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_bos_token_id(36)
    w.add_eos_token_id(36)
    w.add_eot_token_id(37)

    def mat(*shape):  # numpy shape = PyTorch order, as the converter writes it
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    w.add_tensor("token_embd.weight", mat(vocab, hidden))
    w.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    p = "blk.0."
    w.add_tensor(p + "attn_norm.weight", np.ones(hidden, dtype=np.float32))
    w.add_tensor(p + "attn_q.weight", mat(heads * hd, hidden))
    w.add_tensor(p + "attn_k.weight", mat(kv * hd, hidden))
    w.add_tensor(p + "attn_v.weight", mat(kv * hd, hidden))
    w.add_tensor(p + "attn_q.bias", mat(heads * hd))
    w.add_tensor(p + "attn_k.bias", mat(kv * hd))
    w.add_tensor(p + "attn_v.bias", mat(kv * hd))
    w.add_tensor(p + "attn_output.weight", mat(hidden, heads * hd))
    w.add_tensor(p + "ffn_norm.weight", np.ones(hidden, dtype=np.float32))
    w.add_tensor(p + "ffn_gate.weight", mat(ff, hidden))
    w.add_tensor(p + "ffn_up.weight", mat(ff, hidden))
    w.add_tensor(p + "ffn_down.weight", mat(hidden, ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_fuzz_seeds():
    """Seeds for tools/fuzz/fuzz_safetensors.c (tests/fuzz_corpus/safetensors/)."""
    d = "tests/fuzz_corpus/safetensors"
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(OUT, "values.safetensors"), os.path.join(d, "seed_values"))
    rng = np.random.default_rng(3)
    mixed = {
        "model.layers.0.self_attn.q_proj.weight": torch.from_numpy(
            rng.standard_normal((4, 8)).astype(np.float32)).to(torch.bfloat16),
        "model.layers.0.self_attn.q_proj.bias": torch.zeros(4, dtype=torch.float32),
        "model.norm.weight": torch.ones(8, dtype=torch.float16),
        "lm_head.weight": torch.zeros((2, 1, 2, 2), dtype=torch.float32),
    }
    save_file(mixed, os.path.join(d, "seed_mixed"), metadata={"format": "pt"})
    save_file({}, os.path.join(d, "seed_empty"))
    # A real header whose data is cut off (rejected: offsets past the end).
    with open(os.path.join(OUT, "qwen3", "model.safetensors"), "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little")
        cut = head + f.read(n) + b"\0" * 64
    with open(os.path.join(d, "seed_truncated_qwen3"), "wb") as f:
        f.write(cut)
    # Header JSON alone: the fuzzer also parses each input behind a correct
    # length prefix, which is how these reach the tensor checks.
    json_seeds = {
        "seed_json_a": {"__metadata__": {"format": "pt"},
                        "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                        "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]}},
        "seed_json_b": {"x": {"dtype": "F16", "shape": [], "data_offsets": [0, 2]},
                        "y": {"dtype": "F16", "shape": [0, 5], "data_offsets": [2, 2]}},
    }
    for name, header in json_seeds.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(json.dumps(header))
    for f in os.listdir(d):
        os.chmod(os.path.join(d, f), 0o644)


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    rng = np.random.default_rng(20240517)
    write_values()
    write_tiny_gguf()

    hd = HIDDEN // HEADS
    llama = base_config("llama", tied=False)
    llama.update({"rms_norm_eps": 1e-5, "rope_theta": 500000.0, "max_position_embeddings": 131072,
                  "bos_token_id": 1, "eos_token_id": 2, "attention_bias": False,
                  "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0,
                                   "original_max_position_embeddings": 8192}})
    write_dir("llama", llama, weights(rng, "llama", hd, False, torch.float16, torch.float16),
              shards=2, generation={"bos_token_id": 1, "eos_token_id": [2, 5]})

    qwen2 = base_config("qwen2", tied=True)
    qwen2.update({"rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 4096,
                  "bos_token_id": None, "eos_token_id": 3, "use_sliding_window": False,
                  "sliding_window": 4096, "rope_scaling": {"type": "linear", "factor": 2.0}})
    write_dir("qwen2", qwen2, weights(rng, "qwen2", hd, True, torch.bfloat16, torch.bfloat16))

    qwen3 = base_config("qwen3", tied=True)
    qwen3.update({"head_dim": 8, "rms_norm_eps": 1e-6, "max_position_embeddings": 40960,
                  "bos_token_id": 4, "eos_token_id": [3, 6], "attention_bias": False,
                  "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}})
    write_dir("qwen3", qwen3, weights(rng, "qwen3", 8, True, torch.bfloat16, torch.bfloat16))

    write_fuzz_seeds()
    total = 0
    for root, _, files in os.walk(OUT):
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
            total += os.path.getsize(os.path.join(root, f))
    print("wrote %s (%d bytes)" % (OUT, total))


if __name__ == "__main__":
    main()
