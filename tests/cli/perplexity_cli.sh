#!/usr/bin/env bash
# `perplexity`: on tiny models from make_model, a run prints the running perplexity per window and
# a --json summary whose fields agree with each other (windows, tokens scored, a finite
# perplexity above 1, the last running value), the same perplexity from the HF folder and the
# F32 GGUF file and for another batch size; bad input exits non-zero with one clear line and no
# crash.
# Usage: perplexity_cli.sh <perplexity> <make_model> <work dir>
set -u
perplexity=$1
make_model=$2

source "$(dirname "$0")/common.sh"
start_cli_test "$3"
make_tiny_models "$make_model" f32

# check <name> <exit code of a condition>
check() { if [ "$2" -eq 0 ]; then ok "$1"; else fail "$1"; fi; }
# field <name>: the value of a top-level number field of $work/out.json's last line
field() { tail -n 1 "$work/out.json" | grep -o "\"$1\":[^,}]*" | head -n 1 | cut -d: -f2; }

# ~2,400 bytes of prose; the tiny byte-level vocabulary makes it about as many tokens.
text="$work/text.txt"
for i in $(seq 1 40); do
  echo "Line $i: the quick brown fox jumps over the lazy dog, and the dog sleeps on."
done > "$text"

"$perplexity" -m "$work/hf" -f "$text" -c 64 --json -t 2 > "$work/out.json" 2> "$work/err.txt"
rc=$?
check "a run on the HF folder exits 0" $rc
head -n 1 "$work/out.json" | grep -qE '^\[1\][0-9]+\.[0-9]{4},\[2\][0-9]+\.[0-9]{4},'
rc=$?
check "running perplexity per window: $(head -n 1 "$work/out.json" | cut -c 1-40)..." $rc
grep -qE '^estimate: PPL = [0-9]+\.[0-9]{4} \+/- [0-9]+\.[0-9]{5}' "$work/out.json"
check "final estimate with its standard error" $?
for key in model file n_ctx batch chunks tokens_scored ppl ppl_stderr mean_nll running_ppl seconds \
  tokens_per_second backend weight_type kv_type; do
  tail -n 1 "$work/out.json" | grep -q "\"$key\":"
  check "--json has $key" $?
done
chunks=$(field chunks)
text_tokens=$(field text_tokens)
scored=$(field tokens_scored)
ppl=$(field ppl)
check "windows: $chunks = $text_tokens tokens / 64" $([ "$chunks" -eq $((text_tokens / 64)) ]; echo $?)
check "tokens scored: $scored = $chunks x 31" $([ "$scored" -eq $((chunks * 31)) ]; echo $?)
awk -v p="$ppl" 'BEGIN { exit !(p > 1 && p < 1e30) }'
check "a finite perplexity above 1: $ppl" $?
mean_nll=$(field mean_nll)
awk -v p="$ppl" -v m="$mean_nll" -v s="$(field ppl_stderr)" -v ms="$(field mean_nll_stderr)" \
  'BEGIN { d = p - exp(m); e = s - p * ms; exit !(d * d < 1e-18 * p * p && e * e < 1e-18 * s * s && s > 0) }'
check "ppl = exp(mean_nll), ppl_stderr = ppl x mean_nll_stderr" $?
grep -q "^estimate: PPL = $(awk -v p="$ppl" 'BEGIN { printf "%.4f", p }') " "$work/out.json"
check "the printed estimate is the JSON's" $?
last=$(tail -n 1 "$work/out.json" | grep -o '"running_ppl":\[[^]]*\]' | tr -d ']' | awk -F, '{ print $NF }')
awk -v a="$last" -v b="$ppl" 'BEGIN { exit !(a == b) }'
check "the last running value is the estimate" $?

