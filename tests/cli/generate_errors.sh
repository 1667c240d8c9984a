#!/usr/bin/env bash
# Bad input to `generate` must end in one clear line on stderr naming the file, field or flag, a
# non-zero exit, and no crash (no signal, no sanitizer report). Also checks that a good run works
# and ends stdout with the --json summary.
# Usage: generate_errors.sh <generate> <make_model> <work dir>
set -u
generate=$1
make_model=$2

source "$(dirname "$0")/common.sh"
start_cli_test "$3"
make_tiny_models "$make_model" q8_0
"$make_model" --preset tiny-mha-untied --format hf --out "$work/mha" > /dev/null 2>&1 || { echo "make_model mha failed"; exit 1; }

# expect_error <name> <substring> <generate args...>
expect_error() { expect_error_from "$generate" generate "$@"; }

# A copy of the good folder to break.
broken() {
  rm -rf "$work/$1" && cp -r "$work/hf" "$work/$1" && echo "$work/$1"
}

expect_error "missing model" "no such file" --model-path "$work/none" --prompt-ids 1
d=$(broken malformed_json); echo '{ "model_type": "llama", ' > "$d/config.json"
expect_error "malformed config.json" "malformed JSON" --model-path "$d" --prompt-ids 1
d=$(broken missing_field); sed -i '/"hidden_size"/d' "$d/config.json"
expect_error "missing config field" "hidden_size" --model-path "$d" --prompt-ids 1
d=$(broken unknown_arch); sed -i 's/"model_type": "llama"/"model_type": "mamba"/' "$d/config.json"
expect_error "unknown architecture" "unknown architecture" --model-path "$d" --prompt-ids 1
# Another family in a Llama-shaped config, and a layer count below the file's: refused, not run.
d=$(broken qwen2_arch); sed -i 's/"LlamaForCausalLM"/"Qwen2ForCausalLM"/' "$d/config.json"
expect_error "another architecture" "unsupported architectures entry \"Qwen2ForCausalLM\"" --model-path "$d" --prompt-ids 1
d=$(broken fewer_layers); sed -i 's/"num_hidden_layers": 2/"num_hidden_layers": 1/' "$d/config.json"
expect_error "layer count below the tensors" "belongs to layer 1 but num_hidden_layers is 1" --model-path "$d" --prompt-ids 1
d=$(broken shape_mismatch); sed -i 's/"intermediate_size": 128/"intermediate_size": 160/' "$d/config.json"
expect_error "shape mismatch" "has shape" --model-path "$d" --prompt-ids 1
d=$(broken header_too_long); size=$(stat -c %s "$d/model.safetensors")
{ printf '\x00\x00\x10\x00\x00\x00\x00\x00'; tail -c +9 "$work/hf/model.safetensors"; } > "$d/model.safetensors"
expect_error "safetensors header longer than the file" "[safetensors]" --model-path "$d" --prompt-ids 1
d=$(broken truncated_data); head -c $((size - 64)) "$work/hf/model.safetensors" > "$d/model.safetensors"
expect_error "safetensors offsets out of range" "[safetensors]" --model-path "$d" --prompt-ids 1
d=$(broken missing_weights); rm "$d/model.safetensors"
expect_error "missing weights" "model.safetensors" --model-path "$d" --prompt-ids 1
head -c 3000 "$gguf" > "$work/truncated.gguf"
expect_error "truncated gguf" "[gguf]" --model-path "$work/truncated.gguf" --prompt-ids 1
printf 'GGUF\x03\x00\x00\x00' > "$work/empty.gguf"
expect_error "gguf header only" "[gguf]" --model-path "$work/empty.gguf" --prompt-ids 1
expect_error "prompt longer than --max-seq-len" "-c/--ctx-size 4" --model-path "$work/hf" --prompt-ids 1,2,3,4,5 --max-seq-len 4
expect_error "token id outside the vocabulary" "vocabulary" --model-path "$gguf" --prompt-ids 1,99999
expect_error "malformed --prompt-ids" "--prompt-ids" --model-path "$gguf" --prompt-ids 1,x
expect_error "bad --kv-type" "--kv-type" --model-path "$gguf" --prompt-ids 1 --kv-type q4_0
expect_error "two drafters" "exclusive" --model-path "$gguf" --prompt-ids 1 --greedy --lookup-ngram 3 -md "$gguf"
expect_error "draft model of another vocabulary" "another vocabulary" --model-path "$gguf" --prompt-ids 1 --greedy -md "$work/mha"
expect_error "bad --weight-type" "--weight-type" --model-path "$gguf" --prompt-ids 1 --weight-type q7
expect_error "unknown backend" "unknown backend" --model-path "$gguf" --prompt-ids 1 --backend vulkan
expect_error "--chat without text" "--chat" --model-path "$gguf" --prompt-ids 1 --chat
# Chat templates: a model without one, an unknown name, a template no format recognises, a
# system message the template refuses, --chat-template without --chat.
chat_fixtures="$(cd "$(dirname "$0")/../fixtures/chat" && pwd)"
expect_error "--chat on a model without a template" \
  "the model carries no chat template (no tokenizer.chat_template); name a format with --chat-template NAME" \
  --model-path "$gguf" --prompt Hi --chat
