#!/usr/bin/env bash
# Estimated cycles of CPU kernels on CPUs this machine does not have. A micro_bench benchmark runs
# under qemu-user with a block-counting plugin (tb_profile.c), once with 1 iteration and once
# with 3; llvm-mca prices each block of the difference with a CPU's pipeline model
# (mca_estimate.py). Compare builds of two versions of a kernel by running this on each; only the
# ratio between them means much (the models assume data in L1).
#
#   scripts/cycle_estimate/estimate.sh BUILD_DIR [FILTER] [CPU ...]
#
# BUILD_DIR is a Release build for aarch64 (scripts/test_aarch64.sh makes build-aarch64/) or for
# this x86-64 machine; micro_bench is built (or brought up to date) in it. FILTER is a regular
# expression of one-thread micro_bench benchmarks (one line each; default: prefill attention on
# the F16 cache, 64 queries, both model shapes, neon on aarch64, avx2 on x86-64). CPUs default to
# cortex-a53 cortex-a55 cortex-a57 apple-a14 on aarch64 (LLVM 14 prices cortex-a76 and cortex-x1
# with the A57 model) and znver3 skylake on x86-64. Needs qemu-user, llvm (llvm-mca) and gcc. For
# instance, the SDOT matmuls on the stored and the 8-row layouts, decode shape, in cores with SDOT:
#   estimate.sh build-aarch64 '^matmul/neon_dotprod/q4_0(x8)?/1b\.attn_qo\.2048x2048/M1/t1/' \
#     cortex-a55 cortex-a76 apple-a14
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:?usage: estimate.sh BUILD_DIR [FILTER] [CPU ...]}" && pwd)"
filter="${2:-}"
shift $(( $# >= 2 ? 2 : $# ))
work="$build/cycle-estimate"
mkdir -p "$work"

if grep -q '^CMAKE_AR:.*aarch64' "$build/CMakeCache.txt"; then
  qemu=(qemu-aarch64); table=neon; default_cpus=(cortex-a53 cortex-a55 cortex-a57 apple-a14)
else
  qemu=(qemu-x86_64 -cpu max); table=avx2; default_cpus=(znver3 skylake)
fi
if [ $# -gt 0 ]; then cpus=("$@"); else cpus=("${default_cpus[@]}"); fi
[ -n "$filter" ] || filter="^attention/$table/f16/.*/q64\.slots[0-9]+/t1/"

cmake --build "$build" --target micro_bench >/dev/null
gcc -O2 -shared -fPIC -o "$work/tb_profile.so" "$here/tb_profile.c"
bench="$build/bin/micro_bench"
mapfile -t names < <("${qemu[@]}" "$bench" --benchmark_list_tests --benchmark_filter="$filter")
[ ${#names[@]} -gt 0 ] || { echo "estimate.sh: no micro_bench benchmark matches '$filter'" >&2; exit 1; }

echo "cycle_estimate: $build, CPU models ${cpus[*]}; per iteration:"
for name in "${names[@]}"; do
  name="${name%/real_time}"  # the name as listed; with --iterations it gains /iterations:N
  for iterations in 1 3; do
    TB_PROFILE_OUT="$work/profile$iterations.txt" "${qemu[@]}" -plugin "$work/tb_profile.so" \
      "$bench" --iterations "$iterations" --benchmark_filter="^${name}/" >/dev/null 2>&1
  done
  echo "$name: $(python3 "$here/mca_estimate.py" "$bench" "$work/profile1.txt" \
    "$work/profile3.txt" 2 "${cpus[@]}")"
done
