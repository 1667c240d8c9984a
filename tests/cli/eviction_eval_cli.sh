#!/usr/bin/env bash
# `eviction_eval`: on a tiny model from make_model, a run of every kind (streaming, compress-then-
# continue, retrieval, cost) over two policies and two budgets writes one JSON object per cell
# whose fields agree with each other and with the settings they record (check_eviction_eval_json),
# a CSV row per cell and a markdown table on stdout, with progress on stderr; --budget-bytes gives
# the budget in slots that the bytes hold; bad settings exit non-zero with one clear line and no
# crash.
# Usage: eviction_eval_cli.sh <eviction_eval> <make_model> <check_eviction_eval_json> <work dir>
set -u
eviction_eval=$1
make_model=$2
checker=$3

source "$(dirname "$0")/common.sh"
start_cli_test "$4"
make_tiny_models "$make_model" f32

# check <name> <exit code of a condition>
check() { if [ "$2" -eq 0 ]; then ok "$1"; else fail "$1"; fi; }

# About 2,400 bytes of prose; the tiny byte-level vocabulary makes it about as many tokens.
text="$work/text.txt"
for i in $(seq 1 40); do
  echo "Line $i: the quick brown fox jumps over the lazy dog, and the dog sleeps on."
done > "$text"

run=(-m "$gguf" -f "$text" -c 128 --windows 2 --budgets 16,32 --policies sink,h2o
  --prefix-tokens 32 --continue-tokens 16 --block-tokens 16 --bootstrap 100 --cost-tokens 4
  --passkey-lengths 32 --passkey-depths 0.5 --passkey-trials 1 -t 2)
"$eviction_eval" "${run[@]}" --json "$work/out.jsonl" --csv "$work/out.csv" \
  > "$work/out.md" 2> "$work/err.txt"
check "a run of every kind exits 0" $?
"$checker" "$work/out.jsonl" "$work/out.csv" 4 128 2 > "$work/check.txt"
rc=$?
cat "$work/check.txt"
check "JSON lines and CSV: every field, consistent" $rc
grep -q '^| policy | budget | KV MiB | ppl | ppl after fill | ΔNLL after fill |' "$work/out.md"
check "markdown: the quality table" $?
grep -q '^| policy | budget | passkey accuracy (full) |' "$work/out.md"
check "markdown: the retrieval and cost table" $?
for cell in "sink | 16" "h2o | 16" "sink | 32" "h2o | 32"; do
  [ "$(grep -c "^| $cell |" "$work/out.md")" -eq 2 ]
  check "markdown: both tables have a row for $cell" $?
done
grep -q '^| full cache | 128 |' "$work/out.md"
check "markdown: the full cache's row" $?
grep -q '^streaming: .* window 2/2, 128 tokens, 4 cells' "$work/err.txt" &&
  grep -q '^retrieval 2/2: length 32' "$work/err.txt" && grep -q '^cost: h2o at 32 slots' "$work/err.txt"
check "progress on stderr" $?
! grep -q '"schema"' "$work/out.md"
check "no JSON on stdout" $?

# 4KiB of an F16 cache whose slot takes 2 layers x 2 kv heads x 16 x K and V x 2 bytes = 256: 16.
"$eviction_eval" -m "$gguf" -f "$text" -c 64 --budget-bytes 4KiB --policies sink --runs streaming \
  --block-tokens 16 --json "$work/bytes.jsonl" --csv "$work/bytes.csv" > /dev/null 2> "$work/err.txt"
check "--budget-bytes run exits 0" $?
grep -q '"budget_slots":16,"budget_bytes":4096,' "$work/bytes.jsonl" &&
  grep -q '"budget_bytes_requested":4096' "$work/bytes.jsonl" &&
  grep -q '^--budget-bytes 4KiB: 16 slots per layer and kv head (256 bytes each)' "$work/err.txt"
check "--budget-bytes 4KiB: 16 slots" $?
"$checker" "$work/bytes.jsonl" "$work/bytes.csv" 1 64 1 > "$work/check.txt"
check "--budget-bytes: a consistent line" $?
grep -q '"evict_every":1,' "$work/bytes.jsonl"
check "the strict setting by default (--evict-every 1)" $?

