#!/usr/bin/env bash
# Installs dependencies, builds edgelm in build/ (Release, tests on) and runs the whole ctest suite
# in parallel. Extra arguments go to ctest (e.g. -R parity). Set EDGELM_SANITIZE=ON to build with
# AddressSanitizer + UBSan in build-asan/ instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
sanitize=${EDGELM_SANITIZE:-OFF}
build_dir=build
build_type=Release
if [ "$sanitize" = ON ]; then build_dir=build-asan; build_type=RelWithDebInfo; fi
jobs=$(nproc)
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DEDGELM_SANITIZE="$sanitize" \
  -DEDGELM_BUILD_TESTS=ON
cmake --build "$build_dir" -j "$jobs"
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "$@"
