#!/usr/bin/env bash
# One binary with and without an OpenCL driver: the OpenCL library is opened at run time, so with
# the ICD loader hidden (EDGELM_OPENCL_LIB naming a file that does not exist, which the loader then
# tries alone) `generate` and `test_backend` start and run on the CPU, and `--backend opencl` fails
# with one line naming the library and the variable. The binaries name neither libOpenCL nor
# libclblast as a needed library (readelf -d), so the dynamic linker cannot refuse to start them.
# Usage: opencl_loader_cli.sh <generate> <test_backend> <make_model> <work dir>
set -u
generate=$1
test_backend=$2
make_model=$3

source "$(dirname "$0")/common.sh"
start_cli_test "$4"
make_tiny_models "$make_model" q8_0

hidden=/nonexistent/libOpenCL.so
export EDGELM_OPENCL_LIB=$hidden

if "$generate" -m "$gguf" --prompt-ids 1,2,3 -n 4 --greedy --backend cpu > "$work/out.txt" 2> "$work/err.txt" &&
  [ -s "$work/out.txt" ]; then
  ok "generate runs on the CPU with the ICD loader hidden"
else
  fail "generate runs on the CPU with the ICD loader hidden"
fi

"$test_backend" --list > "$work/out.txt" 2> "$work/err.txt"
if [ $? -eq 0 ] && grep -q '^backends: cpu' "$work/out.txt" && ! grep -q 'opencl' "$work/out.txt"; then
  ok "test_backend --list: cpu backends, no opencl"
else
  cat "$work/out.txt"; fail "test_backend --list: cpu backends, no opencl"
fi

# --backend opencl: a clean non-zero exit and exactly one line on stderr, the loader's.
want="[opencl] no OpenCL library: tried \$EDGELM_OPENCL_LIB=$hidden (install an OpenCL driver or set EDGELM_OPENCL_LIB)"
"$generate" -m "$gguf" --prompt-ids 1 -n 1 --backend opencl > "$work/out.txt" 2> "$work/err.txt"
rc=$?
if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$(wc -l < "$work/err.txt")" -eq 1 ] &&
  [[ "$(cat "$work/err.txt")" == *"$want" ]]; then
  ok "--backend opencl: one line ($(cat "$work/err.txt"))"
else
  echo "exit code $rc; want one line ending in: $want"; fail "--backend opencl: one line"
fi

# --list-devices says why there is no device instead of listing none.
"$generate" --list-devices > "$work/out.txt" 2> "$work/err.txt"
if grep -qF "$want" "$work/out.txt" "$work/err.txt"; then
  ok "--list-devices names the library"
else
  cat "$work/out.txt"; fail "--list-devices names the library"
fi

if command -v readelf > /dev/null; then
  for binary in "$generate" "$test_backend"; do
    readelf -d "$binary" > "$work/dynamic.txt" 2> "$work/err.txt"
    if grep -q 'NEEDED' "$work/dynamic.txt" && ! grep -qiE 'NEEDED.*(libOpenCL|libclblast)' "$work/dynamic.txt"; then
      ok "$(basename "$binary") needs no libOpenCL or libclblast"
    else
      grep NEEDED "$work/dynamic.txt"; fail "$(basename "$binary") needs no libOpenCL or libclblast"
    fi
  done
else
  echo "skip readelf checks: readelf (binutils) is not installed"
fi

finish_cli_test opencl_loader_cli
