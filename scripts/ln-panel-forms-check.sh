#!/usr/bin/env bash
# ln_panel's forms (bf16, `--choose-as 8.6`) on the lent GPU in one call (run with a 200 s limit):
# the plan's (FL_LN_PANEL_FORM 11) against every bit (123: the bias ahead, the split-K multiplies
# by address, and x's and W's copies by two halves of the warps, the first normalizing x while W
# lands) and 59 (the first two alone). Builds fusionlab and the GPU tests into ../build-port23,
# then `fusionlab bench` (cold, levels 1 and 2, 1-256 tokens) the forms interleaved (FL_ROUNDS
# rounds, 3 by default), the phases at 64 tokens once each way, with the hidden-slice FFN's rows
# and phases at 16 (FL_FFN_OFF: an FL_FFN_SLICE form to set beside the plan's); then, nothing
# timed, the GPU tests (sharded) and compute-sanitizer memcheck and racecheck on the small
# shapes (the LN's with FL_LN_PANEL_FORM=123), in parallel. Logs under $OUT: summary.txt first.
# The 2026-11-27 12:40 UTC call (docs/PERFORMANCE.md) ran it with 123 as the plan's and a
# hidden-slice form since removed as FL_FFN_OFF's other side.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-194}
build=../build-port23
gpu_check_build "$build" 130 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
G="$build/tests/fusionlab_gpu_tests"
B=(--levels 1,2 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20)
P=(--levels 2 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6)
R=${FL_TEST_RESERVE:-62}
OFF=${FL_FFN_OFF:-FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,4,2,2}
LN=(--lesson layernorm_linear --sizes 1,4,16,64,256)
for i in $(seq 1 "${FL_ROUNDS:-3}"); do
  gpu_check_row "ffn-plan-$i" FL_NONE=1 "$R" --lesson ffn --sizes 1,16,64 "${B[@]}"
  gpu_check_row "ffn-off-$i" "$OFF" "$R" --lesson ffn --sizes 1,16,64 "${B[@]}"
  gpu_check_row "ln-123-$i" FL_LN_PANEL_FORM=123 "$R" "${LN[@]}" "${B[@]}"
  gpu_check_row "ln-plan-$i" FL_NONE=1 "$R" "${LN[@]}" "${B[@]}"
done
gpu_check_row "ln-59" FL_LN_PANEL_FORM=59 "$R" "${LN[@]}" "${B[@]}"
gpu_check_phases ffn16-plan FL_NONE=1 "$R" --lesson ffn --sizes 16 "${P[@]}"
gpu_check_phases ffn16-off "$OFF" "$R" --lesson ffn --sizes 16 "${P[@]}"
gpu_check_phases ln64-123 FL_LN_PANEL_FORM=123 "$R" --lesson layernorm_linear --sizes 64 "${P[@]}"
gpu_check_phases ln64-plan FL_NONE=1 "$R" --lesson layernorm_linear --sizes 64 "${P[@]}"
grep -E "median over blocks" "$OUT/phases.txt" | tee -a "$S"
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests and the sanitizers in parallel.
FFN='*HiddenSlice*:*PortableStream*:-*HiddenSliceFfnRingForms*:*FfnStreamForms*'
gpu_check_lane gpu0 "GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=0" "$FFN"
gpu_check_lane gpu1 "GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=1" "$FFN"
gpu_check_lane ln FL_NONE=1 'Variants.PanelLayerNorm*:Catalog/*layernorm_linear*'
SMALL_FFN='*PortableStream*HiddenSliceFfnWithW2Late*:*PortableStream*HiddenSliceFfnRingSmallShapes*'
SMALL_LN='Variants.PanelLayerNormLinearSmallShapes'
for tool in memcheck racecheck; do
  gpu_check_lane "san-ffn-$tool" FL_NONE=1 "$SMALL_FFN" $tool
  gpu_check_lane "san-ln-$tool" FL_LN_PANEL_FORM=123 "$SMALL_LN" $tool
done
wait
gpu_check_lanes_summary gpu0 gpu1 ln san-ffn-memcheck san-ffn-racecheck san-ln-memcheck san-ln-racecheck
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
