#!/usr/bin/env bash
# setup-arm64.sh — what scripts/test-arm64.sh needs beyond scripts/setup.sh, on an x86-64 Debian 12 machine:
# the aarch64 cross compiler, the arm64 -dev packages of braid's libraries (multiarch: dpkg --add-architecture
# arm64), qemu-user to run arm64 programs, the kernel's binfmt_misc entry that hands arm64 executables to qemu
# (tests start braid and the oracle driver as child processes), and llama.cpp's prebuilt arm64 library
# (scripts/fetch-oracle.sh arm64). Safe to run again: what is there is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo

PACKAGES=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user qemu-user-binfmt
          libpcre2-dev:arm64 libxxhash-dev:arm64 libpng-dev:arm64 libjpeg62-turbo-dev:arm64 libwebp-dev:arm64
          libjansson-dev:arm64 libmicrohttpd-dev:arm64 libedit-dev:arm64)
dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# binfmt_misc: in a container it may be unmounted and empty; mounting and registering need root.
binfmt=/proc/sys/fs/binfmt_misc
if [ ! -e "$binfmt/qemu-aarch64" ]; then
    [ -e "$binfmt/register" ] || $SUDO mount -t binfmt_misc binfmt_misc "$binfmt"
    $SUDO sh -c "cat /usr/lib/binfmt.d/qemu-aarch64.conf > $binfmt/register"
fi
[ -e "$binfmt/qemu-aarch64" ] || { echo "setup-arm64: cannot register qemu-aarch64 with binfmt_misc" >&2; exit 1; }

scripts/fetch-oracle.sh arm64
