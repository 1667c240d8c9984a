#!/usr/bin/env bash
# generate's flags as llama.cpp users type them: each alias has the effect of the older edgelm
# name (compared in the --json summary, or the profile), -f reads the prompt from a file,
# --ignore-eos generates exactly -n tokens where the end token would stop, unknown flags (llama.cpp
# ones with a hint) are one line and exit 1, the stats line starts a line of its own in every
# output path, and eviction logs one summary line (the per-step lines at debug level).
# Usage: generate_flags.sh <generate> <make_model> <work dir>
set -u
generate=$1
make_model=$2

source "$(dirname "$0")/common.sh"
start_cli_test "$3"
make_tiny_models "$make_model" q8_0
hf=$work/hf

# run <name> <generate args...>: generate with --json; stdout in $work/run_<name>.txt.
run() {
  local name=$1
  shift
  "$generate" -q --json "$@" > "$work/run_$name.txt" 2> "$work/err.txt"
}
# field <key> <name>: "key":value from the JSON summary of run <name> (its last stdout line).
field() {
  tail -n 1 "$work/run_$2.txt" 2> /dev/null | grep -o "\"$1\":\(\[[^]]*\]\|\"[^\"]*\"\|[^,}]*\)"
}
# same <check> <key> <want> <runs...>: the key is <want> in every run.
same() {
  local check=$1 key=$2 want=$3 name value
  shift 3
  for name in "$@"; do
    value=$(field "$key" "$name")
    if [ "$value" != "\"$key\":$want" ]; then
      fail "$check: run '$name' has '$value', want '\"$key\":$want'"
      return
    fi
  done
  ok "$check: \"$key\":$want"
}
# alike <check> <key> <runs...>: the key has one value in every run.
alike() {
  local check=$1 key=$2
  shift 2
  local want
  want=$(field "$key" "$1")
  if [ -z "$want" ]; then fail "$check: run '$1' has no $key"; return; fi
  same "$check" "$key" "${want#\"$key\":}" "$@"
}

# --- Aliases with the same effect.
run m -m "$hf" --prompt-ids 1,2,3 -n 4 --greedy
run model --model "$hf" --prompt-ids 1,2,3 -n 4 --greedy
run model_path --model-path "$hf" --prompt-ids 1,2,3 -n 4 --greedy
alike "-m = --model = --model-path" tokens m model model_path

# The cache fills at the capacity before the 80 tokens asked for.
for flag in -c --ctx-size --max-seq-len; do
  run "ctx$flag" -m "$hf" --prompt-ids 1,2,3 -n 80 --greedy "$flag" 40
done
run ctx_small -m "$hf" --prompt-ids 1,2,3 -n 80 --greedy -c 20
same "-c = --ctx-size = --max-seq-len" kv_slots 40 ctx-c ctx--ctx-size ctx--max-seq-len
same "-c 20" kv_slots 20 ctx_small

run n -m "$hf" --prompt-ids 1,2,3 -n 5 --greedy
run n_predict -m "$hf" --prompt-ids 1,2,3 --n-predict 5 --greedy
same "-n = --n-predict" generated_tokens 5 n n_predict

run p -m "$hf" -p "Hello there" -n 4 --greedy
run prompt -m "$hf" --prompt "Hello there" -n 4 --greedy
printf 'Hello there\n' > "$work/prompt.txt"
run f -m "$hf" -f "$work/prompt.txt" -n 4 --greedy
run file -m "$hf" --file "$work/prompt.txt" -n 4 --greedy
alike "-p = --prompt = -f FILE = --file FILE (prompt)" prompt_tokens p prompt f file
alike "-p = --prompt = -f FILE = --file FILE (tokens)" tokens p prompt f file
# A value that looks like a flag is still the value of the flag before it.
run dash_prompt -m "$hf" -p "-xyz" -n 2 --greedy
same "-p -xyz is prompt text" generated_tokens 2 dash_prompt

