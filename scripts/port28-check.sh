#!/usr/bin/env bash
# The hidden slice's ring form as an RTX card plans it (99 KiB, 33-64 bf16 tokens, ring_direct)
# on the lent GPU in one call (run with a 190 s limit): the plan's sum of y (the grid barrier,
# then every block's sum) against the sum by 8 interleaved groups of blocks
# (ffn_hidden_slice_groups.cuh; FL_FFN_SLICE's nineteenth number 1) and the groups polled without
# a sleep (4); 16 tokens (the resident form's groups, the plan's there) in the same rows, to see
# that it is unchanged. Builds fusionlab and the GPU tests into ../build-port28, then
# `fusionlab bench --choose-as 8.6` (bf16, cold, levels 1 and 2 at 16, 33 and 64 tokens) the
# forms interleaved three times, the phases at 64 tokens once each; then, nothing timed, the GPU
# tests with the groups form forced and compute-sanitizer memcheck and racecheck on
# HiddenSliceFfnRingDirect with it, in parallel. Logs under $OUT: summary.txt first.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-186}
build=../build-port28
gpu_check_build "$build" 150 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
G="$build/tests/fusionlab_gpu_tests"
B=(--lesson ffn --levels 1,2 --sizes 16,33,64 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20)
F=FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0
declare -A FORM=([plan]=FL_NONE=1 [groups]=$F,1 [spin]=$F,4)
NAMES=(${FL_P28_FORMS:-plan groups spin})
for i in 1 2 3; do
  for n in "${NAMES[@]}"; do gpu_check_row "$n-$i" "${FORM[$n]}" 70 "${B[@]}"; done
done
P=(--lesson ffn --levels 2 --sizes 64 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6)
for n in plan groups; do gpu_check_phases "$n" "${FORM[$n]}" 60 "${P[@]}"; done
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests with the groups form (polls without a sleep in gpu2) and
# the sanitizers in parallel.
SMALL='*PortableStream*HiddenSliceFfnRingDirect/*'
gpu_check_lane ring "${FORM[groups]}" '*HiddenSliceFfnRingGroupsAsAnRtxCard*:*HiddenSliceFfnRingAsAnRtxCard*:*HiddenSliceFfnRingDirect*:*HiddenSliceFfnRingSmallShapes*'
gpu_check_lane gpu "${FORM[groups]}" '*HiddenSliceFfnAsAnRtxCard*:*HiddenSliceFfnW2EarlyAsAnRtxCard*:*HiddenSliceFfnMatchesReferenceAtOddShapes*:*HiddenSliceFfnWith16Warps*:*HiddenSliceFfnShareForms*:*HiddenSliceFfnWithPrefetchingBlocks*'
gpu_check_lane gpu2 "${FORM[spin]}" '*FfnTwoPhase*:Catalog/*ffn*:*HiddenSliceFfnRingForms*'
gpu_check_lane san-memcheck "${FORM[groups]}" "$SMALL" memcheck
gpu_check_lane san-racecheck "${FORM[groups]}" "$SMALL" racecheck
wait
gpu_check_lanes_summary ring gpu gpu2 san-memcheck san-racecheck
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
