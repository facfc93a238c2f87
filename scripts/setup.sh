#!/usr/bin/env bash
# One-step set-up on a fresh Debian 12 machine: installs every apt dependency, fetches the llama.cpp oracle
# from the npm registry into ~/.cache/braid, and builds braid (release build in build/).
# Safe to run again: installed packages and a complete oracle cache are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential clang cmake ninja-build pkg-config git ca-certificates
              libpcre2-dev libjansson-dev libmicrohttpd-dev libxxhash-dev libclang-rt-14-dev python3-numpy
              libutf8proc-dev  # only scripts/gen-unicode-table.c, which regenerates the tokenizer's table
              libedit-dev      # line editing in braid chat
              doxygen          # the API reference (scripts/docs.sh, tests/docs/test_api_docs.sh)
              libpng-dev libjpeg62-turbo-dev libwebp-dev  # image decoding (src/vision/codecs.c)
              python3-jinja2   # the reference renderer of tests/unit/test_template_corpus.c (/usr/bin/python3)
              chromium)        # headless, for the chat page's browser test (tests/unit/test_server_webui.c)
# npm fetches the oracle. A machine whose Node.js comes from elsewhere (e.g. NodeSource, which bundles npm and
# conflicts with Debian's npm package) keeps its own; only a machine without npm gets Debian's.
command -v npm >/dev/null || APT_PACKAGES+=(nodejs npm)
missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

scripts/fetch-oracle.sh
scripts/fetch-openai-js.sh  # the OpenAI JS client the server test drives braid serve with
scripts/build-mtmd-oracle.sh # llama.cpp's libmtmd from the oracle's source tree: the vision oracle (~3 min once)
scripts/fetch-npm.sh playwright-core playwright-core 1.65.1  # drives chromium in the chat page's test
scripts/build.sh build Release
