#!/usr/bin/env bash
# The test command: builds (release, gcc) and runs every CTest test — unit tests and the conformance suite
# against llama.cpp — then the conformance suite once more on braid's AVX2 path against llama.cpp's AVX2
# build. Run scripts/setup.sh once first. Extra arguments go to ctest (e.g. -R kv, -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh build Release
cd build
ctest --output-on-failure -LE long -j "$(nproc)" "$@"
# The other pair of float orders: braid's AVX2 level against llama.cpp's AVX2 build (libggml-cpu-haswell.so),
# forced, so that every run checks both braid's x86 paths whatever the CPU (on an AVX-512 one the pass above
# checked avx512 against an AVX-512 build). A CPU that cannot run them reports these tests as skipped.
if [ "$(uname -m)" = x86_64 ]; then
    echo "conformance again with BRAID_SIMD=avx2 BRAID_GGML_CPU=haswell:"
    BRAID_SIMD=avx2 BRAID_GGML_CPU=haswell ctest --output-on-failure -L conformance -LE long -j "$(nproc)" "$@"
fi
