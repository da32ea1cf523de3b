#!/usr/bin/env python3
"""Reference fixtures for model/quant.c and model/gguf.c, made with the gguf
Python package (the reference reader/writer of the GGUF format).

Writes, under tests/fixtures/:
  quant/<TYPE>.bin         raw blocks of one type and the gguf package's f32 dequantization
  tiny.gguf                a small v3 GGUF file: every metadata value type, arrays of
                           strings, nested arrays, custom alignment, tensors of 6 types
  quant/tiny_tensors.bin   the dequantized f32 of tiny.gguf's tensors, in file order
  quant/smollm2_tensors.txt  (only when models/SmolLM2-135M-Instruct.Q4_1.gguf exists)
                           its tensor table and the first values of each tensor's first row

<TYPE>.bin layout (little-endian):
  "EBQ1", u32 type id, u32 n_elems, u32 n_src, u32 n_bytes,
  f32 src[n_src]      (the inputs given to the quantizer; only for F16, where
                       the C side checks its own f32 -> f16 rounding)
  u8  blocks[n_bytes]
  f32 expected[n_elems]

Blocks come from gguf.quants.quantize where the package can quantize the type,
plus random blocks with sane fp16 scales (all types; the only source for the
K-quants, which the package can only dequantize).

Run from the repository root:  python3 tools/golden/gen_quant.py
"""
import os
import shutil
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V
from gguf.constants import GGML_QUANT_SIZES

