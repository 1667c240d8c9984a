#!/usr/bin/env bash
# Installs dependencies, builds edgelm in build/ (Release) and runs the main job: generation.
# Arguments go to bin/generate. Without -m/--model, a random-weight model with real
# Llama-3.2-1B shapes is made once with make_model (Q4_0 GGUF, ~0.7 GB, in build/models/) and used;
# EDGELM_PRESET and EDGELM_QUANT choose another (e.g. EDGELM_PRESET=tiny for a seconds-long demo).
# Without a prompt, a fixed text prompt is used (the made models carry a synthetic byte-level
# vocabulary, so their random weights produce random text).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"

args=("$@")
has() { for a in "${args[@]}"; do [[ "$a" == "$1" || "$a" == "$1="* ]] && return 0; done; return 1; }
if ! has -m && ! has --model && ! has --model-path; then
  preset=${EDGELM_PRESET:-llama-3.2-1b}
  quant=${EDGELM_QUANT:-q4_0}
  model="build/models/$preset-$quant.gguf"
  if [ ! -f "$model" ]; then
    echo "run: making $model with make_model (random weights, real shapes)"
    build/bin/make_model --preset "$preset" --format gguf --quant "$quant" --seed 1 --out build/models > /dev/null
  fi
  args+=(-m "$model")
fi
if ! has --prompt-ids && ! has --prompt && ! has -p && ! has -f && ! has --file &&
  ! has --interactive && ! has -i; then
  args+=(-p "The capital of France is")
fi
has -n || has --n-predict || args+=(-n 16)
exec build/bin/generate "${args[@]}"
