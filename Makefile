# evictbench - build, test, bench.  See README.md.
#
#   make deps      install build/runtime dependencies and the models (MODELS="a b")
#   make all       build ./evictbench
#   make test      the whole suite (SAN=1: under ASan + UBSan), after make lint
#   make lint      size limits of harness/ files and functions; policies/ includes no upper layer
#   make bench     tokens/s, policy overhead, KV memory table
#   make bench-peer  ours vs llama.cpp's llama-bench (built once into build-peer/ from
#                  the llama-cpp-python sdist; needs cmake, a C++ compiler, pip's network
#                  the first time): prefill 512, decode batch 1 and batch 16 on the same
#                  GGUFs, and decode at depth 4096/8192 [THREADS=N REPS=N PEER_MODELS="a.gguf b.gguf"]
#   make bench-qmatmul  the quantized matmul alone, in CPU time (the 1.5B's shapes)
#   make bench-host  the host's own work per decode step at the 7B shape, compute
#                  taken away (a GPU step's host share) [BENCH_HOST_ARGS="--batches 1,64"]
#   make bench-long  decode speed vs context (1k-16k) and the largest batch under a KV
#                  cap, FullKV against policies, into the bench table of DB (slow)
#   make cuda      build the CUDA backend (nvcc + cuBLAS) ./evictbench-cuda, gpu_check
#   make devcheck-emu  the lent GPU's check run (tools/devcheck.sh) rehearsed on the CPU
#                  emulator; transformers on the CPU from HF_VENV (made the first time:
#                  pip installs torch and transformers, several GB)

CC      ?= cc
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp -I. -I/usr/include/openblas
LDLIBS  += -lopenblas -lcjson -lsqlite3 -lz -lm -fopenmp

BUILD   := build
ifeq ($(SAN),1)
BUILD   := build-san
CFLAGS  += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif

# harness/ is one folder per subsystem (cli, exp, grade, store, report, cluster);
# every harness/*/*.c is library code except the binary's entry point.
# kernels/cuda/*.c is plain C: the device pool's bookkeeping and the weak
# stubs a build without CUDA answers `--device cuda` with.
LIB_SRC := $(wildcard util/*.c model/*.c kernels/*.c kernels/cpu/*.c kernels/cuda/*.c policies/*.c datasets/*.c harness/*/*.c)
LIB_SRC := $(filter-out harness/cli/main.c,$(LIB_SRC))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/code_hash.o
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all deps test bench bench-host bench-long bench-peer bench-shared bench-qmatmul clean cuda fuzz exp exp-bench cpu-sweep data plots tables report report-png check-docs lint cuda-emu devcheck-emu FORCE

all: evictbench

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# The code hash run keys carry (harness/exp/code_hash.h): regenerated at every
# make, rewritten only when the sources changed.
$(BUILD)/gen/code_hash.c: FORCE
	@tools/code_hash.sh $@

$(BUILD)/gen/code_hash.o: $(BUILD)/gen/code_hash.c harness/exp/code_hash.h
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libevictbench.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/evictbench: $(BUILD)/harness/cli/main.o $(BUILD)/libevictbench.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

evictbench: $(BUILD)/evictbench
	@if [ "$(SAN)" != "1" ]; then rm -f evictbench && cp $(BUILD)/evictbench evictbench; fi

$(BUILD)/tests/%: tests/%.c $(BUILD)/libevictbench.a tests/test.h tests/test_util.h tests/tok_fixture.h tests/replay.h tests/fwd_runs.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(BUILD)/libevictbench.a $(LDLIBS) -o $@

