#!/usr/bin/env bash
# The one-token megakernel's forms on the lent GPU, one call a stage (run with a 190 s limit).
# Always: this tree built (../build-mega21: fusionlab and the GPU tests), then `fusionlab bench
# --lesson gpt2_decode --levels 3,4 --sizes 512,2K --precision bf16 --cache cold --no-counters`
# interleaved, three rounds of [old /] new / new with FL_MEGA21_CONTROL (NAME=VALUE: the
# environment that picks the form before in the same build). FL_MEGA21_STAGES, a list:
#   ab: the tree it was made from (.ab-old.tgz, a `git archive` of it) built beside it
#     (../build-mega21-old: fusionlab) and timed first in each round ("old").
#   tests: the task timeline and probes of each form (Gpt2DecodeGpu.MegakernelRecordsEveryTask
#     at cache 511, one after the other); then lanes side by side: MegakernelSmall with
#     MegakernelOneToken, EveryLevelMatchesTheCpuReference (the longest), the one-token part of
#     MegakernelOnAPartialGrid, MegakernelCopyTimings, MegakernelOneToken with the control's
#     form, and compute-sanitizer memcheck / racecheck / synccheck on MegakernelSmall
#     (FL_DECODE_SMALL=1). On 2026-11-27 (H100) the build took 97-120 s of the 190, and the
#     lanes' ~70 s left racecheck and the partial grids unfinished.
# Logs under $OUT, summary.txt first (a call cut off still brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-184}
build=../build-mega21
stages=${FL_MEGA21_STAGES:-ab,tests}
control=${FL_MEGA21_CONTROL:-FL_DECODE_ONE_TOKEN_ROWS=2}
G="$build/tests/fusionlab_gpu_tests"
R=$OUT/raw  # the benches' and timelines' output, tarred at the end ($OUT brings back 8 files)
mkdir -p "$R"
bench() {  # NAME BINARY [ENV...]: levels 3 and 4 at 512 and 2K; one line of $S
  local name=$1 bin=$2
  shift 2
  (( $(gpu_check_left) > 22 )) || { echo "$name: skipped (time)" | tee -a "$S"; return; }
  env FL_NONE=1 "$@" timeout 30 "$bin" bench --lesson gpt2_decode --levels 3,4 --sizes 512,2K \
    --precision bf16 --cache cold --no-counters > "$R/bench-$name.txt" 2>&1
  echo "$name $(date -u +%T): $(grep -E 'level [34] (graph|megakernel)' "$R/bench-$name.txt" |
    grep -v phases | awk '{for(i=1;i<=NF;i++) if($i=="us"){print $1, $3, $(i-1); break}}' |
    tr '\n' ' ')" | tee -a "$S"
}

old=../build-mega21-old
if [[ ",$stages," == *",ab,"* ]]; then
  old_src=../mega21-old
  rm -rf "$old_src" && mkdir -p "$old_src" && tar xzf .ab-old.tgz -C "$old_src"
  (cd assets/recordings && find . -type d) | while read -r d; do
    mkdir -p "$old_src/assets/recordings/$d"
  done
  mkdir -p assets/recordings/h100-2026-11-27 "$old_src/assets/recordings/h100-2026-11-27"
  b() {  # SOURCE BUILD TARGET...: configure and build, the log in $OUT on failure
    local src=$1 dir=$2
    shift 2
    { cmake -S "$src" -B "$dir" -G Ninja -DFUSIONLAB_GUI=OFF -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$prefix/usr" &&
      timeout 150 cmake --build "$dir" -j16 --target "$@"; } > "$OUT/build-$(basename "$dir").log" 2>&1 &&
      rm -f "$OUT/build-$(basename "$dir").log"
  }
  b . "$build" fusionlab fusionlab_gpu_tests &
  b "$old_src" "$old" fusionlab &
  wait
  ls "$build/fusionlab" "$old/fusionlab" > /dev/null || { tail -30 "$OUT"/build-*.log; exit 1; }
else
  gpu_check_build "$build" 130 fusionlab fusionlab_gpu_tests
fi
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
for i in 1 2 3; do
  [[ ",$stages," == *",ab,"* ]] && bench "old-$i" "$old/fusionlab"
  bench "new-$i" "$build/fusionlab"
  bench "new-control-$i" "$build/fusionlab" "$control"
done
grep -E 'level [34]' "$R/bench-new-1.txt" | head -8 >> "$S"

if [[ ",$stages," == *",tests,"* ]]; then
  for form in new control; do  # the timeline and the probes, alone on the GPU
    env FL_NONE=1 $([[ $form == control ]] && echo "$control") timeout 20 "$G" \
      --gtest_filter='Gpt2DecodeGpu.MegakernelRecordsEveryTask' > "$R/timeline-$form.txt" 2>&1
    echo "timeline $form rc=$? ($(( $(date +%s) - t0 )) s)" | tee -a "$S"
    grep -vE '^\[|^Note|^$|^Running' "$R/timeline-$form.txt" | head -40 >> "$S"
  done
  lanes=(core every grid-one copies control)
  gpu_check_lane core FL_NONE=1 'Gpt2DecodeGpu.MegakernelSmall:Gpt2DecodeGpu.MegakernelOneToken'
  gpu_check_lane every FL_NONE=1 'Gpt2DecodeGpu.EveryLevelMatchesTheCpuReference'
  gpu_check_lane grid-one FL_DECODE_ONE_TOKEN_GRIDS=1 'Gpt2DecodeGpu.MegakernelOnAPartialGrid'
  gpu_check_lane copies FL_NONE=1 'Gpt2DecodeGpu.MegakernelCopyTimings'
  gpu_check_lane control "$control" 'Gpt2DecodeGpu.MegakernelOneToken'
  for tool in memcheck racecheck synccheck; do
    gpu_check_lane "san-small-$tool" FL_DECODE_SMALL=1 'Gpt2DecodeGpu.MegakernelSmall' $tool
    lanes+=("san-small-$tool")
  done
  wait
  gpu_check_lanes_summary "${lanes[@]}"
fi
tar czf "$OUT/raw.tgz" -C "$R" . && rm -rf "$R"
echo "done: $(( $(date +%s) - t0 )) s $(date -u +%T)" | tee -a "$S"
