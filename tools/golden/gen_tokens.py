#!/usr/bin/env python3
"""Reference token ids for tests/test_tokenizer.c and tests/test_chat.c.

Three byte-level BPE tokenizers, each written as a Hugging Face tokenizer.json
(compressed with xz into tests/fixtures/tok/) and used, through the
`tokenizers` library, to encode the test strings:

  smollm2  SmolLM2-135M-Instruct: loaded by transformers from the GGUF file
           models/SmolLM2-135M-Instruct.Q4_1.gguf.  transformers' GGUF
           converter writes a plain ByteLevel pre-tokenizer; the model's own
           tokenizer.json (and llama.cpp's "smollm" pre id) isolates digits
           first: Sequence[Digits(individual_digits), ByteLevel].  We restore
           that pre-tokenizer before encoding.
  r1-qwen  DeepSeek-R1-Distill-Qwen: the Qwen2 vocabulary and merges from the
           vocab-only ggml-vocab-qwen2.gguf that llama.cpp ships (inside the
           llama-cpp-python source package), ids 0..151642, plus R1-Distill's
           22 added tokens (151643..151664), NFC normalizer and the Qwen2
           split regex, exactly as R1-Distill-Qwen's tokenizer.json has them.
  llama3   Llama 3 (llama-bpe): ggml-vocab-llama-bpe.gguf from the same
           package, its 256 control tokens as special added tokens, the
           Llama 3 split regex and ignore_merges=true.

Every reference is a tokenizers.Tokenizer built from the exact JSON we commit.
For each string we store the ids with added tokens matched (parse_special=1)
and, where different, the ids with none matched (parse_special=0, encoded by
the same tokenizer without its added_tokens), and HF's decode when it differs
from the text (NFC).  The chat fixture renders one user message with the
models' own Jinja templates through transformers' apply_chat_template.

Usage: python3 tools/golden/gen_tokens.py [--sdist llama_cpp_python-X.tar.gz]
(without --sdist the source package is fetched with `pip download`).
"""
import argparse
import glob
import json
import lzma
import os
import subprocess
import sys
import tarfile
import tempfile

import gguf
from tokenizers import Tokenizer

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "tok")
SMOL_GGUF = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
SDIST_VERSION = "0.3.36"

QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_RE = QWEN2_RE.replace(r"\p{N}|", r"\p{N}{1,3}|", 1)

BOS_R1 = "<｜begin▁of▁sentence｜>"
EOS_R1 = "<｜end▁of▁sentence｜>"
# (content, special) for ids 151643.. of DeepSeek-R1-Distill-Qwen's tokenizer.json.
R1_ADDED = [
    (EOS_R1, True), ("<｜User｜>", False), ("<｜Assistant｜>", False), (BOS_R1, True),
    ("<|EOT|>", False), ("<think>", False), ("</think>", False), ("<|quad_start|>", True),
    ("<|quad_end|>", True), ("<|vision_start|>", True), ("<|vision_end|>", True),
    ("<|vision_pad|>", True), ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False), ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False), ("<|fim_suffix|>", False), ("<|fim_pad|>", False),
    ("<|repo_name|>", False), ("<|file_sep|>", False),
]


def fetch_sdist(path):
    if path:
        return path
    cache = os.path.join(ROOT, "build", "golden-cache")
    os.makedirs(cache, exist_ok=True)
    hits = glob.glob(os.path.join(cache, "llama_cpp_python-%s.tar.gz" % SDIST_VERSION))
    if not hits:
        subprocess.check_call([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                               ":all:", "llama-cpp-python==" + SDIST_VERSION, "-d", cache])
        hits = glob.glob(os.path.join(cache, "llama_cpp_python-%s.tar.gz" % SDIST_VERSION))
    return hits[0]


def gguf_vocab(path):
    r = gguf.GGUFReader(path)
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    merges = r.fields["tokenizer.ggml.merges"].contents()
    return tokens, types, merges