# Every test program runs from the repository root; the suite fails if any fails.
# Where the CUDA headers are, the suite also runs the CUDA kernels on the CPU
# emulator (tests/cli/cuda_emu.sh; it skips, saying so, without them).
CUDA_HEADERS := $(wildcard $(patsubst %/bin/nvcc,%/include,$(shell command -v nvcc 2>/dev/null))/cuda_runtime.h)
test: $(TEST_BIN) $(BUILD)/evictbench $(BUILD)/tools/bench_membw $(BUILD)/tools/bench_host lint \
      $(if $(CUDA_HEADERS),cuda-emu)
	@EVICTBENCH_BIN=$(BUILD)/evictbench EVICTBENCH_EMU_BIN=$(BUILD)/evictbench-emu \
	    EVICTBENCH_EMU_CHECK=$(BUILD)/tools/gpu_check-emu \
	    EVICTBENCH_EMU_SELFTEST=$(CUDA_EMU_DIR)/cuda_selftest tests/run_all.sh $(TEST_BIN)

# Every evictbench and make command README.md and docs/*.md show still exists.
check-docs: evictbench
	@tools/check_docs.sh

# harness/: no file over 600 lines, no function over 80 (tools/check_size.sh);
# policies/: no include of model/, datasets/ or harness/ (tools/check_layers.sh).
lint:
	@tools/check_size.sh harness
	@tools/check_layers.sh policies

# The quantized matmul alone, in CPU time (tools/bench_qmatmul.c): the 1.5B's
# Q4_K gate/up and Q6_K down shapes at prefill 512, decode batch 16 and batch 1.
$(BUILD)/tools/bench_qmatmul: tools/bench_qmatmul.c $(BUILD)/libevictbench.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(BUILD)/libevictbench.a $(LDLIBS) -o $@

# The host's own work per decode step at the 7B shape, compute taken away
# (tools/bench_host.c; make bench-host: FullKV and R-KV at batch 1 and 64).
$(BUILD)/tools/bench_host: tools/bench_host.c $(BUILD)/libevictbench.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(BUILD)/libevictbench.a $(LDLIBS) -o $@

bench-host: $(BUILD)/tools/bench_host
	$< $(BENCH_HOST_ARGS)

# The host's memory read rate (tools/bench_membw.c), beside batch-1 decode in bench-peer.
$(BUILD)/tools/bench_membw: tools/bench_membw.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $< -fopenmp -o $@

bench-qmatmul: $(BUILD)/tools/bench_qmatmul
	@for m in 512 16 1; do $< 12 8960 1536 $$m 5 && $< 14 1536 8960 $$m 5 || exit 1; done

# The runtime table, then the policy table of issue 4 (2,048 generated tokens
# per row: roughly 15 minutes on 2 cores).
BENCH_POLICIES ?= fullkv,streamingllm,h2o,h2o-rkv,snapkv-decode,rkv,skipkv-sent,skipkv,seal,vase-attnv,vase-dkv,rpc,beaconkv,knorm,tova
bench: evictbench
	./evictbench bench --model smollm2-135m --policies $(BENCH_POLICIES) --budgets 256,512,1024

# What eviction buys (docs/benchmarks.md): decode tokens/s at 1k-16k contexts, batch 1 and
# 8, f32 and f16 KV, FullKV against R-KV, SnapKV (decode) and StreamingLLM at
# 1,024; then the largest batch whose K+V fits the A100-40GB-scaled cap
# (10 FullKV sequences of 8,192 tokens) for FullKV, R-KV and SkipKV at 512.
# Rows go to the bench table of DB; make tables / make plots render them.
BENCH_LONG_MODEL ?= qwen2.5-coder-0.5b
BENCH_LONG_CAP ?= 1006632960
bench-long: evictbench
	./evictbench bench --contexts 1024,2048,4096,8192,16384 --model $(BENCH_LONG_MODEL) \
		--batches 1,8 --kv-types f32,f16 --new 16 --fill-len 64 --db $(DB)
	./evictbench bench --max-batch --max-kv-bytes $(BENCH_LONG_CAP) --model $(BENCH_LONG_MODEL) \
		--kv-types f16 --policies rkv,skipkv-sent --budgets 512 --gen-len 8128 --fill-len 64 \
		--new 8 --db $(DB)

# Same GGUF, same threads, medians of REPS runs; see tools/bench_peer.sh.
PEER_MODELS ?=
bench-peer: evictbench $(BUILD)/tools/bench_membw
	THREADS="$(THREADS)" REPS="$(REPS)" tools/bench_peer.sh $(PEER_MODELS)

