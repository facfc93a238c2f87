# aarch64-linux-gnu.cmake — CMake toolchain file for cross-building braid for 64-bit ARM Linux on an x86-64
# Debian host (scripts/test-arm64.sh): Debian's gcc-aarch64-linux-gnu, the arm64 -dev packages installed
# multiarch (dpkg --add-architecture arm64), and qemu-user to run what was built (tests, CTest's emulator).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
# pkg-config must see the arm64 .pc files only (the host's would link x86-64 libraries)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
# Programs built here run under qemu; -L makes it find the arm64 loader and libraries of the multiarch tree.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
