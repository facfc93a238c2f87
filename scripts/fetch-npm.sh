#!/usr/bin/env bash
# Installs one pinned npm package into a cache outside the checkout, for the tests that drive braid serve from
# Node.js (the OpenAI JS client, playwright-core for the browser test). Idempotent.
#   scripts/fetch-npm.sh DIR PACKAGE VERSION  ->  $BRAID_CACHE/DIR/VERSION/node_modules/PACKAGE  (~/.cache/braid)
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 DIR PACKAGE VERSION" >&2; exit 2; }
DIR=$1 PKG=$2 VERSION=$3
CACHE=${BRAID_CACHE:-$HOME/.cache/braid}
DEST=$CACHE/$DIR/$VERSION
if [ -f "$DEST/.complete" ]; then
    echo "$DIR: cached at $DEST"
    exit 0
fi
rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp"
npm install --silent --no-audit --no-fund --prefix "$DEST.tmp" "$PKG@$VERSION" >&2
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
touch "$DEST/.complete"
echo "$DIR: installed in $DEST"
