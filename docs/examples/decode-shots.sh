#!/usr/bin/env bash
# Lesson 11's pictures (gpt2_decode, bf16, 1 new token, cold L2) from a recording, into
# docs/images/gpt2_decode/ (or OUT_DIR):
#   decode-timeline-level3.png, decode-timeline-level4.png  the Timeline view at cache 512: level 3
#       (graph + PDL, its 61 kernels on the stream's lane) and level 4 (the megakernel, one lane per
#       SM, one bar per task: phases on); decode-timelines.png puts them side by side when
#       ImageMagick's `convert` is there
#   decode-flow-level0.png, decode-flow-level4.png  the flow view at levels 0 (every op's output to
#       HBM and back) and 4 (only weights and the cache from HBM)
#   decode-speedup.png (and .svg)  the speedup plot over the cache length, level 4 against level
#       0, with the PyTorch peers (eager, CUDA graph) of the peer file
# The recording needs the phase records for the level-4 timeline: record the lesson with
#   fusionlab bench --lesson gpt2_decode --precision bf16 --cache cold --phases \
#     --sizes 16,64,256,512,1K,2K,4K,8K --out RECORDING.json
# and the peers with scripts/pytorch_decode.py --caches ... --peers PEERS.json (same GPU, same day).
# Needs xvfb-run; no GPU.
#   docs/examples/decode-shots.sh RECORDING PEERS [BUILD_DIR] [OUT_DIR]
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 RECORDING PEERS [BUILD_DIR] [OUT_DIR]" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
recording=$(realpath "$1")
peers=$(realpath "$2")
app=${3:-$root/build}/fusionlab
out=${4:-$root/docs/images/gpt2_decode}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/decode.fls" <<'FLS'
caption on
window-size 1600 1000
lesson gpt2_decode
precision bf16
cache cold
size 512
level 3
view timeline
phases on
wait
screenshot view decode-timeline-level3.png
level 4
wait
screenshot view decode-timeline-level4.png
level 0
view flow
wait
screenshot view decode-flow-level0.png
level 4
wait
screenshot view decode-flow-level4.png
sweep
wait 600
view speedup
wait
screenshot view decode-speedup.png
svg decode-speedup.svg
quit
FLS
xvfb-run -a -s "-screen 0 2560x1600x24" "$app" --no-gpu --replay "$recording" --peers "$peers" \
  --script "$work/decode.fls" --out-dir "$work"
if convert -version 2> /dev/null | grep -q ImageMagick; then
  convert "$work/decode-timeline-level3.png" "$work/decode-timeline-level4.png" +append \
    "$work/decode-timelines.png" || echo "decode-shots: no side-by-side timeline picture" >&2
fi
mkdir -p "$out"
cp "$work"/*.png "$work"/*.svg "$out"/
echo "decode-shots: $(ls "$work"/*.png | wc -l) pictures in $out"
