#!/usr/bin/env bash
# The hidden slice's ring form with x straight into registers (ring_direct, the plan's, with W2's
# last rows asked for with W1 and x's first two batches of loads before W1's wait), and
# ffn_two_phase's direct up tiles (FL_FFN_TWO_PHASE_DIRECT=1), on the lent GPU in one call (run
# with a 200 s limit). Builds fusionlab and the GPU tests into ../build-port24, then `fusionlab
# bench --choose-as 8.6` (bf16, cold, levels 1 and 2 at 33 and 64 tokens): the plan's, x through
# the ring (FL_FFN_SLICE's fifteenth number 2), one batch before W1's wait (seventeenth number 2)
# and ffn_two_phase forced with direct up tiles interleaved three times; ffn_two_phase's ring, 8
# warps and W2 all late (sixteenth number 2) once; phases at 33 and 64 tokens; then, nothing
# timed, the GPU tests
# (*HiddenSlice*:*PortableStream*:*FfnTwoPhase*, HiddenSliceFfnRingForms apart; FL_CHECK_TESTS
# another filter) and compute-sanitizer memcheck and racecheck on the small shapes, in parallel.
# Logs under $OUT: summary.txt first (a call cut off still brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-194}
build=../build-port24
gpu_check_build "$build" 150 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
G="$build/tests/fusionlab_gpu_tests"
B=(--lesson ffn --levels 1,2 --sizes 33,64 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20)
OLD=FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,0,0,0,2
ONE=FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,2
TP="--variant ffn_fused=ffn_two_phase"
TPD="FL_FFN_TWO_PHASE=0,0,0,99 FL_FFN_TWO_PHASE_DIRECT=1"
for i in 1 2 3; do
  gpu_check_row "direct-$i" FL_NONE=1 85 "${B[@]}"
  gpu_check_row "ring-$i" "$OLD" 85 "${B[@]}"
  gpu_check_row "direct-one-batch-$i" "$ONE" 85 "${B[@]}"
  gpu_check_row "two-phase-direct-$i" "$TPD" 85 "${B[@]}" $TP
done
gpu_check_row "two-phase-ring" FL_FFN_TWO_PHASE=0,0,0,99 85 "${B[@]}" $TP
gpu_check_row "direct-8-warps" FL_FFN_SLICE=8 85 "${B[@]}"
gpu_check_row "direct-no-w2-early" FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,2 85 "${B[@]}"
P=(--lesson ffn --levels 2 --sizes 33,64 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6)
gpu_check_phases direct FL_NONE=1 85 "${P[@]}"
gpu_check_phases one-batch "$ONE" 85 "${P[@]}"
gpu_check_phases two-phase-direct "$TPD" 85 "${P[@]}" $TP
gpu_check_phases two-phase-ring FL_FFN_TWO_PHASE=0,0,0,99 85 "${P[@]}" $TP
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests and the sanitizers in parallel.
SMALL='*PortableStream*HiddenSliceFfnRingDirect/*:*PortableStream*HiddenSliceFfnRingSmallShapes*:FfnTwoPhase.DirectSmall'
gpu_check_lane ring-forms FL_NONE=1 '*HiddenSliceFfnRingForms*:*RingDirectWide*'
gpu_check_lane gpu FL_NONE=1 "${FL_CHECK_TESTS:-*HiddenSlice*:*PortableStream*:*FfnTwoPhase*:-*HiddenSliceFfnRingForms*:*RingDirectWide*}"
gpu_check_lane san-memcheck FL_NONE=1 "$SMALL" memcheck
gpu_check_lane san-racecheck FL_NONE=1 "$SMALL" racecheck
wait
gpu_check_lanes_summary ring-forms gpu san-memcheck san-racecheck
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
