#!/usr/bin/env bash
# bench.sh [BUILD_DIR] — braid against llama.cpp on the issue-5 benchmark shape: a ~0.65B-class gen-model
# qwen35 (hidden 1024, 24 layers, 3 of 4 layers linear attention: the "0.5b" preset) in F16, Q8_0 and Q4_K,
# prompt processing of 512 tokens and generation of 128, on $THREADS threads (default 2). The models are
# generated once into $BRAID_CACHE/bench (default ~/.cache/braid/bench). For each type it runs
# bench_llama_vs_braid (both engines and the bandwidth in one process), then prints a summary table.
# Environment: THREADS, REPS (default 3), TYPES (gen-model --type names, default "f16 q8_0 q4_k"), PP (512),
# TG (128).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
threads=${THREADS:-2}
reps=${REPS:-3}
types=${TYPES:-"f16 q8_0 q4_k"}
pp=${PP:-512}
tg=${TG:-128}
cache=${BRAID_CACHE:-$HOME/.cache/braid}/bench
mkdir -p "$cache"

[ -x "$build/braid" ] && [ -x "$build/bench/bench_llama_vs_braid" ] || {
    echo "bench.sh: build first (scripts/build.sh $build Release)" >&2
    exit 1
}

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (figures mean little if it exceeds the cores)"
summary=()
for t in $types; do
    model="$cache/qwen35-0.5b-$t.gguf"
    if [ ! -s "$model" ]; then
        echo "== generating $model" >&2
        "$build/braid" gen-model --arch qwen35 --preset 0.5b --type "$t" -o "$model.tmp" >&2
        mv "$model.tmp" "$model"
    fi
    echo "== $t"
    out=$("$build/bench/bench_llama_vs_braid" -m "$model" -t "$threads" -p "$pp" -n "$tg" -r "$reps") || true
    echo "$out" | grep -v '^SUMMARY'
    echo
    line=$(echo "$out" | grep '^SUMMARY' || true)
    [ -n "$line" ] && summary+=("$line")
done

echo "== summary: qwen35 0.5b preset, $threads threads, pp$pp / tg$tg, mean of $reps runs"
printf '%-6s %10s %10s %7s %10s %10s %7s %8s %9s %7s %7s\n' type "pp braid" "pp llama" ratio "tg braid" \
    "tg llama" ratio "GB/s" "roof t/s" "braid%" "llama%"
for line in "${summary[@]}"; do
    # SUMMARY type pp_b pp_l ratio tg_b tg_l ratio bw roof braid% llama%
    set -- $line
    printf '%-6s %10s %10s %7s %10s %10s %7s %8s %9s %6s%% %6s%%\n' "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" \
        "${10}" "${11}" "${12}"
done
