#!/usr/bin/env bash
# fuzz.sh [SECONDS] — builds the libFuzzer targets and runs each for SECONDS (default 60) on its seed corpus
# (fuzz/corpus/NAME), printing executions and crashes. Exits non-zero if any target finds a crash.
# The mutations follow a fixed seed (FUZZ_SEED, default 1), so a run's inputs are a prefix of one sequence fixed
# by the code and the corpus: CI replays what a developer can fuzz longer with the same seed, and a crash CI
# reports is found again by the same command. Hunting for new bugs wants other seeds: FUZZ_SEED=0 lets libFuzzer
# pick one.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
seed=${FUZZ_SEED:-1}
scripts/build.sh build-fuzz Fuzz
status=0
for bin in build-fuzz/fuzz/fuzz_*; do
    [ -x "$bin" ] || continue
    name=$(basename "$bin"); name=${name#fuzz_}
    seeds=fuzz/corpus/$name
    work=$(mktemp -d)
    [ -d "$seeds" ] && cp -r "$seeds"/. "$work"/ 2>/dev/null || true
    echo "== fuzz $name for ${secs}s, seed $seed"
    # A state of the real-model target (three sequences, checkpoints, rollback states) is larger than the others.
    max_len=65536; [ "$name" = state_model ] && max_len=262144
    if ! "$bin" -seed="$seed" -max_total_time="$secs" -max_len="$max_len" -rss_limit_mb=2048 -artifact_prefix="build-fuzz/$name-" \
            -print_final_stats=1 "$work" 2>"build-fuzz/$name.log"; then
        status=1; echo "fuzz $name: CRASH (see build-fuzz/$name.log)"; tail -n 40 "build-fuzz/$name.log"
    fi
    grep -E '^stat::number_of_executed_units|^Done' "build-fuzz/$name.log" || true
    rm -rf "$work"
done
exit $status