OUT = os.path.join("tests", "fixtures")
QDIR = os.path.join(OUT, "quant")
MODEL = os.path.join("models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def f16_bytes(x):
    return np.asarray(x, dtype=np.float16).view(np.uint8)


def sane_scales(rng, n, positive=False, subnormal_every=0):
    """fp16 scales spread over 1e-4..1e-1 (log-uniform); every k-th one a
    half-precision subnormal so the f16 conversion of tiny scales is exercised."""
    d = np.exp(rng.uniform(np.log(1e-4), np.log(1e-1), n)).astype(np.float32)
    if not positive:
        d *= rng.choice([-1.0, 1.0], n).astype(np.float32)
    if subnormal_every:
        d[::subnormal_every] = rng.uniform(1e-7, 5e-5, len(d[::subnormal_every]))
    return d


def random_blocks(rng, qtype, n_blocks):
    """Random bytes with the fp16 scale fields replaced by sane values."""
    bs = GGML_QUANT_SIZES[qtype][1]
    b = rng.integers(0, 256, (n_blocks, bs), dtype=np.uint8)
    if qtype in (T.Q4_0, T.Q5_0, T.Q8_0):
        b[:, 0:2] = f16_bytes(sane_scales(rng, n_blocks, subnormal_every=5)).reshape(-1, 2)
    elif qtype in (T.Q4_1, T.Q5_1):
        b[:, 0:2] = f16_bytes(sane_scales(rng, n_blocks, subnormal_every=5)).reshape(-1, 2)
        b[:, 2:4] = f16_bytes(sane_scales(rng, n_blocks)).reshape(-1, 2)
    elif qtype in (T.Q4_K, T.Q5_K):
        b[:, 0:2] = f16_bytes(sane_scales(rng, n_blocks, True, subnormal_every=3)).reshape(-1, 2)
        b[:, 2:4] = f16_bytes(sane_scales(rng, n_blocks, True)).reshape(-1, 2)
    elif qtype == T.Q6_K:
        b[:, bs - 2:bs] = f16_bytes(sane_scales(rng, n_blocks, subnormal_every=3)).reshape(-1, 2)
    else:
        raise ValueError(qtype)
    return b.reshape(-1)


def quantizer_input(rng, n):
    """Values to quantize: normals at several scales, a zero block, an outlier block."""
    x = rng.standard_normal(n).astype(np.float32)
    x *= np.repeat(np.exp(rng.uniform(-6, 2, n // 32)), 32).astype(np.float32)
    x[32:64] = 0.0
    x[64:96] *= 1000.0
    x[100] = 1e4
    return x


def write_fixture(qtype, blocks, src=None):
    blocks = np.ascontiguousarray(blocks, dtype=np.uint8).reshape(-1)
    if qtype in (T.F32, T.F16, T.BF16):
        expected = gguf.quants.dequantize(blocks, qtype)
    else:
        bs = GGML_QUANT_SIZES[qtype][1]
        expected = gguf.quants.dequantize(blocks.reshape(-1, bs), qtype)
    expected = np.ascontiguousarray(expected, dtype=np.float32).reshape(-1)
    src = np.zeros(0, np.float32) if src is None else np.asarray(src, np.float32)
    path = os.path.join(QDIR, qtype.name + ".bin")
    with open(path, "wb") as f:
        f.write(struct.pack("<4sIIII", b"EBQ1", int(qtype), expected.size, src.size, blocks.size))
        f.write(src.tobytes())
        f.write(blocks.tobytes())
        f.write(expected.tobytes())
    return path


def gen_quant_fixtures():
    os.makedirs(QDIR, exist_ok=True)
    rng = np.random.default_rng(20240611)
    paths = []

    # F32: identity, including signed zero, f32 subnormals and infinities.
    x = rng.standard_normal(256).astype(np.float32)
    x[:6] = [0.0, -0.0, 1e-40, -1e-45, np.inf, -np.inf]
    paths.append(write_fixture(T.F32, x.view(np.uint8)))

    # F16: the package's quantizer is numpy's f32 -> f16 (round to nearest even);
    # inputs cover normals, half subnormals, underflow to zero, ties and overflow.
    x = rng.standard_normal(1024).astype(np.float32) * 100
    x[0:200] = rng.uniform(-6.1e-5, 6.1e-5, 200)          # half subnormal range
    x[200:220] = rng.uniform(-3e-8, 3e-8, 20)              # underflow to +-0
    x[220:230] = [65504, 65519, 65520, 1e6, -1e6, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26,
                  2.0 ** -14, -0.0]
    ties = (np.arange(1, 41, dtype=np.float32) * 2 + 1) * np.float32(2.0 ** -11)  # halfway
    x[230:270] = 1 + ties / 2
    with np.errstate(over="ignore"):  # overflow to inf is one of the cases
        q = gguf.quants.quantize(x, T.F16)
    paths.append(write_fixture(T.F16, q.view(np.uint8), src=x))

    # BF16: the package's quantizer (round to nearest even, NaN quieted).
    x = rng.standard_normal(512).astype(np.float32) * 10
    x[:4] = [0.0, -0.0, 1e-40, 3e38]
    q = gguf.quants.quantize(x, T.BF16)
    paths.append(write_fixture(T.BF16, q.view(np.uint8)))

    # 32-element block types: 48 quantized blocks + 16 random blocks.
    for qt in (T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
        q = gguf.quants.quantize(quantizer_input(rng, 48 * 32).reshape(-1, 32), qt)
        blocks = np.concatenate([q.reshape(-1), random_blocks(rng, qt, 16)])
        paths.append(write_fixture(qt, blocks))

    # K-quants: the package only dequantizes them; random valid blocks.
    for qt in (T.Q4_K, T.Q5_K, T.Q6_K):
        paths.append(write_fixture(qt, random_blocks(rng, qt, 8)))
    return paths


def gen_tiny_gguf():
    """A tiny v3 GGUF with every value type; the C test checks each value."""
    path = os.path.join(OUT, "tiny.gguf")
    w = gguf.GGUFWriter(path, arch="tiny")
    w.add_custom_alignment(64)
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.15625)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "h\u00e9llo, \u4e16\u754c")
    w.add_uint64("test.u64", 2 ** 63 + 5)
    w.add_int64("test.i64", -(2 ** 62) - 3)
    w.add_float64("test.f64", -2.5e-300)
    w.add_key_value("test.arr_u8", [1, 2, 255], V.ARRAY, sub_type=V.UINT8)
    w.add_key_value("test.arr_i16", [-1, 300, -32768], V.ARRAY, sub_type=V.INT16)
    w.add_key_value("test.arr_u64", [0, 2 ** 40], V.ARRAY, sub_type=V.UINT64)
    w.add_key_value("test.arr_f64", [0.5, -1.25], V.ARRAY, sub_type=V.FLOAT64)
    w.add_array("test.arr_i32", [7, -8, 9, 2147483647])
    w.add_array("test.arr_f32", [1.5, -0.25])
    w.add_array("test.arr_bool", [True, False, True])
    w.add_array("test.arr_str", ["alpha", "", "\u00df\u2603", "a b"])
    w.add_array("test.nested", [[1, 2, 3], [4], [5, 6]])
    w.add_array("test.nested_str", [["x", "yz"], ["w"]])
    w.add_array("test.nested2", [[[1], [2, 3]], [[4, 5, 6]]])

    rng = np.random.default_rng(7)
    tensors = []  # (name, gguf type, raw array for the writer, shape in numpy order)
    f32 = (np.arange(12, dtype=np.float32) * 0.25 - 1).reshape(3, 4)
    tensors.append(("t.f32", T.F32, f32))
    f16 = (np.arange(8, dtype=np.float32) / 4 - 0.5).astype(np.float16)
    tensors.append(("t.f16", T.F16, f16))
    bf16 = gguf.quants.quantize(np.linspace(-3, 3, 16, dtype=np.float32), T.BF16)
    tensors.append(("t.bf16", T.BF16, bf16))
    q8 = gguf.quants.quantize(rng.standard_normal((2, 64)).astype(np.float32), T.Q8_0)
    tensors.append(("blk.0.q8_0", T.Q8_0, q8))
    q41 = gguf.quants.quantize(rng.standard_normal((2, 32)).astype(np.float32), T.Q4_1)
    tensors.append(("blk.0.q4_1", T.Q4_1, q41))
    q4k = random_blocks(rng, T.Q4_K, 1).reshape(1, -1)
    tensors.append(("blk.1.q4_k", T.Q4_K, q4k))

    expected = []
    for name, qt, arr in tensors:
        if qt in (T.F32, T.F16):
            w.add_tensor(name, arr)
        else:
            w.add_tensor(name, arr, raw_dtype=qt)
        expected.append(gguf.quants.dequantize(arr.view(np.uint8) if qt == T.BF16 else arr, qt)
                        .astype(np.float32).reshape(-1))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(os.path.join(QDIR, "tiny_tensors.bin"), "wb") as f:
        for e in expected:
            f.write(e.tobytes())
    return path


def gen_smollm2_table():
    """Tensor table of the default model as the gguf package reads it."""
    if not os.path.exists(MODEL):
        print("skip: %s not present" % MODEL)
        return None
    r = gguf.GGUFReader(MODEL)
    path = os.path.join(QDIR, "smollm2_tensors.txt")
    with open(path, "w") as f:
        f.write("# name type n_dims ne0 ne1 ne2 ne3 nbytes first-values(float.hex)\n")
        for t in r.tensors:
            ne = [int(v) for v in t.shape] + [1] * (4 - len(t.shape))
            row = np.asarray(t.data).reshape(ne[1] * ne[2] * ne[3], -1)[0]
            vals = gguf.quants.dequantize(np.ascontiguousarray(row), t.tensor_type).reshape(-1)[:2]
            f.write("%s %d %d %d %d %d %d %d %s\n" % (
                t.name, int(t.tensor_type), len(t.shape), *ne, int(t.n_bytes),
                " ".join(float(v).hex() for v in vals)))
    return path


def gen_fuzz_seeds():
    """Small valid inputs for tools/fuzz/fuzz_gguf.c: one tensor of every
    supported type (so the fuzzer reaches every dequantizer), the same as
    version 2, and a file that is mostly nested metadata."""
    d = os.path.join("tests", "fuzz_corpus", "gguf")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(3)
    path = os.path.join(d, "seed_all_types.gguf")
    w = gguf.GGUFWriter(path, arch="seed")
    w.add_custom_alignment(8)
    w.add_array("s.tokens", ["a", "b"])
    w.add_tensor("f32", np.arange(4, dtype=np.float32))
    w.add_tensor("f16", np.arange(4, dtype=np.float16))
    for qt in (T.BF16,):
        w.add_tensor(qt.name, gguf.quants.quantize(np.ones(4, np.float32), qt), raw_dtype=qt)
    for qt in (T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
        w.add_tensor(qt.name, gguf.quants.quantize(rng.standard_normal(32).astype(np.float32), qt),
                     raw_dtype=qt)
    for qt in (T.Q4_K, T.Q5_K, T.Q6_K):
        w.add_tensor(qt.name, random_blocks(rng, qt, 1).reshape(1, -1), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    data = bytearray(open(path, "rb").read())
    data[4:8] = struct.pack("<I", 2)
    open(os.path.join(d, "seed_v2.gguf"), "wb").write(bytes(data))

    path = os.path.join(d, "seed_nested.gguf")
    w = gguf.GGUFWriter(path, arch="n")
    w.add_array("n.a", [[[1], [2, 3]], [[4]]])
    w.add_array("n.s", [["x", "y"], ["z"]])
    w.add_key_value("n.b", [True, False], V.ARRAY, sub_type=V.BOOL)
    w.add_float64("n.f", 1.5)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    shutil.copy(os.path.join(OUT, "tiny.gguf"), os.path.join(d, "seed_tiny.gguf"))
    return [os.path.join(d, f) for f in ("seed_all_types.gguf", "seed_v2.gguf",
                                         "seed_nested.gguf", "seed_tiny.gguf")]


def main():
    if not os.path.isdir("tests"):
        sys.exit("run from the repository root")
    paths = gen_quant_fixtures()
    paths.append(gen_tiny_gguf())
    paths += gen_fuzz_seeds()
    p = gen_smollm2_table()
    if p:
        paths.append(p)
    total = 0
    for p in paths + [os.path.join(QDIR, "tiny_tensors.bin")]:
        total += os.path.getsize(p)
        print("%8d  %s" % (os.path.getsize(p), p))
    print("%8d  total" % total)


if __name__ == "__main__":
    main()
