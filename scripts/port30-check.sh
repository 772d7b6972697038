#!/usr/bin/env bash
# The hidden slice as an RTX card plans it (99 KiB, bf16, w2_during_up, W1 first, the sum of y
# by 8 interleaved groups at 9-16 tokens), on the lent GPU in one call (run with a 190 s limit):
# the down product's jobs (12 column tiles a warp) in the plan's two runs of 6 tiles, each run's
# shares stored before the next run's mma (kSliceDownParts), against the whole job (the form
# before: FL_FFN_SLICE's twentieth number 1), three runs of 4 (3) and six of 2 (6). Builds
# fusionlab and the GPU tests into ../build-port30, then `fusionlab bench --choose-as 8.6` (bf16,
# cold, levels 1 and 2 at 1, 9 and 16 tokens) the forms interleaved (a round forward, one
# backward, a third forward while time lasts), the phases at 16 tokens once each; then, nothing
# timed, the hidden-slice GPU tests with each form and compute-sanitizer memcheck and racecheck
# on HiddenSliceFfnW2EarlyAsAnRtxCard, in parallel. FL_P30_FORMS names the forms. Logs under
# $OUT: summary.txt first.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-186}
build=../build-port30
gpu_check_build "$build" 150 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
G="$build/tests/fusionlab_gpu_tests"
B=(--lesson ffn --levels 1,2 --sizes 1,9,16 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20)
F=FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0
declare -A FORM=([plan]=FL_NONE=1 [whole]=$F,0,1 [thirds]=$F,0,3 [sixths]=$F,0,6)
NAMES=(${FL_P30_FORMS:-plan whole thirds sixths})
REV=()
for (( i=${#NAMES[@]}-1; i>=0; i-- )); do REV+=("${NAMES[i]}"); done
for n in "${NAMES[@]}"; do gpu_check_row "$n-1" "${FORM[$n]}" 60 "${B[@]}"; done
for n in "${REV[@]}"; do gpu_check_row "$n-2" "${FORM[$n]}" 60 "${B[@]}"; done
for n in "${NAMES[@]}"; do gpu_check_row "$n-3" "${FORM[$n]}" 72 "${B[@]}"; done
P=(--lesson ffn --levels 2 --sizes 16 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6)
for n in "${NAMES[@]}"; do gpu_check_phases "$n" "${FORM[$n]}" 45 "${P[@]}"; done
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests (the plan's form; 3 and 6 runs forced, also in the ring
# form's 8-warp jobs) and the sanitizers in parallel.
SMALL='*PortableStream*HiddenSliceFfnW2EarlyAsAnRtxCard*'
RTX='*HiddenSliceFfnAsAnRtxCard*:*HiddenSliceFfnW2EarlyAsAnRtxCard*'
gpu_check_lane rtx FL_NONE=1 "$RTX:*HiddenSliceFfnWithW2Late*:*HiddenSliceFfnMatchesReferenceAtOddShapes*:*HiddenSliceFfnShareForms*"
gpu_check_lane gpu "${FORM[thirds]}" "$RTX:*HiddenSliceFfnWith16Warps*:*HiddenSliceFfnWithWiderSlices*:*HiddenSliceFfnRingAsAnRtxCard*"
gpu_check_lane gpu2 "${FORM[sixths]}" "$RTX:*HiddenSliceFfnWithW2Late*:*HiddenSliceFfnRingGroupsAsAnRtxCard*"
gpu_check_lane san-memcheck FL_NONE=1 "$SMALL" memcheck
gpu_check_lane san-racecheck FL_NONE=1 "$SMALL" racecheck
gpu_check_lane san-memcheck6 "${FORM[sixths]}" "$SMALL" memcheck
wait
gpu_check_lanes_summary rtx gpu gpu2 san-memcheck san-racecheck san-memcheck6
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
