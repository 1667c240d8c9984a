#!/usr/bin/env bash
# scripts/plot_eviction.py on eviction_eval's JSON lines from a tiny model of make_model: a run of
# every kind gives every PNG (valid, not trivially small, the paths printed); runs from separate
# files are put together, and a file without a run leaves its plots out with a note; bad input
# (a missing file, a line that is not JSON, another schema, a missing field, a cell given twice,
# cells of different models) exits 1 with one line on stderr.
# Needs python3 with matplotlib and numpy (scripts/install_deps.sh); without them it exits 77,
# which CTest reports as skipped.
# Usage: plot_eviction_cli.sh <eviction_eval> <make_model> <plot_eviction.py> <work dir>
set -u
eviction_eval=$1
make_model=$2
script=$3

source "$(dirname "$0")/common.sh"
start_cli_test "$4"
# matplotlib keeps its font cache here rather than in the home folder.
export MPLCONFIGDIR="$work/matplotlib"

# The first python3 that has matplotlib and numpy: the one on PATH, or Debian's, where
# install_deps.sh puts them when PATH starts with another one (a virtual environment, pyenv).
# Importing pyplot builds the font cache now, so that the runs below print nothing about it.
python=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c "import matplotlib.pyplot, numpy" > /dev/null 2>&1; then
    python=$candidate
    break
  fi
done
if [ -z "$python" ]; then
  echo "SKIPPED: no python3 with matplotlib and numpy (scripts/install_deps.sh installs them)"
  exit 77
fi

make_tiny_models "$make_model" f32

# check <name> <exit code of a condition>
check() { if [ "$2" -eq 0 ]; then ok "$1"; else fail "$1"; fi; }

# is_png <file>: the PNG signature, an IHDR of at least 400 x 300 pixels and more than 20 kB,
# so an empty or blank image does not pass.
is_png() {
  [ -f "$1" ] || return 1
  [ "$(od -An -tx1 -N8 "$1" | tr -d ' \n')" = "89504e470d0a1a0a" ] || return 1
  [ "$(od -An -c -j12 -N4 "$1" | tr -d ' \n')" = "IHDR" ] || return 1
  local width height
  width=$(od -An -tu1 -j16 -N4 "$1" | awk '{print ((($1 * 256 + $2) * 256 + $3) * 256 + $4)}')
  height=$(od -An -tu1 -j20 -N4 "$1" | awk '{print ((($1 * 256 + $2) * 256 + $3) * 256 + $4)}')
  [ "$width" -ge 400 ] && [ "$height" -ge 300 ] && [ "$(wc -c < "$1")" -gt 20000 ]
}

for i in $(seq 1 40); do
  echo "Line $i: the quick brown fox jumps over the lazy dog, and the dog sleeps on."
done > "$work/text.txt"
run=(-m "$gguf" -f "$work/text.txt" -c 128 --windows 2 --prefix-tokens 32 --continue-tokens 16
  --block-tokens 16 --bootstrap 50 --cost-tokens 4 --passkey-lengths 32 --passkey-depths 0.5
  --passkey-trials 1 -t 2)
"$eviction_eval" "${run[@]}" --budgets 16,32 --policies sink,h2o --json "$work/all.jsonl" \
  > /dev/null 2> "$work/err.txt"
check "eviction_eval: a run of every kind" $?

# Every run: every plot.
"$python" "$script" -o "$work/all" "$work/all.jsonl" > "$work/paths.txt" 2> "$work/err.txt"
check "every run: exit 0" $?
expected=(quality_streaming quality_continuation retrieval_16slots retrieval_32slots eviction_time)
printf "$work/all/%s.png\n" "${expected[@]}" | sort > "$work/expected.txt"
sort "$work/paths.txt" | diff - "$work/expected.txt" > /dev/null
check "every run: the five paths printed" $?
for name in "${expected[@]}"; do
  is_png "$work/all/$name.png"
  check "$name.png: a PNG of some size" $?
done
[ ! -s "$work/err.txt" ]
check "every run: nothing on stderr" $?
"$python" "$script" --filled -o "$work/filled" "$work/all.jsonl" > /dev/null 2> "$work/err.txt" &&
  is_png "$work/filled/quality_streaming.png" &&
  ! cmp -s "$work/filled/quality_streaming.png" "$work/all/quality_streaming.png"
