#!/usr/bin/env bash
# The one-token megakernel's LayerNorm folded into its products against the form before, on the
# lent GPU in one call (run with a 190 s limit): this tree built (../build-mega22: fusionlab and
# the GPU tests), then `fusionlab bench --lesson gpt2_decode --levels 3,4 --sizes 512,2K
# --precision bf16 --cache cold --no-counters` interleaved, three rounds of new / control
# (FL_MEGA22_CONTROL, NAME=VALUE: the environment that picks the form before in the same build,
# FL_DECODE_ONE_TOKEN_FOLD=0); the task timeline and probes of each form once
# (Gpt2DecodeGpu.MegakernelRecordsEveryTask at cache 511); then lanes side by side:
# MegakernelSmall with MegakernelOneToken, MegakernelOnAPartialGrid,
# EveryLevelMatchesTheCpuReference, and compute-sanitizer memcheck / racecheck / synccheck on
# MegakernelSmall (FL_DECODE_SMALL=1). Logs under $OUT, summary.txt first (a call cut off still
# brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-184}
build=../build-mega22
control=${FL_MEGA22_CONTROL:-FL_DECODE_ONE_TOKEN_FOLD=0}
G="$build/tests/fusionlab_gpu_tests"
R=$OUT/raw  # the benches' and timelines' output, tarred at the end
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

gpu_check_build "$build" 150 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
for i in 1 2 3; do
  bench "new-$i" "$build/fusionlab"
  bench "control-$i" "$build/fusionlab" "$control"
done
grep -E 'level [34]|rel|error' "$R/bench-new-1.txt" | head -10 >> "$S"

for form in new control; do  # the timeline and the probes, alone on the GPU
  (( $(gpu_check_left) > 30 )) || break
  env FL_NONE=1 $([[ $form == control ]] && echo "$control") timeout 15 "$G" \
    --gtest_filter='Gpt2DecodeGpu.MegakernelRecordsEveryTask' > "$R/timeline-$form.txt" 2>&1
  echo "timeline $form rc=$? ($(( $(date +%s) - t0 )) s)" | tee -a "$S"
  grep -vE '^\[|^Note|^$|^Running' "$R/timeline-$form.txt" | head -40 >> "$S"
done
lanes=(core grid every)
gpu_check_lane core FL_NONE=1 'Gpt2DecodeGpu.MegakernelSmall:Gpt2DecodeGpu.MegakernelOneToken'
gpu_check_lane grid FL_NONE=1 'Gpt2DecodeGpu.MegakernelOnAPartialGrid'
gpu_check_lane every FL_NONE=1 'Gpt2DecodeGpu.EveryLevelMatchesTheCpuReference'
for tool in memcheck racecheck synccheck; do
  gpu_check_lane "san-small-$tool" FL_DECODE_SMALL=1 'Gpt2DecodeGpu.MegakernelSmall' $tool
  lanes+=("san-small-$tool")
done
wait
gpu_check_lanes_summary "${lanes[@]}"
tar czf "$OUT/raw.tgz" -C "$R" . && rm -rf "$R"
echo "done: $(( $(date +%s) - t0 )) s $(date -u +%T)" | tee -a "$S"
