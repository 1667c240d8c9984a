#!/usr/bin/env bash
# Cross-builds edgelm for 64-bit Arm Linux in build-aarch64/ (Debian's g++-aarch64-linux-gnu, the
# target's libraries from Debian multiarch arm64 packages, scripts/aarch64-linux-gnu.cmake) and runs
# the test suites under qemu-user, each test program in one process: the op parity matrix on
# cpu:portable, cpu:neon and cpu:neon_dotprod (against the reference and the portable oracle), the
# harness self-test, the zero-allocation test on every table, and the other unit tests (model, KV
# cache, eviction, tokenizer, loaders). Then the run-time choice of tables is checked on two
# emulated CPUs (QEMU's "max" has the dot-product extension, a Cortex-A53 does not, so only
# cpu:neon may be offered there) and the parity matrix runs again on the A53. Ends with the worst
# NMSE per op and table. The OpenCL backend is left out (-DEDGELM_OPENCL=OFF: it is tested on x86
# with PoCL), which also keeps the build without OpenCL checked. Extra arguments go to each test
# program (e.g. --gtest_filter=Tokenizer*). Installs packages with sudo when not root.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
build_dir=build-aarch64
jobs=$(nproc)

as_root=()
if [ "$(id -u)" -ne 0 ]; then as_root=(sudo); fi

# --- Packages: the cross compiler and QEMU for the host; for the target, what the library and the
# tests link (PCRE2, GoogleTest) and run with (the C++ runtime: GoogleTest's package does not pull
# it in, and the build runs each test program under QEMU to list its cases). Header-only
# dependencies (nlohmann-json, CLI11) are architecture-independent and shared with the host build. The build is lean (below), so neither
# Google Benchmark nor Eigen is needed.
host_packages=(cmake ninja-build pkg-config g++-aarch64-linux-gnu qemu-user
               nlohmann-json3-dev libcli11-dev)
target_packages=(libpcre2-dev:arm64 libgtest-dev:arm64 libstdc++6:arm64)

missing=()
for package in "${host_packages[@]}" "${target_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "test_aarch64: all packages present"
else
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "test_aarch64: enabling the arm64 architecture (multiarch)"
    "${as_root[@]}" dpkg --add-architecture arm64
  fi
  echo "test_aarch64: installing ${missing[*]}"
  "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
fi

# --- Build. The unit tests below (and test_backend for the summary); the rest of bin/ is not
# needed. test_half is left out: it uses _Float16, which GCC's C++ front end accepts only from
# GCC 13 on, while the compiler defines __FLT16_MAX__ on AArch64. Configured lean, as a device build
# is: Google Benchmark and Eigen are not looked for even where the host has them (so no
# micro_bench), and the OpenCL backend (with CLBlast) is off.
tests=(test_op_parity test_parity_selftest test_zero_alloc test_attention test_rope test_quant
       test_tensor test_thread_pool test_kv_cache test_llama test_eviction test_sampler
       test_tokenizer test_tokenizer_gguf test_tokenizer_hf_json test_tokenizer_pre_tokenizers
       test_tokenizer_sentencepiece test_tokenizer_stream test_tokenizer_unicode test_gguf
       test_safetensors)
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_TOOLCHAIN_FILE=scripts/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=Release -DEDGELM_BUILD_TESTS=ON -DEDGELM_OPENCL=OFF \
  -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON >/dev/null
cmake --build "$build_dir" -j "$jobs" --target "${tests[@]}" test_backend
built=$(date +%s)

