#!/usr/bin/env bash
# Checks the instruction sets of the library's object files by disassembling them (objdump -d): the
# per-ISA kernel files must hold the instructions their tables are chosen for, and no other object
# may hold instructions the CPU might lack (a baseline caller could run them on such a CPU).
#   x86:     every x86/avx512* object uses ZMM registers and x86/avx512_quant holds VNNI's vpdpbusd;
#            every x86/avx2* object uses YMM registers and no ZMM; every other object uses neither.
#   AArch64: arm/neon_dotprod holds SDOT; no other object does.
# Usage: check_isa_objects.sh OBJDUMP OBJECT... (an OBJECT argument may be a ;-separated list, as
# CMake's $<TARGET_OBJECTS:edgelm> gives). ctest runs it on the edgelm library (tests/CMakeLists.txt).
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 OBJDUMP OBJECT..." >&2
  exit 2
fi
objdump=$1
shift
objects=()
for argument in "$@"; do
  IFS=';' read -r -a listed <<<"$argument"
  objects+=("${listed[@]}")
done

failures=0
fail() {
  echo "check_isa_objects: FAILED: $1" >&2
  failures=$((failures + 1))
}

# The first line of the disassembly matching the pattern (an example for the message), or nothing.
first_match() {
  grep -m 1 -E "$2" <<<"$1" | sed 's/^[[:space:]]*//' || true
}

arch=""
seen_avx2=0 seen_avx512=0 seen_vnni=0 seen_dotprod=0
for object in "${objects[@]}"; do
  [ -n "$object" ] || continue
  if [ ! -f "$object" ]; then
    fail "object file '$object' does not exist"
    continue
  fi
  # Only the lines that matter: the format line and those naming the registers or instructions.
  listing=$("$objdump" -d --no-show-raw-insn "$object" |
    grep -E 'file format|%[yz]mm[0-9]|[[:space:]](vpdpbusd|sdot)[[:space:]]' || true)
  case "$listing" in
    *"file format elf64-x86-64"*) arch=x86 ;;
    *"file format elf64-littleaarch64"*) arch=aarch64 ;;
    *) fail "'$object': not an x86-64 or AArch64 ELF object"; continue ;;
  esac
  name=${object##*/}
  ymm=$(first_match "$listing" '%ymm[0-9]')
  zmm=$(first_match "$listing" '%zmm[0-9]')
  sdot=$(first_match "$listing" '[[:space:]]sdot[[:space:]]')
  case "$object" in
    */x86/avx512*)
      seen_avx512=1
      [ -n "$zmm" ] || fail "'$name' (AVX-512 kernels) uses no ZMM register: built without its flags?"
      if [[ "$name" == avx512_quant* ]]; then
        seen_vnni=1
        [ -n "$(first_match "$listing" '[[:space:]]vpdpbusd[[:space:]]')" ] ||
          fail "'$name' (AVX-512 quantized matmul) holds no vpdpbusd (VNNI)"
      fi
      ;;
    */x86/avx2*)
      seen_avx2=1
      [ -n "$ymm" ] || fail "'$name' (AVX2 kernels) uses no YMM register: built without its flags?"
      [ -z "$zmm" ] || fail "'$name' (AVX2 kernels) uses a ZMM register: $zmm"
      ;;
    */arm/neon_dotprod*)
      seen_dotprod=1
      [ -n "$sdot" ] || fail "'$name' (dot-product kernels) holds no SDOT"
      ;;
    *)
      [ -z "$ymm" ] || fail "'$name' is built for the baseline ISA but uses a YMM register: $ymm"
      [ -z "$zmm" ] || fail "'$name' is built for the baseline ISA but uses a ZMM register: $zmm"
      [ -z "$sdot" ] || fail "'$name' is built for the baseline ISA but holds SDOT: $sdot"
      ;;
  esac
done

# The kernel files must have been among the objects, or the checks above passed vacuously.
case "$arch" in
  x86)
    [ $seen_avx2 = 1 ] || fail "no x86/avx2* object among the ${#objects[@]} objects"
    [ $seen_avx512 = 1 ] || fail "no x86/avx512* object among the ${#objects[@]} objects"
    [ $seen_vnni = 1 ] || fail "no x86/avx512_quant object among the ${#objects[@]} objects"
    ;;
  aarch64)
    [ $seen_dotprod = 1 ] || fail "no arm/neon_dotprod object among the ${#objects[@]} objects"
    ;;
  *) fail "no object to check" ;;
esac

if [ $failures -gt 0 ]; then exit 1; fi
echo "check_isa_objects: ${#objects[@]} $arch objects: ISA instructions only where their flags are"
