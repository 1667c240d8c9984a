#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ and runs each for a bounded time; fails on any finding.
#
#   scripts/fuzz/run.sh [seconds per target] [target ...]
#
# The targets are built with Clang under AddressSanitizer and UBSan (-DEDGELM_SANITIZE=ON
# -DEDGELM_FUZZ=ON) in $EDGELM_FUZZ_BUILD_DIR (default build-fuzz/: the library without the
# OpenCL backend, which no parser uses, and the targets). Default: every target, 60 s each, as many at once as there
# are CPUs. Each target starts from its committed seeds (fuzz/corpus/<target>/, read only) and
# keeps what it finds new in <build dir>/fuzz/work/<target>/, which later runs reuse. A crash, a
# sanitizer report, a leak, a timeout (10 s for one input) or running out of memory (2 GiB) stops
# that target; the input is saved as <build dir>/fuzz/findings/<target>/<kind>-<sha1>, and the
# script ends with exit status 1 naming it. Reproduce a finding with
# `<build dir>/bin/<target> <file>`. EDGELM_FUZZ_SEED sets libFuzzer's random seed (default 0:
# a new one each run); CI fixes it, so that whether a commit passes does not depend on the draw,
# while longer runs here with fresh seeds look further.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift $(($# >= 1 ? 1 : 0))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(fuzz_gguf fuzz_safetensors fuzz_config fuzz_tokenizer_json fuzz_id_list
           fuzz_chat_template)
fi
build_dir=${EDGELM_FUZZ_BUILD_DIR:-build-fuzz}
# A folder already configured with EDGELM_FUZZ=ON (the Clang ASan build of scripts/test.sh with
# EDGELM_ASAN_COMPILER=clang) is used as it is; any other is configured for the targets alone.
if ! grep -qs '^EDGELM_FUZZ:BOOL=ON$' "$build_dir/CMakeCache.txt"; then
  CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DEDGELM_SANITIZE=ON -DEDGELM_FUZZ=ON -DEDGELM_OPENCL=OFF -DEDGELM_BUILD_TESTS=OFF > /dev/null
fi
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"

# One target: its log in $build_dir/fuzz/<target>.log, a summary line on stdout.
run_one() {
  local target=$1 work="$build_dir/fuzz/work/$1" findings="$build_dir/fuzz/findings/$1"
  local log="$build_dir/fuzz/$1.log"
  mkdir -p "$work" "$findings"
  local rc=0
  "$build_dir/bin/$target" -max_total_time="$seconds" -seed="$seed" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$findings/" "$work" "fuzz/corpus/$target" \
    > "$log" 2>&1 || rc=$?
  local runs corpus
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  corpus=$(ls "$work" | wc -l)
  if [ $rc -ne 0 ]; then
    echo "fuzz: $target: FINDING after ${runs:-?} runs (exit code $rc): $(ls "$findings" | tr '\n' ' ')"
    grep -m 3 -E 'ERROR:|runtime error|fuzz: |==[0-9]+==' "$log" | sed 's/^/fuzz:   /' || true
    return 1
  fi
  echo "fuzz: $target: $seconds s, ${runs:-?} runs, no finding (corpus: $corpus new inputs)"
}
export -f run_one
seed=${EDGELM_FUZZ_SEED:-0}
export build_dir seconds seed

echo "fuzz: ${#targets[@]} targets, $seconds s each, $(nproc) at a time"
status=0
printf '%s\n' "${targets[@]}" | xargs -P "$(nproc)" -I{} bash -c 'run_one {}' || status=1
if [ $status -ne 0 ]; then
  echo "fuzz: FAILED: a target found an input the library does not handle (logs in" \
    "$build_dir/fuzz/*.log)" >&2
fi
exit $status