check "--filled: another streaming plot" $?

# Runs from separate files, with budgets of their own: put together.
"$eviction_eval" "${run[@]}" --budgets 16 --policies sink,h2o --runs streaming \
  --json "$work/streaming.jsonl" > /dev/null 2> "$work/err.txt" &&
  "$eviction_eval" "${run[@]}" --budgets 24 --policies sink --runs retrieval \
    --json "$work/retrieval.jsonl" > /dev/null 2> "$work/err.txt"
check "eviction_eval: a streaming run and a retrieval run" $?
"$python" "$script" -o "$work/split" "$work/streaming.jsonl" "$work/retrieval.jsonl" \
  > "$work/paths.txt" 2> "$work/err.txt"
check "two files: exit 0" $?
printf "$work/split/%s.png\n" quality_streaming retrieval_24slots eviction_time | sort \
  > "$work/expected.txt"
sort "$work/paths.txt" | diff - "$work/expected.txt" > /dev/null &&
  is_png "$work/split/quality_streaming.png" && is_png "$work/split/retrieval_24slots.png" &&
  is_png "$work/split/eviction_time.png" && [ ! -e "$work/split/quality_continuation.png" ]
check "two files: the plots of the runs they hold, and no other" $?
[ "$(wc -l < "$work/err.txt")" -eq 1 ] &&
  grep -qx "plot_eviction: note: no continuation results: quality_continuation.png not written" \
    "$work/err.txt"
check "two files: a one-line note for the run neither holds" $?

# expect_error <name> <substring> <args...>: exit code 1 and one line "plot_eviction: ...".
expect_error() { expect_flag_error "$python" plot_eviction "$1" "$2" "$script" "${@:3}"; }
out=(-o "$work/bad")
expect_error "missing file" "$work/none.jsonl: no such file" "${out[@]}" "$work/none.jsonl"
expect_error "not JSON lines" "text.txt:1: not a JSON line" "${out[@]}" "$work/text.txt"
"$python" -m json.tool < <(head -n 1 "$work/all.jsonl") > "$work/pretty.json"
expect_error "pretty-printed JSON" "pretty.json:1: not a JSON line" "${out[@]}" \
  "$work/pretty.json"
sed 's|"edgelm.eviction_eval/1"|"edgelm.eviction_eval/2"|' "$work/all.jsonl" > "$work/schema.jsonl"
expect_error "another schema" \
  "schema.jsonl:1: schema \"edgelm.eviction_eval/2\", expected \"edgelm.eviction_eval/1\"" \
  "${out[@]}" "$work/schema.jsonl"
echo '[1, 2]' > "$work/array.jsonl"
expect_error "not an object" "array.jsonl:1: not a JSON object" "${out[@]}" "$work/array.jsonl"
: > "$work/empty.jsonl"
expect_error "empty file" "empty.jsonl: no cells" "${out[@]}" "$work/empty.jsonl"
sed '2s|"budget_slots":[0-9]*,||' "$work/all.jsonl" > "$work/field.jsonl"
expect_error "missing field" "field.jsonl:2: field 'budget_slots' is missing" "${out[@]}" \
  "$work/field.jsonl"
sed '3s|"kl":{"mean":[^,]*,|"kl":{"mean":"high",|' "$work/all.jsonl" > "$work/type.jsonl"
expect_error "field of the wrong type" "type.jsonl:3: field 'streaming.paired.kl.mean' is" \
  "${out[@]}" "$work/type.jsonl"
expect_error "a cell given twice" "streaming results of 'sink' at budget 16 twice" "${out[@]}" \
  "$work/all.jsonl" "$work/streaming.jsonl"
sed 's|"model_sha256":"[0-9a-f]*"|"model_sha256":"00"|' "$work/retrieval.jsonl" \
  > "$work/other.jsonl"
expect_error "different models" "different models" "${out[@]}" "$work/streaming.jsonl" \
  "$work/other.jsonl"
expect_error "no file" "the following arguments are required" -o "$work/bad"
[ ! -e "$work/bad" ]
check "bad input writes nothing" $?

finish_cli_test plot_eviction_cli
