#!/usr/bin/env bash
# Installs dependencies, builds edgelm in build/ (Release) and runs the main job. Until the model
# path exists, the main job is the op demo: every op of the op set on every backend of this
# machine, checked against double-precision reference math (bin/test_backend). Extra arguments go
# to test_backend (e.g. --filter matmul).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"
build/bin/test_backend "$@"