expect_error "unknown --chat-template" "unknown chat template 'alpaca' (known: llama3," \
  --model-path "$gguf" --prompt Hi --chat --chat-template alpaca
d=$(broken odd_template); printf '{{ messages }}' > "$d/chat_template.jinja"
expect_error "unrecognised chat template" \
  "[chat] $d/chat_template.jinja: not a chat template edgelm recognises ('{{ messages }}', 14 bytes); name a format with --chat-template NAME" \
  --model-path "$d" --prompt Hi --chat
d=$(broken gemma_template); cp "$chat_fixtures/gemma2.jinja" "$d/chat_template.jinja"
expect_error "system message the template refuses" \
  "[chat] gemma: the template refuses this conversation: System role not supported" \
  --model-path "$d" --prompt Hi --chat --system "Be brief."
expect_error "--chat-template without --chat" \
  "--chat-template, --system and --no-think need --chat or --interactive" \
  --model-path "$gguf" --prompt Hi --chat-template llama3
expect_error "--no-think without --chat" \
  "--chat-template, --system and --no-think need --chat or --interactive" \
  --model-path "$gguf" --prompt Hi --no-think
expect_error "--no-think on a template without the switch" \
  "[chat] chatml: the template has no thinking switch (enable_thinking)" \
  --model-path "$gguf" --prompt Hi --chat --chat-template chatml --no-think
expect_error "no prompt" "--prompt" --model-path "$gguf"
# The kernel table has one spelling, --backend cpu:<isa>; the variable that once chose it is
# refused, not ignored.
EDGELM_CPU_ISA=portable expect_error "EDGELM_CPU_ISA set" \
  "[cpu] EDGELM_CPU_ISA is not read: name the table with --backend cpu:<isa> (portable" \
  --model-path "$gguf" --prompt-ids 1
expect_error "unknown kernel table" "[cpu] instruction set 'sse9' (--backend cpu:sse9) is not available" \
  --model-path "$gguf" --prompt-ids 1 --backend cpu:sse9
expect_error "eviction flag" "--kv-budget" --model-path "$gguf" --prompt-ids 1 --eviction-policy h2o
expect_error "unknown eviction policy" "--eviction-policy" --model-path "$gguf" --prompt-ids 1 --eviction-policy lru
# The attention-free policies and the wrappers: one line naming the flag for each bad setting.
expect_error "keydiff without a budget" "--eviction-policy keydiff needs --kv-budget" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy keydiff
expect_error "random with a budget of 0" "--kv-budget 0 keeps nothing" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy random --kv-budget 0
expect_error "expected_attention sinks >= budget" \
  "expected_attention: --sink-tokens 8 must be below --kv-budget 8" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy expected_attention --kv-budget 8 --sink-tokens 8