# --- Tests, under QEMU. Each test program runs whole, in one emulated process (starting QEMU once
# per gtest case, as ctest does, cost five times the tests' own time), as many at once as there are
# CPUs, each with a temp directory of its own (several tests write model files under fixed names).
# The reference half of the op parity matrix runs through test_backend below, whose JSON also
# gives the summary; test_op_parity runs the rest (the matrix against the portable oracle, the
# coverage checks). The host-side checks of the cross build run through ctest.
test_tmp="$PWD/$build_dir/test-tmp"
rm -rf "$test_tmp"
mkdir -p "$test_tmp"
run_test_program() {
  local program=$1 log="$test_tmp/$1.log" tmp="$test_tmp/$1"
  shift
  local filter=()
  if [ "$program" = test_op_parity ]; then filter=(--gtest_filter=-Matrix/OpParity.*); fi
  mkdir -p "$tmp"
  if TMPDIR="$tmp" TEST_TMPDIR="$tmp/" qemu-aarch64 "$build_dir/bin/$program" "${filter[@]}" \
      "$@" > "$log" 2>&1; then
    echo "test_aarch64: $program: $(grep -E '^\[  PASSED  \]' "$log" | tail -n 1)"
  else
    echo "test_aarch64: $program FAILED:"
    tail -n 60 "$log"
    return 1
  fi
}
export -f run_test_program
export build_dir test_tmp
printf '%s\n' "${tests[@]}" | xargs -P "$jobs" -I{} bash -c 'run_test_program "$@"' _ {} "$@"
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" -R '^check_'

# --- The op parity matrix against the reference on QEMU's "max" CPU (every table, dot product
# included), then the run-time choice of tables on two emulated CPUs (a Cortex-A53 has no dot
# product, so only cpu:neon may be offered there) and the matrix again on the A53. test_backend
# exits non-zero on any failure.
test_backend=(qemu-aarch64 "$build_dir/bin/test_backend")
max_report="$test_tmp/parity-max.json"
"${test_backend[@]}" --json > "$max_report" || {
  tail -c 4000 "$max_report"
  echo "test_aarch64: FAILED: the parity matrix on QEMU max" >&2
  exit 1
}
backends_max=$("${test_backend[@]}" --list | sed -n 1p)
backends_a53=$(QEMU_CPU=cortex-a53 "${test_backend[@]}" --list | sed -n 1p)
echo "test_aarch64: QEMU max:   $backends_max"
echo "test_aarch64: Cortex-A53: $backends_a53"
if [[ " $backends_max " != *" cpu:neon "* || " $backends_max " != *" cpu:neon_dotprod "* ||
      " $backends_a53 " != *" cpu:neon "* || " $backends_a53 " == *" cpu:neon_dotprod "* ]]; then
  echo "test_aarch64: FAILED: wrong kernel tables offered (expected neon and neon_dotprod on max," \
    "neon alone on the A53)" >&2
  exit 1
fi
a53_report=$(QEMU_CPU=cortex-a53 "${test_backend[@]}") || {
  echo "$a53_report"
  echo "test_aarch64: FAILED: the parity matrix on the Cortex-A53" >&2
  exit 1
}
echo "test_aarch64: Cortex-A53 $(echo "$a53_report" | tail -n 1)"
finished=$(date +%s)

# --- Summary: worst NMSE per op (matmul, attention and cast per dtype) for each NEON table; exact
# ops (tolerance 0: data movement, decoding) are left out, a failure there has failed above.
echo
if command -v python3 >/dev/null; then
  python3 -c '
import collections, json, sys
report = json.load(open(sys.argv[1]))
worst = collections.defaultdict(float)
tolerance = collections.defaultdict(float)
for r in report["results"]:
    if r["result"] == "skip" or r["backend"] == "cpu:portable" or r["tolerance"] == 0:
        continue
    op, dtype = r["case"].split("/")[:2]
    op = op + "/" + dtype if op in ("matmul", "attention", "cast") else op
    tolerance[op] = max(tolerance[op], r["tolerance"])
    worst[(op, r["backend"])] = max(worst[(op, r["backend"])], r["nmse"])
backends = sorted({b for _, b in worst})
print("%-16s %10s" % ("op (QEMU max)", "tolerance") + "".join(" %16s" % b for b in backends))
for op in sorted(tolerance):
    print("%-16s %10.1e" % (op, tolerance[op]) + "".join(" %16.3e" % worst[(op, b)] for b in backends))
print("parity: %d passed, %d failed, %d skipped" % (report["passed"], report["failed"],
                                                   report["skipped"]))
' "$max_report"
fi
echo "test_aarch64: passed; packages and build $((built - started)) s, tests $((finished - built)) s," \
  "total $((finished - started)) s"
