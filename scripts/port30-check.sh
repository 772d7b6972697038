#!/usr/bin/env bash
# The hidden slice as an RTX card plans it (99 KiB, bf16, w2_during_up, W1 first, the sum of y
# by 8 interleaved groups at 9-16 tokens), on the lent GPU in one call (run with a 190 s limit):
# the plan's hand-over (one acq_rel atomic a block, its old value to the warps behind a second
# __syncthreads) against the parity read ahead and a red.release arrival a block
# (FL_FFN_SLICE's nineteenth number 5) or a warp (6), and with it the down product's jobs in two
# halves (twentieth number 1). Builds fusionlab and the GPU tests into ../build-port30, then
# `fusionlab bench --choose-as 8.6` (bf16, cold, levels 1 and 2 at 1, 9 and 16 tokens) the forms
# interleaved (a round forward, one backward, a third forward while time lasts), the phases at 16
# tokens once each; then, nothing timed, the hidden-slice GPU tests with the new forms and
# compute-sanitizer memcheck and racecheck on HiddenSliceFfnW2EarlyAsAnRtxCard with them, in
# parallel. FL_P30_FORMS names the forms. Logs under $OUT: summary.txt first.
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
declare -A FORM=([plan]=FL_NONE=1 [block]=$F,5 [warp]=$F,6 [warph]=$F,6,1 [halves]=$F,0,1)
NAMES=(${FL_P30_FORMS:-plan block warp warph})
REV=()
for (( i=${#NAMES[@]}-1; i>=0; i-- )); do REV+=("${NAMES[i]}"); done
for n in "${NAMES[@]}"; do gpu_check_row "$n-1" "${FORM[$n]}" 60 "${B[@]}"; done
for n in "${REV[@]}"; do gpu_check_row "$n-2" "${FORM[$n]}" 60 "${B[@]}"; done
for n in "${NAMES[@]}"; do gpu_check_row "$n-3" "${FORM[$n]}" 72 "${B[@]}"; done
P=(--lesson ffn --levels 2 --sizes 16 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6)
for n in "${NAMES[@]}"; do gpu_check_phases "$n" "${FORM[$n]}" 45 "${P[@]}"; done
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests and the sanitizers in parallel.
SMALL='*PortableStream*HiddenSliceFfnW2EarlyAsAnRtxCard*'
T=${FL_P30_TESTFORM:-warph}
gpu_check_lane rtx "${FORM[$T]}" '*HiddenSliceFfnAsAnRtxCard*:*HiddenSliceFfnW2EarlyAsAnRtxCard*:*HiddenSliceFfnWithW2Late*:*HiddenSliceFfnMatchesReferenceAtOddShapes*'
gpu_check_lane gpu "${FORM[block]},1" '*HiddenSliceFfnShareForms*:*HiddenSliceFfnWith16Warps*:*HiddenSliceFfnWithWiderSlices*:*HiddenSliceFfnAsAnRtxCard*'
gpu_check_lane san-memcheck "${FORM[$T]}" "$SMALL" memcheck
gpu_check_lane san-racecheck "${FORM[$T]}" "$SMALL" racecheck
wait
gpu_check_lanes_summary rtx gpu san-memcheck san-racecheck
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