# expect_error <name> <substring> <eviction_eval args...>
expect_error() { expect_error_from "$eviction_eval" eviction_eval "$@"; }
base=(-m "$gguf" -f "$text" -c 64)
expect_error "budget 0" "budget 0: a budget is at least 1 slot" "${base[@]}" --budgets 0
expect_error "sinks not below the budget" "--sink-tokens 8 must be below the budget of 8 slots" \
  "${base[@]}" --budgets 8 --sink-tokens 8 --policies sink
expect_error "text window shorter than the budget" \
  "-c/--ctx-size 64: a text window shorter than the budget of 128 slots" "${base[@]}" --budgets 128
head -c 40 "$text" > "$work/short.txt"
expect_error "text shorter than a window" "tokenizes to 41 tokens, fewer than one window of -c" \
  -m "$gguf" -f "$work/short.txt" -c 64 --budgets 16 --runs streaming
expect_error "unknown policy" "--policies: 'lru' is not one of" "${base[@]}" --policies sink,lru
expect_error "unknown wrapper" "wrapper 'lru' is not protect or pyramid" "${base[@]}" \
  --policies h2o+lru
expect_error "a pyramid's top layer too small for a chunk" \
  "tova+pyramid at a budget of 16 slots makes room for steps of at most" "${base[@]}" \
  --budgets 16 --policies tova+pyramid --pyramid-beta 2 --evict-every 8
expect_error "none as a policy" "'none' is the full cache" "${base[@]}" --policies none
expect_error "chunk beyond half the budget" "--evict-every 9 is more than half the budget of 16" \
  "${base[@]}" --budgets 16 --evict-every 9
expect_error "prefill step beyond half the budget" "-b/--batch-size 9 is more than half the budget" \
  "${base[@]}" --budgets 16 -b 9
expect_error "continuation longer than a window" "+ 1 is longer than a text window" "${base[@]}" \
  --budgets 16
expect_error "budget bytes holding no slot" "--budget-bytes 100 holds no KV slot" "${base[@]}" \
  --budget-bytes 100
expect_error "budget bytes not a size" "--budget-bytes: '4 MiB' is not a size" "${base[@]}" \
  --budget-bytes "4 MiB"
expect_error "both kinds of budget" "give the budgets one way" "${base[@]}" --budgets 16 \
  --budget-bytes 4KiB
expect_error "unknown run" "--runs: 'plots' is not one of" "${base[@]}" --runs streaming,plots
expect_error "no model" "-m/--model is required" -f "$text"
expect_error "no text" "-f/--file is required" -m "$gguf"
expect_error "missing text" "No such file" -m "$gguf" -f "$work/none.txt"
printf '# none\n\n' > "$work/list.txt"
expect_error "empty file list" "--file-list: '$work/list.txt' names no file" -m "$gguf" \
  --file-list "$work/list.txt"
expect_error "chat template demanded of a model without one" "[chat]" -m "$gguf" --runs retrieval \
  --budgets 16 --chat on
"$eviction_eval" --list-chat-templates > "$work/templates.txt" 2> "$work/err.txt" &&
  grep -qx chatml "$work/templates.txt"
check "--list-chat-templates names chatml" $?
expect_error "unknown chat template" "[chat]" -m "$gguf" --runs retrieval --budgets 16 \
  --chat-template nosuch
expect_error "bad passkey depth" "--passkey-depths 2: a depth is a share" -m "$gguf" \
  --runs retrieval --budgets 16 --passkey-depths 2
expect_error "unwritable --json" "--json: cannot write" "${base[@]}" --budgets 16 --runs streaming \
  --json "$work/no/such/dir/out.jsonl"
expect_error "missing model" "no such file" -m "$work/none.gguf" -f "$text"
expect_error "unknown flag" "--bogus" "${base[@]}" --bogus
expect_unknown_short_flags "$eviction_eval" eviction_eval "${base[@]}"

finish_cli_test eviction_eval_cli
