# evictbench - build, test, bench.  See README.md.
#
#   make deps      install build/runtime dependencies and the models (MODELS="a b")
#   make all       build ./evictbench
#   make test      the whole suite (SAN=1: under ASan + UBSan)
#   make bench     tokens/s, policy overhead, KV memory table
#   make cuda      build the CUDA backend (nvcc + cuBLAS)

CC      ?= cc
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp -I. -I/usr/include/openblas
LDLIBS  += -lopenblas -lcjson -lsqlite3 -lm -fopenmp

BUILD   := build
ifeq ($(SAN),1)
BUILD   := build-san
CFLAGS  += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif

LIB_SRC := $(wildcard util/*.c model/*.c kernels/cpu/*.c policies/*.c datasets/*.c harness/*.c)
LIB_SRC := $(filter-out harness/main.c,$(LIB_SRC))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all deps test bench clean cuda fuzz exp data plots tables

all: evictbench

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libevictbench.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/evictbench: $(BUILD)/harness/main.o $(BUILD)/libevictbench.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

evictbench: $(BUILD)/evictbench
	@if [ "$(SAN)" != "1" ]; then rm -f evictbench && cp $(BUILD)/evictbench evictbench; fi

$(BUILD)/tests/%: tests/%.c $(BUILD)/libevictbench.a tests/test.h tests/test_util.h tests/tok_fixture.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(BUILD)/libevictbench.a $(LDLIBS) -o $@

# Every test program runs from the repository root; the suite fails if any fails.
test: $(TEST_BIN) $(BUILD)/evictbench
	@EVICTBENCH_BIN=$(BUILD)/evictbench tests/run_all.sh $(TEST_BIN)

# The runtime table, then the policy table of issue 4 (2,048 generated tokens
# per row: roughly 15 minutes on 2 cores).
BENCH_POLICIES ?= fullkv,streamingllm,h2o,h2o-rkv,snapkv-decode,rkv,skipkv-sent,skipkv,seal,vase-attnv,vase-dkv,rpc,beaconkv
bench: evictbench
	./evictbench bench --model smollm2-135m --policies $(BENCH_POLICIES) --budgets 256,512,1024

# MODELS: registry names to fetch (default: the quickstart's and the tests' models)
deps:
	tools/deps.sh $(MODELS)

fuzz:
	tools/fuzz/build.sh

data:
	tools/fetch_data.sh

CONFIG ?= quickstart
exp: evictbench
	./evictbench exp $(CONFIG)

DB ?= results/results.db
plots: evictbench
	./evictbench plots --db $(DB) --out results/plots

tables: evictbench
	./evictbench tables --db $(DB) --out results/tables

cuda:
	$(MAKE) -C kernels/cuda

clean:
	rm -rf build build-san evictbench

-include $(LIB_OBJ:.o=.d)
