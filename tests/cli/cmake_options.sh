#!/usr/bin/env bash
# The configure options of a lean (device) build: micro_bench is skipped, with a message, when
# Google Benchmark or Eigen is missing and EDGELM_MICRO_BENCH=ON then refuses to configure; tests
# OFF looks for no GoogleTest; EDGELM_PCRE2_ROOT finds PCRE2 in a prefix without pkg-config, and a
# bad prefix or option value, or an Android build without the prefix, is a configure error naming
# it. Configures only (one build folder, every option given each time, so each run is a fraction of
# a second after the first).
# Usage: cmake_options.sh <cmake> <source dir> <work dir>
set -u
cmake=$1
source_dir=$2

source "$(dirname "$0")/common.sh"
start_cli_test "$3"

# Each run states every option this test varies, so nothing carries over in the cache.
configure() {
  env -u PKG_CONFIG_LIBDIR "$cmake" -S "$source_dir" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DEDGELM_OPENCL=OFF -DCMAKE_DISABLE_FIND_PACKAGE_CLBlast=ON "$@" > "$work/out.txt" 2>&1
}
lean=(-DEDGELM_BUILD_TESTS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON
      -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON
      -DEDGELM_PCRE2_ROOT=)

# expect_configure_error <name> <substring> <options...>: configure fails and says the substring
# (CMake wraps long messages, so the output is read as one line).
expect_configure_error() {
  local name=$1 expected=$2
  shift 2
  if configure "$@"; then
    echo "FAIL $name: configured"; failures=$((failures + 1)); return
  fi
  if [[ "$(tr -s ' \n' ' ' < "$work/out.txt")" != *"$expected"* ]]; then
    echo "FAIL $name: the output lacks '$expected':"; cat "$work/out.txt"
    failures=$((failures + 1)); return
  fi
  echo "ok   $name"
  passes=$((passes + 1))
}

if configure "${lean[@]}" -DEDGELM_MICRO_BENCH=AUTO &&
  grep -q "micro_bench: skipped, Google Benchmark (Debian: libbenchmark-dev) and Eigen" "$work/out.txt" &&
  ! grep -q "micro_bench" "$work/build/build.ninja"; then
  ok "no Benchmark, Eigen or GoogleTest, tests off: configures, micro_bench skipped with a message"
else
  cp "$work/out.txt" "$work/err.txt"
  fail "no Benchmark, Eigen or GoogleTest, tests off: configures, micro_bench skipped with a message"
fi
expect_configure_error "EDGELM_MICRO_BENCH=ON without them" \
  "EDGELM_MICRO_BENCH is ON but Google Benchmark (Debian: libbenchmark-dev) and Eigen (Debian: libeigen3-dev) not found" \
  "${lean[@]}" -DEDGELM_MICRO_BENCH=ON
expect_configure_error "EDGELM_MICRO_BENCH=sometimes" "EDGELM_MICRO_BENCH is 'sometimes': use AUTO, ON or OFF" \
  "${lean[@]}" -DEDGELM_MICRO_BENCH=sometimes

# A prefix holding the host's PCRE2 as a release build installs it; pkg-config is then not used.
pcre2_include=$(pkg-config --variable=includedir libpcre2-8 2> /dev/null)
pcre2_libdir=$(pkg-config --variable=libdir libpcre2-8 2> /dev/null)
if [ -f "$pcre2_include/pcre2.h" ] && [ -f "$pcre2_libdir/libpcre2-8.a" ]; then
  mkdir -p "$work/pcre2/include" "$work/pcre2/lib"
  ln -s "$pcre2_include/pcre2.h" "$work/pcre2/include/pcre2.h"
  ln -s "$pcre2_libdir/libpcre2-8.a" "$work/pcre2/lib/libpcre2-8.a"
  if configure "${lean[@]}" -DEDGELM_MICRO_BENCH=OFF -DEDGELM_PCRE2_ROOT="$work/pcre2" \
    -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON &&
    grep -qx "EDGELM_PCRE2_LIBRARY:FILEPATH=$work/pcre2/lib/libpcre2-8.a" "$work/build/CMakeCache.txt" &&
    grep -q -- "-I$work/pcre2/include" "$work/build/build.ninja"; then
    ok "EDGELM_PCRE2_ROOT: the prefix's header and static library, no pkg-config"
  else
    cp "$work/out.txt" "$work/err.txt"
    fail "EDGELM_PCRE2_ROOT: the prefix's header and static library, no pkg-config"
  fi
else
  fail "the host's PCRE2 (pcre2.h and libpcre2-8.a through pkg-config: libpcre2-dev)"
fi
mkdir -p "$work/empty"
expect_configure_error "EDGELM_PCRE2_ROOT without PCRE2" \
  "EDGELM_PCRE2_ROOT '$work/empty' holds no include/pcre2.h and lib/libpcre2-8" \
  "${lean[@]}" -DEDGELM_MICRO_BENCH=OFF -DEDGELM_PCRE2_ROOT="$work/empty"
expect_configure_error "EDGELM_PCRE2_ROOT not a directory" \
  "EDGELM_PCRE2_ROOT '$work/missing' is not a directory" \
  "${lean[@]}" -DEDGELM_MICRO_BENCH=OFF -DEDGELM_PCRE2_ROOT="$work/missing"
# An Android toolchain sets ANDROID; without a prefix, pkg-config would find the host's PCRE2.
expect_configure_error "Android without EDGELM_PCRE2_ROOT" \
  "an Android build needs EDGELM_PCRE2_ROOT (the android-arm64 preset takes it from the environment variable EDGELM_ANDROID_DEPS)" \
  "${lean[@]}" -DEDGELM_MICRO_BENCH=OFF -DANDROID=ON

finish_cli_test cmake_options
