#!/usr/bin/env bash
# `eviction_bench`: a short run over every policy on a tiny model prints one JSON object with a
# row per policy; the flag vocabulary's aliases have the same effect, -p (prompt text in edgelm's
# tools) is refused with a hint to use --n-prompt, and unknown short flags are one line; bad input
# (flags out of range, an unknown policy, a cache too small for the prompt) exits non-zero with
# one clear line and no crash. Times are not checked.
# Usage: eviction_bench_cli.sh <eviction_bench> <make_model> <work dir>
set -u
eviction_bench=$1
make_model=$2

source "$(dirname "$0")/common.sh"
start_cli_test "$3"
make_tiny_models "$make_model" q8_0

# expect_error <name> <substring> <eviction_bench args...>
expect_error() { expect_error_from "$eviction_bench" eviction_bench "$@"; }

# Budget and window below prompt + decoded tokens, so the evicting policies do evict.
if "$eviction_bench" -m "$gguf" --n-prompt 48 -n 16 --eviction-window 16 --kv-budget 24 --snapkv-window 8 \
    -o json > "$work/out.json" 2> "$work/err.txt" &&
  [ "$(grep -o '"policy":"[a-z0-9_]*"' "$work/out.json" | tr '\n' ' ')" = \
    '"policy":"none" "policy":"sliding" "policy":"sink" "policy":"snapkv" "policy":"h2o" "policy":"tova" "policy":"random" "policy":"keydiff" "policy":"expected_attention" ' ] &&
  grep -o '{[^{}]*"policy":"expected_attention"[^{}]*}' "$work/out.json" | grep -q '"evictions":[1-9]' &&
  grep -o '{[^{}]*"policy":"h2o"[^{}]*}' "$work/out.json" | grep -q '"evictions":[1-9]' &&
  grep -o '{[^{}]*"policy":"none"[^{}]*}' "$work/out.json" | grep -q '"evictions":0,'; then
  ok "every policy, one JSON row each, evictions counted"
else
  cat "$work/out.json" 2> /dev/null; fail "every policy, one JSON row each, evictions counted"
fi

# The wrappers around the budgeted policies (pyramid: the bottom layer holds more than the budget;
# the sink policy keeps its fixed window, so only --protect applies to it).
if "$eviction_bench" -m "$gguf" --n-prompt 48 -n 16 --kv-budget 24 --eviction-window 8 \
    --sink-tokens 4 --policies keydiff,sink --layer-budget pyramid --pyramid-beta 2 --protect sinks \
    -o json \
    > "$work/wrapped.json" 2> "$work/err.txt" &&
  grep -q '"kv_slots":34,"ms_per_eviction":[0-9.e-]*,"policy":"keydiff","policy_name":"keydiff+protect(sinks)+pyramid"' \
    "$work/wrapped.json" &&
  grep -q '"policy":"sink","policy_name":"sink+protect(sinks)"' "$work/wrapped.json"; then
  ok "wrapped policies: protect and pyramid named, the bottom layer holds its share"
else
  cat "$work/wrapped.json" 2> /dev/null; fail "wrapped policies"
fi
expect_error "unknown protected class" "--protect 'sink': 'sink' is not one of" -m "$gguf" \
  --policies keydiff --protect sink

expect_error "prompt of 0 tokens" "--n-prompt: Value 0 not in range" -m "$gguf" --n-prompt 0
expect_error "negative decode count" "--n-predict: Value -1 not in range" -m "$gguf" -n -1
expect_error "cache of 0 slots" "--ctx-size: Value 0 not in range" -m "$gguf" --max-seq-len 0
expect_error "prefill step of 0 tokens" "--batch-size: Value 0 not in range" -m "$gguf" -b 0
expect_error "negative threads" "--threads: Value -1 not in range" -m "$gguf" -t -1
expect_error "unknown policy" "--policies: 'lru' is not one of" -m "$gguf" --policies none,lru
expect_error "prompt past the context" "--n-prompt 100 and -n 16 tokens pass the logical context" \
  -m "$gguf" --policies none --n-prompt 100 -n 16 --max-seq-len 50
expect_error "missing model" "no such file" -m "$work/none.gguf"


# Aliases: the same run, row for row (times aside), through every name; -c is the capacity (a
# prompt past it fails under either name).
for names in "-m -n -c -b" "--model --n-gen --ctx-size --batch-size" \
  "--model-path --n-predict --max-seq-len --chunk"; do
  read -r model_flag gen_flag ctx_flag batch_flag <<< "$names"
  "$eviction_bench" "$model_flag" "$gguf" --n-prompt 20 "$gen_flag" 6 "$ctx_flag" 40 \
    "$batch_flag" 8 --eviction-window 8 --kv-budget 12 --snapkv-window 4 -o json 2> "$work/err.txt" |
    grep -o '"\(policy\|evictions\|kv_slots\|prefill_evictions\)":[^,}]*' | tr '\n' ' ' \
      > "$work/alias$model_flag.txt"
done
# With prefill steps of 8 tokens (not 2), the sliding window evicts 3 times during prefill (not 6).
"$eviction_bench" -m "$gguf" --n-prompt 20 -n 6 -c 40 -b 2 --eviction-window 8 --policies sliding \
  -o json 2> "$work/err.txt" | grep -o '"prefill_evictions":[0-9]*' > "$work/b2.txt"
if grep -q '"evictions":[1-9][0-9]* "kv_slots":12 "policy":"h2o" "prefill_evictions":[0-9]* ' \
  "$work/alias-m.txt" &&
  grep -q '"kv_slots":8 "policy":"sliding" "prefill_evictions":3 ' "$work/alias-m.txt" &&
  grep -q '"prefill_evictions":6' "$work/b2.txt" &&
  cmp -s "$work/alias-m.txt" "$work/alias--model.txt" &&
  cmp -s "$work/alias-m.txt" "$work/alias--model-path.txt"; then
  ok "-m -n -c -b = --model --n-gen --ctx-size --batch-size = --model-path --n-predict --max-seq-len --chunk"
else
  cat "$work"/alias-*.txt; fail "aliases"
fi
expect_error "prompt past -c" "-c/--ctx-size 50" -m "$gguf" --policies none --n-prompt 100 -c 50

expect_flag_error "$eviction_bench" eviction_bench "-p 48 refused" \
  "unknown flag '-p': -p/--prompt is the prompt text in edgelm's tools; use --n-prompt 48" \
  -m "$gguf" -p 48
expect_flag_error "$eviction_bench" eviction_bench "--prompt 48 refused" "use --n-prompt 48" \
  -m "$gguf" --prompt 48
expect_unknown_short_flags "$eviction_bench" eviction_bench -m "$gguf" --policies none

finish_cli_test eviction_bench_cli
