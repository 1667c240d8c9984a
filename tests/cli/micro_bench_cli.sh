#!/usr/bin/env bash
# `micro_bench`: one benchmark run with a fixed iteration count reports the FLOP and byte rates in
# Google Benchmark's JSON, and bad input (a filter that matches nothing, a bad --iterations, an
# unknown flag: Google Benchmark reports unknown long ones, edgelm's parse_flags unknown short
# ones) exits non-zero with a clear line and no crash. Speeds are not checked.
# Usage: micro_bench_cli.sh <micro_bench> <work dir>
set -u
micro_bench=$1

source "$(dirname "$0")/common.sh"
start_cli_test "$2"

# The portable Q4_0 decode GEMV at the 1B attention shape, weights from cache, run once.
if "$micro_bench" --hot --iterations 1 --benchmark_format=json \
    --benchmark_filter='^matmul/portable/q4_0/1b.attn_qo.2048x2048/M1/t1/' \
    > "$work/out.json" 2> "$work/err.txt" &&
  grep -q '"name": "matmul/portable/q4_0/1b.attn_qo.2048x2048/M1/t1/iterations:1/real_time"' \
    "$work/out.json" &&
  grep -q '"iterations": 1,' "$work/out.json" &&
  grep -q '"FLOPs": [1-9]' "$work/out.json" && grep -q '"bytes": [1-9]' "$work/out.json"; then
  ok "one benchmark, FLOP and byte rates"
else
  cat "$work/out.json" 2> /dev/null; fail "one benchmark, FLOP and byte rates"
fi

expect_error_from "$micro_bench" micro_bench "filter matching nothing" "matches no benchmark" \
  --benchmark_filter='^no_such_benchmark$'
expect_error_from "$micro_bench" micro_bench "--iterations 0" "--iterations: Value 0 not in range" \
  --iterations 0
expect_error_from "$micro_bench" micro_bench "--iterations without a value" "--iterations: 1 required" \
  --iterations
# Google Benchmark reports unknown flags itself, after the program's path.
"$micro_bench" --no-such-flag > "$work/out.txt" 2> "$work/err.txt"
rc=$?
if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q 'unrecognized command-line flag: --no-such-flag' \
    "$work/err.txt"; then
  ok "unknown flag"
else
  fail "unknown flag (exit $rc)"
fi

expect_unknown_short_flags "$micro_bench" micro_bench --benchmark_filter='^no_such_benchmark$'
expect_flag_error "$micro_bench" micro_bench "-t" "unknown flag '-t'" -t 2

finish_cli_test micro_bench_cli
