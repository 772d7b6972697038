#!/usr/bin/env bash
# The one-token megakernel's late qkv release against the form before on the lent GPU, one call
# (run with a 190 s limit). This tree built (../build-mega23: fusionlab and the GPU tests), then
# `fusionlab bench --lesson gpt2_decode --levels 3,4 --sizes 512,2K --precision bf16 --cache cold
# --no-counters` interleaved, FL_MEGA23_ROUNDS rounds (3 unless set) of new / control
# (FL_MEGA23_CONTROL, NAME=VALUE: the environment that picks the form before in the same build).
# Then one round at 4K and 8K. FL_MEGA23_STAGES, a list:
#   timelines: Gpt2DecodeGpu.MegakernelRecordsEveryTask (cache 511: the task timeline and the
#     probes) of new and control, one after the other.
#   tests: lanes side by side: MegakernelSmall, MegakernelOneToken, MegakernelRecordsEveryTask and
#     Catalog/*gpt2*; the partial grids (MegakernelSpreadOnAPartialGrid, MegakernelOnAPartialGrid);
#     the other Megakernel* tests; EveryLevelMatchesTheCpuReference (the
#     longest); the control's MegakernelOneToken; compute-sanitizer memcheck / racecheck /
#     synccheck on MegakernelSmall (FL_DECODE_SMALL=1).
# Logs under $OUT, summary.txt first (a call cut off still brings back what ran). On 2026-11-27
# (H100, 21:28 UTC) the build took 74 s and a bench run ~1.5 s.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-184}
build=../build-mega23
stages=${FL_MEGA23_STAGES:-timelines,tests}
rounds=${FL_MEGA23_ROUNDS:-3}
control=${FL_MEGA23_CONTROL:-FL_DECODE_LATE_QKV_RELEASE=0}
G="$build/tests/fusionlab_gpu_tests"
R=$OUT/raw  # the benches' and timelines' output, tarred at the end ($OUT brings back 8 files)
mkdir -p "$R"
bench() {  # NAME [ENV...]: levels 3 and 4 at $sizes (512 and 2K); one line of $S
  local name=$1
  shift
  (( $(gpu_check_left) > 22 )) || { echo "$name: skipped (time)" | tee -a "$S"; return; }
  env FL_NONE=1 "$@" timeout 30 "$build/fusionlab" bench --lesson gpt2_decode --levels 3,4 \
    --sizes "${sizes:-512,2K}" --precision bf16 --cache cold --no-counters > "$R/bench-$name.txt" 2>&1
  echo "$name $(date -u +%T): $(grep -E 'level [34] (graph|megakernel)' "$R/bench-$name.txt" |
    grep -v phases | awk '{for(i=1;i<=NF;i++) if($i=="us"){print $1, $3, $(i-1); break}}' |
    tr '\n' ' ')" | tee -a "$S"
}

gpu_check_build "$build" 140 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
cuobjdump -res-usage "$build/fusionlab" 2>/dev/null | grep -A1 'megakernel' | grep -oE 'REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+' | paste -sd' ' | head -c 300 >> "$S"; echo >> "$S"
for i in $(seq 1 "$rounds"); do
  bench "new-$i"
  bench "control-$i" "$control"
done
grep -E 'level [34]' "$R/bench-new-1.txt" | head -8 >> "$S"
sizes=4K,8K bench new-big
sizes=4K,8K bench control-big "$control"

if [[ ",$stages," == *",timelines,"* ]]; then
  for form in new control; do  # the timeline and the probes, alone on the GPU
    env FL_NONE=1 $([[ $form == control ]] && echo "$control") timeout 20 "$G" \
      --gtest_filter='Gpt2DecodeGpu.MegakernelRecordsEveryTask' > "$R/timeline-$form.txt" 2>&1
    echo "timeline $form rc=$? ($(( $(date +%s) - t0 )) s)" | tee -a "$S"
    grep -E 'tasks over|stage |probes|last-ending' "$R/timeline-$form.txt" | head -24 >> "$S"
  done
fi

if [[ ",$stages," == *",tests,"* ]]; then
  lanes=(core grid rest every control)
  mk='Gpt2DecodeGpu.MegakernelSmall:Gpt2DecodeGpu.MegakernelOneToken:Gpt2DecodeGpu.MegakernelRecordsEveryTask'
  grid='Gpt2DecodeGpu.MegakernelSpreadOnAPartialGrid:Gpt2DecodeGpu.MegakernelOnAPartialGrid'
  gpu_check_lane core FL_NONE=1 "$mk:Catalog/*gpt2*"
  gpu_check_lane grid FL_NONE=1 "$grid"
  gpu_check_lane rest FL_NONE=1 "Gpt2DecodeGpu.Megakernel*-$mk:$grid"
  gpu_check_lane every FL_NONE=1 'Gpt2DecodeGpu.EveryLevelMatchesTheCpuReference'
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
