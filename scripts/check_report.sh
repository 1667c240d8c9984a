#!/usr/bin/env bash
# Opens an HTML page (scripts/report.py's) in headless Chromium and saves a screenshot of its top
# WIDTH x HEIGHT pixels as a PNG, to look at what a reader sees. Exits 1 with one line when
# Chromium is missing or writes no image, 77 with --skip-missing when Chromium is missing (the
# tests' "skipped"). Debian: apt-get install chromium (scripts/install_deps.sh).
# Usage: scripts/check_report.sh [--skip-missing] REPORT.html SCREENSHOT.png [WIDTH [HEIGHT]]
set -euo pipefail

missing_code=1
if [ "${1:-}" = "--skip-missing" ]; then
  missing_code=77
  shift
fi
if [ $# -lt 2 ] || [ $# -gt 4 ]; then
  echo "check_report: usage: check_report.sh [--skip-missing] REPORT.html SCREENSHOT.png [WIDTH [HEIGHT]]" >&2
  exit 1
fi
page=$1
shot=$2
width=${3:-1400}
height=${4:-2400}
if [ ! -f "$page" ]; then
  echo "check_report: $page: no such file" >&2
  exit 1
fi
if ! [[ "$width" =~ ^[0-9]+$ && "$height" =~ ^[0-9]+$ ]]; then
  echo "check_report: WIDTH and HEIGHT: pixels, e.g. 1400 2400" >&2
  exit 1
fi

browser=""
for candidate in chromium chromium-browser google-chrome; do
  if command -v "$candidate" > /dev/null; then
    browser=$candidate
    break
  fi
done
if [ -z "$browser" ]; then
  echo "check_report: no Chromium (Debian: apt-get install chromium; scripts/install_deps.sh)" >&2
  exit "$missing_code"
fi

# A profile of its own, so a Chromium the user has open is not disturbed; --no-sandbox because
# Chromium's sandbox refuses to start as root (containers, CI). The page has no script and loads
# nothing, so nothing runs unsandboxed but the renderer of a static page.
profile=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$profile" "$log"' EXIT
rm -f "$shot"
url="file://$(cd "$(dirname "$page")" && pwd)/$(basename "$page")"
if ! timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --user-data-dir="$profile" --window-size="$width,$height" --screenshot="$shot" "$url" \
  > "$log" 2>&1 || [ ! -s "$shot" ]; then
  echo "check_report: $browser wrote no screenshot of $page:" >&2
  tail -n 5 "$log" >&2
  exit 1
fi
echo "$shot"
