#!/usr/bin/env bash
# Fetches the reference implementation (llama.cpp, prebuilt by node-llama-cpp) from the npm registry into a
# cache outside the checkout, so fresh clones (CI) reuse one download. Versions are pinned and each tarball is
# checked against its published sha1 before it is unpacked. Idempotent: a complete cache is left untouched.
#
# Layout of $BRAID_CACHE/oracle/<version>/ (default ~/.cache/braid):
#   lib/       libllama.so, libggml*.so (and the CPU backend variants loaded at run time)
#   include/   llama.h, ggml*.h from the matching source tree
#   src/       llama.cpp's source (git clone of the bundle) — facts and vocab test files, never built
# `fetch-oracle.sh arm64` installs the same version's aarch64 build into oracle/<version>-arm64/ instead: the
# oracle scripts/test-arm64.sh runs under qemu-aarch64 beside braid's cross-built tests.
set -euo pipefail

VERSION=3.22.1
SRC_PKG=node-llama-cpp
SRC_SHA1=e908932762f21939024263d58f1d6dc3e88b23e6
CACHE=${BRAID_CACHE:-$HOME/.cache/braid}
case "${1:-x64}" in
    x64)   BIN_PKG=@node-llama-cpp/linux-x64 BIN_SHA1=cf9934edd4cf034260358123d65f9f8c9fb6b5fd
           BIN_DIR=linux-x64 DEST=$CACHE/oracle/$VERSION ;;
    arm64) BIN_PKG=@node-llama-cpp/linux-arm64 BIN_SHA1=13a4f1488909b223cf53aa102c645daef0296188
           BIN_DIR=linux-arm64 DEST=$CACHE/oracle/$VERSION-arm64 ;;
    *) echo "fetch-oracle.sh: unknown architecture '$1' (x64 or arm64)" >&2; exit 2 ;;
esac
if [ -f "$DEST/.complete" ]; then
    echo "oracle: cached at $DEST"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

fetch() { # package, expected sha1 -> prints the tarball path
    local pkg=$1 sha=$2 tgz
    tgz=$(npm pack --silent "$pkg@$VERSION" | tail -n 1)
    echo "$sha  $tgz" | sha1sum -c --quiet - >&2 || { echo "oracle: checksum mismatch for $pkg" >&2; exit 1; }
    echo "$tgz"
}

bin_tgz=$(fetch "$BIN_PKG" "$BIN_SHA1")
src_tgz=$(fetch "$SRC_PKG" "$SRC_SHA1")

rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp/lib" "$DEST.tmp/include"
mkdir bin src
tar -xzf "$bin_tgz" -C bin
tar -xzf "$src_tgz" -C src
cp -a "bin/package/bins/$BIN_DIR/." "$DEST.tmp/lib/"
git -c advice.detachedHead=false clone --quiet src/package/llama/gitRelease.bundle "$DEST.tmp/src"
cp "$DEST.tmp/src/include/llama.h" "$DEST.tmp/include/"
cp "$DEST.tmp/src/ggml/include/"*.h "$DEST.tmp/include/"
touch "$DEST.tmp/.complete"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
echo "oracle: installed at $DEST"
