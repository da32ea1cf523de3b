#!/usr/bin/env python3
"""Golden references for the forward pass and generation (tests/test_forward.c,
tests/test_generate.c, tests/cli/generate.sh).

Independent reference: Hugging Face transformers (float32, eager attention).

  (1) Tiny random checkpoints for llama, llama + llama3 rope scaling, llama with
      tied embeddings, qwen2 (q/k/v biases) and qwen3 (q_norm/k_norm), written as
      safetensors + config.json and as GGUF (llama.cpp's Q/K row permutation for
      the llama arch only; llama3 scaling as rope_freqs.weight).
  (2) Their logits at every position for three fixed token-id prompts, and
      32-token greedy continuations.
  (3) SmolLM2-135M-Instruct (models/SmolLM2-135M-Instruct.Q4_1.gguf, dequantized
      by transformers): last-position logits and top-20 at every position for
      three prompts, a 64-token greedy continuation, and the greedy answer to a
      chatml prompt.

Fixture layout, per model directory tests/fixtures/models/<name>/:
  config.json, model.safetensors, model.gguf,
  golden.json  {"vocab": V, "prompts": [[ids]], "greedy": [[32 ids]]}
  logits.bin   f32 little-endian, the prompts' [len][V] logits one after another.

Usage: python3 tools/golden/gen_models.py [--tiny] [--smollm2]   (default: both)
"""
import json
import os
import sys

import numpy as np
import torch
import gguf
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "models")
VOCAB = 256
PROMPTS = [
    [1, 17, 200, 45, 45, 3, 99],
    [1, 250, 12, 7, 130, 64, 201, 33, 18, 90, 5, 77, 160],
    [1] + [(i * 37 + 11) % VOCAB for i in range(40)],
]
N_GREEDY = 32

COMMON = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, vocab_size=VOCAB, max_position_embeddings=128,
              rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2, initializer_range=0.15,
              attn_implementation="eager")

LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 32}

TINY = {
    "tiny-llama": (LlamaForCausalLM, LlamaConfig, dict(rope_theta=10000.0, tie_word_embeddings=False)),
    "tiny-llama3": (LlamaForCausalLM, LlamaConfig,
                    dict(rope_theta=10000.0, tie_word_embeddings=False, rope_scaling=LLAMA3_SCALING)),
    "tiny-llama-tied": (LlamaForCausalLM, LlamaConfig,
                        dict(rope_theta=100000.0, tie_word_embeddings=True, num_hidden_layers=3)),
    "tiny-qwen2": (Qwen2ForCausalLM, Qwen2Config, dict(rope_theta=1000000.0, tie_word_embeddings=False)),
    "tiny-qwen3": (Qwen3ForCausalLM, Qwen3Config, dict(rope_theta=1000000.0, tie_word_embeddings=True)),
}

HF_TO_GGUF = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(hf):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")
    assert parts[0] == "model" and parts[1] == "layers", hf
    return "blk.%s.%s" % (parts[2], HF_TO_GGUF[".".join(parts[3:])])


def interleave_rows(w, n_heads):
    """HF half-split rows -> GGUF adjacent pairs, per head: HF row i of the first
    half goes to 2i, row i + d/2 to 2i + 1 (works for weights and biases)."""
    d = w.shape[0] // n_heads
    rest = w.shape[1:]
    return w.reshape(n_heads, 2, d // 2, *rest).swapaxes(1, 2).reshape(w.shape)


def llama3_divisors(cfg_scaling, theta, dim):
    """Per-frequency divisors llama.cpp stores as rope_freqs.weight."""
    factor = cfg_scaling["factor"]
    low, high = cfg_scaling["low_freq_factor"], cfg_scaling["high_freq_factor"]
    orig = cfg_scaling["original_max_position_embeddings"]
    out = []
    for i in range(0, dim, 2):
        freq = 1.0 / (theta ** (i / dim))
        wavelen = 2 * np.pi / freq
        if wavelen < orig / high:
            out.append(1.0)
        elif wavelen > orig / low:
            out.append(factor)
        else:
            s = (orig / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - s) / factor + s))
    return np.array(out, dtype=np.float32)


