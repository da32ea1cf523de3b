#!/usr/bin/env python3
"""The transformers side of tools/devcheck.sh (run on the GPU machine; nothing
is downloaded: torch and transformers are installed there, the tokenizers come
from the repository's fixtures).

  hf_check.py make-ckpt --shape qwen7b|qwen7b-4l|llama8b|small-qwen|small-llama|tiny-qwen --out DIR [--peak S]
      A random-weight checkpoint shaped exactly like DeepSeek-R1-Distill-Qwen-7B
      or -Llama-8B (their config.json values), written by transformers as bf16
      safetensors shards, with the real tokenizer (tests/fixtures/tok/*.xz) so
      evictbench's sentence-aware policies see real text.  Writes
      DIR/devcheck.json {"params", "weight_bytes"}.  Skips the work when DIR
      already holds a checkpoint this script wrote for the same shape and peak.
      --peak S: peaked logits for the whole-decode comparison: each LM-head row
      scaled by exp(S z), z ~ N(0, 1) per row, then all by one factor that
      gives the heaviest row PEAK_TOP times its initial scale.  Random weights
      give logits like 152k Gaussian draws (sd ~1.2), whose top-1 margin is
      ~1/(2 ln V) of the top logit, a median of ~4 bf16 ulps of it, so the
      GPU's bf16 roundings flip many argmaxes; with rows of log-normal scale
      (S = 1) the top-1 comes from a heavy row and stands clear: the median
      margin is ~50 ulps and 20-30 different tokens still win over 40 steps
      (simulated; gpu_check compare prints the measured median).  Margins in
      ulps do not depend on the overall factor; it keeps the top logits near
      20, so that the same relative error costs little KL.
  hf_check.py logits --model DIR --ids 1,2,3 --out FILE
      transformers' logits of every position (f32 reference: the bf16 weights
      upcast to f32, f32 arithmetic, eager attention), f32 little-endian [n][V].
  hf_check.py compare --ours FILE --ref FILE --vocab V [--rel TOL] [--cos TOL]
      Exit 1 unless, at every position, max|ours - ref| / max|ref| <= rel and the
      cosine similarity >= cos.  Defaults (rel 0.05, cos 0.999) are for ours
      with bf16 weights against the f32 reference: our matmul rounds weights
      (they are bf16 already, so exactly) and activations to bf16 at every
      projection input (relative 2^-9 per element, random sign), i.e. ~7
      roundings per layer; as a random walk over 28-32 layers that is about
      sqrt(224) * 2^-9 ~ 3% of a logit's scale in the worst position of random
      weights, where logits are small and flat.  A wrong kernel (layout, RoPE,
      mask) moves logits by their own scale and cosines far below 0.99.
  hf_check.py generate --model DIR --batch B --prompt-len L --new N
                       [--peer eager|static-compile] [--device cuda|cpu]
      Times transformers `generate` (greedy, bf16, the model's default
      attention, EOS ignored via min_new_tokens).  Prints one JSON line.
      eager (default): the dynamic cache, every kernel launched from Python;
      prefill tokens/s from a separate timed forward of the prompts, decode
      tokens/s from the rest.
      static-compile: the fair peer of a CUDA-graph engine: a static cache
      (cache_implementation "static") and the model's forward through
      torch.compile(mode="reduce-overhead", fullgraph=True), which replays
      CUDA graphs.  A first generate of the same shapes compiles and captures
      (its excess over the timed run is "compile_s", left out of the rates);
      in the timed run a logits processor marks the end of the prefill (the
      first step's logits, synchronized once), so decode tokens/s is the
      batch x (new - 1) tokens after it over the time to the end.  Where
      torch.compile cannot run (no triton, no compiler), the JSON line holds
      "error" with the reason instead of rates.
"""
import argparse
import json
import lzma
import math
import os
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

