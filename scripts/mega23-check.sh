#!/usr/bin/env bash
# The one-token megakernel's residual spread 8 times against 4 on the lent GPU, one call (run
# with a 190 s limit). This tree built (../build-mega23: fusionlab and the GPU tests), then
# `fusionlab bench --lesson gpt2_decode --levels 3,4 --sizes 512,2K --precision bf16 --cache cold
# --no-counters` interleaved, FL_MEGA23_ROUNDS rounds (3 unless set) of new / control
# (FL_MEGA23_CONTROL, NAME=VALUE: the environment that picks the form before in the same build).
# FL_MEGA23_STAGES, a list:
#   variants: Gpt2DecodeGpu.MegakernelVariants with FL_DECODE_VARIANTS=mega23 at a cache of 512
#     (each form checked, timed by events, its timeline and probes).
#   tests: lanes side by side: MegakernelOneToken with MegakernelSpreadOnAPartialGrid,
#     MegakernelSmall with MegakernelRecordsEveryTask, the control's MegakernelOneToken, and
#     compute-sanitizer memcheck / racecheck / synccheck on MegakernelSmall (FL_DECODE_SMALL=1).
# Logs under $OUT, summary.txt first (a call cut off still brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-184}
build=../build-mega23
stages=${FL_MEGA23_STAGES:-variants,tests}
rounds=${FL_MEGA23_ROUNDS:-3}
control=${FL_MEGA23_CONTROL:-FL_DECODE_RESIDUAL_SPREAD=4}
G="$build/tests/fusionlab_gpu_tests"
R=$OUT/raw  # the benches' and timelines' output, tarred at the end ($OUT brings back 8 files)
mkdir -p "$R"
bench() {  # NAME [ENV...]: levels 3 and 4 at 512 and 2K; one line of $S
  local name=$1
  shift
  (( $(gpu_check_left) > 22 )) || { echo "$name: skipped (time)" | tee -a "$S"; return; }
  env FL_NONE=1 "$@" timeout 30 "$build/fusionlab" bench --lesson gpt2_decode --levels 3,4 \
    --sizes 512,2K --precision bf16 --cache cold --no-counters > "$R/bench-$name.txt" 2>&1
  echo "$name $(date -u +%T): $(grep -E 'level [34] (graph|megakernel)' "$R/bench-$name.txt" |
    grep -v phases | awk '{for(i=1;i<=NF;i++) if($i=="us"){print $1, $3, $(i-1); break}}' |
    tr '\n' ' ')" | tee -a "$S"
}

gpu_check_build "$build" 140 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
for i in $(seq 1 "$rounds"); do
  bench "new-$i"
  bench "control-$i" "$control"
done
grep -E 'level [34]' "$R/bench-new-1.txt" | head -8 >> "$S"

if [[ ",$stages," == *",variants,"* ]] && (( $(gpu_check_left) > 30 )); then
  FL_DECODE_VARIANTS=mega23 FL_DECODE_CACHES=512 timeout $(( $(gpu_check_left) - 12 )) "$G" \
    --gtest_filter='Gpt2DecodeGpu.MegakernelVariants' > "$R/variants.txt" 2>&1
  echo "variants rc=$? ($(( $(date +%s) - t0 )) s)" | tee -a "$S"
  grep -E 'megakernel|timeline|stage|probe|FAIL|rel ' "$R/variants.txt" | head -60 >> "$S"
fi

if [[ ",$stages," == *",tests,"* ]]; then
  lanes=(core small control)
  gpu_check_lane core FL_NONE=1 'Gpt2DecodeGpu.MegakernelOneToken:Gpt2DecodeGpu.MegakernelSpreadOnAPartialGrid'
  gpu_check_lane small FL_NONE=1 'Gpt2DecodeGpu.MegakernelSmall:Gpt2DecodeGpu.MegakernelRecordsEveryTask'
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
