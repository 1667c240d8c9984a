#!/usr/bin/env bash
# tokenize: encodes and decodes through a model folder and a GGUF file; bad input ends in one
# clear line and a non-zero exit without a crash.
# Usage: tokenize_cli.sh <tokenize> <make_model> <work dir>
set -u
tokenize=$1
make_model=$2
work=$3
rm -rf "$work" && mkdir -p "$work"
failures=0
passes=0
check() {  # check <name> <condition exit code>
  if [ "$2" -eq 0 ]; then echo "ok   $1"; passes=$((passes + 1)); else echo "FAIL $1"; failures=$((failures + 1)); fi
}

"$make_model" --preset tiny --format hf --out "$work/hf" > /dev/null 2>&1 || { echo "make_model failed"; exit 1; }
gguf=$("$make_model" --preset tiny --format gguf --quant q8_0 --out "$work/gguf" 2> /dev/null) || { echo "make_model failed"; exit 1; }

ids=$("$tokenize" --model-path "$work/hf" --text "Hello, world!" --ids-only 2> "$work/err.txt")
check "encode from a folder: $ids" $([[ "$ids" == \[312,* ]]; echo $?)
gguf_ids=$("$tokenize" --model-path "$gguf" --text "Hello, world!" --ids-only 2> "$work/err.txt")
check "GGUF vocabulary gives the same ids" $([ "$ids" = "$gguf_ids" ]; echo $?)
plain=$(echo "$ids" | tr -d '[]')
text=$("$tokenize" --model-path "$work/hf" --decode "$plain" --skip-special 2> "$work/err.txt")
check "decode round trip: '$text'" $([ "$text" = "Hello, world!" ]; echo $?)

expect_error() {  # expect_error <name> <substring> <args...>
  local name=$1 expected=$2
  shift 2
  "$tokenize" "$@" > /dev/null 2> "$work/err.txt"
  local rc=$? last
  last=$(tail -n 1 "$work/err.txt")
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [[ "$last" == tokenize:* ]] && [[ "$last" == *"$expected"* ]] &&
    ! grep -qE 'AddressSanitizer|runtime error' "$work/err.txt"; then
    echo "ok   $name: $last"; passes=$((passes + 1))
  else
    echo "FAIL $name (exit $rc): $last"; failures=$((failures + 1))
  fi
}
expect_error "missing tokenizer" "nope.json" --tokenizer "$work/nope.json" --text x
echo '{"model": {"type": "WordPiece"}}' > "$work/wordpiece.json"
expect_error "unsupported model type" "WordPiece" --tokenizer "$work/wordpiece.json" --text x
echo '{"model": ' > "$work/broken.json"
expect_error "malformed JSON" "broken.json" --tokenizer "$work/broken.json" --text x
expect_error "id outside the vocabulary" "99999" --model-path "$work/hf" --decode 1,99999
printf 'caf\xc3' > "$work/invalid.txt"
"$tokenize" --model-path "$work/hf" --file "$work/invalid.txt" --ids-only > /dev/null 2> "$work/err.txt"
check "invalid UTF-8 input is tokenized" $?

echo "tokenize_cli: $passes passed, $failures failed"
[ $failures -eq 0 ]
