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

# --list-skips prints the expected-skips format for the chosen backends; --update-skips rewrites
# their sections of a file and keeps the others (another machine's backends) as they were.
"$test_backend" --backend cpu:portable --list-skips > "$work/skips.txt" 2> "$work/err.txt"
if [ "$(grep -c '^\[' "$work/skips.txt")" = 1 ] && grep -qx '\[cpu:portable\]' "$work/skips.txt" &&
  grep -qx 'matmul/i32' "$work/skips.txt" && ! grep -qx 'matmul/f32' "$work/skips.txt"; then
  ok "--list-skips"
else
  cat "$work/skips.txt"; fail "--list-skips"
fi
printf '[cpu:elsewhere]\nmatmul/f32\n\n[cpu:portable]\nmatmul/f16\n' > "$work/update.txt"
"$test_backend" --backend cpu:portable --update-skips "$work/update.txt" > "$work/out.txt" 2> "$work/err.txt"
if grep -qx '\[cpu:elsewhere\]' "$work/update.txt" && grep -qx 'matmul/f32' "$work/update.txt" &&
  ! grep -qx 'matmul/f16' "$work/update.txt" &&
  [ "$(sed -n '/^\[cpu:portable\]/,$p' "$work/update.txt")" = "$(sed -n '/^\[cpu:portable\]/,$p' "$work/skips.txt")" ]; then
  ok "--update-skips keeps other sections"
else
  cat "$work/update.txt"; fail "--update-skips keeps other sections"
fi
printf '[cpu:portable]\nmatmul/q9_9\n' > "$work/bad.txt"
expect_error_from "$test_backend" test_backend "--update-skips of a bad file" \
  "bad.txt:2: 'matmul/q9_9' is no op/dtypes combination" --backend cpu:portable --update-skips "$work/bad.txt"

expect_flag_error "$test_backend" test_backend "-b refused" "the backend is chosen with --backend" \
  -b cpu:portable --filter rms_norm/f32
expect_flag_error "$test_backend" test_backend "-f refused" "cases are chosen with --filter" \
  --backend cpu:portable -f rms_norm/f32
expect_flag_error "$test_backend" test_backend "negative seed" "--seed" -s -1 "${one[@]}"
expect_unknown_short_flags "$test_backend" test_backend "${one[@]}"

finish_cli_test test_backend_cli