def byte_level(use_regex):
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
            "use_regex": use_regex}


def split(regex):
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
        byte_level(False)]}


def tokenizer_json(vocab, merges, added, pre, normalizer, ignore_merges):
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": s}
                         for i, c, s in added],
        "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": None,
        "decoder": byte_level(True),
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": ignore_merges,
                  "vocab": vocab, "merges": merges},
    }


def build_r1_qwen(path):
    tokens, _, merges = gguf_vocab(path)
    n_base = 151643
    vocab = {t: i for i, t in enumerate(tokens[:n_base])}
    added = [(n_base + k, c, s) for k, (c, s) in enumerate(R1_ADDED)]
    # Merges as [left, right] pairs: the newer tokenizer.json form.
    pairs = [m.split(" ") for m in merges]
    return tokenizer_json(vocab, pairs, added, split(QWEN2_RE), {"type": "NFC"}, False), \
        {"bos_token": BOS_R1, "eos_token": EOS_R1}


def build_llama3(path):
    tokens, types, merges = gguf_vocab(path)
    vocab = {t: i for i, t in enumerate(tokens)}
    added = [(i, t, True) for i, (t, ty) in enumerate(zip(tokens, types)) if ty == 3]
    # Merges as "left right" strings: the older tokenizer.json form.
    return tokenizer_json(vocab, list(merges), added, split(LLAMA3_RE), None, True), \
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}


def build_smollm2():
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(os.path.dirname(SMOL_GGUF),
                                       gguf_file=os.path.basename(SMOL_GGUF))
    j = json.loads(hf.backend_tokenizer.to_str())
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    j["post_processor"] = None
    # Check that the GGUF's control tokens became added tokens.
    r = gguf.GGUFReader(SMOL_GGUF)
    ctl = [i for i, ty in enumerate(r.fields["tokenizer.ggml.token_type"].contents()) if ty == 3]
    assert sorted(a["id"] for a in j["added_tokens"]) == ctl, "added tokens differ from GGUF"
    template = r.fields["tokenizer.chat_template"].contents()
    return j, {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}, template


