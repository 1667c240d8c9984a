#!/usr/bin/env bash
# `test_backend`: --backend and --filter choose what runs; -t/--threads and -s/--seed are the
# vocabulary's names (the same seed gives the same errors, another seed others); -b and -f, which
# mean the batch size and a text file in edgelm's tools, are refused with a hint to the long names;
# unknown short flags are one line with exit 1.
# Usage: test_backend_cli.sh <test_backend> <work dir>
set -u
test_backend=$1

source "$(dirname "$0")/common.sh"
start_cli_test "$2"

# nmse <file>: the errors of the results, in order.
nmse() { grep -o '"nmse":[^,]*' "$1" | tr '\n' ' '; }
one=(--backend cpu:portable --filter rms_norm/f32)
"$test_backend" "${one[@]}" -t 1 -s 3 --json > "$work/short.json" 2> "$work/err.txt"
"$test_backend" "${one[@]}" --threads 1 --seed 3 --json > "$work/long.json" 2> "$work/err.txt"
"$test_backend" "${one[@]}" -t 1 -s 4 --json > "$work/other.json" 2> "$work/err.txt"
if grep -q '"failed":0,"passed":[1-9]' "$work/short.json" &&
  ! grep -q '"backend":"[^c]' "$work/short.json" && ! grep -q '"case":"[^r]' "$work/short.json" &&
  [ "$(nmse "$work/short.json")" = "$(nmse "$work/long.json")" ] &&
  [ "$(nmse "$work/short.json")" != "$(nmse "$work/other.json")" ]; then
  ok "--backend, --filter; -t -s = --threads --seed"
else
  cat "$work/short.json"; fail "--backend, --filter; -t -s = --threads --seed"
fi

expect_flag_error "$test_backend" test_backend "-b refused" "the backend is chosen with --backend" \
  -b cpu:portable --filter rms_norm/f32
expect_flag_error "$test_backend" test_backend "-f refused" "cases are chosen with --filter" \
  --backend cpu:portable -f rms_norm/f32
expect_flag_error "$test_backend" test_backend "negative seed" "--seed" -s -1 "${one[@]}"
expect_unknown_short_flags "$test_backend" test_backend "${one[@]}"

finish_cli_test test_backend_cli