run t -m "$hf" --prompt-ids 1,2,3 -n 2 -t 1
run threads -m "$hf" --prompt-ids 1,2,3 -n 2 --threads 1
alike "-t = --threads" device t threads
if field device t | grep -q ', 1 threads)'; then ok "-t 1: one thread"; else fail "-t 1: one thread"; fi

# Sampling: -s/--seed and --temp/--temperature (the other filters off, so every token can be drawn).
sampling=(-m "$hf" --prompt-ids 1,2,3 -n 16 --top-k 0 --top-p 1 --min-p 0)
run s "${sampling[@]}" -s 7 --temp 1.5
run seed "${sampling[@]}" --seed 7 --temperature 1.5
run s8 "${sampling[@]}" -s 8 --temp 1.5
run temp0 "${sampling[@]}" -s 7 --temp 0
alike "-s = --seed, --temp = --temperature" tokens s seed
if [ -n "$(field tokens s)" ] && [ "$(field tokens s)" != "$(field tokens s8)" ] &&
  [ "$(field tokens s)" != "$(field tokens temp0)" ]; then
  ok "-s and --temp change the tokens"
else
  fail "-s and --temp change the tokens"
fi

# -b/--batch-size/--chunk: prompt tokens per prefill step, seen as the embedding calls of prefill.
for flag in -b --batch-size --chunk; do
  "$generate" -m "$hf" --prompt-ids 1,2,3,4,5,6,7 -n 1 -q "$flag" 2 \
    --profile-out "$work/profile$flag.csv" > /dev/null 2> "$work/err.txt"
done
steps=""
for flag in -b --batch-size --chunk; do
  steps="$steps $(grep '^prefill,embed,' "$work/profile$flag.csv" 2> /dev/null | cut -d, -f4)"
done
if [ "$steps" = " 4 4 4" ]; then
  ok "-b 2 = --batch-size 2 = --chunk 2: 7 prompt tokens in 4 steps"
else
  fail "-b 2 = --batch-size 2 = --chunk 2: prefill steps '$steps', want ' 4 4 4'"
fi

# llama.cpp's -nr is --no-repack: Q4_0 weights stay in their stored layout.
q4=$("$make_model" --preset tiny --format gguf --quant q4_0 --out "$work/q4" 2> /dev/null)
run nr -m "$q4" --prompt-ids 1,2,3 -n 2 -nr
run no_repack -m "$q4" --prompt-ids 1,2,3 -n 2 --no-repack
same "-nr = --no-repack" weight_layout '"q4_0"' nr no_repack

# --- The prompt file: one line for a file that is missing, a folder, or empty.
expect_flag_error "$generate" generate "-f missing file" "-f/--file: cannot open '$work/none.txt'" \
  -m "$hf" -f "$work/none.txt"
expect_flag_error "$generate" generate "-f a folder" "is a directory" -m "$hf" -f "$work"
: > "$work/empty.txt"
expect_flag_error "$generate" generate "-f an empty file" "holds no text" -m "$hf" -f "$work/empty.txt"
expect_flag_error "$generate" generate "-f and -p" "exclusive" -m "$hf" -f "$work/prompt.txt" -p x

# --- --ignore-eos. Greedy decoding of the tiny model (make_model's seed 0) after the prompt 49,0
# picks one token and then an end token (313 or 319) by a margin of 0.6 in the logits, found by
# trying prompts once; with --ignore-eos it runs to -n.
run eos -m "$hf" --prompt-ids 49,0 -n 6 --greedy
run ignore_eos -m "$hf" --prompt-ids 49,0 -n 6 --greedy --ignore-eos
same "without --ignore-eos: stops at the end token" stop '"eos"' eos
same "without --ignore-eos: one token" generated_tokens 1 eos
same "--ignore-eos: to -n" generated_tokens 6 ignore_eos
same "--ignore-eos: stop" stop '"length"' ignore_eos
tokens=$(field tokens ignore_eos)
if [ -n "$tokens" ] && ! echo "$tokens" | grep -Eq '[[,](313|319)[],]'; then
  ok "--ignore-eos: no end token sampled: $tokens"
