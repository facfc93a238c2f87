#!/usr/bin/env bash
# build.sh DIR [Release|Debug|Sanitize|Fuzz] — configures and builds one build tree.
#   Release   optimized (default), gcc
#   Sanitize  ASan + UBSan, clang, -O1
#   Fuzz      libFuzzer targets, clang
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
kind=${2:-Release}
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
case "$kind" in
    Release)  cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null ;;
    Debug)    cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Debug >/dev/null ;;
    Sanitize) CC=clang cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRAID_SANITIZE=ON \
                  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" >/dev/null ;;
    Fuzz)     CC=clang cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRAID_FUZZ=ON >/dev/null ;;
    *) echo "build.sh: unknown kind $kind" >&2; exit 2 ;;
esac
cmake --build "$dir" -j "$(nproc)"
