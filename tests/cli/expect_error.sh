# Sourced by the CLI tests. expect_error_from <program> <prefix> <name> <substring> <args...> runs
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
