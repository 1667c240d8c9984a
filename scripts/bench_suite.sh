#!/usr/bin/env bash
# The benchmark suite behind docs/performance.md: writes the llama-3.2-1b-shaped model as GGUF in
# F16, Q8_0 and Q4_0 (make_model, seed 1, once, into build/models/), runs edgelm's bench on them,
# and, when LLAMA_BENCH names a llama.cpp llama-bench binary built elsewhere, runs it on the very
# same files with the same tests; then prints one markdown table side by side
# (scripts/bench_compare.py). Results go to bench-results/<date>/ as JSON.
#
# The two tools take turns per model and thread count (edgelm, then llama-bench, then the next),
# so each pair of rows is measured minutes apart at most: on a VM the memory bandwidth two vCPUs
# get can change by half between phases of a few minutes, more than the differences measured.
#
#   scripts/bench_suite.sh                         # edgelm only
#   LLAMA_BENCH=~/llama.cpp/build/bin/llama-bench scripts/bench_suite.sh
#   EDGELM_BENCH_ARGS="--n-prompt 128 -n 32 -r 2" EDGELM_BENCH_THREADS="2" scripts/bench_suite.sh
#
# EDGELM_BENCH_ARGS go to both tools, so they use the names both take: --n-prompt for prompt
# lengths (llama-bench's -p; in edgelm's tools -p is prompt text), -n, -pg, -d, -r.
#
# Run it on an otherwise idle machine: both tools measure wall-clock throughput.
set -euo pipefail
cd "$(dirname "$0")/.."
args=${EDGELM_BENCH_ARGS:-"--n-prompt 128,512 -n 128 -r 3"}
threads=${EDGELM_BENCH_THREADS:-"1 2"}
types=${EDGELM_BENCH_TYPES-"q4_0 q8_0 f16"}
files=${EDGELM_BENCH_FILES:-}
out=bench-results/$(date +%Y-%m-%d)
mkdir -p "$out" build/models

if [ ! -x build/bin/bench ] || [ ! -x build/bin/make_model ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build build --target bench make_model
fi

models=()
for type in $types; do
  file=build/models/llama-3.2-1b-$type.gguf
  if [ ! -f "$file" ]; then
    echo "bench_suite: writing $file"
    build/bin/make_model --preset llama-3.2-1b --format gguf --quant "$type" --seed 1 \
      --out build/models > /dev/null
  fi
  models+=("$file")
done
for file in $files; do
  [ -f "$file" ] || { echo "bench_suite: $file (EDGELM_BENCH_FILES) does not exist" >&2; exit 1; }
  models+=("$file")
done
rm -f "$out"/edgelm-*.json "$out"/llama.cpp-*.json
for file in "${models[@]}"; do
  for t in $threads; do
    name=$(basename "$file" .gguf)-t$t
    echo "bench_suite: edgelm bench -m $file $args -t $t"
    # shellcheck disable=SC2086
    build/bin/bench -m "$file" $args -t "$t" -o json > "$out/edgelm-$name.json"
    if [ -n "${LLAMA_BENCH:-}" ]; then
      echo "bench_suite: $LLAMA_BENCH -m $file $args -t $t"
      # shellcheck disable=SC2086
      "$LLAMA_BENCH" -m "$file" $args -t "$t" -o json > "$out/llama.cpp-$name.json"
    fi
  done
done

# One JSON array per tool, in the order the tests ran.
join() {
  python3 -c 'import json, sys; print(json.dumps([r for f in sys.argv[1:] for r in json.load(open(f))], indent=1))' "$@"
}
join $(ls -tr "$out"/edgelm-*.json) > "$out/edgelm.json"
if [ -n "${LLAMA_BENCH:-}" ]; then
  join $(ls -tr "$out"/llama.cpp-*.json) > "$out/llama.cpp.json"
  python3 scripts/bench_compare.py "$out/edgelm.json" "$out/llama.cpp.json" | tee "$out/summary.md"
else
  python3 scripts/bench_compare.py "$out/edgelm.json" | tee "$out/summary.md"
fi
