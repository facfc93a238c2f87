#!/usr/bin/env bash
# Builds the vision oracle: llama.cpp's libmtmd (the multimodal library, which the npm prebuilt package does
# not ship) from the oracle's source tree, linked against the PREBUILT libllama / libggml of the oracle cache
# (scripts/fetch-oracle.sh). Only tools/mtmd and its vendored hash sources are compiled; llama.cpp and ggml
# themselves are not. The conformance test tests/conformance/test_vision.c drives it through its public C API
# (mtmd.h, mtmd-helper.h). Takes about 3 minutes on 2 cores the first time; a complete build is left alone.
#
# Output: $BRAID_CACHE/mtmd/<version>/ (default ~/.cache/braid): lib/libmtmd.so, include/mtmd*.h, .complete
set -euo pipefail

VERSION=3.22.1
CACHE=${BRAID_CACHE:-$HOME/.cache/braid}
ORACLE=$CACHE/oracle/$VERSION
DEST=$CACHE/mtmd/$VERSION
JOBS=${JOBS:-$(nproc)}
[ "$JOBS" -gt 2 ] && JOBS=2 # the machines this runs on are small and shared

if [ -f "$DEST/.complete" ]; then
    echo "mtmd oracle: cached at $DEST"
    exit 0
fi
[ -f "$ORACLE/.complete" ] || { echo "mtmd oracle: run scripts/fetch-oracle.sh first ($ORACLE missing)" >&2; exit 1; }
command -v g++ >/dev/null || { echo "mtmd oracle: g++ is needed (build-essential)" >&2; exit 1; }

SRC=$ORACLE/src
M=$SRC/tools/mtmd
LIB=$ORACLE/lib
rm -rf "$DEST.tmp"
mkdir -p "$DEST.tmp/obj" "$DEST.tmp/lib" "$DEST.tmp/include"
OBJ=$DEST.tmp/obj

inc=(-I"$M" -I"$SRC/include" -I"$SRC/ggml/include" -I"$SRC/vendor" -I"$SRC/vendor/hash")
cxxflags=(-O2 -g0 -std=c++17 -fPIC -pthread -w -DLLAMA_SHARED -DLLAMA_BUILD "${inc[@]}")
cflags=(-O2 -g0 -fPIC -w "${inc[@]}")

# The library's sources are the .cpp files its CMakeLists.txt lists (clip.cpp refers to every graph builder),
# plus the vendored hashes it links (sha1.c is compiled as C++ there: it lives in a namespace).
cmds=()
for f in $(sed -n '/^add_library(mtmd$/,/^ *)$/s@^ *\([a-z0-9_./-]*\.cpp\)$@\1@p' "$M/CMakeLists.txt"); do
    o=$(echo "$f" | tr '/' '_'); cmds+=("g++ ${cxxflags[*]} -c $M/$f -o $OBJ/${o%.cpp}.o")
done
[ ${#cmds[@]} -gt 40 ] || { echo "mtmd oracle: found only ${#cmds[@]} sources in $M/CMakeLists.txt" >&2; exit 1; }
cmds+=("g++ ${cxxflags[*]} -c $SRC/vendor/hash/hash.cpp -o $OBJ/hash.o")
cmds+=("gcc ${cflags[*]} -c $SRC/vendor/hash/xxhash/xxhash.c -o $OBJ/xxhash.o")
cmds+=("gcc ${cflags[*]} -c $SRC/vendor/hash/sha256/sha256.c -o $OBJ/sha256.o")
cmds+=("g++ -x c++ ${cxxflags[*]} -c $SRC/vendor/hash/sha1/sha1.c -o $OBJ/sha1.o")

t0=$(date +%s)
echo "mtmd oracle: compiling ${#cmds[@]} sources with $JOBS jobs"
printf '%s\n' "${cmds[@]}" | xargs -P "$JOBS" -I{} sh -c '{} || exit 255'
g++ -shared -o "$DEST.tmp/lib/libmtmd.so" "$OBJ"/*.o -L"$LIB" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so \
    -l:libggml-base.so -Wl,-rpath,"$LIB" -Wl,--no-undefined -pthread
cp "$M/mtmd.h" "$M/mtmd-helper.h" "$DEST.tmp/include/"
rm -rf "$OBJ"
touch "$DEST.tmp/.complete"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
echo "mtmd oracle: built $DEST in $(( $(date +%s) - t0 )) s"