expect_error "no future positions" "--ea-future-positions 0 must be at least 1" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy expected_attention --kv-budget 8 --ea-future-positions 0
expect_error "covariance neither on nor off" "--ea-covariance" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy expected_attention --kv-budget 8 --ea-covariance maybe
expect_error "unknown protected class" "--protect 'sinks,prompt': 'prompt' is not one of sinks|system|template" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy tova --kv-budget 8 --protect sinks,prompt
expect_error "protected sinks >= budget" "--protect sinks: --sink-tokens 8 must be below the limit of 8 slots" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy tova --kv-budget 8 --protect sinks --sink-tokens 8
expect_error "--protect system without a chat" "--protect system needs --chat or --interactive" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy tova --kv-budget 8 --protect system
expect_error "unknown layer budget" "--layer-budget 'steep' must be uniform or pyramid" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy tova --kv-budget 8 --layer-budget steep
expect_error "pyramid beta below 1" "--pyramid-beta 0.5 must be finite and >= 1" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy tova --kv-budget 8 --layer-budget pyramid --pyramid-beta 0.5
expect_error "pyramid top layer too small" "--layer-budget pyramid: the top layer would keep 0.4 slots" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy tova --kv-budget 8 --layer-budget pyramid
expect_error "flag out of range" "--ctx-size: Value 0 not in range" --model-path "$gguf" --prompt-ids 1 --max-seq-len 0
# Budgets that cannot work, each named (tiny f16: a slot of K and V over all layers is 256 bytes).
expect_error "budget of 0" "--kv-budget 0 keeps nothing" --model-path "$gguf" --prompt-ids 1 \
  --eviction-policy sink --kv-budget 0
expect_error "budget of 0 bytes" "--budget-bytes 0 keeps nothing" --model-path "$gguf" \
  --prompt-ids 1 --eviction-policy sink --budget-bytes 0
expect_error "budget in slots and bytes" "--kv-budget and --budget-bytes are exclusive" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy sink --kv-budget 8 --budget-bytes 4096
expect_error "budget below one slot" "--budget-bytes 255 holds no KV slot: one slot (K and V over all layers) takes 256 bytes" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy h2o --budget-bytes 255
expect_error "sinks fill the budget" "sink: --sink-tokens 8 leave no room for a window in --kv-budget 8" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy sink --kv-budget 8 --sink-tokens 8
expect_error "capacity past the context" "--kv-capacity 100 is above -c/--ctx-size 50" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy sink --kv-budget 8 -c 50 --kv-capacity 100
expect_error "capacity below the budget" "keeps up to 16 slots but the cache holds only 12" \
  --model-path "$gguf" --prompt-ids 1 --eviction-policy tova --kv-budget 16 --kv-capacity 12
expect_error "prompt past the logical context" "the logical context, -c/--ctx-size 5, leaves 5 positions" \
  --model-path "$gguf" --prompt-ids 1,2,3,4,5,6,7,8 -c 5 --eviction-policy sink --kv-budget 4
expect_error "negative seed" "--seed: '-1' is not a whole number" --model-path "$gguf" --prompt-ids 1 --seed -1
expect_error "seed past 2^64-1" "is not a whole number" --model-path "$gguf" --prompt-ids 1 --seed 18446744073709551616
expect_error_from "$make_model" make_model "make_model: negative seed" "--seed: '-2' is not a whole number" \
  --preset tiny --format gguf --seed -2 --out "$work/bad_seed"
expect_error_from "$make_model" make_model "make_model: q4_1 safetensors" \
  "--quant q4_1: safetensors folders hold f32, f16 or bf16" --preset tiny --format hf --quant q4_1 \
  --out "$work/bad_quant"
expect_error "NaN memory threshold" "--memory-threshold-mb nan" --model-path "$gguf" --prompt-ids 1 --memory-threshold-mb nan
expect_error "bad simulated memory curve" "step:MiB" --model-path "$gguf" --prompt-ids 1 --simulate-memory 0:10,x
expect_error "--cl-device on the cpu" "--cl-platform/--cl-device" --model-path "$gguf" --prompt-ids 1 --cl-device 0

