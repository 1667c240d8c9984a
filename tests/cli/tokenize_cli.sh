#!/usr/bin/env bash
# tokenize: encodes and decodes through a model folder and a GGUF file; llama-tokenize's -m, -p
# and -f give what --model-path, --text and --file give; bad input (and an unknown flag) ends in
# one clear line and a non-zero exit without a crash.
# Usage: tokenize_cli.sh <tokenize> <make_model> <work dir>
set -u
tokenize=$1
make_model=$2

source "$(dirname "$0")/common.sh"
start_cli_test "$3"
make_tiny_models "$make_model" q8_0

# check <name> <exit code of a condition>
check() { if [ "$2" -eq 0 ]; then ok "$1"; else fail "$1"; fi; }

ids=$("$tokenize" --model-path "$work/hf" --text "Hello, world!" --ids-only 2> "$work/err.txt")
check "encode from a folder: $ids" $([[ "$ids" == \[312,* ]]; echo $?)
gguf_ids=$("$tokenize" --model-path "$gguf" --text "Hello, world!" --ids-only 2> "$work/err.txt")
check "GGUF vocabulary gives the same ids" $([ "$ids" = "$gguf_ids" ]; echo $?)
plain=$(echo "$ids" | tr -d '[]')
text=$("$tokenize" --model-path "$work/hf" --decode "$plain" --skip-special 2> "$work/err.txt")
check "decode round trip: '$text'" $([ "$text" = "Hello, world!" ]; echo $?)

# expect_error <name> <substring> <tokenize args...>
expect_error() { expect_error_from "$tokenize" tokenize "$@"; }
expect_error "missing tokenizer" "nope.json" --tokenizer "$work/nope.json" --text x
echo '{"model": {"type": "WordPiece"}}' > "$work/wordpiece.json"
expect_error "unsupported model type" "WordPiece" --tokenizer "$work/wordpiece.json" --text x
echo '{"model": ' > "$work/broken.json"
expect_error "malformed JSON" "broken.json" --tokenizer "$work/broken.json" --text x
expect_error "id outside the vocabulary" "99999" --model-path "$work/hf" --decode 1,99999
# A GGUF whose tokenizer.ggml.pre names no known pre-tokenizer (a name of the same length, so the
# file stays valid): one line on stderr and exit code 1, unless the flag allows a fallback.
LC_ALL=C sed 's/llama-bpe/future-ab/' "$gguf" > "$work/unknown_pre.gguf"
"$tokenize" --model-path "$work/unknown_pre.gguf" --text x > /dev/null 2> "$work/err.txt"
rc=$?
check "unknown tokenizer.ggml.pre: exit $rc, $(wc -l < "$work/err.txt") line: $(head -c 160 "$work/err.txt")" \
  $([ $rc -eq 1 ] && [ "$(wc -l < "$work/err.txt")" -eq 1 ] &&
    grep -q "^tokenize: .*unknown_pre.gguf: tokenizer.ggml.pre 'future-ab' is not a known" "$work/err.txt"; echo $?)
allowed=$("$tokenize" --model-path "$work/unknown_pre.gguf" --text "Hello, world!" --ids-only \
  --allow-unknown-pre-tokenizer 2> "$work/err.txt")
check "--allow-unknown-pre-tokenizer: a warning and Llama 3's ids" \
  $([ "$allowed" = "$gguf_ids" ] && grep -q "'future-ab' is not a known" "$work/err.txt"; echo $?)
printf 'caf\xc3' > "$work/invalid.txt"
"$tokenize" --model-path "$work/hf" --file "$work/invalid.txt" --ids-only > /dev/null 2> "$work/err.txt"
check "invalid UTF-8 input is tokenized" $?


# The vocabulary: -m/--model/--model-path, -p/--prompt/--text, -f/--file.
printf 'Hello, world!' > "$work/hello.txt"
short=$("$tokenize" -m "$work/hf" -p "Hello, world!" --ids-only 2> "$work/err.txt")
long=$("$tokenize" --model "$work/hf" --prompt "Hello, world!" --ids-only 2> "$work/err.txt")
from_file=$("$tokenize" -m "$gguf" -f "$work/hello.txt" --ids-only 2> "$work/err.txt")
check "-m -p = --model --prompt = --model-path --text" $([ "$short" = "$ids" ] && [ "$long" = "$ids" ]; echo $?)
check "-f FILE = --text" $([ "$from_file" = "$ids" ]; echo $?)
expect_flag_error "$tokenize" tokenize "-f missing file" "-f/--file: cannot open" \
  -m "$work/hf" -f "$work/none.txt"
expect_flag_error "$tokenize" tokenize "-f a folder" "is a directory" -m "$work/hf" -f "$work"
expect_unknown_short_flags "$tokenize" tokenize -m "$work/hf" -p x

# Id lists are strict: digits and commas only (" " once decoded as id 0, "1,2," and "+1" passed).
expect_flag_error "$tokenize" tokenize "--decode ' '" "--decode: ' ' is not a token id" -m "$gguf" --decode " "
expect_flag_error "$tokenize" tokenize "--decode 1,2," "--decode: item 3 of '1,2,' is empty" -m "$gguf" --decode 1,2,
expect_flag_error "$tokenize" tokenize "--decode +1" "--decode: '+1' is not a token id" -m "$gguf" --decode +1
expect_flag_error "$tokenize" tokenize "--decode '1, 2'" "--decode: ' 2' is not a token id" -m "$gguf" --decode "1, 2"

# Inputs that are not regular files end at once, not in a wait for a FIFO's writer or a read of
# /dev/zero that never ends; `timeout` turns a hang into exit 124, which counts as a failure.
timed_tokenize() { timeout 20 "$tokenize" "$@"; }
mkfifo "$work/fifo"
expect_error_from timed_tokenize tokenize "-f a FIFO" "-f/--file: '$work/fifo' is not a regular file" \
  -m "$work/hf" -f "$work/fifo"
expect_error_from timed_tokenize tokenize "-f /dev/zero" "-f/--file: '/dev/zero' is not a regular file" \
  -m "$work/hf" -f /dev/zero
expect_error_from timed_tokenize tokenize "-m a FIFO" "$work/fifo: not a regular file" -m "$work/fifo" -p x
expect_error_from timed_tokenize tokenize "-m /dev/zero" "/dev/zero: not a regular file" -m /dev/zero -p x

# Output that cannot be written (a full disk) is an error, not exit 0.
if [ -e /dev/full ]; then
  "$tokenize" -m "$work/hf" -p "Hello" > /dev/full 2> "$work/err.txt"
  rc=$?
  check "stdout on /dev/full: exit $rc, '$(tail -n 1 "$work/err.txt")'" \
    $([ $rc -eq 1 ] && [ "$(cat "$work/err.txt")" = "tokenize: stdout: write failed: No space left on device" ]; echo $?)
fi

finish_cli_test tokenize_cli
