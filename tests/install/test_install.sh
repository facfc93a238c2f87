#!/usr/bin/env bash
# install_examples: installs this build into a scratch prefix with `cmake --install`, then builds examples/ the
# way an outside program would — by pkg-config (shared, and static with --static) and by find_package(braid)
# (examples/CMakeLists.txt) — and runs each on a small generated model. Also checks what the installed
# library exposes: a versioned soname, braid_* symbols only, and that the programs load the installed copy.
# Usage: test_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fails=0 passes=0
check() { # check NAME COMMAND...: runs a check, counts it, prints its output on failure
    local name=$1; shift
    if out=$("$@" 2>&1); then passes=$((passes + 1)); echo "ok   $name"
    else fails=$((fails + 1)); echo "FAIL $name"; printf '%s\n' "$out" | sed 's/^/     /'; fi
}

cmake --install "$build" --prefix "$prefix" >"$work/install.log"
libdir=$(dirname "$(find "$prefix" -name braid.pc | head -1)")/..
export PKG_CONFIG_PATH=$libdir/pkgconfig

check "header installed" test -f "$prefix/include/braid.h"
check "libbraid.a installed" test -f "$libdir/libbraid.a"
check "soname libbraid.so.0" bash -c "readelf -d '$libdir/libbraid.so' | grep -q 'SONAME.*\[libbraid.so.0\]'"
# Every defined dynamic symbol is braid_* (the version node BRAID_0 itself is listed as an absolute symbol).
check "exports braid_* only" bash -c "! nm -D --defined-only '$libdir/libbraid.so' | awk '{print \$3}' \
    | grep -v '^braid_' | grep -v '^BRAID_0$' | grep ."
# ... and every function braid.h declares is there (a definition in a file that does not include braid.h
# would be hidden).
check "exports every braid.h function" bash -c "! comm -13 \
    <(nm -D --defined-only '$libdir/libbraid.so' | awk '{print \$3}' | sed 's/@.*//' | sort -u) \
    <(grep -o 'braid_[a-z_0-9]*(' '$prefix/include/braid.h' | tr -d '(' | sort -u) | grep ."
check "no server libraries in libbraid" bash -c "! readelf -d '$libdir/libbraid.so' | grep -E 'jansson|microhttpd'"
check "pkg-config knows braid" pkg-config --exists braid

model=$work/tiny.gguf
"$build/braid" gen-model --arch qwen35 --preset tiny --seed 7 -o "$model" >/dev/null

cflags=(-std=c11 -Wall -Wextra -Werror -O1)
for ex in simple multi_seq session; do
    # shellcheck disable=SC2046
    check "pkg-config build $ex" cc "${cflags[@]}" "$src/examples/$ex.c" $(pkg-config --cflags --libs braid) \
        -Wl,-rpath,"$libdir" -o "$work/$ex"
done
# shellcheck disable=SC2046
check "pkg-config --static build simple" cc "${cflags[@]}" "$src/examples/simple.c" -static-libgcc \
    $(pkg-config --cflags braid) -L"$libdir" -Wl,-Bstatic -lbraid -Wl,-Bdynamic \
    $(pkg-config --static --libs-only-l braid | sed 's/-lbraid//') -o "$work/simple_static"
check "loads the installed libbraid.so" bash -c "ldd '$work/simple' | grep -q '$libdir/libbraid.so.0'"
check "static build needs no libbraid.so" bash -c "! ldd '$work/simple_static' | grep -q libbraid"

check "run simple" "$work/simple" "$model" "Hello world" 8
check "run simple (static)" "$work/simple_static" "$model" "Hello world" 8
check "simple shared = static" bash -c "diff <('$work/simple' '$model' 'Hello world' 8) \
    <('$work/simple_static' '$model' 'Hello world' 8)"
check "run multi_seq" "$work/multi_seq" "$model" "Hello world" 3 12
check "run session" "$work/session" "$model" "Hello world" "$work/state.bin"

check "find_package configure" cmake -S "$src/examples" -B "$work/ex" -DCMAKE_PREFIX_PATH="$prefix"
check "find_package build" cmake --build "$work/ex"
check "run find_package simple" "$work/ex/simple" "$model" "Hello" 4
check "run find_package multi_seq (static)" "$work/ex/multi_seq" "$model" "Hello" 2 6
check "run find_package session" "$work/ex/session" "$model" "Hello" "$work/state2.bin"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
