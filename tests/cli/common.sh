# Sourced by the CLI tests.
#
# start_cli_test <work dir> empties the work folder (left in $work) and zeroes the counts in
# $passes and $failures; finish_cli_test <name> prints them and is the script's last command, so
# the script fails when a check did.
start_cli_test() {
  work=$1
  rm -rf "$work" && mkdir -p "$work"
  passes=0
  failures=0
}
finish_cli_test() {
  echo "$1: $passes passed, $failures failed"
  [ "$failures" -eq 0 ]
}

# make_tiny_models <make_model> <quant> writes a tiny model as a Hugging Face folder ($work/hf) and
# as a GGUF file of that quant type, whose path it leaves in $gguf; it exits the test on failure.
make_tiny_models() {
  local make_model=$1 quant=$2
  "$make_model" --preset tiny --format hf --out "$work/hf" > /dev/null 2>&1 ||
    { echo "make_model hf failed"; exit 1; }
  gguf=$("$make_model" --preset tiny --format gguf --quant "$quant" --out "$work/gguf" 2> /dev/null) ||
    { echo "make_model gguf failed"; exit 1; }
}

# expect_error_from <program> <prefix> <name> <substring> <args...> runs
# the program with the args and passes when it exits non-zero without a signal, prints no sanitizer
# or crash report, and ends stderr with one line that starts with "<prefix>:" and contains the
# substring. Writes into $work; counts into $passes and $failures.
expect_error_from() {
  local program=$1 prefix=$2 name=$3 expected=$4
  shift 4
  "$program" "$@" > "$work/out.txt" 2> "$work/err.txt"
  local rc=$?
  local last
  last=$(tail -n 1 "$work/err.txt")
  if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then
    echo "FAIL $name: exit code $rc (want a clean non-zero exit)"; failures=$((failures + 1)); return
  fi
  if grep -qE 'AddressSanitizer|runtime error|Segmentation' "$work/err.txt"; then
    echo "FAIL $name: sanitizer or crash report"; cat "$work/err.txt"; failures=$((failures + 1)); return
  fi
  if [[ "$last" != "$prefix":* ]] || [[ "$last" != *"$expected"* ]]; then
    echo "FAIL $name: last stderr line '$last' lacks '$prefix:' or '$expected'"; failures=$((failures + 1)); return
  fi
  echo "ok   $name: $last"
  passes=$((passes + 1))
}

# ok <name> and fail <name> count a check that passed or failed; fail also shows $work/err.txt.
ok() { echo "ok   $1"; passes=$((passes + 1)); }
fail() {
  echo "FAIL $1"
  [ -f "$work/err.txt" ] && cat "$work/err.txt"
  failures=$((failures + 1))
}

# expect_flag_error <program> <prefix> <name> <substring> <args...> is expect_error_from for a bad
# flag, held to more: the exit code is 1 and stderr is that one line, nothing before it.
expect_flag_error() {
  local program=$1 prefix=$2 name=$3 expected=$4
  shift 4
  "$program" "$@" > "$work/out.txt" 2> "$work/err.txt"
  local rc=$? line
  line=$(cat "$work/err.txt")
  if [ $rc -ne 1 ] || [ "$(wc -l < "$work/err.txt")" -ne 1 ] || [[ "$line" != "$prefix":* ]] ||
    [[ "$line" != *"$expected"* ]]; then
    echo "FAIL $name: exit code $rc, stderr:"; cat "$work/err.txt"
    echo "     (want exit code 1 and one line '$prefix: ...$expected...')"
    failures=$((failures + 1)); return
  fi
  echo "ok   $name: $line"
  passes=$((passes + 1))
}

# expect_unknown_short_flags <program> <prefix> <args...>: llama.cpp's -ngl 99 and a made-up -xyz,
# before and after the args, are each reported as an unknown flag (one line, exit 1), not read as
# a one-letter flag with a value ("-ngl" as "-n gl") or as several one-letter switches.
expect_unknown_short_flags() {
  local program=$1 prefix=$2
  shift 2
  expect_flag_error "$program" "$prefix" "-ngl 99 first" "unknown flag '-ngl'" -ngl 99 "$@"
  expect_flag_error "$program" "$prefix" "-xyz last" "unknown flag '-xyz'" "$@" -xyz
}
