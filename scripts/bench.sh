#!/usr/bin/env bash
# bench.sh [BUILD_DIR] — braid against llama.cpp on the issue-5 benchmark shape: a ~0.65B-class gen-model
# qwen35 (hidden 1024, 24 layers, 3 of 4 layers linear attention: the "0.5b" preset) in F16, Q8_0 and Q4_K,
# prompt processing of 512 tokens and generation of 128, on $THREADS threads (default 2). ARCHS names other
# gen-model architectures to run their "0.5b" presets the same way (the hybrid family: mamba2, nemotron_h,
# nemotron_h_moe, granitehybrid, falcon-h1, lfm2, ...; MoE presets are ~1B total / ~0.3B active). The models are
# generated once into $BRAID_CACHE/bench (default ~/.cache/braid/bench). For each model it runs
# bench_llama_vs_braid (both engines and the bandwidth in one process), then prints a summary table.
# Environment: ARCHS (default qwen35), THREADS, REPS (default 3), TYPES (default "f16 q8_0 q4_k"), PP (512),
# TG (128). A TYPES entry is
#   - a gen-model --type name (f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs mxfp4):
#     every matrix in that type (a pure file: what isolates one type's kernels), generated directly;
#   - a llama.cpp mix preset (q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s q5_k_m, any case): the arch's F16 file
#     quantized with `braid quantize` (llama-quantize's per-tensor types and bytes, no importance matrix), as
#     the files people download are.
# NEW_TYPES=1 sets TYPES to the types of issue 18 and the common mixes. BRAID_SIMD=avx2 BRAID_GGML_CPU=haswell
# runs the AVX2 pair on an AVX-512 machine (add BRAID_AVX_VNNI=0 for braid without AVX-VNNI, as on CPUs that
# lack it).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
threads=${THREADS:-2}
reps=${REPS:-3}
types=${TYPES:-"f16 q8_0 q4_k"}
[ "${NEW_TYPES:-0}" = 1 ] && types="q4_1 q5_0 q5_1 q2_k q3_k iq4_nl iq4_xs mxfp4 q3_k_m q4_k_m q5_k_m"
archs=${ARCHS:-qwen35}
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
for arch in $archs; do
for t in $types; do
    model="$cache/$arch-0.5b-$t.gguf"
    if [ ! -s "$model" ]; then
        case "$t" in
        *_[sSmMlL])
            f16="$cache/$arch-0.5b-f16.gguf"
            if [ ! -s "$f16" ]; then
                echo "== generating $f16" >&2
                "$build/braid" gen-model --arch "$arch" --preset 0.5b --type f16 -o "$f16.tmp" >&2
                mv "$f16.tmp" "$f16"
            fi
            echo "== quantizing $f16 to ${t^^}" >&2
            "$build/braid" quantize "$f16" "$model.tmp" "${t^^}" >&2
            ;;
        *)
            echo "== generating $model" >&2
            "$build/braid" gen-model --arch "$arch" --preset 0.5b --type "$t" -o "$model.tmp" >&2
            ;;
        esac
        mv "$model.tmp" "$model"
    fi
    echo "== $arch $t"
    out=$("$build/bench/bench_llama_vs_braid" -m "$model" -t "$threads" -p "$pp" -n "$tg" -r "$reps") || true
    echo "$out" | grep -v '^SUMMARY'
    echo
    line=$(echo "$out" | grep '^SUMMARY' || true)
    # a mix is labelled with its preset (the SUMMARY names the type holding most of the weight bytes)
    case "$t" in *_[sSmMlL]) line=$(echo "$line" | sed "s/^SUMMARY [^ ]*/SUMMARY ${t^^}/") ;; esac
    [ -n "$line" ] && summary+=("$arch $line")
done
done

echo "== summary: 0.5b presets, $threads threads, pp$pp / tg$tg, mean of $reps runs," \
    "BRAID_SIMD=${BRAID_SIMD:-best} BRAID_GGML_CPU=${BRAID_GGML_CPU:-best} BRAID_AVX_VNNI=${BRAID_AVX_VNNI:-1}," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo "   (ratio: the median of the per-repetition ratios, the engines alternating; pp roof: multiply-adds per"
echo "    token over the register-only peak; tg roof: weight + recurrent state bytes"
echo "    per token over the measured bandwidth; braid% / llama%: each engine's share of the roofline)"
printf '%-14s %-7s %9s %9s %6s %8s %7s %7s %9s %9s %6s %8s %7s %7s %7s\n' arch type "pp braid" "pp llama" ratio \
    "pp roof" "braid%" "llama%" "tg braid" "tg llama" ratio "tg roof" "braid%" "llama%" "GB/s"
for line in "${summary[@]}"; do
    # arch SUMMARY type pp_b pp_l ratio tg_b tg_l ratio bw roof braid% llama% pp_roof pp_braid% pp_llama%
    set -- $line
    printf '%-14s %-7s %9s %9s %6s %8s %6s%% %6s%% %9s %9s %6s %8s %6s%% %6s%% %7s\n' "$1" "$3" "$4" "$5" "$6" \
        "${14}" "${15}" "${16}" "$7" "$8" "$9" "${11}" "${12}" "${13}" "${10}"
done
