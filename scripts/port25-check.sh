#!/usr/bin/env bash
# The hidden slice as an RTX card plans it (99 KiB, 1-16 bf16 tokens, w2_during_up): W2's last
# rows past x and W1 asked for right after them, the rest over W1 once the up operands are in
# registers (ffn_slice_w2_early_resident; FL_FFN_SLICE's sixteenth number 1) against the plan's
# (all of W2's rows over W1), on the lent GPU in one call (run with a 190 s limit). Builds
# fusionlab and the GPU tests into ../build-port25, then `fusionlab bench --choose-as 8.6` (bf16,
# cold, levels 1 and 2 at 1, 16, 64 tokens; 64 is the ring form, the same both ways) the two ways
# interleaved three times, the phases at 16 tokens once each way; then, nothing timed, the GPU
# tests and compute-sanitizer memcheck and racecheck on the new form's shapes, in parallel.
# FL_P25_NEW: the new form's environment (FL_NONE=1 once it is the plan's, with OLD then off).
# Logs under $OUT: summary.txt first (a call cut off still brings back what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
gpu_check_begin
limit=${FL_CHECK_LIMIT:-186}
build=../build-port25
gpu_check_build "$build" 150 fusionlab fusionlab_gpu_tests
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$S"
app="$build/fusionlab"
G="$build/tests/fusionlab_gpu_tests"
B=(--lesson ffn --levels 1,2 --sizes 1,16,64 --precision bf16 --cache cold --choose-as 8.6 --no-counters --reps 20)
NEW=${FL_P25_NEW:-FL_FFN_SLICE=0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,1}
OLD=${FL_P25_OLD:-FL_NONE=1}
for i in 1 2 3; do
  gpu_check_row "new-$i" "$NEW" 75 "${B[@]}"
  gpu_check_row "old-$i" "$OLD" 75 "${B[@]}"
done
P=(--lesson ffn --levels 2 --sizes 16 --precision bf16 --cache cold --no-counters --reps 20 --choose-as 8.6)
gpu_check_phases new "$NEW" 60 "${P[@]}"
gpu_check_phases old "$OLD" 60 "${P[@]}"
echo "benches done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
# Nothing timed from here: the tests and the sanitizers in parallel.
SMALL='*PortableStream*HiddenSliceFfnW2EarlyAsAnRtxCard*'
gpu_check_lane rtx "$NEW" '*HiddenSliceFfnW2EarlyAsAnRtxCard*:*HiddenSliceFfnAsAnRtxCard*:*HiddenSliceFfnWithW2Late*'
gpu_check_lane gpu FL_NONE=1 '*HiddenSlice*:*PortableStream*:*FfnTwoPhase*:Catalog/*ffn*:-*HiddenSliceFfnRingForms*'
gpu_check_lane san-memcheck FL_NONE=1 "$SMALL" memcheck
gpu_check_lane san-racecheck FL_NONE=1 "$SMALL" racecheck
wait
gpu_check_lanes_summary rtx gpu san-memcheck san-racecheck
echo "done: $(( $(date +%s) - t0 )) s" | tee -a "$S"
