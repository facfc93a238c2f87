#!/usr/bin/env bash
# insn-arm64.sh [ARCH PRESET TYPE ...] — instructions per generated token of the arm64 build, braid against
# llama.cpp's arm64 build on the same random-weight GGUF, counted by qemu-aarch64 with scripts/qemu_insn.c
# (emulated time says nothing about an ARM core; the instruction count is the proxy the issue asks for).
# Needs build-arm64/ (scripts/test-arm64.sh). Each engine runs one thread, a short prompt, then 8 and then 40
# greedy tokens; (count(40) - count(8)) / 32 is the decode cost per token, with loading and the prompt
# subtracted out. braid: `braid run --temp 0`; llama.cpp: the oracle driver's greedy command (its logits
# output included). QEMU_CPU as test-arm64.sh (default neoverse-n1: braid's dotprod level, ggml's armv8.2_2).
# PROMPT=1: instructions per prompt token instead: batches of 8 and of 72 tokens (braid bench -p N -n 0 -r 1,
# which decodes the batch twice: its full-size warm-up and the measured run; the oracle's decode of N tokens,
# logits of the last): braid (count(72) - count(8)) / 128, llama.cpp (count(72) - count(8)) / 64.
set -euo pipefail
cd "$(dirname "$0")/.."
prompt=${PROMPT:-0}
b=build-arm64
cache=${BRAID_CACHE:-$HOME/.cache/braid}
export QEMU_CPU=${QEMU_CPU:-neoverse-n1} BRAID_ORACLE_DIR="$cache/oracle/3.22.1-arm64"
cc -std=c11 -O2 -shared -fPIC -o "$b/qemu_insn.so" scripts/qemu_insn.c
q() { qemu-aarch64 -L / -plugin "$b/qemu_insn.so" "$@" 2>&1 >/dev/null | sed -n 's/^qemu_insn: \([0-9]*\) instructions$/\1/p'; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
[ $# -gt 0 ] || set -- qwen35 small q8_0 qwen35 small q4_k qwen35 small f32
printf '%-8s %-6s %-5s %14s %14s %7s\n' arch preset type "braid insn/tok" "llama insn/tok" ratio
while [ $# -ge 3 ]; do
    arch=$1 preset=$2 type=$3; shift 3
    f="$dir/$arch-$preset-$type.gguf"
    # generated natively if there is an x86 build (the same bytes; much faster than emulated)
    gen=$b/braid; [ -x build/braid ] && gen=build/braid
    if [ "$gen" = build/braid ]; then "$gen" gen-model -o "$f" --arch "$arch" --preset "$preset" --type "$type" >/dev/null
    else qemu-aarch64 -L / "$gen" gen-model -o "$f" --arch "$arch" --preset "$preset" --type "$type" >/dev/null; fi
    declare -A bi=() bt=() li=()
    if [ "$prompt" = 1 ]; then
        for n in 8 72; do
            qemu-aarch64 -L / -plugin "$b/qemu_insn.so" "$b/braid" bench -m "$f" -p $n -n 0 -r 1 -t 1 --bw-mib 16 \
                >/dev/null 2>"$dir/err"
            bi[$n]=$(sed -n 's/^qemu_insn: \([0-9]*\) instructions$/\1/p' "$dir/err")
            { echo "decode $n"; for ((i = 0; i < n; i++)); do echo "$((100 + i)) $i 0 $([ $i = $((n - 1)) ] && echo 1 || echo 0)"; done; } > "$dir/script"
            li[$n]=$(q "$b/tests/oracle" -m "$f" --threads 1 < "$dir/script")
        done
        bpt=$(( (bi[72] - bi[8]) / 128 )); lpt=$(( (li[72] - li[8]) / 64 ))
        printf '%-8s %-6s %-5s %14d %14d %7.2f  (per prompt token)\n' "$arch" "$preset" "$type" "$bpt" "$lpt" \
            "$(echo "$bpt / $lpt" | bc -l)"
        unset bi bt li
        continue
    fi
    for n in 8 40; do
        out=$(qemu-aarch64 -L / -plugin "$b/qemu_insn.so" "$b/braid" run -m "$f" -p "The quick brown fox" -n $n \
              --temp 0 -t 1 --json 2>"$dir/err")
        bi[$n]=$(sed -n 's/^qemu_insn: \([0-9]*\) instructions$/\1/p' "$dir/err")
        bt[$n]=$(( $(printf '%s' "$out" | grep -o '"tokens":\[[^]]*\]' | tr -cd , | wc -c) + 1 ))
        { echo "decode 8"; for i in 0 1 2 3 4 5 6 7; do echo "$((100 + i)) $i 0 $([ $i = 7 ] && echo 1 || echo 0)"; done
          echo "greedy $n 0"; } > "$dir/script"
        li[$n]=$(q "$b/tests/oracle" -m "$f" --threads 1 < "$dir/script")
    done
    bpt=$(( (bi[40] - bi[8]) / (bt[40] - bt[8]) )); lpt=$(( (li[40] - li[8]) / 32 ))
    printf '%-8s %-6s %-5s %14d %14d %7.2f\n' "$arch" "$preset" "$type" "$bpt" "$lpt" "$(echo "$bpt / $lpt" | bc -l)"
    [ "${bt[40]}" -lt 40 ] && echo "  (braid stopped at ${bt[40]} tokens: per-token figure over $(( bt[40] - bt[8] )))"
    unset bi bt li
done
