#!/usr/bin/env bash
# The test command: builds (release, gcc) and runs every CTest test — unit tests and the conformance suite
# against llama.cpp. Run scripts/setup.sh once first. Extra arguments go to ctest (e.g. -R kv, -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh build Release
cd build
ctest --output-on-failure -LE long -j "$(nproc)" "$@"
