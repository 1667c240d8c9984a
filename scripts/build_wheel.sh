#!/usr/bin/env bash
# Builds a wheel of the `edgelm` Python package for this machine (pyproject.toml: scikit-build-core
# over the same CMake project, only the module's target) into dist/, in a virtual environment of
# its own so that pip fetches the build requirements (scikit-build-core, pybind11) there.
# Usage: scripts/build_wheel.sh [OUT_DIR]   (default: dist/)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist}"
venv="${EDGELM_WHEEL_VENV:-build/wheel-venv}"
python="${PYTHON:-/usr/bin/python3}"
[ -x "$venv/bin/pip" ] || "$python" -m venv "$venv"
# The compiler runs as many jobs as the machine has cores.
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
"$venv/bin/pip" wheel --no-deps --wheel-dir "$out" .
ls -l "$out"/edgelm-*.whl
