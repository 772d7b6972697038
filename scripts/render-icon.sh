#!/usr/bin/env bash
# Renders assets/icons/fusionlab.png (256x256) from the hand-written assets/icons/fusionlab.svg.
# Run it after editing the SVG and commit both; builds and CI use the committed PNG, so only this
# script needs the renderer (Debian: librsvg2-bin, which it installs when missing).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if ! command -v rsvg-convert > /dev/null; then
  sudo=""
  [[ $(id -u) != 0 ]] && sudo="sudo"
  $sudo apt-get install -y -qq --no-install-recommends librsvg2-bin
fi
rsvg-convert --width 256 --height 256 --format png \
  --output "$root/assets/icons/fusionlab.png" "$root/assets/icons/fusionlab.svg"
echo "wrote $root/assets/icons/fusionlab.png"
