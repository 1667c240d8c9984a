#!/usr/bin/env bash
# `bench` on tiny models: the JSON rows (llama-bench's field names, values consistent with their
# own samples, the bandwidth measured around every decode run) checked by check_bench_json; the
# markdown table; and bad input ending in one clear line on stderr with a non-zero exit and no
# crash. Speeds are not checked: tests carry no timing thresholds.
# Usage: bench_cli.sh <bench> <make_model> <check_bench_json> <work dir>
set -u
bench=$1
make_model=$2
check=$3

source "$(dirname "$0")/common.sh"
start_cli_test "$4"
make_tiny_models "$make_model" q4_0
# A small bandwidth buffer and one pass keep the test quick; the numbers mean nothing here.
quick=(--bw-mib 8 --bw-passes 1)

# Two models x two thread counts x two depths x (pp8, tg4) = 16 rows of 2 repetitions.
if "$bench" -m "$gguf,$work/hf" -p 8 -n 4 -d 0,3 -t 1,2 -r 2 "${quick[@]}" -o json \
    > "$work/out.json" 2> "$work/err.txt" &&
  "$check" "$work/out.json" 16 2 > "$work/check.txt"; then
  ok "json rows"
else
  cat "$work/check.txt" 2> /dev/null; fail "json rows"
fi
# Progress goes to stderr, one line per timed run, with the bandwidth around decode runs.
if [ "$(grep -c 'tg4 rep [12]/2: .* t/s (read bandwidth before/after' "$work/err.txt")" -eq 8 ]; then
  ok "progress lines"
else
  fail "progress lines"
fi

# Markdown: the header, then one row per test; tg rows carry the bandwidth columns.
if "$bench" -m "$gguf" -p 8 -n 4 -t 1 -r 1 "${quick[@]}" > "$work/out.md" 2> "$work/err.txt" &&
  grep -q '^| model | size | params | backend | threads | test | t/s | bw GB/s' "$work/out.md" &&
  [ "$(grep -c '^| llama .* | pp8 | ' "$work/out.md")" -eq 1 ] &&
  grep -Eq '^\| llama .* \| tg4 \| [0-9.]+ ± [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|' "$work/out.md"; then
  ok "markdown table"
else
  cat "$work/out.md"; fail "markdown table"
fi

# Each named CPU kernel table, and weights converted on load.
if "$bench" -m "$work/hf" -p 4 -n 2 -t 1 -r 1 --backend cpu:portable --weight-type q8_0 \
    "${quick[@]}" -o json > "$work/out.json" 2> "$work/err.txt" &&
  "$check" "$work/out.json" 2 1 > "$work/check.txt" &&
  grep -q '"weight_type": "q8_0"' "$work/out.json" &&
  grep -q '"backend_label": "cpu:portable"' "$work/out.json"; then
  ok "--backend cpu:portable --weight-type q8_0"
else
  cat "$work/check.txt" 2> /dev/null; fail "--backend cpu:portable --weight-type q8_0"
fi

# Notes, not errors: more threads than the machine runs at once, and a test longer than the
# model's context (the tiny preset's is 4096).
online=$(getconf _NPROCESSORS_ONLN)
if "$bench" -m "$gguf" -p 0 -n 2 -d 4095 -t $((online + 1)) -r 1 "${quick[@]}" \
    > "$work/out.md" 2> "$work/err.txt" &&
  grep -q "^bench: note: -t $((online + 1)) is more threads than the $online " "$work/err.txt" &&
  grep -q '^bench: note: the longest test needs 4097 positions, more than the 4096 ' \
    "$work/err.txt"; then
  ok "notes on threads and context"
else
  fail "notes on threads and context"
fi

# expect_error <name> <substring> <bench args...>
expect_error() { expect_error_from "$bench" bench "$@" "${quick[@]}"; }

expect_error "missing model" "does not exist" -m "$work/none.gguf"
expect_error "not a gguf" "bad magic" -m "$work/hf/config.json"
head -c 3000 "$gguf" > "$work/truncated.gguf"
expect_error "truncated gguf" "[gguf]" -m "$work/truncated.gguf"
expect_error "bad --output" "--output" -m "$gguf" -o xml
expect_error "unknown backend" "--backend" -m "$gguf" --backend vulkan
expect_error "bad --weight-type" "--weight-type" -m "$gguf" --weight-type q4_0x8
expect_error "bad --kv-type" "--kv-type" -m "$gguf" --kv-type q8_0
expect_error "zero threads" "--threads" -m "$gguf" -t 0
expect_error "no test" "no test to run" -m "$gguf" -p 0 -n 0
expect_error "bad --cpus" "--cpus" -m "$gguf" --cpus 1-x

finish_cli_test bench_cli