else
  fail "--ignore-eos: an end token was sampled, or no tokens: '$tokens'"
fi

# --- Unknown flags: one line, exit 1, a hint for llama.cpp's; a negative value is a value.
expect_unknown_short_flags "$generate" generate -m "$hf" --prompt-ids 1
expect_flag_error "$generate" generate "-ngl after a flag" "--backend opencl runs every layer" \
  -m "$hf" -n 2 -ngl 99 --prompt-ids 1
expect_flag_error "$generate" generate "-ctk" "use --kv-type" -m "$hf" --prompt-ids 1 -ctk q8_0
expect_flag_error "$generate" generate "-fa" "always one fused op" -m "$hf" --prompt-ids 1 -fa on
expect_flag_error "$generate" generate "-x" "unknown flag '-x'" -m "$hf" --prompt-ids 1 -x
expect_flag_error "$generate" generate "--n-gpu-layers" "unknown flag '--n-gpu-layers'" \
  -m "$hf" --prompt-ids 1 --n-gpu-layers 99
if run negative -m "$hf" --prompt-ids 1 -n 2 --cl-platform -1 --temp -1; then
  ok "negative values (--cl-platform -1 --temp -1)"
else
  fail "negative values (--cl-platform -1 --temp -1)"
fi

# --- The stats line starts a line of its own after the streamed text, with stdout and stderr in
# one file (stdout block-buffered), in every path: text, --quiet, a stop at the end token, a full
# cache, --print-ids, --json; in --interactive, each turn's line does.
stats_line() {
  local name=$1
  shift
  "$generate" -m "$hf" "$@" > "$work/both.txt" 2>&1
  if [ "$(grep -c '^load [0-9.]* s | prefill ' "$work/both.txt")" -eq 1 ]; then
    ok "stats line on its own line: $name"
  else
    cat "$work/both.txt"; fail "stats line on its own line: $name"
  fi
}
stats_line "text" -p "Hello" -n 4 --greedy
stats_line "--quiet" -p "Hello" -n 4 -q
stats_line "end token" --prompt-ids 49,0 -n 6 --greedy
stats_line "full cache" --prompt-ids 1,2,3 -n 20 -c 6 --greedy
stats_line "--print-ids" --prompt-ids 1,2,3 -n 4 --print-ids
stats_line "--json" -p "Hello" -n 4 --greedy --json
printf 'Hello\nAgain\n' | "$generate" -m "$hf" -i --chat-template llama3 -n 3 --greedy > "$work/both.txt" 2>&1
if [ "$(grep -c '^\[3 tokens, length; ' "$work/both.txt")" -eq 2 ]; then
  ok "--interactive: each turn's line on its own line"
else
  cat "$work/both.txt"; fail "--interactive: each turn's line on its own line"
fi

# --- Eviction: one summary line; the line per eviction only with EDGELM_LOG=debug.
evicting=(-m "$hf" --prompt-ids 1,2,3,4,5,6,7,8,9,10,11,12 -n 10 -q --eviction-policy sliding
  --eviction-window 8)
"$generate" "${evicting[@]}" > /dev/null 2> "$work/err.txt"
if [ "$(grep -c '\[eviction\]' "$work/err.txt")" -eq 1 ] &&
  grep -Eq '^\[info\] \[eviction\] sliding: [1-9][0-9]* evictions, [1-9][0-9]* tokens evicted, [0-9.]+ ms$' \
    "$work/err.txt"; then
  ok "eviction: one summary line"
else
  fail "eviction: one summary line"
fi
EDGELM_LOG=debug "$generate" "${evicting[@]}" > /dev/null 2> "$work/err.txt"
if grep -q '^\[debug\] \[eviction\] step ' "$work/err.txt"; then
  ok "eviction: a line per eviction at debug level"
else
  fail "eviction: a line per eviction at debug level"
fi

