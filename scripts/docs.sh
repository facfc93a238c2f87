#!/usr/bin/env bash
# docs.sh [OUT_DIR] — the API reference generated from include/braid.h by Doxygen (Debian's doxygen, installed
# by scripts/setup.sh): HTML in OUT_DIR/html (default build/docs), XML in OUT_DIR/xml for tools and tests.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/docs}
mkdir -p "$out"
BRAID_DOCS_OUT=$(cd "$out" && pwd) doxygen docs/api/Doxyfile
echo "API reference: $out/html/braid_8h.html"
