#!/usr/bin/env bash
# Runs an eviction-policy sweep with bin/eviction_eval and plots it: every (policy, budget) cell
# beside the full cache, written as JSON lines, CSV and a markdown table, then PNGs
# (scripts/plot_eviction.py). The model defaults to SmolLM2-135M-Instruct (scripts/fetch_smollm2.sh)
# and the texts to the Canterbury corpus's prose (scripts/fetch_texts.sh); both are fetched once.
#
# Usage: scripts/eviction_sweep.sh [--preset NAME] [--out DIR] [--resume] [-m MODEL]
#                                  [EVICTION_EVAL FLAGS...]
#   --preset default   (the default) 8 policies at 64 and 256 slots (6 % and 25 % of a 1,024-token
#                      window of alice29.txt): streaming with an eviction every 16 tokens,
#                      compress-then-continue (512 + 128 tokens), passkeys at 512 and 1,024 tokens
#                      and three depths, cost. 734 s on 2 shared vCPUs of an AMD EPYC Zen 4.
#   --preset paper     docs/eviction_results.md's run: 8 policies and 2 protected ones at 48, 128
#                      and 512 slots (2.3 % to 25 % of a 2,048-token window) streamed over the
#                      first window of alice29.txt and of plrabn12.txt (an eviction every 16
#                      tokens) with their cost, compress-then-continue on alice29.txt, passkeys in
#                      1,024-token documents at three depths with the question after and before
#                      the document (6 policies at 128 slots), and the strict setting (every
#                      token) with per-layer budgets.
#   --preset cost-1b   the cost alone on the random-weight Llama-3.2-1B shape (Q4_0, made with
#                      make_model) at a 4,096-token logical length, 8 policies at 256 and 1,024 slots.
# Flags after the preset's are passed to eviction_eval (a later flag overrides the preset's, e.g.
# --budgets 128). The build must exist (scripts/run.sh or the README's build command makes it);
# EDGELM_BIN names another folder of binaries (default build/bin).
set -euo pipefail
cd "$(dirname "$0")/.."

preset=default
out=
model=
resume=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset=${2:?--preset needs a name}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --resume) resume=1; shift ;;
    -m | --model | --model-path) model=${2:?$1 needs a file}; shift 2 ;;
    *) extra+=("$1"); shift ;;
  esac
done
case "$preset" in default | paper | cost-1b) ;; *)
  echo "eviction_sweep: --preset '$preset' is not one of default|paper|cost-1b" >&2
  exit 2 ;;
esac
out=${out:-build/eviction/$preset}
bin=${EDGELM_BIN:-build/bin}
for tool in eviction_eval make_model; do
  if [ ! -x "$bin/$tool" ]; then
    echo "eviction_sweep: $bin/$tool is missing: build first (cmake --build build)" >&2
    exit 1
  fi
done
if ! python3 -c "import matplotlib" 2> /dev/null; then
  echo "eviction_sweep: python3 with matplotlib is needed for the plots" \
    "(scripts/install_deps.sh installs python3-matplotlib)" >&2
  exit 1
fi
texts=$(scripts/fetch_texts.sh build/texts)
if [ -z "$model" ]; then
  if [ "$preset" = cost-1b ]; then
    model=build/models/llama-3.2-1b-q4_0.gguf
    if [ ! -f "$model" ]; then
      echo "eviction_sweep: making $model with make_model (random weights, real shapes)" >&2
      "$bin/make_model" --preset llama-3.2-1b --format gguf --quant q4_0 --seed 1 \
        --out build/models > /dev/null
    fi
  else
    model=$(scripts/fetch_smollm2.sh build/models)
  fi
fi
mkdir -p "$out"
threads=$(nproc)
policies="sliding,sink,h2o,tova,snapkv,random,keydiff,expected_attention"

# One eviction_eval run: its name, then its flags. Writes NAME.jsonl, NAME.csv and NAME.md (the
# last only when the run succeeded; with --resume a run whose NAME.md exists is not run again).
evaluate() {
  local name=$1
  shift
  if [ "$resume" = 1 ] && [ -s "$out/$name.md" ]; then
    echo "eviction_sweep: $name done before ($out/$name.md), kept" >&2
    return
  fi
  echo "eviction_sweep: $name -> $out/$name.{jsonl,csv,md}" >&2
  rm -f "$out/$name.jsonl" "$out/$name.md"
  "$bin/eviction_eval" -m "$model" -t "$threads" "$@" "${extra[@]}" \
    --json "$out/$name.jsonl" --csv "$out/$name.csv" > "$out/$name.md.part"
  mv "$out/$name.md.part" "$out/$name.md"
}

start=$(date +%s)
case "$preset" in
  default)
    evaluate cells -f "$texts/alice29.txt" -c 1024 --budgets 64,256 --policies "$policies" \
      --evict-every 16 --prefix-tokens 512 --continue-tokens 128 \
      --passkey-lengths 512,1024 --passkey-depths 0.1,0.5,0.9 --passkey-placements end \
      --passkey-trials 1
    ;;
  paper)
    quality="$policies,h2o+protect,keydiff+protect"
    evaluate streaming -f "$texts/alice29.txt" -f "$texts/plrabn12.txt" -c 2048 \
      --budgets 48,128,512 --policies "$quality" --evict-every 16 --runs streaming,cost
    evaluate continuation -f "$texts/alice29.txt" -c 2048 --budgets 48,128,512 \
      --policies "$quality" --runs continuation --prefix-tokens 512 --continue-tokens 128
    evaluate retrieval -f "$texts/alice29.txt" -c 2048 --budgets 128 \
      --policies sliding,sink,h2o,tova,snapkv,expected_attention --runs retrieval \
      --passkey-lengths 1024 --passkey-depths 0.1,0.5,0.9 --passkey-placements end,both \
      --passkey-trials 1
    # A pyramid's top layer keeps a few slots, which take one token at a time: the strict setting.
    evaluate strict -f "$texts/alice29.txt" -c 1024 --budgets 128 --evict-every 1 \
      --policies sink,tova,snapkv,snapkv+pyramid,tova+pyramid --runs streaming
    ;;
  cost-1b)
    evaluate cost -f "$texts/alice29.txt" -c 4096 --budgets 256,1024 --policies "$policies" \
      --runs cost --cost-tokens 32
    ;;
esac
# The strict run repeats (policy, budget) cells of the streaming run with other settings: its
# plots go to a folder of their own.
shopt -s nullglob
main_runs=()
for file in "$out"/*.jsonl; do [ "$(basename "$file")" = strict.jsonl ] || main_runs+=("$file"); done
python3 scripts/plot_eviction.py -o "$out" "${main_runs[@]}"
if [ -f "$out/strict.jsonl" ]; then
  python3 scripts/plot_eviction.py -o "$out/strict" "$out/strict.jsonl"
fi
echo "eviction_sweep: $preset done in $(($(date +%s) - start)) s: $out" >&2
cat "$out"/*.md