# The OpenCL backend: without any platform (an empty ICD vendor folder hides every installed one)
# and with device indices that do not exist; a build without OpenCL says so instead.
# EDGELM_REQUIRE_OPENCL (scripts/test.sh, CI): a missing backend or device fails instead.
if "$generate" --list-devices | grep -q "no OpenCL backend"; then
  expect_error "opencl not built" "-DEDGELM_OPENCL=ON" --model-path "$gguf" --prompt-ids 1 --backend opencl
  [ -z "${EDGELM_REQUIRE_OPENCL:-}" ] || fail "EDGELM_REQUIRE_OPENCL is set but this build has no OpenCL"
else
  mkdir -p "$work/no_icd"
  OCL_ICD_VENDORS="$work/no_icd" expect_error "no OpenCL platform" "no OpenCL platform found" \
    --model-path "$gguf" --prompt-ids 1 --backend opencl
  if "$generate" --list-devices | grep -q '^0:0 '; then
    expect_error "OpenCL device out of range" "--cl-device 99 out of range" --model-path "$gguf" \
      --prompt-ids 1 --backend opencl --cl-device 99
    expect_error "OpenCL platform out of range" "--cl-platform 42 out of range" --model-path "$gguf" \
      --prompt-ids 1 --backend opencl --cl-platform 42
    # A good run on OpenCL reports zero bytes moved between host and device while decoding.
    if "$generate" --model-path "$gguf" --prompt-ids 1,2,3 -n 4 --greedy --json --backend opencl \
        --profile-out "$work/profile.csv" > "$work/out.txt" 2> "$work/err.txt" &&
      tail -n 1 "$work/out.txt" | grep -q '"host_device_copy_bytes":0,' &&
      grep -q '^decode,matmul,' "$work/profile.csv"; then
      ok "opencl run: zero-copy decode, profile written"
    else
      fail "opencl run"
    fi
  elif [ -n "${EDGELM_REQUIRE_OPENCL:-}" ]; then
    fail "EDGELM_REQUIRE_OPENCL is set but no OpenCL device"
  fi
fi

# An eviction flag the chosen policy does not read runs, with a warning naming it (the whole cache
# is used: an experiment that forgot --eviction-policy must not look budgeted).
if "$generate" --model-path "$gguf" --prompt-ids 1,2,3 -n 2 --kv-budget 8 > "$work/out.txt" 2> "$work/err.txt" &&
  grep -q '^\[warn\] \[eviction\] --kv-budget has no effect with --eviction-policy none$' "$work/err.txt" &&
  "$generate" --model-path "$gguf" --prompt-ids 1,2,3 -n 2 --eviction-policy tova --kv-budget 8 \
    --sink-tokens 2 > "$work/out.txt" 2> "$work/err.txt" &&
  grep -q 'sink-tokens has no effect with --eviction-policy tova$' "$work/err.txt" &&
  ! grep -q 'kv-budget has no effect' "$work/err.txt" &&
  "$generate" --model-path "$gguf" --prompt-ids 1,2,3 -n 2 --eviction-policy tova --kv-budget 8 \
    --eviction-seed 3 --pyramid-beta 4 > "$work/out.txt" 2> "$work/err.txt" &&
  grep -q 'eviction-seed has no effect with --eviction-policy tova$' "$work/err.txt" &&
  grep -q 'pyramid-beta has no effect with --eviction-policy tova$' "$work/err.txt" &&
  "$generate" --model-path "$gguf" --prompt-ids 1,2,3 -n 2 --eviction-policy tova --kv-budget 8 \
    --sink-tokens 2 --protect sinks > "$work/out.txt" 2> "$work/err.txt" &&
  ! grep -q 'has no effect' "$work/err.txt"; then
  ok "eviction flag the policy ignores: warning"
else
  fail "eviction flag the policy ignores: warning"
fi

# A good run: streams tokens and ends stdout with the JSON summary.
if "$generate" --model-path "$gguf" --prompt-ids 1,2,3 -n 4 --greedy --json > "$work/out.txt" 2> "$work/err.txt" &&
  tail -n 1 "$work/out.txt" | grep -q '"generated_tokens":4'; then
  ok "good run"
else
  fail "good run"
fi

