#!/usr/bin/env bash
# Estimated cycles of the CPU backend's prefill attention on CPUs this machine does not have: the
# op runs under qemu-user with a block-counting plugin (tb_profile.c) and llvm-mca prices each
# block with a CPU's pipeline model (mca_estimate.py). Compare builds of two versions of a kernel
# by running this on each; only the ratio between them means much (the models assume data in L1).
#
#   scripts/cycle_estimate/estimate.sh BUILD_DIR [TABLE] [CPU ...]
#
# BUILD_DIR is a Release build whose libedgelm.a is for aarch64 (scripts/test_aarch64.sh makes
# build-aarch64/) or for this x86-64 machine. TABLE forces a kernel table (neon, avx2, ...).
# CPUs default to cortex-a53 cortex-a55 cortex-a57 apple-a14 on aarch64 (LLVM 14 prices
# cortex-a76 and cortex-x1 with the A57 model) and znver3 skylake on x86-64. Needs qemu-user,
# llvm (llvm-mca) and gcc; prints one line per shape: instructions and cycles per call.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:?usage: estimate.sh BUILD_DIR [TABLE] [CPU ...]}" && pwd)"
table="${2:-}"
shift $(( $# >= 2 ? 2 : $# ))
work="$build/cycle-estimate"
mkdir -p "$work"

if grep -q '^CMAKE_AR:.*aarch64' "$build/CMakeCache.txt"; then
  arch=aarch64; cxx=aarch64-linux-gnu-g++; qemu=(qemu-aarch64)
  default_cpus=(cortex-a53 cortex-a55 cortex-a57 apple-a14)
else
  arch=x86_64; cxx=g++; qemu=(qemu-x86_64 -cpu max)
  default_cpus=(znver3 skylake)
fi
if [ $# -gt 0 ]; then cpus=("$@"); else cpus=("${default_cpus[@]}"); fi

gcc -O2 -shared -fPIC -o "$work/tb_profile.so" "$here/tb_profile.c"
"$cxx" -std=c++20 -O2 -no-pie -I"$root" -I"$build" "$here/attention_driver.cpp" \
  "$build/libedgelm.a" -lpcre2-8 -lpthread -o "$work/attention_driver"

echo "cycle_estimate: $arch build $build, table ${table:-default}, CPU models ${cpus[*]}"
for shape in "128 1b" "512 1b" "2048 1b" "512 3b"; do
  read -r slots model <<<"$shape"
  for calls in 1 3; do
    TB_PROFILE_OUT="$work/profile$calls.txt" "${qemu[@]}" -plugin "$work/tb_profile.so" \
      "$work/attention_driver" "$calls" "$slots" "$model" "$table" >"$work/driver.out"
  done
  echo "$model q64 slots$slots: $(sed 's/^attention_driver: //' "$work/driver.out")"
  echo "  $(python3 "$here/mca_estimate.py" "$work/attention_driver" "$work/profile1.txt" \
    "$work/profile3.txt" 2 "${cpus[@]}")"
done
