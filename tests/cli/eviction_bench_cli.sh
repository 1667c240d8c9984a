#!/usr/bin/env bash
# `eviction_bench`: a short run over every policy on a tiny model prints one JSON object with a
# row per policy, and bad input (flags out of range, an unknown policy, a cache too small for the
# prompt) exits non-zero with one clear line and no crash. Times are not checked.
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
if "$eviction_bench" -m "$gguf" -p 48 -n 16 --eviction-window 16 --kv-budget 24 --snapkv-window 8 \
    -o json > "$work/out.json" 2> "$work/err.txt" &&
  [ "$(grep -o '"policy":"[a-z0-9]*"' "$work/out.json" | tr '\n' ' ')" = \
    '"policy":"none" "policy":"sliding" "policy":"sink" "policy":"snapkv" "policy":"h2o" "policy":"tova" ' ] &&
  grep -o '{[^{}]*"policy":"h2o"[^{}]*}' "$work/out.json" | grep -q '"evictions":[1-9]' &&
  grep -o '{[^{}]*"policy":"none"[^{}]*}' "$work/out.json" | grep -q '"evictions":0,'; then
  ok "every policy, one JSON row each, evictions counted"
else
  cat "$work/out.json" 2> /dev/null; fail "every policy, one JSON row each, evictions counted"
fi

expect_error "prompt of 0 tokens" "--prompt: Value 0 not in range" -m "$gguf" -p 0
expect_error "negative decode count" "--n-gen: Value -1 not in range" -m "$gguf" -n -1
expect_error "cache of 0 slots" "--max-seq-len: Value 0 not in range" -m "$gguf" --max-seq-len 0
expect_error "negative threads" "--threads: Value -1 not in range" -m "$gguf" -t -1
expect_error "unknown policy" "--policies: 'lru' is not one of" -m "$gguf" --policies none,lru
expect_error "prompt past the cache" "policy none: " -m "$gguf" --policies none -p 100 \
  --max-seq-len 50
expect_error "missing model" "no such file" -m "$work/none.gguf"

finish_cli_test eviction_bench_cli