SHAPES = {
    # deepseek-ai/DeepSeek-R1-Distill-Qwen-7B config.json
    "qwen7b": dict(
        arch="qwen2", tokenizer="r1-qwen",
        config=dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=3584,
                    intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                    num_key_value_heads=4, vocab_size=152064, max_position_embeddings=131072,
                    rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=False,
                    use_sliding_window=False, sliding_window=4096, max_window_layers=28,
                    bos_token_id=151646, eos_token_id=151643, hidden_act="silu",
                    initializer_range=0.02, torch_dtype="bfloat16")),
    # deepseek-ai/DeepSeek-R1-Distill-Llama-8B config.json
    "llama8b": dict(
        arch="llama", tokenizer="llama3",
        config=dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=4096,
                    intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                    num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072,
                    rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
                    rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0,
                                  "original_max_position_embeddings": 8192},
                    bos_token_id=128000, eos_token_id=128001, hidden_act="silu",
                    initializer_range=0.02, torch_dtype="bfloat16")),
}
# The 7B widths (hidden, heads, head_dim, MLP, vocab) over 4 layers: the whole-decode
# comparison against the CPU backend (gpu_check compare), whose CPU side must
# finish in about a minute.
SHAPES["qwen7b-4l"] = dict(arch="qwen2", tokenizer="r1-qwen", config=dict(
    SHAPES["qwen7b"]["config"], num_hidden_layers=4, max_window_layers=4))
# The same, tiny: tests this script and the comparison on a machine without a GPU.
SHAPES["tiny-qwen"] = dict(arch="qwen2", tokenizer="r1-qwen", config=dict(
    SHAPES["qwen7b"]["config"], hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2))
# Small, with the 7B's and 8B's head_dim (128) and 4 query heads per KV head
# (the 8B's grouping; cuda_selftest covers the 7B's 7 at its full shape), so
# the GPU's flash attention and step graphs take them: devcheck.sh --emulate.
SHAPES["small-qwen"] = dict(arch="qwen2", tokenizer="r1-qwen", config=dict(
    SHAPES["qwen7b"]["config"], hidden_size=1024, intermediate_size=2048, num_hidden_layers=2,
    max_window_layers=2, num_attention_heads=8, num_key_value_heads=2))
SHAPES["small-llama"] = dict(arch="llama", tokenizer="llama3", config=dict(
    SHAPES["llama8b"]["config"], hidden_size=1024, intermediate_size=2048, num_hidden_layers=2,
    num_attention_heads=8, num_key_value_heads=2))


PEAK_TOP = 4.0  # make-ckpt --peak: the heaviest LM-head row's scale


def fail(msg):
    print(f"hf_check: {msg}", file=sys.stderr)
    sys.exit(1)


def make_ckpt(args):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    shape = SHAPES[args.shape]
    marker = os.path.join(args.out, "devcheck.json")
    if os.path.exists(marker):
        with open(marker) as f:
            info = json.load(f)
        if info.get("shape") == args.shape and info.get("peak", 0) == args.peak:
            print(f"hf_check: {args.out} already holds the random {args.shape} checkpoint")
            return
    if os.path.exists(os.path.join(args.out, "config.json")) and not os.path.exists(marker):
        fail(f"{args.out} holds a checkpoint this script did not write; refusing to overwrite it")
    os.makedirs(args.out, exist_ok=True)
    cfg = dict(shape["config"])
    model_type = cfg.pop("model_type")
    config = AutoConfig.for_model(model_type, **cfg)
    torch.manual_seed(0)
    t0 = time.time()
    with torch.device(args.device):
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
    if args.peak:
        head = model.get_output_embeddings().weight
        gen = torch.Generator(device="cpu").manual_seed(1)
        scale = torch.exp(args.peak * torch.randn(head.shape[0], generator=gen))
        scale *= PEAK_TOP / scale.max()
        with torch.no_grad():
            head.mul_(scale.to(head.device, head.dtype)[:, None])
    model.save_pretrained(args.out, safe_serialization=True, max_shard_size="5GB")
    del model
    torch.cuda.empty_cache()
    tok = shape["tokenizer"]
    with lzma.open(os.path.join(ROOT, "tests", "fixtures", "tok", f"{tok}.tokenizer.json.xz")) as f:
        data = f.read()
    with open(os.path.join(args.out, "tokenizer.json"), "wb") as f:
        f.write(data)
    with open(os.path.join(ROOT, "tests", "fixtures", "tok", f"{tok}.tokenizer_config.json")) as f:
        tcfg = f.read()
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        f.write(tcfg)
    with open(marker, "w") as f:
        json.dump({"shape": args.shape, "peak": args.peak, "params": params,
                   "weight_bytes": params * 2}, f)
    print(f"hf_check: wrote {args.out}: {params / 1e9:.2f}B parameters, "
          f"{params * 2 / 1e9:.2f} GB bf16, {time.time() - t0:.1f} s")


