#!/usr/bin/env bash
# Installs the official OpenAI JS client (npm `openai`, pinned) into a cache outside the checkout, for the
# server test that drives `braid serve` with it unchanged (tests/unit/test_server_openai_js.c). Idempotent.
#   $BRAID_CACHE/openai-js/<version>/node_modules/openai   (default ~/.cache/braid)
set -euo pipefail
VERSION=6.49.0
CACHE=${BRAID_CACHE:-$HOME/.cache/braid}
DEST=$CACHE/openai-js/$VERSION
if [ -f "$DEST/.complete" ]; then
    echo "openai-js: cached at $DEST"
    exit 0
fi
rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp"
npm install --silent --no-audit --no-fund --prefix "$DEST.tmp" "openai@$VERSION" >&2
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
touch "$DEST/.complete"
echo "openai-js: installed in $DEST"