# --- A budget is memory: the cache allocates the budget's slots (and one prefill step for
# snapkv), -c stays the logical context; --budget-bytes is the same budget in bytes of K and V
# (tiny, f16: 2 layers x 2 kv heads x 16 x 2 bytes x K and V = 256 bytes a slot), rounded down.
twelve=1,2,3,4,5,6,7,8,9,10,11,12
run full_cache -m "$hf" --prompt-ids $twelve -n 40 --greedy -c 512
run budget -m "$hf" --prompt-ids $twelve -n 40 --greedy -c 512 --eviction-policy sink --kv-budget 16
run budget_bytes -m "$hf" --prompt-ids $twelve -n 40 --greedy -c 512 --eviction-policy sink \
  --budget-bytes 4351
run snapkv -m "$hf" --prompt-ids $twelve -n 40 --greedy -c 512 -b 8 --eviction-policy snapkv \
  --kv-budget 16 --snapkv-window 4
same "no budget: the whole context" kv_capacity 512 full_cache
same "no budget: its bytes" kv_bytes 131072 full_cache
same "a budget of 16 slots" kv_capacity 16 budget budget_bytes
same "a budget of 16 slots: its bytes" kv_bytes 4096 budget budget_bytes
same "a budget of 16 slots: all resident" kv_resident_bytes 4096 budget
same "4351 bytes hold 16 slots" kv_budget 16 budget_bytes
same "positions past the allocation" next_position 51 full_cache budget budget_bytes snapkv
same "snapkv: the budget and a prefill step of 8" kv_capacity 24 snapkv
same "nothing falls back" eviction_fallbacks 0 budget snapkv
# Generation stops where the logical context ends, not where the cache is full.
run context -m "$hf" --prompt-ids 1,2,3 -n 80 --greedy -c 30 --eviction-policy sink --kv-budget 16
same "-c 30 with a budget: the logical context" next_position 30 context
same "-c 30 with a budget: stop" stop '"context_full"' context
if grep -q '^stopped: the logical context of 30 positions is used up; raise -c/--ctx-size$' \
  "$work/err.txt"; then
  ok "-c 30 with a budget: says why it stopped"
else
  fail "-c 30 with a budget: says why it stopped"
fi
# Memory pressure gives the pages past its cap back (released_bytes), so fewer are resident than
# allocated, and a cap below the policy's limit is a fallback: one warning, counted (a floor below
# the cap, so that the cap is half the cache).
run pressure -m "$hf" --prompt-ids $twelve -n 40 --greedy -c 4096 --eviction-policy sink \
  --eviction-window 400 --simulate-memory 0:4000,10:100 --pressure-floor 8
same "memory pressure: cap below the limit counted" eviction_fallbacks 1 pressure
released=$(field released_bytes pressure); released=${released#*:}
resident=$(field kv_resident_bytes pressure); resident=${resident#*:}
allocated=$(field kv_bytes pressure); allocated=${allocated#*:}
if [ "${released:-0}" -gt 0 ] && [ "$((resident + released))" -le "$allocated" ] &&
  [ "$(grep -c '^\[warn\] \[eviction\] sink: memory pressure caps the cache at 10 slots, below' \
    "$work/err.txt")" -eq 1 ]; then
  ok "memory pressure: $released bytes given back, $resident of $allocated resident"
else
  fail "memory pressure: released '$released', resident '$resident' of '$allocated'"
fi
# Memory low from the start: the cache stays at its floor (the one sink of a 64-slot budget + 16
# recent + the 12-token prefill step) and generation goes on to the last token; the floor is warned about once.
run low -m "$hf" --prompt-ids $twelve -n 40 --greedy --eviction-policy sink --kv-budget 64 \
  --simulate-memory 0:100
same "memory low throughout: every token generated" generated_tokens 40 low
same "memory low throughout: the cache at its floor" kv_slots 29 low
if [ "$(grep -c '^\[warn\] \[eviction\] sink: memory stays below' "$work/err.txt")" -eq 1 ]; then
  ok "memory low throughout: the floor warned about once"
else
  fail "memory low throughout: the floor warned about once"
fi

finish_cli_test generate_flags
