#!/usr/bin/env bash
# test-arm64.sh [CTEST ARGS] — braid for 64-bit ARM Linux, built and checked on an x86-64 machine: sets up
# (scripts/setup-arm64.sh), cross-builds build-arm64/ with cmake/aarch64-linux-gnu.cmake against llama.cpp's own
# arm64 build, and runs the unit tests and the conformance suite under qemu-aarch64 (CTest's emulator; child
# processes through binfmt_misc). Tests labelled "long" and those that need x86-only oracles (libmtmd) or
# programs (node, chromium) are left to scripts/test.sh. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-arm64.sh >/dev/null
cache=${BRAID_CACHE:-$HOME/.cache/braid}
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B build-arm64 "${gen[@]}" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
    -DCMAKE_BUILD_TYPE=Release -DBRAID_ORACLE_DIR="$cache/oracle/3.22.1-arm64" \
    -DBRAID_MTMD_DIR=/nonexistent >/dev/null
cmake --build build-arm64 -j "$(nproc)"
cd build-arm64
# what the emulated CPU is: qemu's "max" model, and the ggml variant llama.cpp picks on it
echo "arm64 under $(qemu-aarch64 --version | head -n 1)"
ctest --output-on-failure -LE long -E '^(conformance_vision|unit_server_openai_js|unit_server_webui|unit_install_examples|unit_api_docs|compat_)' \
    -j "$(nproc)" "$@"
