#!/usr/bin/env bash
# `bench` on tiny models: the JSON rows (llama-bench's field names, values consistent with their
# own samples, the bandwidth measured around every decode run) checked by check_bench_json; the
# markdown table; llama-bench's -pg rows; runs without the bandwidth probe; the flag vocabulary
# (llama-bench's spellings -m -p -n -pg -d -r -t -o give the same rows as the long ones, and --help
# lists them; -p is bench's prompt lengths though it is prompt text in edgelm's other tools); and
# bad input ending in one clear line on stderr with a non-zero exit and no crash. Speeds are
# not checked: tests carry no timing thresholds.
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
if "$bench" -m "$gguf,$work/hf" --n-prompt 8 -n 4 -d 0,3 -t 1,2 -r 2 "${quick[@]}" -o json \
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
if "$bench" -m "$gguf" --n-prompt 8 -n 4 -t 1 -r 1 "${quick[@]}" > "$work/out.md" 2> "$work/err.txt" &&
  grep -q '^| model | size | params | backend | threads | test | t/s | bw GB/s' "$work/out.md" &&
  [ "$(grep -c '^| llama .* | pp8 | ' "$work/out.md")" -eq 1 ] &&
  grep -Eq '^\| llama .* \| tg4 \| [0-9.]+ ± [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|' "$work/out.md"; then
  ok "markdown table"
else
  cat "$work/out.md"; fail "markdown table"
fi

# Each named CPU kernel table, and weights converted on load.
if "$bench" -m "$work/hf" --n-prompt 4 -n 2 -t 1 -r 1 --backend cpu:portable --weight-type q8_0 \
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
if "$bench" -m "$gguf" --n-prompt 0 -n 2 -d 4095 -t $((online + 1)) -r 1 "${quick[@]}" \
    > "$work/out.md" 2> "$work/err.txt" &&
  grep -q "^bench: note: -t $((online + 1)) is more threads than the $online " "$work/err.txt" &&
  grep -q '^\[warn\] \[bench\] -n 2 -d 4095: tg2 @ d4095 needs 4097 positions, past the model.s context of 4096 ' \
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
expect_error "threads out of range" "--threads" -m "$gguf" -t 1025
expect_error "no test" "no test to run" -m "$gguf" --n-prompt 0 -n 0
expect_error "bad --cpus" "--cpus" -m "$gguf" --cpus 1-x