# Decode batch 1 and 16 with one busy process per core, ours and llama.cpp's,
# each beside its quiet rate (tools/bench_shared.sh; about 10 minutes on 2 cores).
SHARED_MODEL ?=
bench-shared: evictbench
	THREADS="$(THREADS)" REPS="$(REPS)" tools/bench_shared.sh $(SHARED_MODEL)

# MODELS: registry names to fetch (default: the quickstart's and the tests' models)
deps:
	tools/deps.sh $(MODELS)

# Build every fuzzer (tools/fuzz/fuzz_*.c: gguf, safetensors, tokenizer,
# config, grade) and run each a few seconds from its corpus.
fuzz:
	sh tests/cli/fuzz_smoke.sh

data:
	tools/fetch_data.sh

# MODEL=NAME runs the config's sweep as written on that model (exp --model).
# Then a short bench of the same model (tools/exp_bench.sh: about a minute,
# once per model and database) and the report.
CONFIG ?= quickstart
MODEL ?=
EXP_BENCH_MODEL = $(or $(MODEL),$(shell sed -n 's/^ *"models": *\[ *"\([^"]*\)".*/\1/p; /"models": *\[ *$$/{n;s/^ *"\([^"]*\)".*/\1/p;}' $(if $(filter %.json,$(CONFIG)),$(CONFIG),experiments/$(CONFIG).json) 2>/dev/null | head -n 1))
exp: evictbench
	./evictbench exp $(CONFIG) $(if $(MODEL),--model $(MODEL)) --db $(DB)
	$(MAKE) --no-print-directory exp-bench || echo "exp-bench failed: the report follows without it"
	./evictbench report --db $(DB) --out results/report

exp-bench: evictbench
	tools/exp_bench.sh $(or $(EXP_BENCH_MODEL),qwen2.5-coder-1.5b) $(DB)

# The README's picture of the report (docs/report.png, under 200 KB), from
# the quickstart's database: make exp, then make report-png.
report-png: evictbench
	tools/report_shot.sh $(DB) docs/report.png

# The CPU reproduction (docs/reproduce.md): both experiments, then the reference tables.
# About 3 hours on 2 cores; run again to resume.
cpu-sweep: evictbench
	./evictbench exp gsm8k_cpu_sweep --db results/gsm8k_cpu.db
	./evictbench exp gsm8k_cpu_batching --db results/gsm8k_cpu.db
	tools/gsm8k_cpu_reference.sh results/gsm8k_cpu.db

DB ?= results/results.db
plots: evictbench
	./evictbench plots --db $(DB) --out results/plots

tables: evictbench
	./evictbench tables --db $(DB) --out results/tables

# The static HTML report (results/report/index.html; docs/report.md).
report: evictbench
	./evictbench report --db $(DB) --out results/report

# The CUDA build: the backend library, its self-test, and ./evictbench-cuda,
# which links the library whole so its definitions replace the weak stubs of
# kernels/cuda/backend_cuda_stub.c (nvcc links, with the static CUDA runtime;
# nvcc moves archives ahead of -Xlinker options, so the whole-archive group
# names the library inside the option).
NVCC      ?= nvcc
CUDA_LIB  := kernels/cuda/build/libevictbench_cuda.a
cuda:
	$(MAKE) -C kernels/cuda
	$(MAKE) evictbench-cuda devcheck-tools

$(CUDA_LIB): FORCE
	$(MAKE) -C kernels/cuda build/libevictbench_cuda.a

evictbench-cuda: $(BUILD)/harness/cli/main.o $(BUILD)/libevictbench.a $(CUDA_LIB)
	$(NVCC) -o $@ $(BUILD)/harness/cli/main.o \
		-Xlinker --whole-archive,$(CUDA_LIB),--no-whole-archive $(BUILD)/libevictbench.a \
		-lcublas $(filter-out -fopenmp,$(LDLIBS)) -Xcompiler -fopenmp

