#!/usr/bin/env bash
# Installs dependencies, builds edgelm in build/ (Release, tests on) and runs the whole ctest suite
# in parallel, including the OpenCL backend's tests on PoCL; without extra arguments the op parity
# matrix runs as one process per CPU beside it. Extra arguments go to ctest instead (e.g.
# -R parity). Set EDGELM_SANITIZE=ON to build with AddressSanitizer + UBSan in build-asan/ instead,
# or EDGELM_SANITIZE=thread for ThreadSanitizer in build-tsan/: the library without OpenCL (PoCL's
# own threads are not instrumented) and the test programs that run threads (the thread pool, the
# zero-allocation test, the model, KV cache and eviction tests), each run whole; extra arguments
# then go to each program (e.g. --gtest_filter=ThreadPool*). EDGELM_LEAN=1 configures as if Google
# Benchmark, Eigen and CLBlast were not installed (a device build's dependencies), in a folder of
# its own (build-lean/, build-asan-lean/, ...): no micro_bench, and the rest must pass without them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
sanitize=${EDGELM_SANITIZE:-OFF}
build_dir=build
build_type=Release
options=()
if [ "$sanitize" = ON ]; then
  build_dir=build-asan
  build_type=RelWithDebInfo
  # EDGELM_ASAN_COMPILER=clang: Clang instead of GCC, which compiles the sanitized tree in about
  # half the CPU time (docs/testing.md, CI time), and the fuzz targets in the same folder
  # (EDGELM_FUZZ_BUILD_DIR=build-asan scripts/fuzz/run.sh then builds nothing more).
  if [ "${EDGELM_ASAN_COMPILER:-gcc}" = clang ]; then
    options=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DEDGELM_FUZZ=ON)
  fi
elif [ "$sanitize" = thread ]; then
  build_dir=build-tsan
  build_type=RelWithDebInfo
  options=(-DEDGELM_OPENCL=OFF)
fi
if [ "${EDGELM_LEAN:-0}" = 1 ]; then
  build_dir+=-lean
  options+=(-DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON
            -DCMAKE_DISABLE_FIND_PACKAGE_CLBlast=ON)
else
  # Installed above, so micro_bench (and its ctest) must be built: a library CMake failed to find
  # is an error here, not a test that silently drops out.
  options+=(-DEDGELM_MICRO_BENCH=ON)
fi
if [ "$sanitize" != OFF ]; then
  # The sanitized builds at -O1 with line tables only, the level the sanitizers' own documentation
  # suggests: reports keep their file and line, and against RelWithDebInfo's -O2 -g GCC compiles a
  # file in about half the CPU time, Clang in 0.86 of it (docs/testing.md, CI time).
  options+=("-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
            "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")
fi
jobs=$(nproc)
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DEDGELM_SANITIZE="$sanitize" \
  -DEDGELM_BUILD_TESTS=ON "${options[@]}"
if [ "$sanitize" = thread ]; then
  tsan_tests=(test_thread_pool test_zero_alloc test_kv_cache test_llama test_session test_eviction
              test_eviction_policies)
  cmake --build "$build_dir" -j "$jobs" --target "${tsan_tests[@]}"
  # halt_on_error: the first race ends the program (and so this script) with its report.
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
  run_tsan_test() {
    # A temp folder per program: some tests write model files under fixed names there.
    local log="$build_dir/$1.log" tmp="$PWD/$build_dir/tmp-$1"
    rm -rf "$tmp" && mkdir -p "$tmp"
    if TMPDIR="$tmp" TEST_TMPDIR="$tmp/" "$build_dir/bin/$1" "${@:2}" > "$log" 2>&1; then
      echo "tsan: $1: $(tail -n 1 "$log")"
    else
      echo "tsan: $1 FAILED:"
      tail -n 80 "$log"
      return 1
    fi
  }
  export -f run_tsan_test
  export build_dir
  printf '%s\n' "${tsan_tests[@]}" | xargs -P "$jobs" -I{} bash -c 'run_tsan_test "$@"' _ {} "$@"
  exit
fi
cmake --build "$build_dir" -j "$jobs"
# PoCL is installed above, so an OpenCL device must be found: the OpenCL tests fail instead of
# skipping when it is not (a broken ICD must not pass silently).
export EDGELM_REQUIRE_OPENCL=1
if [ $# -gt 0 ]; then
  ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "$@"
  exit
fi
# Starting a test process costs more than most parity cases: ctest's one process per case took 20
# times the CPU of the cases themselves in Release, six times under the sanitizers (docs/testing.md,
# CI time). So the op parity matrix, most of the suite, runs in test_op_parity processes, one gtest
# shard per CPU, and everything else through ctest (which still lists every case: ctest -R OpParity).
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" -E 'OpParity'
parity_failed=0
for ((shard = 0; shard < jobs; ++shard)); do
  GTEST_TOTAL_SHARDS=$jobs GTEST_SHARD_INDEX=$shard "$build_dir/bin/test_op_parity" \
    > "$build_dir/test_op_parity.$shard.log" 2>&1 &
done
for ((shard = 0; shard < jobs; ++shard)); do
  wait -n || parity_failed=1
done
for ((shard = 0; shard < jobs; ++shard)); do
  log="$build_dir/test_op_parity.$shard.log"
  if grep -q '^\[  FAILED  \]' "$log" || ! grep -q '^\[  PASSED  \]' "$log"; then
    parity_failed=1
    grep -E '^\[  FAILED  \]|Failure|ERROR|runtime error' "$log" | head -n 40
  fi
  echo "test_op_parity shard $shard of $jobs: $(grep -E '^\[  PASSED  \]' "$log")"
done
if [ $parity_failed -ne 0 ]; then
  echo "test.sh: FAILED: the op parity matrix (logs in $build_dir/test_op_parity.*.log)" >&2
  exit 1
fi