# llama-bench's -pg: PP prompt tokens then TG generated ones, timed together ("pp8+tg4", tokens/s
# over all 12), after the pp and tg tests, at each depth; no bandwidth limit on them.
if "$bench" -m "$gguf" -pg 8,4 -pg 5,3 --n-prompt 6 -n 2 -d 0,2 -t 1 -r 2 "${quick[@]}" -o json \
    > "$work/out.json" 2> "$work/err.txt" &&
  "$check" "$work/out.json" 8 2 > "$work/check.txt" &&
  [ "$(grep -o '"test": "[^"]*"' "$work/out.json" | tr '\n' ' ')" = \
    '"test": "pp6" "test": "tg2" "test": "pp8+tg4" "test": "pp5+tg3" "test": "pp6 @ d2" "test": "tg2 @ d2" "test": "pp8+tg4 @ d2" "test": "pp5+tg3 @ d2" ' ]; then
  ok "-pg rows"
else
  cat "$work/check.txt" "$work/err.txt" 2> /dev/null; fail "-pg rows"
fi
expect_error "-pg not a pair" "-pg: '8' is not PP,TG" -m "$gguf" -pg 8

# --no-bw-probe: no measurement at all; the rows say so (bw_probe false, no limit), and so does
# the markdown's header.
if "$bench" -m "$gguf" --n-prompt 4 -n 2 -t 1 -r 2 --no-bw-probe -o json > "$work/out.json" \
    2> "$work/err.txt" &&
  "$check" "$work/out.json" 2 2 > "$work/check.txt" &&
  [ "$(grep -c '"bw_probe": false' "$work/out.json")" -eq 2 ] &&
  ! grep -q 'measuring read bandwidth' "$work/err.txt" &&
  "$bench" -m "$gguf" --n-prompt 4 -n 2 -t 1 -r 1 --no-bw-probe > "$work/out.md" 2> "$work/err.txt" &&
  grep -q '^read bandwidth not measured (--no-bw-probe): no row carries a bandwidth limit' \
    "$work/out.md" &&
  grep -Eq '^\| llama .* \| tg2 \| [0-9.]+ ± [0-9.]+ \|  \|  \|  \|' "$work/out.md"; then
  ok "--no-bw-probe"
else
  cat "$work/check.txt" "$work/out.md" 2> /dev/null; fail "--no-bw-probe"
fi

# The vocabulary: aliases give the same rows.
for names in "-m -n -b" "--model --n-gen --batch-size" "--model-path --n-predict --chunk"; do
  read -r model_flag gen_flag batch_flag <<< "$names"
  "$bench" "$model_flag" "$gguf" --n-prompt 0 "$gen_flag" 3 "$batch_flag" 16 -t 1 -r 1 \
    --no-bw-probe -o json 2> "$work/err.txt" |
    grep -E '"(test|n_ubatch|model_filename)"' | tr -d ' \n' > "$work/alias$model_flag.txt"
done
if [ "$(cat "$work/alias-m.txt")" = "\"model_filename\":\"$gguf\",\"n_ubatch\":16,\"test\":\"tg3\"," ] &&
  cmp -s "$work/alias-m.txt" "$work/alias--model.txt" &&
  cmp -s "$work/alias-m.txt" "$work/alias--model-path.txt"; then
  ok "-m -n -b = --model --n-gen --batch-size = --model-path --n-predict --chunk"
else
  cat "$work"/alias-*.txt; fail "-m -n -b = --model --n-gen --batch-size = --model-path --n-predict --chunk"
fi

# llama-bench's spellings, as a llama-bench user types them: -p (bench's prompt lengths, prompt
# text in edgelm's other tools), -n, -pg, -r, -t, -m, -o, lists where llama-bench takes lists;
# the same rows as the long spellings, and --help names each.
llama_bench_rows() {  # the tests and thread counts of bench's JSON on stdin, one line
  grep -E '"(test|n_threads|n_prompt|n_gen|repetitions)"' | tr -d ' \n'
}
if "$bench" -m "$gguf" -p 8 -n 4 -pg 8,4 -r 1 -t 1 --no-bw-probe -o json > "$work/short.json" \
    2> "$work/err.txt" &&
  "$check" "$work/short.json" 3 1 > "$work/check.txt" &&
  "$bench" --model "$gguf" --n-prompt 8 --n-gen 4 --pg 8,4 --repetitions 1 --threads 1 \
    --no-bw-probe --output json > "$work/long.json" 2> "$work/err.txt" &&
  [ "$(llama_bench_rows < "$work/short.json")" = "$(llama_bench_rows < "$work/long.json")" ] &&
  [ "$(grep -o '"test": "[^"]*"' "$work/short.json" | tr '\n' ' ')" = \
    '"test": "pp8" "test": "tg4" "test": "pp8+tg4" ' ]; then
  ok "-p 8 -n 4 -pg 8,4 -r 1 -t 1 = --n-prompt 8 --n-gen 4 --pg 8,4 --repetitions 1 --threads 1"
else
  cat "$work/check.txt" 2> /dev/null; fail "-p 8 -n 4 -pg 8,4 -r 1 -t 1"
fi
if "$bench" -m "$gguf" -p 6,8 -n 2,4 -t 1,2 -r 1 --no-bw-probe -o md > "$work/out.md" \
    2> "$work/err.txt" &&
  [ "$(grep -cE '^\| llama .* \| [12] \| (pp6|pp8|tg2|tg4) \| ' "$work/out.md")" -eq 8 ]; then
  ok "-p 6,8 -n 2,4 -t 1,2: lists, as llama-bench takes them"
else
  cat "$work/out.md"; fail "-p 6,8 -n 2,4 -t 1,2"
fi
if "$bench" --help > "$work/help.txt" 2> "$work/err.txt" &&
  grep -q -- '-p (--n-prompt), -n, -d, -t and --backend take comma-separated lists' "$work/help.txt" && grep -q -- '-p = --n-prompt' "$work/help.txt" &&
  grep -q -- '-pg = --pg' "$work/help.txt" && grep -q -- '-pg PP,TG' "$work/help.txt" &&
  grep -q -- '-n,--n-predict,--n-gen' "$work/help.txt" && grep -q -- '-r,--repetitions' "$work/help.txt" &&
  grep -q -- '-t,--threads' "$work/help.txt" && grep -q -- '-m,--model' "$work/help.txt" &&
  grep -q -- '-o,--output' "$work/help.txt" && grep -q -- '-d,--n-depth' "$work/help.txt"; then
  ok "--help lists -p, -n, -pg, -r, -t, -m, -o, -d"
else
  cat "$work/help.txt"; fail "--help lists -p, -n, -pg, -r, -t, -m, -o, -d"
fi
expect_flag_error "$bench" bench "-p not a number" "--n-prompt" -m "$gguf" -p x

# bench's JSON feeds scripts/bench_compare.py (as llama-bench's does), whose --json data file
# scripts/make_docs_tables.py writes as the very table bench_compare prints: the way a measurement
# becomes a table of the docs (results/README.md).
scripts=$(cd "$(dirname "$0")/../../scripts" && pwd)
if ! command -v python3 > /dev/null; then
  echo "skip bench_compare.py --json: no python3"
elif python3 "$scripts/bench_compare.py" "$work/short.json" "$work/long.json" \
    --json "$work/data.json" --machine "Test CPU" > "$work/compare.md" 2> "$work/err.txt" &&
  printf '<!-- table: %s -->\n<!-- end table -->\n' "$work/data.json" > "$work/doc.md" &&
  python3 "$scripts/make_docs_tables.py" "$work/doc.md" > /dev/null 2> "$work/err.txt" &&
  [ "$(grep '^|' "$work/doc.md")" = "$(sed ':a; s/|  |/| |/; ta' "$work/compare.md")" ] &&
  [ "$(grep -c '"machine": "Test CPU", "date": "20' "$work/data.json")" -eq 3 ]; then
  ok "bench_compare.py --json: records that make_docs_tables.py writes as the same table"
else
  cat "$work/compare.md" "$work/doc.md" 2> /dev/null; fail "bench_compare.py --json"
fi
expect_flag_error "$bench" bench "--prompt with a hint" "use --n-prompt 5" -m "$gguf" --prompt 5
expect_flag_error "$bench" bench "-ub with a hint" "-b/--batch-size" -m "$gguf" -ub 512
expect_unknown_short_flags "$bench" bench -m "$gguf" --no-bw-probe

finish_cli_test bench_cli