# tools/devcheck.sh's model-level checks (GPU vs CPU vs transformers logits).
devcheck-tools: build/tools/gpu_check

# gpu_check's objects, linked with the CUDA backend or with its emulator.
GPU_CHECK_OBJ := $(BUILD)/tools/devcheck/gpu_check.o $(BUILD)/tools/devcheck/decode_compare.o \
                 $(BUILD)/tools/devcheck/graph_check.o

build/tools/gpu_check: $(GPU_CHECK_OBJ) $(BUILD)/libevictbench.a $(CUDA_LIB)
	@mkdir -p $(dir $@)
	$(NVCC) -o $@ $(GPU_CHECK_OBJ) -Xlinker --whole-archive,$(CUDA_LIB),--no-whole-archive \
		$(BUILD)/libevictbench.a -lcublas $(filter-out -fopenmp,$(LDLIBS)) -Xcompiler -fopenmp

.PHONY: devcheck-tools

# The CUDA backend on the CPU emulator (kernels/cuda/emu/README.md): the same
# kernels, run block by block on the host, so `--device cuda` and gpu_check
# run here without a GPU.  It needs the CUDA headers (the toolkit), no GPU.
# Its objects check the alignment of every typed load, and with SAN=1 every
# device access, in kernels/cuda/build-emu-san (kernels/cuda/Makefile, EMU_SAN).
CUDA_EMU_SUB := $(if $(filter 1,$(SAN)),build-emu-san,build-emu)
CUDA_EMU_DIR := kernels/cuda/$(CUDA_EMU_SUB)
CUDA_EMU_LIB := $(CUDA_EMU_DIR)/libevictbench_cuda_emu.a
EMU_LDFLAGS  := -fsanitize=alignment
# (the sub-make links the emulator's self-test and cuda_bench_batch beside the library)
$(CUDA_EMU_LIB): FORCE
	$(MAKE) -C kernels/cuda SAN=$(SAN) $(CUDA_EMU_SUB)/libevictbench_cuda_emu.a \
	    $(CUDA_EMU_SUB)/cuda_selftest $(CUDA_EMU_SUB)/cuda_bench_batch

cuda-emu: $(BUILD)/evictbench-emu $(BUILD)/tools/gpu_check-emu

# tools/devcheck.sh --emulate (docs/gpu.md): its checkpoints and peers need
# torch and transformers, which make test does not; a private environment
# holds them.  LOGS=DIR keeps the console and the logs.
HF_VENV ?= build/hf-venv
devcheck-emu:
	@$(HF_VENV)/bin/python3 -c "import torch, transformers" 2>/dev/null || \
	    { python3 -m venv $(HF_VENV) && $(HF_VENV)/bin/pip install -q torch transformers numpy safetensors; }
	HF_PYTHON=$(HF_VENV)/bin/python3 tools/devcheck.sh --emulate

$(BUILD)/evictbench-emu: $(BUILD)/harness/cli/main.o $(BUILD)/libevictbench.a $(CUDA_EMU_LIB)
	$(CXX) $(LDFLAGS) $(EMU_LDFLAGS) -o $@ $(BUILD)/harness/cli/main.o \
		-Wl,--whole-archive $(CUDA_EMU_LIB) -Wl,--no-whole-archive $(BUILD)/libevictbench.a $(LDLIBS)

$(BUILD)/tools/gpu_check-emu: $(GPU_CHECK_OBJ) $(BUILD)/libevictbench.a $(CUDA_EMU_LIB)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) $(EMU_LDFLAGS) -o $@ $(GPU_CHECK_OBJ) \
		-Wl,--whole-archive $(CUDA_EMU_LIB) -Wl,--no-whole-archive $(BUILD)/libevictbench.a $(LDLIBS)

clean:
	rm -rf build build-san evictbench evictbench-cuda
	$(MAKE) -C kernels/cuda clean

-include $(LIB_OBJ:.o=.d) $(GPU_CHECK_OBJ:.o=.d)