def randomize(model, gen):
    """Non-trivial values for every parameter, including norms and biases that
    transformers initializes to ones/zeros (a wrong norm or bias must show)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=gen))


def write_gguf(path, arch, cfg, state, scaling):
    w = gguf.GGUFWriter(path, arch)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(float(rope_theta(cfg)))
    w.add_rope_dimension_count(cfg.head_dim)
    w.add_vocab_size(cfg.vocab_size)
    w.add_file_type(0)
    w.add_bos_token_id(cfg.bos_token_id)
    w.add_eos_token_id(cfg.eos_token_id)
    if scaling is not None:
        w.add_tensor("rope_freqs.weight", llama3_divisors(scaling, rope_theta(cfg), cfg.head_dim))
    for hf, t in state.items():
        if hf == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        a = t.detach().float().numpy().copy()
        name = gguf_name(hf)
        if arch == "llama" and (".attn_q." in name or ".attn_k." in name):
            heads = cfg.num_attention_heads if ".attn_q." in name else cfg.num_key_value_heads
            a = interleave_rows(a, heads)
        w.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def rope_theta(cfg):
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict) and "rope_theta" in rp:
        return rp["rope_theta"]
    return cfg.rope_theta


def legacy_rope_keys(cfg_path, theta, scaling):
    """Also write rope_theta / rope_scaling (the pre-v5 spelling) next to
    rope_parameters, so the fixture covers readers of either spelling."""
    with open(cfg_path) as f:
        c = json.load(f)
    c["rope_theta"] = theta
    c["rope_scaling"] = scaling
    with open(cfg_path, "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)


def greedy(model, ids, n):
    seq = list(ids)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([seq])).logits[0, -1]
            seq.append(int(torch.argmax(logits)))
    return seq[len(ids):]


def gen_tiny():
    for idx, (name, (cls, cfg_cls, extra)) in enumerate(sorted(TINY.items())):
        kw = dict(COMMON)
        kw.update(extra)
        cfg = cfg_cls(**kw)
        torch.manual_seed(1234 + idx)
        model = cls(cfg).float().eval()
        gen = torch.Generator().manual_seed(4321 + idx)
        randomize(model, gen)
        if cfg.tie_word_embeddings:
            model.tie_weights()
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        model.save_pretrained(d, safe_serialization=True)
        for junk in ("generation_config.json",):
            p = os.path.join(d, junk)
            if os.path.exists(p):
                os.remove(p)
        scaling = extra.get("rope_scaling")
        legacy_rope_keys(os.path.join(d, "config.json"), rope_theta(cfg), scaling)
        arch = {"LlamaConfig": "llama", "Qwen2Config": "qwen2", "Qwen3Config": "qwen3"}[cfg_cls.__name__]
        state = model.state_dict()
        write_gguf(os.path.join(d, "model.gguf"), arch, cfg, state, scaling)

        logits_all = []
        conts = []
        with torch.no_grad():
            for p in PROMPTS:
                lg = model(torch.tensor([p])).logits[0].float().numpy()
                logits_all.append(lg.astype("<f4"))
                conts.append(greedy(model, p, N_GREEDY))
        with open(os.path.join(d, "logits.bin"), "wb") as f:
            for lg in logits_all:
                f.write(lg.tobytes())
        with open(os.path.join(d, "golden.json"), "w") as f:
            json.dump({"vocab": VOCAB, "prompts": PROMPTS, "greedy": conts}, f)
        print("wrote", d)


SMOL_GGUF = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
SMOL_PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "Once upon a time, in a small village by the sea, there lived",
]
CHAT_PROMPT = "What is 12*7? Answer briefly."


def gen_smollm2():
    if not os.path.exists(SMOL_GGUF):
        print("skip SmolLM2: %s absent (make deps downloads it)" % SMOL_GGUF)
        return
    d, f = os.path.split(SMOL_GGUF)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    out = {"prompts": [], "top_ids": [], "top_vals": [], "greedy": []}
    last = []
    with torch.no_grad():
        for text in SMOL_PROMPTS:
            ids = tok(text, add_special_tokens=False)["input_ids"]
            lg = model(torch.tensor([ids])).logits[0].float()
            v, i = torch.topk(lg, 20, dim=-1)
            out["prompts"].append(ids)
            out["top_ids"].append(i.tolist())
            out["top_vals"].append(v.tolist())
            last.append(lg[-1].numpy().astype("<f4"))
            out["greedy"].append(greedy(model, ids, 64))
        chat_text = tok.apply_chat_template([{"role": "user", "content": CHAT_PROMPT}],
                                            tokenize=False, add_generation_prompt=True)
        chat_ids = tok(chat_text, add_special_tokens=False)["input_ids"]
        eos = tok.convert_tokens_to_ids("<|im_end|>")
        cont = []
        seq = list(chat_ids)
        for _ in range(40):
            nxt = int(torch.argmax(model(torch.tensor([seq])).logits[0, -1]))
            if nxt == eos or nxt == tok.eos_token_id:
                break
            cont.append(nxt)
            seq.append(nxt)
    out["vocab"] = int(last[0].shape[0])
    out["chat"] = {"user": CHAT_PROMPT, "text": chat_text, "prompt_ids": chat_ids,
                   "gen_ids": cont, "gen_text": tok.decode(cont)}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "smollm2-golden.json"), "w") as fo:
        json.dump(out, fo)
    with open(os.path.join(OUT, "smollm2-last-logits.bin"), "wb") as fo:
        for lg in last:
            fo.write(lg.tobytes())
    with open(os.path.join(OUT, "smollm2-chat-answer.txt"), "w") as fo:
        fo.write(out["chat"]["gen_text"])
    print("wrote SmolLM2 golden; chat answer:", repr(out["chat"]["gen_text"]))


def main():
    args = sys.argv[1:] or ["--tiny", "--smollm2"]
    torch.set_num_threads(2)
    if "--tiny" in args:
        gen_tiny()
    if "--smollm2" in args:
        gen_smollm2()


if __name__ == "__main__":
    main()
