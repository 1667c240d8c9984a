#!/usr/bin/env bash
# What converting a model's Q4_1/Q5_0/Q5_1 matrices to Q8_0 at load (the CPU's SIMD tables and
# OpenCL, docs/model.md) does to the model, and what it buys:
#   1. the conversion error of every such matrix (scripts/q8_0_conversion_error.py);
#   2. greedy generation on a few prompts, compared in pairs: the exact portable kernels on the
#      weights converted (--backend cpu:portable --weight-type q8_0, the same bytes the loader
#      makes) and the default table (converted, 8-bit activations) each against the portable
#      kernels on the weights as stored (exact); OpenCL (converted) against the default table; and,
#      for scale, the avx2 table against the default one where that is avx512 (the same bytes,
#      another summation order). For each: greedy text equality, and over the steps up to the first
#      different token the largest logit difference, argmax agreement, and the second run's top-1
#      margin where the tokens part;
#   3. decode and prefill speed, converted (default table) against in place (the portable table,
#      and the default table with --no-repack); llama.cpp's llama-bench on the same file too when
#      LLAMA_BENCH names it.
#
# Usage: [LLAMA_BENCH=.../llama-bench] scripts/q8_0_conversion_check.sh MODEL.gguf [BUILD_DIR] [N_TOKENS]
# Needs python3 with numpy and gguf, and an OpenCL device for the OpenCL rows (skipped without).
# The portable runs take minutes: its exact kernels decode a 135M model at about a token a second.
set -euo pipefail

model=${1:?usage: $0 MODEL.gguf [BUILD_DIR] [N_TOKENS]}
build=${2:-build}
n=${3:-64}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "## Conversion error per matrix role"
python3 "$here/q8_0_conversion_error.py" "$model"

# Plain prompts that SmolLM2-135M-Instruct continues for 64 tokens without an end of turn.
prompts=("Once upon a time, in a small village,"
         "def fibonacci(n):"
         "The three laws of motion are"
         "Photosynthesis is the process")
run() {  # run NAME PROMPT_INDEX ENV... -- FLAGS...: generate into $work/NAME_i.{json,npy}
  local name=$1 index=$2
  shift 2
  local env=()
  while [ "$1" != "--" ]; do env+=("$1"); shift; done
  shift
  env "${env[@]}" "$build/bin/generate" --model-path "$model" --prompt "${prompts[$index]}" \
    -n "$n" --greedy --json -q --dump-logits "$work/${name}_$index.npy" "$@" \
    2> "$work/${name}_$index.err" | tail -n 1 > "$work/${name}_$index.json"
}
pairs=(portable_q8_0:portable default:portable)
"$build/bin/generate" --list-devices 2> /dev/null | grep -q '^[0-9]' && pairs+=(opencl:default)
"$build/bin/generate" --backend cpu:avx512 --model-path "$model" --prompt-ids 1 -n 1 -q \
  > /dev/null 2>&1 && pairs+=(avx2:default)
for i in "${!prompts[@]}"; do
  run portable "$i" -- --backend cpu:portable
  run portable_q8_0 "$i" -- --backend cpu:portable --weight-type q8_0
  run default "$i" --
  for pair in "${pairs[@]}"; do
    case $pair in
      opencl:*) run opencl "$i" -- --backend opencl ;;
      avx2:*) run avx2 "$i" -- --backend cpu:avx2 ;;
    esac
  done
done

echo
echo "## Greedy generation, $n tokens"
python3 - "$work" "${#prompts[@]}" "${pairs[@]}" << 'EOF'
import json, sys
import numpy as np
work, count, pairs = sys.argv[1], int(sys.argv[2]), [p.split(":") for p in sys.argv[3:]]
print("| prompt | compared | same text | first different token | max abs logit diff "
      "(largest logit) | argmax agree | top-1 margin there |")
print("| ---: | --- | --- | ---: | ---: | ---: | ---: |")
for a, b in pairs:
    for i in range(count):
        ta = json.load(open(f"{work}/{a}_{i}.json"))["tokens"]
        tb = json.load(open(f"{work}/{b}_{i}.json"))["tokens"]
        la, lb = np.load(f"{work}/{a}_{i}.npy"), np.load(f"{work}/{b}_{i}.npy")
        first = next((k for k in range(min(len(ta), len(tb))) if ta[k] != tb[k]), None)
        steps = min(len(la), len(lb)) if first is None else first + 1  # same inputs up to here
        diff = float(np.max(np.abs(la[:steps] - lb[:steps])))
        scale = float(np.max(np.abs(lb[:steps])))
        agree = int(np.sum(np.argmax(la[:steps], 1) == np.argmax(lb[:steps], 1)))
        margin = "-"
        if first is not None:
            top = np.sort(lb[first])[-2:]
            margin = f"{top[1] - top[0]:.4f}"
        print(f"| {i} | {a} vs {b} | {'yes' if ta == tb else 'no'} | "
              f"{'-' if first is None else first} | {diff:.3f} ({scale:.1f}) | {agree}/{steps} | {margin} |")
EOF

echo
echo "## Speed (bench)"
"$build/bin/bench" -m "$model" -p 64 -n 32 -r 3 --backend cpu
"$build/bin/bench" -m "$model" -p 64 -n 32 -r 3 --backend cpu --no-repack
"$build/bin/bench" -m "$model" -p 16 -n 8 -r 1 --backend cpu:portable
if [ -n "${LLAMA_BENCH:-}" ]; then
  "$LLAMA_BENCH" -m "$model" -p 64 -n 32 -r 3 -t "$(nproc)" -o md
fi
