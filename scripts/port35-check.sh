#!/usr/bin/env bash
# The exchange's fixed kernel (49-64 bf16 tokens as an RTX card): W2's asks in three forms chosen
# by FL_EX_FORM (0: as before; 1: W2's tile rows and L2 prefetch with compile-time offsets, no
# loops; 2: 1 with x's second batch of loads asked for before W2's asks), three interleaved rounds
# at 1/16/64 tokens with level 1, the phases at 64; then the fixed and exchange tests under each
# form and compute-sanitizer memcheck / racecheck on forms 2 and 1. Run with a 180 s limit.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-176}
build=../build-port35
gpu_check_build "$build" 110 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"; G="$build/tests/fusionlab_gpu_tests"
B=(--lesson ffn --levels 1,2 --sizes 1,16,64 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20)
for i in 1 2 3; do
  for v in 0 1 2; do gpu_check_row "form$v-$i" "FL_EX_FORM=$v" 40 "${B[@]}"; done
done
for v in 0 1 2; do
  gpu_check_phases "form$v" "FL_EX_FORM=$v" 36 --lesson ffn --levels 2 --sizes 64 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6
done
echo "benches done: $(( $(date +%s) - t0 )) s $(date -u +%T)" | tee -a "$S"
F='*HiddenSliceFfnExchangeFixedAsAnRtxCard*'
A="$F:*HiddenSliceFfnFixedAsAnRtxCard*:*HiddenSliceFfnExchange*:*Variant*"
gpu_check_lane tests0 FL_EX_FORM=0 "$A"
gpu_check_lane tests1 FL_EX_FORM=1 "$A"
gpu_check_lane tests2 FL_EX_FORM=2 "$A"
gpu_check_lane mem2 FL_EX_FORM=2 "$F" memcheck
gpu_check_lane race2 FL_EX_FORM=2 "$F" racecheck
gpu_check_lane mem1 FL_EX_FORM=1 "$F" memcheck
gpu_check_lane race1 FL_EX_FORM=1 "$F" racecheck
wait
gpu_check_lanes_summary tests0 tests1 tests2 mem2 race2 mem1 race1
echo "done: $(( $(date +%s) - t0 )) s $(date -u +%T)" | tee -a "$S"
