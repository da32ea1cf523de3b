# peer_build.sh - sourced by tools/bench_peer.sh and tools/bench_shared.sh:
# llama.cpp's llama-bench and llama-batched-bench, built once from the
# llama.cpp source that the llama-cpp-python sdist vendors (the version
# pinned here, the same one tools/golden/gen_tokens.py uses), CPU only.
# Expects die() and PEER_DIR; sets LLAMA_BENCH and LLAMA_BATCHED.

PEER_VERSION=0.3.36
SRC_DIR=$PEER_DIR/llama_cpp_python-$PEER_VERSION/vendor/llama.cpp
CMAKE_DIR=$PEER_DIR/llama.cpp-$PEER_VERSION
LLAMA_BENCH=$CMAKE_DIR/bin/llama-bench
LLAMA_BATCHED=$CMAKE_DIR/bin/llama-batched-bench

build_llama_bench() {
    command -v cmake >/dev/null 2>&1 || die "cmake not found (apt-get install cmake)"
    command -v c++ >/dev/null 2>&1 || die "no C++ compiler (c++) found (apt-get install g++)"
    command -v cc >/dev/null 2>&1 || die "no C compiler (cc) found (apt-get install gcc)"
    mkdir -p "$PEER_DIR"
    sdist=$PEER_DIR/llama_cpp_python-$PEER_VERSION.tar.gz
    if [ ! -f "$sdist" ]; then
        echo "peer: downloading the llama-cpp-python $PEER_VERSION source package" >&2
        python3 -m pip download --quiet --no-deps --no-binary :all: \
            "llama-cpp-python==$PEER_VERSION" -d "$PEER_DIR" >&2 ||
            die "cannot download llama-cpp-python==$PEER_VERSION with pip (no network or no package index?)"
        [ -f "$sdist" ] || die "pip did not produce $sdist"
    fi
    if [ ! -f "$SRC_DIR/CMakeLists.txt" ]; then
        tar -xzf "$sdist" -C "$PEER_DIR" "llama_cpp_python-$PEER_VERSION/vendor/llama.cpp" ||
            die "cannot unpack $sdist"
    fi
    # CPU only, tuned for this CPU, nothing fetched at configure or run time:
    # no CUDA, no OpenSSL/HTTP (this llama.cpp has no curl option any more), no
    # tests, examples, server or unified app.
    echo "peer: building llama-bench (CPU, Release, native; once)" >&2
    cmake -S "$SRC_DIR" -B "$CMAKE_DIR" -DCMAKE_BUILD_TYPE=Release \
        -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF \
        -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON \
        -DBUILD_SHARED_LIBS=OFF >"$CMAKE_DIR.configure.log" 2>&1 ||
        die "cmake configure failed; see $CMAKE_DIR.configure.log"
    cmake --build "$CMAKE_DIR" --target llama-bench -j "${PEER_JOBS:-2}" \
        >"$CMAKE_DIR.build.log" 2>&1 || die "llama-bench build failed; see $CMAKE_DIR.build.log"
    [ -x "$LLAMA_BENCH" ] || die "the build did not produce $LLAMA_BENCH"
}

# llama-batched-bench from the same build; a failed build leaves it absent (n/a).
build_llama_batched() {
    [ -x "$LLAMA_BATCHED" ] && return 0
    [ -x "$LLAMA_BENCH" ] || build_llama_bench
    echo "peer: building llama-batched-bench (once)" >&2
    cmake --build "$CMAKE_DIR" --target llama-batched-bench -j "${PEER_JOBS:-2}" \
        >"$CMAKE_DIR.batched.log" 2>&1 ||
        echo "peer: llama-batched-bench did not build (see $CMAKE_DIR.batched.log): n/a" >&2
}