# --profile on the CPU: a table per phase, and the CSV with each matmul shape's weight bytes.
if "$generate" --model-path "$gguf" --prompt-ids 1,2,3 -n 4 --greedy --profile-out "$work/cpu_profile.csv" \
    > "$work/out.txt" 2> "$work/err.txt" &&
  grep -q '^profile (decode): .* in ops, ' "$work/err.txt" &&
  head -n 1 "$work/cpu_profile.csv" | grep -q '^phase,op,kernel,calls,total_ms,bytes$' &&
  grep -Eq '^decode,matmul,[a-z0-9]+ [a-z0-9_]+ gemv [0-9]+x[0-9]+.*,[1-9][0-9]*$' "$work/cpu_profile.csv" &&
  grep -q '^prefill,attention,' "$work/cpu_profile.csv"; then
  ok "cpu profile"
else
  fail "cpu profile"
fi

# Q4_0 weights: --json names the layout the CPU multiplies them in (q4_0x8 where the table
# repacks, q4_0 elsewhere); --no-repack keeps q4_0 everywhere, with the same greedy tokens.
q4=$("$make_model" --preset tiny --format gguf --quant q4_0 --out "$work/q4" 2> /dev/null)
if "$generate" --model-path "$q4" --prompt-ids 1,2,3 -n 6 --greedy --json -q > "$work/packed.txt" 2> "$work/err.txt" &&
  "$generate" --model-path "$q4" --prompt-ids 1,2,3 -n 6 --greedy --json -q --no-repack > "$work/plain.txt" 2>> "$work/err.txt" &&
  tail -n 1 "$work/packed.txt" | grep -Eq '"weight_layout":"q4_0(x8)?"' &&
  tail -n 1 "$work/plain.txt" | grep -q '"weight_layout":"q4_0"' &&
  [ "$(tail -n 1 "$work/packed.txt" | grep -o '"tokens":\[[0-9,]*\]')" = \
    "$(tail -n 1 "$work/plain.txt" | grep -o '"tokens":\[[0-9,]*\]')" ]; then
  ok "q4_0 repacked and as stored"
else
  fail "q4_0 repacked and as stored"
fi

# A Q4_1 file: the SIMD tables multiply it converted to their Q8_0 layout (q8_0x8 on x86), the
# portable table and --no-repack as stored; --weight-type q5_1 converts it.
q41=$("$make_model" --preset tiny --format gguf --quant q4_1 --out "$work/q41" 2> /dev/null)
if "$generate" --model-path "$q41" --prompt-ids 1,2,3 -n 4 --greedy --json -q > "$work/packed.txt" 2> "$work/err.txt" &&
  "$generate" --model-path "$q41" --prompt-ids 1,2,3 -n 4 --greedy --json -q --no-repack > "$work/plain.txt" 2>> "$work/err.txt" &&
  "$generate" --model-path "$q41" --prompt-ids 1,2,3 -n 4 --greedy --json -q --weight-type q5_1 --no-repack > "$work/q51.txt" 2>> "$work/err.txt" &&
  tail -n 1 "$work/packed.txt" | grep -q '"weight_type":"q4_1"' &&
  tail -n 1 "$work/packed.txt" | grep -Eq '"weight_layout":"(q4_1|q8_0|q8_0x8)"' &&
  tail -n 1 "$work/plain.txt" | grep -q '"weight_layout":"q4_1"' &&
  tail -n 1 "$work/q51.txt" | grep -q '"weight_layout":"q5_1"'; then
  ok "q4_1 converted, as stored, and as q5_1"
else
  fail "q4_1 converted, as stored, and as q5_1"
fi

# Text in and out, the chat template, and an interactive session fed on stdin.
if "$generate" --model-path "$work/hf" --prompt "Hello there" -n 3 --greedy --json > "$work/out.txt" 2> "$work/err.txt" &&
  tail -n 1 "$work/out.txt" | grep -q '"text":'; then
  ok "text prompt"
else
  fail "text prompt"
fi
if "$generate" --list-chat-templates > "$work/out.txt" 2> "$work/err.txt" &&
  grep -qx chatml "$work/out.txt" && grep -qx llama3.2 "$work/out.txt" && grep -qx gemma3 "$work/out.txt"; then
  ok "--list-chat-templates"