def parse_ids(s):
    ids = [int(x) for x in s.split(",") if x]
    if not ids:
        fail("--ids is empty")
    return ids


def logits(args):
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32,
                                                 attn_implementation="eager").to(args.device)
    model.eval()
    ids = torch.tensor([parse_ids(args.ids)], device=args.device)
    with torch.no_grad():
        out = model(ids).logits[0].float().cpu().numpy()
    out.astype("<f4").tofile(args.out)
    print(f"hf_check: {out.shape[0]} positions x {out.shape[1]} logits of {args.model} -> {args.out}")


def rows_of(path, vocab):
    """The [n][vocab] f32 logits of a file as lists (array: no numpy needed)."""
    from array import array
    a = array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    if sys.byteorder != "little":
        a.byteswap()
    return [a[i:i + vocab] for i in range(0, len(a), vocab)], len(a)


def compare(args):
    # Plain Python (so --check-only can show it failing where numpy is not
    # installed); numpy where it is, for the 7B's 152k-wide rows.
    try:
        import numpy as np
    except ImportError:
        np = None
    ours, n_ours = rows_of(args.ours, args.vocab)
    ref, n_ref = rows_of(args.ref, args.vocab)
    if n_ours != n_ref or n_ours % args.vocab:
        fail(f"compare: {n_ours} vs {n_ref} values (vocab {args.vocab})")
    worst_rel, worst_cos, same = 0.0, 1.0, 0
    for o, r in zip(ours, ref):
        if np is not None:
            o, r = np.asarray(o, dtype=np.float64), np.asarray(r, dtype=np.float64)
            finite = bool(np.all(np.isfinite(o)))
            diff, mag = float(np.max(np.abs(o - r))), float(np.max(np.abs(r)))
            dot, norms = float(o @ r), float(np.linalg.norm(o) * np.linalg.norm(r))
            same += int(o.argmax()) == int(r.argmax())
        else:
            finite = all(math.isfinite(x) for x in o)
            diff = max(abs(x - y) for x, y in zip(o, r)) if finite else 0.0
            mag = max(abs(y) for y in r)
            dot = sum(x * y for x, y in zip(o, r)) if finite else 0.0
            norms = math.sqrt(sum(x * x for x in o) * sum(y * y for y in r)) if finite else 0.0
            same += max(range(len(o)), key=o.__getitem__) == max(range(len(r)), key=r.__getitem__)
        if not finite:
            fail("compare: our logits hold NaN or inf")
        worst_rel = max(worst_rel, diff / max(mag, 1e-30))
        worst_cos = min(worst_cos, dot / max(norms, 1e-30))
    top1 = same / max(len(ours), 1)
    ok = worst_rel <= args.rel and worst_cos >= args.cos
    print(f"  {'ok' if ok else 'FAIL'}   {args.label}: worst relative error {worst_rel:.3g} "
          f"(tol {args.rel}), worst cosine {worst_cos:.6f} (tol {args.cos}), "
          f"top-1 agreement {top1:.2f} over {len(ours)} positions")
    sys.exit(0 if ok else 1)


def generate(args):
    import torch
    from transformers import AutoModelForCausalLM
    dev = args.device
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16).to(dev)
    model.eval()
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(0)
    # Ordinary-text-like ids (the low range of the vocabulary), as evictbench bench does.
    ids = torch.randint(32, 1032, (args.batch, args.prompt_len), generator=g).to(dev)
    mask = torch.ones_like(ids)
    sync = torch.cuda.synchronize if dev.startswith("cuda") else (lambda: None)
    if args.peer == "static-compile":
        return generate_static_compile(args, model, ids, mask, sync, vocab)
    with torch.no_grad():
        model(ids[:, :16])  # warm-up: kernels load
        sync()
        t0 = time.time()
        model(ids, attention_mask=mask, use_cache=True)
        sync()
        prefill_s = time.time() - t0
        t0 = time.time()
        out = model.generate(ids, attention_mask=mask, max_new_tokens=args.new,
                             min_new_tokens=args.new, do_sample=False, pad_token_id=0)
        sync()
        total_s = time.time() - t0
    new = out.shape[1] - ids.shape[1]
    decode_s = max(total_s - prefill_s, 1e-9)  # generate's own prefill costs what ours did
    print(json.dumps({"engine": "transformers", "peer": "eager", "batch": args.batch,
                      "prompt_len": args.prompt_len, "new": int(new),
                      "prefill_tok_s": args.batch * args.prompt_len / prefill_s,
                      "decode_tok_s": args.batch * (new - 1) / decode_s,
                      "peak_mem_bytes": peak_mem(dev), "vocab": vocab}))


