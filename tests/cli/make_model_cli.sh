#!/usr/bin/env bash
# `make_model`: -s is --seed (the same bytes for the same seed, other bytes for another), --list
# names the presets, and bad input (a negative seed, an unknown flag) is one line with exit 1.
# Usage: make_model_cli.sh <make_model> <work dir>
set -u
make_model=$1

source "$(dirname "$0")/common.sh"
start_cli_test "$2"

a=$("$make_model" --preset tiny --format gguf --quant q8_0 -s 3 --out "$work/a" 2> "$work/err.txt")
b=$("$make_model" --preset tiny --format gguf --quant q8_0 --seed 3 --out "$work/b" 2> "$work/err.txt")
c=$("$make_model" --preset tiny --format gguf --quant q8_0 -s 4 --out "$work/c" 2> "$work/err.txt")
if [ -s "$a" ] && cmp -s "$a" "$b" && ! cmp -s "$a" "$c"; then
  ok "-s 3 = --seed 3, -s 4 differs"
else
  fail "-s 3 = --seed 3, -s 4 differs"
fi
if "$make_model" --list > "$work/out.txt" 2> "$work/err.txt" && grep -q '^tiny ' "$work/out.txt"; then
  ok "--list"
else
  fail "--list"
fi

expect_flag_error "$make_model" make_model "negative seed" "--seed: '-2' is not a whole number" \
  --preset tiny --format gguf -s -2 --out "$work/bad_seed"
expect_unknown_short_flags "$make_model" make_model --preset tiny --format gguf --out "$work/d"

finish_cli_test make_model_cli