else
  fail "--list-chat-templates"
fi
# The made models carry Llama 3's special tokens but no template: --chat-template names one.
if "$generate" --model-path "$gguf" --prompt "Hi" --chat --chat-template llama3 --system "Be brief." -n 3 --json -q \
    > "$work/out.txt" 2> "$work/err.txt" &&
  tail -n 1 "$work/out.txt" | grep -q '"prompt_tokens"' && grep -q '^chat template: llama3$' "$work/err.txt"; then
  ok "chat prompt"
else
  fail "chat prompt"
fi
# Qwen3's template, with its thinking switch off.
d=$(broken qwen3_template); cp "$chat_fixtures/qwen3.jinja" "$d/chat_template.jinja"
if "$generate" --model-path "$d" --prompt "Hi" --chat -n 2 -q > "$work/out.txt" 2> "$work/err.txt" &&
  grep -q '^chat template: qwen3 (thinking on; --no-think turns it off)$' "$work/err.txt" &&
  "$generate" --model-path "$d" --prompt "Hi" --chat --no-think -n 2 -q > "$work/out.txt" 2> "$work/err.txt" &&
  grep -q '^chat template: qwen3 (thinking off)$' "$work/err.txt"; then
  ok "qwen3 template and --no-think"
else
  fail "qwen3 template and --no-think"
fi
# A ChatML template on a vocabulary without <|im_end|>: it runs, and says it stops on EOS only.
d=$(broken chatml_template); cp "$chat_fixtures/smollm2.jinja" "$d/chat_template.jinja"
if "$generate" --model-path "$d" --prompt "Hi" --chat -n 2 -q > "$work/out.txt" 2> "$work/err.txt" &&
  grep -q '^chat template: chatml$' "$work/err.txt" &&
  grep -q "ends turns with '<|im_end|>', which is not a token of this model" "$work/err.txt"; then
  ok "chat template from chat_template.jinja"
else
  fail "chat template from chat_template.jinja"
fi
# --protect system finds the system prompt in the first feed (SmolLM2's default system message,
# 98 tokens of this byte-level vocabulary in a prompt of 176); with a budget below the prompt,
# every eviction keeps it, and a budget that cannot hold it is one error line.
if "$generate" --model-path "$d" --prompt "Hi there, how are you today?" --chat -n 4 -q --json \
    --eviction-policy random --kv-budget 150 --protect sinks,system,template --sink-tokens 2 \
    > "$work/out.txt" 2> "$work/err.txt" &&
  tail -n 1 "$work/out.txt" | grep -q '"eviction_policy":"random+protect(sinks,system,template)"' &&
  tail -n 1 "$work/out.txt" | grep -Eq '"protected_system_positions":[1-9][0-9]*' &&
  tail -n 1 "$work/out.txt" | grep -Eq '"evictions":[1-9]'; then
  ok "--protect system in a chat"
else
  cat "$work/out.txt"; fail "--protect system in a chat"
fi
expect_error "system prompt past the budget" "sink and system-prompt slots of layer 0 do not fit" \
  --model-path "$d" --prompt "Hi" --chat -n 4 --eviction-policy random --kv-budget 40 --protect system
d=$(broken no_tokenizer); rm -f "$d"/tokenizer*.json
expect_error "--protect template without a tokenizer" "--protect template needs the model's tokenizer" \
  --model-path "$d" --prompt-ids 1,2 --print-ids --eviction-policy tova \
  --kv-budget 8 --protect template
# Turns after the first prefill only what the cache lacks: the cache grows by the new turn.
if printf 'Hello\nAnd then?\n/reset\nHi again\n/quit\n' |
  "$generate" --model-path "$work/hf" --interactive --chat-template llama3 -n 3 --greedy \
    > "$work/out.txt" 2> "$work/err.txt" &&
  grep -q "conversation cleared" "$work/err.txt" && [ "$(grep -c 'tokens, ' "$work/err.txt")" -eq 3 ] &&
  ! grep -q "prefilling all of it" "$work/err.txt"; then
  ok "interactive session"
else
  fail "interactive session"
