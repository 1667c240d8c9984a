# Cross-compiling for 64-bit Arm Linux with Debian's g++-aarch64-linux-gnu, for example:
#   cmake -S . -B build-aarch64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=scripts/aarch64-linux-gnu.cmake
# Target libraries come from Debian multiarch (dpkg --add-architecture arm64, then e.g.
# apt-get install libpcre2-dev:arm64 libgtest-dev:arm64), which puts them in
# /usr/lib/aarch64-linux-gnu; the compiler's own C and C++ runtime is in /usr/aarch64-linux-gnu.
# scripts/test_aarch64.sh installs all of it, builds and runs the tests under qemu-user.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# find_package/find_library look in /usr/lib/aarch64-linux-gnu (the multiarch directory) and
# never in the host's /usr/lib/x86_64-linux-gnu; arch-independent packages (nlohmann-json, CLI11,
# Eigen) are found in /usr/share as usual. Programs are the host's.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config (PCRE2) reads the target's .pc files, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")

# Test executables (gtest discovery and ctest) run under user-mode QEMU. With the multiarch
# libc6:arm64 installed (it comes with libpcre2-dev:arm64), the target's loader and libraries are
# at their native paths, so QEMU needs no prefix. Do not add "-L /usr/aarch64-linux-gnu" then: that
# loader (the cross toolchain's glibc build) would load the multiarch libc.so.6, another build,
# and programs hang in their first thread start. The prefix is only for hosts without multiarch.
if(EXISTS /lib/ld-linux-aarch64.so.1)
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
else()
  set(CMAKE_CROSSCOMPILING_EMULATOR "qemu-aarch64;-L;/usr/aarch64-linux-gnu")
endif()
