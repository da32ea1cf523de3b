#!/usr/bin/env python3
"""Reference prompts of the qwen2.5 chat template for tests/test_chat.c.

Independent of evictbench's C code on both halves:
  * the text: the model's own Jinja template (tokenizer.chat_template in the
    Qwen2.5-Coder GGUF file) rendered by jinja2 for one user message with the
    generation prompt, as transformers' apply_chat_template does;
  * the ids: a Hugging Face `tokenizers` Tokenizer built from the GGUF's
    vocabulary and merges, with Qwen2's tokenizer.json settings (NFC, the Qwen2
    split regex, byte-level BPE) and the GGUF's control / user-defined tokens
    as added tokens (matched in the text).
Writes tests/fixtures/tok/qwen25_chat.jsonl: {"user", "rendered", "ids"}.

Usage: pip install gguf tokenizers jinja2 &&
       python3 tools/golden/gen_qwen25_chat.py [models/qwen2.5-coder-0.5b-instruct.gguf]
"""
import json
import os
import sys

import gguf
import jinja2
from tokenizers import Tokenizer

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "tok", "qwen25_chat.jsonl")
DEFAULT_GGUF = os.path.join(ROOT, "models", "qwen2.5-coder-0.5b-instruct.gguf")

QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")

USERS = [
    "Hi",
    "What is 12*7? Answer briefly.",
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes "
    "muffins for her friends every day with four. She sells the remainder at the farmers' market "
    "daily for $2 per fresh duck egg. How much in dollars does she make every day at the farmers' "
    "market?\nPlease reason step by step, and put your final answer within \\boxed{}.",
    "Ünïcödé — 数学 test:  two  spaces,\ttab\nnew line 12345 <|im_end|> inside",
    "",
]


def field_str(r, key):
    f = r.fields[key]
    return bytes(f.parts[f.data[0]]).decode("utf-8")


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_GGUF
    r = gguf.GGUFReader(path)
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    merges = r.fields["tokenizer.ggml.merges"].contents()
    template = field_str(r, "tokenizer.chat_template")
    assert field_str(r, "tokenizer.ggml.pre") == "qwen2"

    normal = [i for i, ty in enumerate(types) if ty == 1]
    added = [i for i, ty in enumerate(types) if ty in (3, 4)]  # control, user-defined
    vocab = {tokens[i]: i for i in normal}
    tj = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True} for i in added],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_RE}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [m.split(" ") for m in merges]},
    }
    tok = Tokenizer.from_str(json.dumps(tj))

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    tpl = env.from_string(template)
    rows = []
    for u in USERS:
        text = tpl.render(messages=[{"role": "user", "content": u}], add_generation_prompt=True,
                          tools=None)
        ids = tok.encode(text, add_special_tokens=False).ids
        rows.append({"user": u, "rendered": text, "ids": ids})
    with open(OUT, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print("wrote %s (%d rows) from %s" % (OUT, len(rows), path))


if __name__ == "__main__":
    main()