def test_strings(specials, llama_inputs):
    s = []
    # ASCII prose, punctuation, contractions (any case)
    s += ["Hello world", " Hello world", "Hello World!", "hello, world.", "The quick brown fox jumps over the lazy dog.",
          "I'm here", "you're", "they've", "I'll", "he'd", "it's", "don't", "IT'S", "I'M", "YOU'RE", "WE'VE",
          "SHE'LL", "HE'D", "DON'T", "It'S", "'s", "'", "''", "'S'T'RE", "rock'n'roll", "O'Neill's",
          "x'll've'd", "'ſ", "It'ſ", "a'b", "abc'", "What?!", "...", "--", "a-b_c", "email@example.com",
          "https://example.com/path?q=1&r=2#frag", "C'est la vie", "l'été"]
    # digits and long numbers
    s += ["0", "7", "12", "123", "1234", "12345", "123456", "1234567", "3.14159", "1,000,000", "-42",
          "1e10", "2024-01-15", "x1y2z3", "abc123def", "v1.2.3", " 1", "  1", "\n1", "a 12 b",
          "12345678901234567890", "9" * 64, "0.000001", "$100.00", "50%", "١٢٣", "Ⅻ", "½ ¾", "²³",
          "３４５", "ten 10 twenty20"]
    # LaTeX and math
    s += [r"$\frac{a}{b}$", r"\boxed{42}", r"$x^2 + y^2 = z^2$", r"\int_0^\infty e^{-x}\,dx = 1",
          r"\sum_{i=1}^{n} i = \frac{n(n+1)}{2}", r"\sqrt{2} \approx 1.414", r"\begin{align} a &= b \\ c &= d \end{align}",
          "Therefore, the answer is $\\boxed{\\dfrac{3}{4}}$.", "∀x∈ℝ: x² ≥ 0", "α + β = γ", "f(x) = 3x - 7"]
    # code
    s += ["def foo(x):\n    return x ** 2\n", "int main(void) { return 0; }", "for (int i = 0; i < n; i++) {\n\tsum += a[i];\n}",
          "if x == 1:\n\tpass", "import numpy as np\n\nprint(np.zeros(3))", "#include <stdio.h>", "a=b+c;d=e*f",
          "x->y", "a && b || !c", "    indented", "\tTabbed", "<html><body>hi</body></html>", "{\"key\": [1, 2, 3]}",
          "SELECT * FROM t WHERE id = 1;", "// comment\n/* block */", "fn main() -> i32 { 0 }"]
    # whitespace
    s += ["", " ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", " \n", "\n ",
          "a  b", "a   b", "a\tb", "a \tb", "a\t b", "a\nb", "a\n\nb", "a \n b", "a\n\n\n\nb", "trailing space ",
          "trailing spaces   ", "trailing tab\t", "trailing newline\n", "  leading", "\n\nleading newlines",
          "mixed \t\n \t\n text", "a\u00a0b", "a\u3000b", "a\u2009b", "x\u000bx\u000cx", "end  \n", " \t \n",
          "ctl\x01\x04\x7fchars", "\x1b[0m reset", "a \x04\x04 b", "\x04", "bell\x07"]
    # CJK, other scripts
    s += ["你好，世界！", "我爱北京天安门", "日本語のテキスト", "カタカナとひらがな", "한국어 텍스트입니다", "中文English混合",
          "Привет, мир!", "Ελληνικά", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "ภาษาไทย", "Tiếng Việt",
          "Äpfel über Öl", "naïve café", "Ångström", "straße", "ﬁnance", "İstanbul", "ǅemal"]
    # emoji, ZWJ sequences, combining marks
    s += ["😀", "👍🏽", "🇺🇸", "❤️", "👨‍👩‍👧‍👦", "🏳️‍🌈", "👩🏾‍💻 coding", "emoji 🎉🎉🎉 party", "🤖🦾",
          "e\u0301", "cafe\u0301", "n\u0303", "a\u0308o\u0308u\u0308", "\u1100\u1161\u11a8", "Z\u0351\u036b\u0343\u036a",
          "o\u0323\u0302", "o\u0302\u0323", "\u212b", "\u2126", "A\u030a", "\u0958", "x\u0300\u0301\u0302",
          "\u0301", "ᄀ", "\u200b", "a\u200db", "\ufeffBOM"]
    # text ending mid-word / mid-structure
    s += ["The answer is compl", "unbelievab", "Hello, wor", "3.14", "(a + b", "\"quoted", "tokeniz", "supercalifragilisticexpialidocious",
          "a" * 100, "ab" * 60, " " * 40, "\n" * 20, "!" * 30, "Let me think step by step.\n\nFirst,"]
    # special tokens of this model embedded in text
    for t in specials:
        s += [t, "Hello" + t + "world", " " + t + " ", t + t, "x" + t + "\n", t + "12", "\n\n" + t]
    s += ["<think>\nOkay, 2 + 2 = 4.\n</think>\n\nThe answer is 4.",
          "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
          "<｜User｜>Hi<｜Assistant｜>", "<｜begin▁of▁sentence｜>", "<think", "<think >", "< think>",
          "</think>done", "<|im_start", "|im_start|>", "<|endoftext|>", "<|begin_of_text|>",
          "<|eot_id|>", "<|start_header_id|>user<|end_header_id|>"]
    s += llama_inputs
    seen, out = set(), []
    for x in s:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def encode_all(name, tj, strings):
    tok = Tokenizer.from_str(json.dumps(tj))
    plain_json = dict(tj, added_tokens=[])
    plain = Tokenizer.from_str(json.dumps(plain_json))
    rows = []
    for s in strings:
        ids = tok.encode(s, add_special_tokens=False).ids
        row = {"text": s, "ids": ids}
        ids_plain = plain.encode(s, add_special_tokens=False).ids
        if ids_plain != ids:
            row["ids_plain"] = ids_plain
        dec = tok.decode(ids, skip_special_tokens=False)
        if dec != s:
            row["decoded"] = dec
        rows.append(row)
    path = os.path.join(OUT, name + ".jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print("%s: %d strings -> %s" % (name, len(rows), os.path.relpath(path, ROOT)))
    return tok


def write_tokenizer(name, tj, config):
    data = json.dumps(tj, ensure_ascii=False).encode("utf-8")
    path = os.path.join(OUT, name + ".tokenizer.json.xz")
    with open(path, "wb") as f:
        f.write(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    with open(os.path.join(OUT, name + ".tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False)
    print("%s: tokenizer.json %d bytes, xz %d bytes" % (name, len(data), os.path.getsize(path)))


def check_llama_cpp_vectors(name, tok, inp, out):
    """Informational: llama.cpp's own expected ids for its test inputs."""
    texts = open(inp, encoding="utf-8").read().split("\n__ggml_vocab_test__\n")
    lines = open(out, encoding="utf-8").read().split("\n")
    bad = 0
    for t, l in zip(texts, lines):
        want = [int(x) for x in l.split()]
        if tok.encode(t, add_special_tokens=False).ids != want:
            bad += 1
    print("%s: HF vs llama.cpp's test vectors: %d of %d differ" % (name, bad, min(len(texts), len(lines))))


def ignore_merges_words(tj, limit=6):
    """Vocab entries that plain merging would NOT produce as one token: the
    strings for which Llama 3's ignore_merges changes the result."""
    plain = Tokenizer.from_str(json.dumps(dict(tj, added_tokens=[], model=dict(tj["model"], ignore_merges=False))))
    full = Tokenizer.from_str(json.dumps(tj))
    dec = {v: k for k, v in tj["model"]["vocab"].items()}
    found = []
    for i in range(len(dec)):
        word = full.decode([i])
        if not word.isascii() or not word.strip().isalpha() or len(word) < 4:
            continue
        if len(plain.encode(word, add_special_tokens=False).ids) > 1 and \
                full.encode(word, add_special_tokens=False).ids == [i]:
            found.append(word)
            if len(found) == limit:
                break
    assert found, "no ignore_merges example found"
    return found


def write_tiny_ggufs():
    """Small vocab-only GGUF files for the loader's own tests: a working one
    (256 byte tokens, merges "a b" and "ab c", one control token) and broken
    ones (unknown pre-tokenizer, SentencePiece model, merge not in vocab)."""
    def byte_tokens():
        out = []
        n = 0
        for b in range(256):
            if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE:
                out.append(chr(b))
            else:
                out.append(chr(0x100 + n))
                n += 1
        return out
    def write(name, model="gpt2", pre="qwen2", merges=("a b", "ab c")):
        tokens = byte_tokens() + ["ab", "abc", "<|x|>"]
        types = [1] * (len(tokens) - 1) + [3]
        w = gguf.GGUFWriter(os.path.join(OUT, name), "llama")
        w.add_tokenizer_model(model)
        w.add_tokenizer_pre(pre)
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(list(merges))
        w.add_bos_token_id(258)
        w.add_eos_token_id(258)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    write("tiny-ok.gguf")
    write("tiny-unknown-pre.gguf", pre="mystery")
    write("tiny-spm.gguf", model="llama")
    write("tiny-bad-merge.gguf", merges=("a b", "x yz"))
    print("tiny GGUF fixtures written")


def chat_rows(tok_json, config, template, template_name, model, users):
    from transformers import PreTrainedTokenizerFast
    hf = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(tok_json)),
                                 bos_token=config["bos_token"], eos_token=config["eos_token"])
    hf.chat_template = template
    rows = []
    for u in users:
        msgs = [{"role": "user", "content": u}]
        text = hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        ids = hf.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True)
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        ids = list(ids)
        assert ids == hf(text, add_special_tokens=False)["input_ids"]
        rows.append({"model": model, "template": template_name, "user": u, "rendered": text, "ids": ids})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sdist", help="llama_cpp_python-%s.tar.gz (else pip download)" % SDIST_VERSION)
    args = ap.parse_args()
    if not os.path.exists(SMOL_GGUF):
        sys.exit("gen_tokens.py: %s missing (make deps)" % SMOL_GGUF)
    os.makedirs(OUT, exist_ok=True)
    sdist = fetch_sdist(args.sdist)
    with tempfile.TemporaryDirectory() as tmp:
        names = ["ggml-vocab-qwen2.gguf", "ggml-vocab-qwen2.gguf.inp", "ggml-vocab-qwen2.gguf.out",
                 "ggml-vocab-llama-bpe.gguf", "ggml-vocab-llama-bpe.gguf.inp",
                 "ggml-vocab-llama-bpe.gguf.out", "templates/deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"]
        files = {}
        with tarfile.open(sdist) as tf:
            for m in tf.getmembers():
                for n in names:
                    if m.name.endswith("/vendor/llama.cpp/models/" + n):
                        dst = os.path.join(tmp, os.path.basename(n))
                        with tf.extractfile(m) as src, open(dst, "wb") as d:
                            d.write(src.read())
                        files[n] = dst
        if len(files) != len(names):
            sys.exit("gen_tokens.py: missing %s in %s" % (sorted(set(names) - set(files)), sdist))
        llama_inputs = open(files["ggml-vocab-qwen2.gguf.inp"], encoding="utf-8").read() \
            .split("\n__ggml_vocab_test__\n")
        llama_inputs = [t for t in llama_inputs if t != ""]
        r1_template = open(files["templates/deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"],
                           encoding="utf-8").read()

        smol_json, smol_cfg, smol_template = build_smollm2()
        r1_json, r1_cfg = build_r1_qwen(files["ggml-vocab-qwen2.gguf"])
        l3_json, l3_cfg = build_llama3(files["ggml-vocab-llama-bpe.gguf"])

        smol_specials = [a["content"] for a in smol_json["added_tokens"]]
        r1_specials = [c for c, _ in R1_ADDED]
        l3_specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                       "<|end_header_id|>", "<|eot_id|>", "<|reserved_special_token_0|>"]

        write_tokenizer("smollm2", smol_json, smol_cfg)
        write_tokenizer("r1-qwen", r1_json, r1_cfg)
        write_tokenizer("llama3", l3_json, l3_cfg)
        encode_all("smollm2", smol_json, test_strings(smol_specials[:8], llama_inputs))
        r1_tok = encode_all("r1-qwen", r1_json, test_strings(r1_specials[:10], llama_inputs))
        l3_words = ignore_merges_words(l3_json)
        print("llama3: ignore_merges words:", l3_words)
        l3_tok = encode_all("llama3", l3_json, test_strings(l3_specials, llama_inputs) + l3_words)
        write_tiny_ggufs()
        check_llama_cpp_vectors("r1-qwen", r1_tok, files["ggml-vocab-qwen2.gguf.inp"],
                                files["ggml-vocab-qwen2.gguf.out"])
        check_llama_cpp_vectors("llama3", l3_tok, files["ggml-vocab-llama-bpe.gguf.inp"],
                                files["ggml-vocab-llama-bpe.gguf.out"])

        users = ["Hi", "What is 2+2?", "Solve $x^2 = 4$.\nPlease reason step by step, and put your "
                 "final answer within \\boxed{}.", "", "  spaces  ", "多少？", "<think>inside</think>",
                 "line one\n\nline two"]
        rows = chat_rows(r1_json, r1_cfg, r1_template, "r1", "r1-qwen", users)
        rows += chat_rows(smol_json, smol_cfg, smol_template, "chatml", "smollm2", users)
        path = os.path.join(OUT, "chat.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        print("chat: %d rows -> %s" % (len(rows), os.path.relpath(path, ROOT)))


if __name__ == "__main__":
    main()