def peak_mem(dev):
    import torch
    return torch.cuda.max_memory_allocated() if dev.startswith("cuda") else 0


class PrefillMark:
    """A logits processor that records when generate's first logits (the
    prompt's forward) are ready; it changes no score."""

    def __init__(self, sync):
        self.sync, self.t = sync, None

    def __call__(self, input_ids, scores):
        if self.t is None:
            self.sync()
            self.t = time.time()
        return scores


def generate_static_compile(args, model, ids, mask, sync, vocab):
    import torch
    from transformers import LogitsProcessorList
    result = {"engine": "transformers", "peer": "static-compile", "batch": args.batch,
              "prompt_len": args.prompt_len, "new": args.new, "vocab": vocab}

    extra = {}
    try:
        # transformers >= 4.47 compiles generate's decoding steps itself when the
        # cache is static (its documented path); older ones take the forward
        # compiled by hand (their documented recipe).
        from transformers import CompileConfig
        cc = CompileConfig(fullgraph=True, mode="reduce-overhead")
        if not args.device.startswith("cuda"):
            cc._compile_all_devices = True  # a CPU test of this path compiles too
        extra["compile_config"] = cc
        result["compiled"] = "generate's decoding steps"
    except ImportError:
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
        result["compiled"] = "model.forward"

    def run():
        mark = PrefillMark(sync)
        sync()
        t0 = time.time()
        out = model.generate(ids, attention_mask=mask, max_new_tokens=args.new,
                             min_new_tokens=args.new, do_sample=False, pad_token_id=0,
                             cache_implementation="static",
                             logits_processor=LogitsProcessorList([mark]), **extra)
        sync()
        return out, t0, mark.t, time.time()

    try:
        with torch.no_grad():
            _, a0, _, a1 = run()   # compiles the prefill and decode graphs, captures them
            out, t0, t1, t2 = run()
    except Exception as ex:  # the package or compiler this peer needs is absent here
        result["error"] = f"{type(ex).__name__}: {str(ex).splitlines()[0] if str(ex) else ''}"[:200]
        print(json.dumps(result))
        return
    new = out.shape[1] - ids.shape[1]
    result.update({"new": int(new), "compile_s": max((a1 - a0) - (t2 - t0), 0.0),
                   "prefill_tok_s": args.batch * args.prompt_len / max(t1 - t0, 1e-9),
                   "decode_tok_s": args.batch * (new - 1) / max(t2 - t1, 1e-9),
                   "peak_mem_bytes": peak_mem(args.device)})
    print(json.dumps(result))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("make-ckpt")
    p.add_argument("--shape", choices=sorted(SHAPES), required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--peak", type=float, default=0.0)
    p = sub.add_parser("logits")
    p.add_argument("--model", required=True)
    p.add_argument("--ids", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda")
    p = sub.add_parser("compare")
    p.add_argument("--ours", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--rel", type=float, default=0.05)
    p.add_argument("--cos", type=float, default=0.999)
    p.add_argument("--label", default="logits")
    p = sub.add_parser("generate")
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--prompt-len", type=int, default=512)
    p.add_argument("--new", type=int, default=256)
    p.add_argument("--peer", choices=["eager", "static-compile"], default="eager")
    p.add_argument("--device", default="cuda")
    args = ap.parse_args()
    {"make-ckpt": make_ckpt, "logits": logits, "compare": compare, "generate": generate}[args.cmd](args)


if __name__ == "__main__":
    main()
