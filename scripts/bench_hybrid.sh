#!/usr/bin/env bash
# End-to-end time of one prompt + reply under each backend schedule of generate_hybrid, beside
# generate on each backend alone (docs/performance.md, "Switching backends during a generation").
# The prompt is the first N tokens of a text file, so every run feeds the same ids; the reply is
# greedy with --ignore-eos, so every run decodes the same count. Prints one markdown row per run
# and writes each run's --json line to OUT_DIR.
#
# Usage: scripts/bench_hybrid.sh BUILD_DIR MODEL.gguf TEXT_FILE OUT_DIR [PROMPT_TOKENS] [DECODE]
# e.g.   scripts/bench_hybrid.sh build models/SmolLM2-135M-Instruct.Q4_1.gguf alice29.txt /tmp/hb
set -euo pipefail
build=$1 model=$2 text=$3 out=$4
n_prompt=${5:-512} n_decode=${6:-128}
mkdir -p "$out"
ids=$("$build/bin/tokenize" -m "$model" -f "$text" --ids-only |
  jq -r --argjson n "$n_prompt" '.[:$n] | map(tostring) | join(",")')
[ "$(tr ',' '\n' <<< "$ids" | wc -l)" -eq "$n_prompt" ] || { echo "$text has fewer than $n_prompt tokens"; exit 1; }
common=(-m "$model" --prompt-ids "$ids" -n "$n_decode" --greedy --ignore-eos --json -q)

# run NAME TOOL ARGS...: one run, its JSON kept as OUT_DIR/NAME.json.
run() {
  local name=$1 tool=$2
  shift 2
  "$build/bin/$tool" "${common[@]}" "$@" 2> "$out/$name.err" | tail -n 1 > "$out/$name.json"
}
run cpu generate --backend cpu
run opencl generate --backend opencl
run prefill_opencl_decode_cpu generate_hybrid --prefill-backend opencl --decode-backend cpu
run prefill_cpu_decode_opencl generate_hybrid --prefill-backend cpu --decode-backend opencl
run prefill_opencl_decode_cpu_shared generate_hybrid --hybrid-weights shared
run every_16 generate_hybrid --prefill-backend opencl --decode-backend cpu --switch-every 16
run threshold generate_hybrid --prefill-backend cpu --decode-backend opencl \
  --switch-threshold $((n_prompt + n_decode / 2))
run warmup_16 generate_hybrid --warmup-tokens 16
run gpu_busy generate_hybrid --prefill-backend cpu --decode-backend opencl --switch-on-pressure \
  --simulate-gpu-busy "0:0,$((n_prompt / 128 + n_decode / 4)):1,$((n_prompt / 128 + n_decode / 2)):0"
run sink_every_16 generate_hybrid --prefill-backend opencl --decode-backend cpu --switch-every 16 \
  --eviction-policy sink --kv-budget 256
run sink_cpu generate --backend cpu --eviction-policy sink --kv-budget 256

reference=$(jq -c .tokens "$out/cpu.json")
reference_sink=$(jq -c .tokens "$out/sink_cpu.json")
echo "| run | prefill s | decode s | total s | switches | switch us (mean) | cpu / opencl decode steps | copies | same tokens as generate --backend cpu |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
for json in "$out"/*.json; do
  name=$(basename "$json" .json)
  want=$reference
  [[ $name == sink* ]] && want=$reference_sink
  jq -r --arg name "$name" --argjson want "$want" '
    . as $r | [$name, (.prefill_s | .*100 | round / 100), (.decode_s | .*100 | round / 100),
     ((.prefill_s + .decode_s) | .*100 | round / 100), (.switches // "-"),
     (if (.switches // 0) > 0 then (.switch_s / .switches * 1e6 | .*10 | round / 10) else "-" end),
     (if .backends then "\(.backends.cpu.decode_steps) / \(.backends.opencl.decode_steps)" else "-" end),
     .host_device_copy_bytes,
     (if .tokens == $want then "yes" else
        "no: first differs at \([range(0; $r.tokens | length)] | map(select($r.tokens[.] != $want[.])) | first)" end)]
    | "| " + (map(tostring) | join(" | ")) + " |"' "$json" 2> /dev/null ||
    jq -r --arg name "$name" '"| \($name) | (see json) |"' "$json"
done
