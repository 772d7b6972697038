#!/usr/bin/env bash
# Regenerates docs/images/walkthrough/: runs walkthrough.fls over the shipped H100 recording, then
# reopens the session that script saved (a replay saved today) and takes the GPU panel's picture:
# the banner and the caption still say the day it was measured, not the day it was saved. Needs xvfb-run.
#   docs/examples/walkthrough.sh [BUILD_DIR]      (default: build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
app=${1:-$root/build}/fusionlab
out=$root/docs/images/walkthrough
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
screen=(-a -s "-screen 0 2560x1600x24")
xvfb-run "${screen[@]}" "$app" --no-gpu --script "$here/walkthrough.fls" --out-dir "$work"
cat > "$work/reopen.fls" <<'FLS'
caption on
window-size 1536 864
lesson gelu_scale
size 64M
wait
screenshot replayed-then-saved-reopened.png
FLS
xvfb-run "${screen[@]}" "$app" --replay "$work/replayed-then-saved.json" \
  --script "$work/reopen.fls" --out-dir "$work"
mkdir -p "$out"
cp "$work"/*.png "$out"/
echo "walkthrough: $(ls "$work"/*.png | wc -l) pictures in $out"
