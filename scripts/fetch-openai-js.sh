#!/usr/bin/env bash
# Installs the official OpenAI JS client (npm `openai`, pinned) into a cache outside the checkout, for the
# server test that drives `braid serve` with it unchanged (tests/unit/test_server_openai_js.c). Idempotent.
#   $BRAID_CACHE/openai-js/<version>/node_modules/openai   (default ~/.cache/braid)
exec "$(dirname "$0")/fetch-npm.sh" openai-js openai 6.49.0
