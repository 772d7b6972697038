#!/usr/bin/env bash
# Lesson 9's pictures (docs/images/attention/) from a recording that has the attention lesson
# (every level, bf16, cold, T from 512 to 8K or more, phases recorded at 4K) and its peers.json
# beside it: runs attention-shots.fls in replay under Xvfb. Needs xvfb-run.
#   docs/examples/attention-shots.sh RECORDING_DIR [BUILD_DIR]     (default build dir: build)
# The recording, made on the GPU machine:
#   fusionlab bench --lesson attention --precision bf16 --cache cold \
#     --sizes 256,512,1K,2K,4K,8K --phases --out RECORDING_DIR/attention-bf16-cold.json
#   python3 scripts/peers.py --lessons attention --out RECORDING_DIR/peers.json
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
recording=${1:?"usage: attention-shots.sh RECORDING_DIR [BUILD_DIR]"}
app=${2:-$root/build}/fusionlab
out=$root/docs/images/attention
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
peers=()
[[ -f $recording/peers.json ]] && peers=(--peers "$recording/peers.json")
xvfb-run -a -s "-screen 0 2560x1600x24" "$app" --replay "$recording" "${peers[@]}" \
  --script "$here/attention-shots.fls" --out-dir "$work"
mkdir -p "$out"
cp "$work"/*.png "$out"/
echo "attention: $(ls "$work"/*.png | wc -l) pictures in $out"