# close <name> <a> <b> <bound>: relative difference below the bound
close() {
  awk -v a="$2" -v b="$3" -v bound="$4" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < bound * b) }'
  check "$1: $2 vs $3" $?
}
# Float summation order only (measured below 1e-6).
"$perplexity" -m "$gguf" -f "$text" -c 64 --json > "$work/out.json" 2> "$work/err.txt"
close "the F32 GGUF file gives the HF folder's perplexity" "$(field ppl)" "$ppl" 1e-5
"$perplexity" -m "$work/hf" -f "$text" -c 64 -b 7 --json > "$work/out.json" 2> "$work/err.txt"
close "-b 7 gives the same perplexity" "$(field ppl)" "$ppl" 1e-5
check "-b 7 is reported" $([ "$(field batch)" = 7 ]; echo $?)
# An F32 cache instead of F16 moves it by K/V rounding (measured 1.3e-4).
"$perplexity" -m "$work/hf" -f "$text" -c 64 --kv-type f32 --json > "$work/out.json" 2> "$work/err.txt"
close "an F32 cache gives nearly the same perplexity" "$(field ppl)" "$ppl" 1e-3
check "--kv-type f32 is reported" $([ "$(field kv_type)" = '"f32"' ]; echo $?)
"$perplexity" -m "$work/hf" -f "$text" -c 64 --chunks 2 --json > "$work/out.json" 2> "$work/err.txt"
check "--chunks 2 scores 2 windows" $([ "$(field chunks)" = 2 ] && [ "$(field tokens_scored)" = 62 ]; echo $?)
"$perplexity" --model-path "$work/hf" --file "$text" --ctx-size 64 --batch-size 512 --json \
  > "$work/out.json" 2> "$work/err.txt"
check "long flag names; -b above -c is capped at -c" $([ "$(field batch)" = 64 ]; echo $?)

# expect_error <name> <substring> <perplexity args...>
expect_error() { expect_error_from "$perplexity" perplexity "$@"; }
expect_error "no model" "-m/--model is required" -f "$text"
expect_error "no text file" "-f/--file is required" -m "$work/hf"
expect_error "missing text file" "No such file" -m "$work/hf" -f "$work/none.txt"
expect_error "directory as text file" "is a directory" -m "$work/hf" -f "$work"
: > "$work/empty.txt"
expect_error "empty text file" "is empty" -m "$work/hf" -f "$work/empty.txt"
if [ "$(id -u)" -ne 0 ]; then  # root reads any file
  cp "$text" "$work/unreadable.txt" && chmod 000 "$work/unreadable.txt"
  expect_error "unreadable text file" "cannot open" -m "$work/hf" -f "$work/unreadable.txt"
fi
head -c 100 "$text" > "$work/short.txt"
expect_error "too few tokens" "needs at least 128 (two windows)" -m "$work/hf" -f "$work/short.txt" -c 64
expect_error "context of 2" "-c/--ctx-size 2: must be at least 3" -m "$work/hf" -f "$text" -c 2
expect_error "context beyond the model's" "beyond the model's context of 4096" -m "$work/hf" \
  -f "$text" -c 5000
expect_error "context not a number" "--ctx-size" -m "$work/hf" -f "$text" -c abc
expect_error "no windows" "--chunks 0: must be at least 1" -m "$work/hf" -f "$text" --chunks 0
expect_error "batch of 0" "-b/--batch-size 0" -m "$work/hf" -f "$text" -b 0
expect_error "unknown KV type" "--kv-type: 'q4_0' is not one of" -m "$work/hf" -f "$text" --kv-type q4_0
expect_error "unknown weight type" "--weight-type: 'q3'" -m "$work/hf" -f "$text" --weight-type q3
expect_error "unknown backend" "bogus" -m "$work/hf" -f "$text" --backend bogus
expect_error "missing model" "no such file" -m "$work/none.gguf" -f "$text"
expect_error "unknown flag" "--bogus" -m "$work/hf" -f "$text" --bogus
expect_unknown_short_flags "$perplexity" perplexity -m "$work/hf" -f "$text"

finish_cli_test perplexity_cli
