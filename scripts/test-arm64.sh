#!/usr/bin/env bash
# test-arm64.sh [--all] [CTEST ARGS] — braid for 64-bit ARM Linux, built and checked on an x86-64 machine: sets up
# (scripts/setup-arm64.sh), cross-builds build-arm64/ with cmake/aarch64-linux-gnu.cmake against llama.cpp's own
# arm64 build, and runs the emulated suite under qemu-aarch64 (CTest's emulator; child processes through
# binfmt_misc): the tests labelled "arm64" (tests/CMakeLists.txt: kernels, models, memory, generation; a few
# minutes on 2 cores), or with --all every test but the long ones and those that need x86-only oracles
# (libmtmd) or programs (node, chromium) — about an hour. Extra arguments go to ctest.
#
# The emulated CPU is chosen, not qemu's default "max" (SVE, SME, i8mm): QEMU_CPU (default neoverse-n1: NEON,
# dotprod, FP16 arithmetic, no SVE), so llama.cpp loads its armv8.2_2 build and braid its dotprod level, the
# pair whose NEON kernels are claimed bit-identical. BRAID_SIMD=neon BRAID_GGML_CPU=armv8.0_1 checks the other
# pair. Under "max", ggml's SVE + i8mm Q4_K / Q6_K two-row kernels (armv8.6 and up) give wrong products at qemu's
# default 512-bit vectors (right at 128 and 256): conformance_kernels fails there, not because of braid.
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
if [ "${1:-}" = --all ]; then all=1; shift; fi
scripts/setup-arm64.sh >/dev/null
# Child processes (the braid command, the oracle driver) run through binfmt_misc: without its qemu-aarch64
# entry the tests that spawn them would fail for a reason that is not braid's. Say so and stop.
if ! [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || ! grep -q '^enabled' /proc/sys/fs/binfmt_misc/qemu-aarch64; then
    echo "test-arm64: no enabled qemu-aarch64 entry in /proc/sys/fs/binfmt_misc (needs root: scripts/setup-arm64.sh);" \
         "the emulated suite did NOT run" >&2
    exit 2
fi
cache=${BRAID_CACHE:-$HOME/.cache/braid}
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B build-arm64 "${gen[@]}" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
    -DCMAKE_BUILD_TYPE=Release -DBRAID_ORACLE_DIR="$cache/oracle/3.22.1-arm64" \
    -DBRAID_MTMD_DIR=/nonexistent >/dev/null
cmake --build build-arm64 -j "$(nproc)"
cd build-arm64
export QEMU_CPU=${QEMU_CPU:-neoverse-n1}
# conformance_archs: one Mamba2-family model (F32 logits, greedy continuation, memory scenarios) and its Q8_0 /
# Q4_K files against llama.cpp; qwen35 has conformance_qwen35 (full).
export BRAID_ARCHS=${BRAID_ARCHS-mamba2-tiny,mamba2-small,mamba2-small q8_0,mamba2-small q4_K}
# conformance_qwen35: tiny and odd models (F32 logits, greedy, image span, memory), medium only as Q8_0 / Q4_K
export BRAID_QWEN35_QUICK=${BRAID_QWEN35_QUICK-1}
echo "arm64 under $(qemu-aarch64 --version | head -n 1), QEMU_CPU=$QEMU_CPU, BRAID_ARCHS=$BRAID_ARCHS," \
     "BRAID_QWEN35_QUICK=$BRAID_QWEN35_QUICK"
rc=0
start=$(date +%s)
if [ "$all" = 1 ]; then
    nice ctest --output-on-failure -LE long \
        -E '^(conformance_vision|unit_server_openai_js|unit_server_webui|unit_install_examples|unit_api_docs|compat_)' \
        -j "$(nproc)" "$@" || rc=$?
else
    nice ctest --output-on-failure -L arm64 -j "$(nproc)" "$@" || rc=$?
fi
# which braid level and ggml build were compared (every conformance test prints its pair)
echo "pairs compared: $(grep -h '^pair: ' Testing/Temporary/LastTest.log 2>/dev/null | sort -u | tr '\n' ' ')"
echo "emulated suite: $(( $(date +%s) - start )) s, ctest exit $rc"
exit $rc
