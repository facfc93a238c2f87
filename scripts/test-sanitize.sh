#!/usr/bin/env bash
# Runs the unit tests under ASan + UBSan (clang). Conformance tests are left to the release build: they link
# llama.cpp's prebuilt library, which is not ours to instrument.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh build-san Sanitize
cd build-san
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --output-on-failure -L unit -LE long -j "$(nproc)" "$@"
