#!/usr/bin/env bash
# The hidden slice as an RTX card plans it (99 KiB, 1-16 bf16 tokens, w2_during_up, W1 first), on
# the lent GPU in one call (run with a 190 s limit): the plan's form (the sum of y by 8
# interleaved groups of blocks, ffn_hidden_slice_groups.cuh) against the grid barrier then every
# block's sum (FL_FFN_SLICE's nineteenth number 2, the plan's before), groups of consecutive
# blocks (3) and interleaved groups polled without a sleep (4); the groups run at 9-16 tokens in
# bf16 shares, so 1 token is the same every way. Builds fusionlab and the GPU tests into
# ../build-port27, then `fusionlab bench --choose-as 8.6` (bf16, cold, levels 1 and 2 at 1 and
# 16 tokens) the forms interleaved three times, the phases at 16 tokens once each; then, nothing
# timed, the GPU tests with the groups forms and compute-sanitizer memcheck and racecheck on
# HiddenSliceFfnW2EarlyAsAnRtxCard with groups forced (1: also where the plan keeps the barrier),
# in parallel. Logs under $OUT: summary.txt
# first (a call cut off still brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-186}
build=../build-port27
gpu_check_build "$build" 150 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
G="$build/tests/fusionlab_gpu_tests"
B=(--lesson ffn --levels 1,2 --sizes 1,16 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20)
F=FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0
declare -A FORM=([plan]=FL_NONE=1 [barrier]=$F,2 [contig]=$F,3 [spin]=$F,4 [groups]=$F,1)
NAMES=(${FL_P27_FORMS:-plan barrier contig spin})
for i in 1 2 3; do
  for n in "${NAMES[@]}"; do gpu_check_row "$n-$i" "${FORM[$n]}" 75 "${B[@]}"; done
done
P=(--lesson ffn --levels 2 --sizes 16 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6)
for n in "${NAMES[@]}"; do gpu_check_phases "$n" "${FORM[$n]}" 60 "${P[@]}"; done
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests (groups of consecutive blocks in the rtx lane, polls without
# a sleep in gpu2) and the sanitizers in parallel with the groups forms.
SMALL='*PortableStream*HiddenSliceFfnW2EarlyAsAnRtxCard*'
gpu_check_lane rtx "${FORM[contig]}" '*HiddenSliceFfnAsAnRtxCard*:*HiddenSliceFfnW2EarlyAsAnRtxCard*:*HiddenSliceFfnWithW2Late*'
gpu_check_lane gpu "${FORM[groups]}" '*HiddenSliceFfnMatchesReferenceAtOddShapes*:*HiddenSliceFfnShareForms*:*HiddenSliceFfnWithWiderSlices*:*HiddenSliceFfnWithPrefetchingBlocks*:*HiddenSliceFfnWith16Warps*'
gpu_check_lane gpu2 "${FORM[spin]}" '*FfnTwoPhase*:Catalog/*ffn*'
gpu_check_lane san-memcheck "${FORM[groups]}" "$SMALL" memcheck
gpu_check_lane san-racecheck "${FORM[groups]}" "$SMALL" racecheck
wait
gpu_check_lanes_summary rtx gpu gpu2 san-memcheck san-racecheck
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
