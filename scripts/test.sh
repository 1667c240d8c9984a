#!/usr/bin/env bash
# Installs dependencies, builds edgelm in build/ (Release, tests on) and runs the whole ctest suite
# in parallel, including the OpenCL backend's tests on PoCL. Extra arguments go to ctest (e.g.
# -R parity). Set EDGELM_SANITIZE=ON to build with AddressSanitizer + UBSan in build-asan/ instead.
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
# PoCL is installed above, so an OpenCL device must be found: the OpenCL tests fail instead of
# skipping when it is not (a broken ICD must not pass silently).
export EDGELM_REQUIRE_OPENCL=1
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "$@"