fi
# Mistral v3 moves the system message to the newest user message: the second turn starts over.
if printf 'Hello\nAnd then?\n/quit\n' |
  "$generate" --model-path "$work/hf" --interactive --chat-template mistral-v3 --system "Be brief." -n 3 --greedy \
    > "$work/out.txt" 2> "$work/err.txt" &&
  [ "$(grep -c 'mistral-v3 renders the conversation anew' "$work/err.txt")" -eq 1 ]; then
  ok "interactive session that starts over"
else
  fail "interactive session that starts over"
fi

# Id lists are strict (" " once ran with the prompt [0]; a trailing comma and a sign passed).
expect_error "--prompt-ids ' '" "--prompt-ids: ' ' is not a token id" --model-path "$gguf" --prompt-ids " "
expect_error "--prompt-ids 1,2," "--prompt-ids: item 3 of '1,2,' is empty" --model-path "$gguf" --prompt-ids 1,2,
expect_error "--prompt-ids +1" "--prompt-ids: '+1' is not a token id" --model-path "$gguf" --prompt-ids +1

# A model path that is a FIFO or a device ends at once (the FIFO's open does not wait for a
# writer); `timeout` turns a hang into exit 124, which counts as a failure.
timed_generate() { timeout 20 "$generate" "$@"; }
mkfifo "$work/fifo"
expect_error_from timed_generate generate "-m a FIFO" "[gguf] $work/fifo: not a regular file" -m "$work/fifo" --prompt-ids 1
expect_error_from timed_generate generate "-f a FIFO" "-f/--file: '$work/fifo' is not a regular file" \
  -m "$gguf" -f "$work/fifo"

# A file that cannot be written (a full disk) is an error naming it, not exit 0 after the run.
if [ -e /dev/full ]; then
  run=(--model-path "$gguf" --prompt-ids 1,2 -n 2)
  expect_error "--profile-out on a full disk" "--profile-out: cannot write '/dev/full'" "${run[@]}" --profile-out /dev/full
  expect_error "--dump-logits on a full disk" "[npy] /dev/full: write failed" "${run[@]}" --dump-logits /dev/full
  expect_error "--dump-kv-positions on a full disk" "[npy] /dev/full: write failed" "${run[@]}" --dump-kv-positions /dev/full
  "$generate" "${run[@]}" > /dev/full 2> "$work/err.txt"
  rc=$?
  if [ $rc -eq 1 ] && [ "$(tail -n 1 "$work/err.txt")" = "generate: stdout: write failed: No space left on device" ]; then
    ok "stdout on a full disk"
  else
    fail "stdout on a full disk (exit $rc)"
  fi
fi

# Runs that cannot give what was asked say so before they start: a reply -c cannot hold, a -c past
# the model's context (the tiny preset's is 4096). Both run.
if "$generate" --model-path "$gguf" --prompt-ids 1,2 -n 40 -c 16 --ignore-eos --print-ids > "$work/out.txt" 2> "$work/err.txt" &&
  grep -q '^\[warn\] -n/--n-predict 40 is more than the 15 tokens a reply can take after a 2-token prompt in -c/--ctx-size 16 (model context 4096)' "$work/err.txt" &&
  grep -q 'stop: context_full' "$work/err.txt"; then
  ok "-n past -c warns"
else
  fail "-n past -c warns"
fi
if "$generate" --model-path "$gguf" --prompt-ids 1,2 -n 15 -c 16 --ignore-eos --print-ids > "$work/out.txt" 2> "$work/err.txt" &&
  ! grep -q 'warn' "$work/err.txt" && grep -q 'stop: length' "$work/err.txt"; then
  ok "-n that -c holds exactly: no warning"
else
  fail "-n that -c holds exactly: no warning"
fi
if "$generate" --model-path "$gguf" --prompt-ids 1,2 -n 2 -c 5000 > "$work/out.txt" 2> "$work/err.txt" &&
  grep -q '^\[warn\] -c/--ctx-size 5000 is past the model.s context of 4096 positions' "$work/err.txt"; then
  ok "-c past the model's context warns"
else
  fail "-c past the model's context warns"
fi

finish_cli_test generate_errors
