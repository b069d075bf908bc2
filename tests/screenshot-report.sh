#!/usr/bin/env bash
# Renders an output folder's report.html in headless Chromium and saves a
# full-width screenshot next to it, for a developer to look at:
#   tests/screenshot-report.sh out            # writes out/report.png
#   tests/screenshot-report.sh out 1400 6000  # width and height in pixels
set -euo pipefail
dir=${1:?usage: tests/screenshot-report.sh OUTPUT_FOLDER [WIDTH] [HEIGHT]}
width=${2:-1100}
height=${3:-5000}
page=$(cd "$dir" && pwd)/report.html
[ -f "$page" ] || { echo "$page: not found (run fabricsim run --out $dir first)" >&2; exit 1; }
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$profile" --virtual-time-budget=5000 \
    --window-size="$width,$height" --screenshot="$dir/report.png" "file://$page" 2>/dev/null
echo "$dir/report.png"
